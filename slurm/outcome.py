"""The record of one configuration in a sweep job, composed from every rank's own account.

Each rank of a sweep job runs `dspbench run --outcome-prefix logs/<job>/attempt<k>/<run_id>` and
leaves beside its log (on the shared results directory, so task 0 sees every node's ranks):
    <run_id>.r<k>.beat      the step it last started (a heartbeat, rewritten every step)
    <run_id>.r<k>.outcome   {"status", "error"} as it ended, if it could say
    <run_id>.r0.result      rank 0's full record
and the task that started a rank adds its `.outcome` when the rank died without writing one (its exit
code). Task 0 then names the culprit as `dspbench run` does with the local launcher: a rank's own
failure beats the peers' symptoms of it ("Connection closed by peer", "Timed out ..."), and a rank
that never ended is a timeout naming the rank(s) that stalled at the lowest step.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from dspbench.records.config import RunConfig
from dspbench.records.io import write_atomic

OUTCOME_WAIT_S = 5.0    # how long task 0 waits for other nodes' ranks to leave their outcome


@dataclass
class RankEnd:
    outcome: tuple[str, str] | None   # (status, error) the rank or its task wrote; None: never ended
    step: int                          # last step started (-1: none)


def paths(prefix: Path, rank: int) -> dict[str, Path]:
    return {k: Path(f"{prefix}.r{rank}.{k}") for k in ("beat", "outcome", "result", "log")}


def read_outcome(path: Path) -> tuple[str, str] | None:
    try:
        d = json.loads(Path(path).read_text())
        return d["status"], d["error"] or ""
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_outcome(path: Path, status: str, error: str) -> None:
    write_atomic(path, json.dumps({"status": status, "error": error}))


def read_step(path: Path) -> int:
    try:
        return int(Path(path).read_text().strip() or -1)
    except (OSError, ValueError):
        return -1


def silent_exit(rank: int, code: int | None) -> tuple[str, str]:
    """What a rank that ended without an outcome of its own most likely died of."""
    if code == -signal.SIGKILL:
        return "oom", f"rank {rank} was killed by SIGKILL (most likely the out-of-memory killer)"
    return "error", f"rank {rank} exited with code {code} without writing a record"


def gather(prefix: Path, world: int, local_codes: dict[int, int | None], wait_remote: bool) -> dict[int, RankEnd]:
    """Every rank's end. local_codes: exit codes of the ranks this task started (None: killed by the
    job). Ranks of other tasks get OUTCOME_WAIT_S to show their outcome (shared file system)."""
    deadline = time.monotonic() + (OUTCOME_WAIT_S if wait_remote else 0)
    while True:
        ends = {}
        for r in range(world):
            p = paths(prefix, r)
            got = read_outcome(p["outcome"])
            if got is None and local_codes.get(r) is not None and local_codes[r] != 0:
                got = silent_exit(r, local_codes[r])
            ends[r] = RankEnd(got, read_step(p["beat"]))
        remote_missing = [r for r in range(world) if r not in local_codes and ends[r].outcome is None]
        if not remote_missing or time.monotonic() > deadline:
            return ends
        time.sleep(0.2)


def all_ended_ok(ends: dict[int, RankEnd]) -> bool:
    """Every rank reported `ok`: whatever rank 0 recorded is its own verdict, not a failure's symptom."""
    return all(e.outcome is not None and e.outcome[0] == "ok" for e in ends.values())


def compose(cfg: RunConfig, ends: dict[int, RankEnd], killed: bool) -> tuple[str, str]:
    """(status, error) of a configuration that did not end ok, named after its culprit rank."""
    from dspbench.run.launch import root_cause, timeout_message   # dspbench run's culprit rule
    failures = [(o.outcome[0], o.outcome[1] if o.outcome[1].startswith("rank ") else f"rank {r}: {o.outcome[1]}", "")
                for r, o in sorted(ends.items()) if o.outcome is not None and o.outcome[0] != "ok"]
    pending = {r for r, o in ends.items() if o.outcome is None}
    steps = [ends[r].step for r in range(len(ends))]
    own = [f for f in failures if not _is_symptom(f[1])]
    if own or (failures and not pending):
        out = root_cause(failures)
        return out.status, out.error
    if pending:
        why = timeout_message(cfg, pending, steps)
        if killed:
            why += "; the sweep job killed the ranks (no record within the timeout + grace)"
        return "timeout", why
    return "error", "no rank reported an outcome"


def _is_symptom(error: str) -> bool:
    from dspbench.run.launch import PEER_SYMPTOMS
    return any(s in error for s in PEER_SYMPTOMS)
