"""An emulated cluster on one machine: each rank in its own network namespace, shaped links.

Topology (shared/reference/emulated-network.md): namespace `dspb-br` holds a bridge; rank r lives
in `dspb-r<r>` with veth `vr<r>` (address <subnet>.<r+1>/24) whose peer `vb<r>` is a bridge port.
Both ends are shaped with tc tbf (rank side: uplink, bridge port: downlink), like a full-duplex
NIC on a switch. No netem here (the kernel lacks it), so there is no latency injection. The root
namespace is never touched: no address, route or NAT; only /etc/netns/<ns>/hosts is written.
`Cluster` is a context manager; teardown also runs at exit and on SIGTERM/SIGINT.
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
from pathlib import Path

PREFIX = "dspb-"
BRIDGE_NS = f"{PREFIX}br"


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def netns_unavailable() -> str | None:
    """Why namespaces cannot be made here (None if they can). DSPBENCH_NO_NETNS=1 simulates failure."""
    if os.environ.get("DSPBENCH_NO_NETNS"):
        return "DSPBENCH_NO_NETNS is set (simulated: no network namespaces)"
    if os.geteuid() != 0:
        return "not root (ip netns and tc need CAP_NET_ADMIN)"
    probe = f"{PREFIX}probe{os.getpid()}"
    try:
        r = _ip("ip", "netns", "add", probe, check=False)
    except FileNotFoundError:
        return "the `ip` command (iproute2) is not installed"
    if r.returncode:
        return f"`ip netns add` failed: {r.stderr.strip() or r.returncode}"
    try:
        return _probe_link(probe)
    finally:
        _ip("ip", "netns", "del", probe, check=False)


def says_cannot_emulate(no_netns: bool) -> bool:
    """True (having said why, on stderr) when the emulated cluster cannot be built here: the clean
    exit of `dspbench emulate` in every protocol, with nothing set up."""
    reason = "--no-netns given (simulated: no network namespaces)" if no_netns else netns_unavailable()
    if reason:
        print(f"dspbench emulate: cannot build the emulated cluster here: {reason}. "
              "Nothing was set up; exiting.", file=sys.stderr)
    return bool(reason)


def _probe_link(ns: str) -> str | None:
    """Every kind of step setup() takes, once, inside the probe namespace: a veth pair without
    offload, shaped by tbf (a kernel without veth or sch_tbf fails here, not mid-setup)."""
    try:
        steps = [("ip", "link", "add", "pa", "type", "veth", "peer", "name", "pb"),
                 ("ip", "link", "set", "dev", "pa", *NO_GSO),
                 ("tc", "qdisc", "add", "dev", "pa", *tbf_args("1gbit"))]
        for cmd in steps:
            r = _ip(*cmd, ns=ns, check=False)
            if r.returncode:
                return f"`{' '.join(cmd)}` failed: {r.stderr.strip() or r.returncode}"
    except FileNotFoundError as e:
        return f"the `{e.filename}` command is not available"
    return None


NO_GSO = ("gso_max_size", "1514", "gso_max_segs", "1")   # no segmentation offload: MTU-sized packets


def burst_bytes(rate: str) -> int:
    """max(2 full frames, 1 ms at the rate). Segmentation offload is off on every veth (packets of
    one MTU, as a NIC puts them on the wire), so the bucket need not hold a 64 KB GSO packet; a
    larger bucket hands every message that follows an idle gap its size at line speed for free,
    which flattered small collectives (an 80 KB bucket at 50 Mbit/s is 13 ms of free traffic)."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    unit = next((u for u in units if rate.endswith(u)), None)
    num = float(rate[: -len(unit)]) * units[unit] if unit else float(rate)
    return max(2 * 1514, int(num / 8 / 1000))


def tbf_args(rate: str) -> tuple[str, ...]:
    """`tc qdisc add dev X` arguments of one shaped link direction."""
    return ("root", "tbf", "rate", rate, "burst", str(burst_bytes(rate)), "limit", "4mb")


