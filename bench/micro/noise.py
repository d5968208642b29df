"""Does a micro-benchmark measure the code or the machine? The conditions a run ran under, and a verdict.

Four gloo ranks on two cores measure the scheduler as soon as anything else runs: a ratio moved by
0.3 between two runs of the same code because another job shared the cores. So every multi-rank
micro-benchmark (the switch, the ledger's on/off, calibrate's probes through quality.py) records:

- the 1-minute load average before and after, and the cores;
- the ranks and threads per rank (ranks x threads > cores oversubscribes the machine by design);
- `competing_cores`: the CPU other processes took while it ran, averaged, in cores. Sampled from
  /proc every SAMPLE_S: all busy CPU time minus the time of this process's session (the benchmark
  and its ranks). The load average cannot tell this: it counts our own ranks too.

A run is **noisy** when other processes took more than COMPETING_MAX cores on average while it ran
(where /proc cannot say, when the load before it exceeds the cores: a load average also counts the
previous benchmark's own ranks for a minute after they end, so it is recorded, not judged, where the
competing CPU is known), or when its spread (p90 - p10 over rounds, relative to the median) of a
judged quantity exceeds SPREAD_MAX (SPREAD_MAX_OVERSUBSCRIBED when ranks x threads exceed the cores:
four ranks on two cores spread 30-50% on an idle machine, measured). Goals are judged only on runs
that are not.
`python -m dspbench.micro.noise RUN.json ...` reads pytest-benchmark's saved runs (`make bench-compare`)
and says which benchmarks in which run were noisy and why.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time

SAMPLE_S = 0.25
COMPETING_MAX = 0.5    # cores others may take on average before the run is noisy
SPREAD_MAX = 0.25      # (p90 - p10) / median of a judged ratio
SPREAD_MAX_OVERSUBSCRIBED = 0.6


def _busy_ticks() -> int:
    """All CPUs' busy time (user..steal, not idle/iowait) in clock ticks, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)


def _session_ticks(sid: int) -> int:
    """utime + stime of every live process in session `sid`."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[3]) == sid:      # field 6 (session) is rest[3] after "pid (comm)"
            total += int(rest[11]) + int(rest[12])
    return total


class LoadMonitor:
    """`with LoadMonitor(ranks, threads) as mon: ...; mon.conditions()`: what the machine did meanwhile."""

    def __init__(self, ranks: int, threads_per_rank: int):
        self.ranks, self.threads = ranks, threads_per_rank
        self.cores = os.cpu_count() or 1
        self._others: list[float] = []
        self._stop = threading.Event()
        self._has_proc = os.path.exists("/proc/stat")

    def __enter__(self):
        self.load_before = os.getloadavg()[0]
        self.t0 = time.monotonic()
        if self._has_proc:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._has_proc:
            self._thread.join()
        self.load_after = os.getloadavg()[0]
        self.seconds = time.monotonic() - self.t0
        return False

    def _sample(self) -> None:
        hz, sid = os.sysconf("SC_CLK_TCK"), os.getsid(0)
        busy, ours, t = _busy_ticks(), _session_ticks(sid), time.monotonic()
        while not self._stop.wait(SAMPLE_S):
            busy2, ours2, t2 = _busy_ticks(), _session_ticks(sid), time.monotonic()
            # an exited process's ticks vanish from `ours`: clamp, a rank's exit is not someone else's load
            others = max(0.0, (busy2 - busy) - max(0, ours2 - ours)) / hz
            self._others.append(others / max(t2 - t, 1e-6))
            busy, ours, t = busy2, ours2, t2

    def conditions(self) -> dict:
        competing = sum(self._others) / len(self._others) if self._others else None
        return {"loadavg_1m_before": round(self.load_before, 2), "loadavg_1m_after": round(self.load_after, 2),
                "cores": self.cores, "ranks": self.ranks, "threads_per_rank": self.threads,
                "oversubscribed": self.ranks * self.threads > self.cores,
                "competing_cores": None if competing is None else round(competing, 3),
                "competing_cores_max": round(max(self._others), 3) if self._others else None,
                "seconds": round(self.seconds, 2)}


def noisy_reasons(cond: dict, spreads: dict[str, float] | None = None) -> list[str]:
    """Why a run's numbers describe the machine more than the code ([] = not noisy)."""
    out = []
    if cond.get("competing_cores") is None and cond["loadavg_1m_before"] > cond["cores"]:
        out.append(f"load {cond['loadavg_1m_before']:.1f} > {cond['cores']} cores before the run")
    if cond.get("competing_cores") is not None and cond["competing_cores"] > COMPETING_MAX:
        out.append(f"other processes took {cond['competing_cores']:.2f} cores on average (> {COMPETING_MAX})")
    bound = SPREAD_MAX_OVERSUBSCRIBED if cond.get("oversubscribed") else SPREAD_MAX
    for name, spread in (spreads or {}).items():
        if spread > bound:
            out.append(f"spread of {name} {spread:.0%} of its median (> {bound:.0%})")
    return out


def relative_spread(summary: dict) -> float:
    """(p90 - p10) / median of a {median, p10, p90} summary."""
    return (summary["p90"] - summary["p10"]) / summary["median"] if summary["median"] else 0.0


# ---------------------------------------------------------------- saved pytest-benchmark runs
def verdicts(run_json: dict) -> list[tuple[str, list[str] | None]]:
    """(benchmark name, noisy reasons or None where the benchmark recorded no conditions)."""
    out = []
    for b in run_json.get("benchmarks", []):
        info = b.get("extra_info", {})
        out.append((b["name"], info.get("noisy") if "conditions" in info else None))
    return out


def main(argv=None) -> int:
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        print("usage: python -m dspbench.micro.noise RUN.json [RUN.json ...]  (pytest-benchmark's saved runs)",
              file=sys.stderr)
        return 2
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        print(f"{path}:")
        for name, reasons in verdicts(run):
            state = "no conditions recorded" if reasons is None else ("NOISY: " + "; ".join(reasons) if reasons
                                                                      else "quiet")
            print(f"  {name}: {state}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
