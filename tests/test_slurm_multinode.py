"""The multi-node SLURM of slurm/multinode.sh (`local_cluster.sh up --nodes K ...`): real slurmctld,
slurmdbd and one slurmd per node, each node a network namespace; nothing mocked.

Marked ``slurm``; skipped with the script's own reason where namespaces cannot be made (not root, no
iproute2, a kernel without veth/tbf) or SLURM is not installed. Every SLURM client runs inside node 0's
namespace (`local_cluster.sh exec`), never from the root namespace. The cluster (2 nodes x 2 ranks)
is left up for tests/test_sweep_multinode.py; the last test takes it down and brings it back.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

SCRIPT = Path(__file__).resolve().parents[1] / "slurm" / "local_cluster.sh"
SUBNET = "10.78.0"
UP = ["up", "--nodes", "2", "--ranks-per-node", "2", "--inter", "1gbit"]


def lc(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def in_cluster(*cmd: str, node: int = 0, timeout: float = 60) -> subprocess.CompletedProcess:
    return lc("exec", "--node", str(node), *cmd, timeout=timeout)


def bring_up() -> None:
    """Up (a no-op when this shape already runs), or skip with the script's reason."""
    if shutil.which("slurmd") is None or shutil.which("ip") is None:
        pytest.skip("slurmd or iproute2 not installed (bash slurm/local_cluster.sh install)")
    r = lc(*UP)
    if r.returncode == 3 or "must run as root" in r.stderr:
        pytest.skip(r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, f"up failed:\n{r.stdout}\n{r.stderr}"


@pytest.fixture(scope="module")
def cluster() -> None:
    bring_up()


def test_bad_flags_exit_2_before_touching_anything():
    for args in (["--nodes", "0", "--ranks-per-node", "2"], ["--nodes", "2"],
                 ["--nodes", "2", "--ranks-per-node", "2", "--inter", "fast"], ["--nodes", "2", "--bogus", "1"]):
        r = lc("up", *args, timeout=20)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.strip(), args


def test_without_namespaces_it_says_why_and_touches_nothing():
    if shutil.which("slurmd") is None:
        pytest.skip("slurmd not installed (bash slurm/local_cluster.sh install)")
    before = _ours()
    r = subprocess.run(["bash", str(SCRIPT), *UP], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "DSPBENCH_NO_NETNS": "1"})
    if "must run as root" in r.stderr:
        pytest.skip("not root")
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert "network namespaces cannot be made here: DSPBENCH_NO_NETNS" in r.stderr
    assert _ours() == before


def test_sinfo_shows_two_idle_nodes(cluster):
    r = in_cluster("sinfo", "-h", "-N", "-o", "%N %T %c")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split("\n")[:2]) == ["n0 idle 2", "n1 idle 2"], r.stdout


def test_tasks_are_placed_node_major_and_each_node_has_its_hostname(cluster):
    r = in_cluster("srun", "-N2", "--ntasks-per-node=2", "-t", "1", "bash", "-c",
                   'echo "$SLURM_PROCID $SLURM_LOCALID $(hostname) $(getent hosts $(hostname) | cut -d" " -f1)"')
    assert r.returncode == 0, r.stderr
    rows = sorted(tuple(line.split()) for line in r.stdout.splitlines())
    assert rows == [("0", "0", "n0", f"{SUBNET}.1"), ("1", "1", "n0", f"{SUBNET}.1"),
                    ("2", "0", "n1", f"{SUBNET}.2"), ("3", "1", "n1", f"{SUBNET}.2")], r.stdout


def test_accounting_sees_the_jobs_of_this_cluster(cluster):
    job = in_cluster("sbatch", "--parsable", "-N2", "-t", "1", "--wait", "--wrap", "srun hostname", timeout=90)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip().split(";")[0]
    assert int(job_id) > 1_000_000    # never an id of the single-node cluster
    deadline, row = time.monotonic() + 15, []
    while row != ["COMPLETED|n[0-1]|dspmulti"] and time.monotonic() < deadline:   # sacct trails a job by ~1 s
        time.sleep(0.5)
        row = in_cluster("sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,NodeList,Cluster").stdout.split()
    assert row == ["COMPLETED|n[0-1]|dspmulti"], row


def test_two_tiers_inter_node_veth_shaped_loopback_not(cluster):
    eth = in_cluster("tc", "qdisc", "show", "dev", "eth0").stdout
    assert "tbf" in eth and "rate 1Gbit" in eth, eth
    assert "tbf" not in in_cluster("tc", "qdisc", "show", "dev", "lo").stdout
    # a node's own address is reached over loopback (the intra-node tier), the other node's over eth0
    assert " dev lo " in in_cluster("ip", "route", "get", f"{SUBNET}.1").stdout
    assert " dev eth0 " in in_cluster("ip", "route", "get", f"{SUBNET}.2").stdout


def test_root_namespace_blackholes_the_subnet(cluster):
    shown = subprocess.run(["ip", "route", "show", "exact", f"{SUBNET}.0/24"], capture_output=True, text=True).stdout
    assert shown.startswith("blackhole"), shown
    got = subprocess.run(["ip", "route", "get", f"{SUBNET}.2"], capture_output=True, text=True)
    assert " dev " not in got.stdout, got.stdout     # nothing for the subnet can leave the machine


def _ours() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith("dspmn-")]


def test_down_removes_everything_even_after_a_crash(cluster):
    # a crash: every daemon of the cluster killed, nothing cleaned up
    pids = [p.read_text().strip() for p in Path("/tmp/slurm-multi/run").glob("*.pid")]
    subprocess.run(["kill", "-KILL", *pids], capture_output=True)
    r = lc("down")
    assert r.returncode == 0, r.stderr
    assert _ours() == []
    assert not list(Path("/etc/netns").glob("dspmn-*")) if Path("/etc/netns").exists() else True
    assert subprocess.run(["ip", "route", "show", "exact", f"{SUBNET}.0/24"], capture_output=True,
                          text=True).stdout == ""
    assert lc("mstatus").returncode == 1
    assert lc("exec", "sinfo").returncode == 2     # clear error, no client from the root namespace
    bring_up()                                     # leave it as found for the sweep tests
    assert len(_ours()) == 3