class Cluster:
    """`prefix` names this cluster's namespaces (<prefix>br, <prefix>r<r>); teardown removes those
    alone, so clusters with other prefixes (another tool's, another user's) are never touched."""

    def __init__(self, ranks: int, rate: str, subnet: str = "10.77.0", prefix: str = PREFIX):
        self.ranks, self.rate, self.subnet, self.prefix = ranks, rate, subnet, prefix
        self.bridge_ns = f"{prefix}br"
        self.namespaces = [f"{prefix}r{r}" for r in range(ranks)]

    def addr(self, rank: int) -> str:
        return f"{self.subnet}.{rank + 1}"

    def __enter__(self) -> "Cluster":
        atexit.register(self.teardown)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        try:
            self.setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def _on_signal(self, signum, frame):
        self.teardown()
        raise SystemExit(128 + signum)

    def setup(self) -> None:
        self.teardown()   # leftovers of a killed earlier run with these names would clash
        tbf = tbf_args(self.rate)
        BRIDGE_NS = self.bridge_ns
        _ip("ip", "netns", "add", BRIDGE_NS)
        _ip("ip", "link", "add", "br0", "type", "bridge", ns=BRIDGE_NS)
        _ip("ip", "link", "set", "br0", "up", ns=BRIDGE_NS)
        for r, ns in enumerate(self.namespaces):
            _ip("ip", "netns", "add", ns)
            _ip("ip", "link", "add", f"vr{r}", "type", "veth", "peer", "name", f"vb{r}", "netns", BRIDGE_NS, ns=ns)
            _ip("ip", "link", "set", f"vb{r}", "master", "br0", "up", ns=BRIDGE_NS)
            _ip("ip", "link", "set", "dev", f"vb{r}", *NO_GSO, ns=BRIDGE_NS)
            _ip("tc", "qdisc", "add", "dev", f"vb{r}", *tbf, ns=BRIDGE_NS)
            _ip("ip", "addr", "add", f"{self.addr(r)}/24", "dev", f"vr{r}", ns=ns)
            _ip("ip", "link", "set", f"vr{r}", "up", ns=ns)
            _ip("ip", "link", "set", "lo", "up", ns=ns)
            _ip("ip", "link", "set", "dev", f"vr{r}", *NO_GSO, ns=ns)
            _ip("tc", "qdisc", "add", "dev", f"vr{r}", *tbf, ns=ns)
            # New namespaces inherit BBR and refuse a sysctl change: set cubic per route instead.
            _ip("ip", "route", "replace", f"{self.subnet}.0/24", "dev", f"vr{r}", "congctl", "cubic", ns=ns, check=False)
            _ip("sysctl", "-qw", "net.ipv4.tcp_slow_start_after_idle=0", ns=ns, check=False)
            hosts = Path("/etc/netns") / ns / "hosts"
            hosts.parent.mkdir(parents=True, exist_ok=True)
            hosts.write_text("127.0.0.1 localhost\n" + "".join(
                f"{self.addr(i)} rank{i}\n" for i in range(self.ranks)))

    def rank_cmd(self, rank: int, argv: list[str], env: dict[str, str]) -> list[str]:
        """`ip netns exec <ns> env K=V ... argv` for one rank under env:// (MASTER_ADDR = rank 0)."""
        base = {"RANK": str(rank), "WORLD_SIZE": str(self.ranks), "LOCAL_RANK": "0",
                "MASTER_ADDR": self.addr(0), "GLOO_SOCKET_IFNAME": f"vr{rank}", **env}
        return ["ip", "netns", "exec", self.namespaces[rank], "env", *(f"{k}={v}" for k, v in base.items()), *argv]

    def teardown(self) -> None:
        _remove([self.bridge_ns, *self.namespaces])


def teardown_all(prefix: str = PREFIX) -> None:
    """Remove every namespace named <prefix>* (emulate.sh's safety net for a killed Python)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    _remove([line.split()[0] for line in out.splitlines() if line.startswith(prefix)])


def _remove(names: list[str]) -> None:
    """Kill processes left in these namespaces (by pid), delete them and their /etc/netns entries."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    present = {line.split()[0] for line in listed.splitlines() if line.strip()}
    for ns in names:
        if ns in present:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        d = Path("/etc/netns") / ns
        if d.is_dir():
            for f in d.iterdir():
                f.unlink()
            d.rmdir()
