"""A sweep's results directory and what it says: which run_ids are done, failed or still queued.

    results/<sweep>/manifest.json     resolved spec, git sha, submissions (time, executor, counts)
    results/<sweep>/records/*.jsonl   one records file per job (or per local/planning process)
    results/<sweep>/submissions.log   the submission journal (journal.py): each job array's run_ids
                                      before sbatch, its job ids right after (to skip queued ones)
    results/<sweep>/.sweep.lock       held by the sweep planning and running here (lock.py)
    results/<sweep>/logs/<job>/       per-configuration rank output of SLURM/debug jobs
    results/<sweep>/submitit/         submitit's sbatch scripts, pickles and job logs
Only records/ holds *.jsonl: reports read every *.jsonl under the directory.
"""
from __future__ import annotations

import json
import os
import socket
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from dspbench.records.io import read_dir, write_atomic
from dspbench.slurm.journal import in_flight

OK_STATES = ("ok", "unsupported")   # never rerun
STATUS_ORDER = ("ok", "unsupported", "error", "oom", "timeout")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def records_dir(root: Path) -> Path:
    return Path(root) / "records"


def process_records_file(root: Path, kind: str) -> Path:
    """One file per writing process (no two writers ever share a file, NFS-safe)."""
    return records_dir(root) / f"{kind}-{socket.gethostname()}-{os.getpid()}.jsonl"


def best_records(root: Path) -> tuple[dict[str, dict], list[str]]:
    """run_id -> the record that counts (ok, then unsupported, then the latest failure) and problems."""
    records, problems = read_dir(records_dir(root)) if records_dir(root).is_dir() else ([], [])
    best: dict[str, dict] = {}
    for rec in records:
        old = best.get(rec["run_id"])
        if old is None or _better(rec, old):
            best[rec["run_id"]] = rec
    return best, problems


def _better(new: dict, old: dict) -> bool:
    """ok beats unsupported beats failures; among equals the newer record (ISO times sort as text)."""
    rank = {"ok": 0, "unsupported": 1}
    rn, ro = rank.get(new["status"], 2), rank.get(old["status"], 2)
    if rn != ro:
        return rn < ro
    when = [(r.get("environ") or {}).get("recorded_at") or "" for r in (new, old)]
    return when[0] >= when[1]


def states(root: Path) -> dict[str, str]:
    return {rid: rec["status"] for rid, rec in best_records(root)[0].items()}


# ---------------------------------------------------------------- manifest and submitted jobs
def write_json(path: Path, data) -> None:
    """Write then rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def read_json(path: Path, default):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return default


def write_manifest(root: Path, spec_dict: dict, executor: str, counts: dict, run_ids: list[str]) -> None:
    """The resolved spec, the source tree and when; every submission is kept (resumes append one)."""
    from dspbench.records.environ import git_state
    path = Path(root) / "manifest.json"
    old = read_json(path, {})
    submission = {"submitted_at": now(), "executor": executor, **git_state(), **counts}
    write_json(path, {"name": spec_dict["name"], "spec": spec_dict, **git_state(),
                      "submitted_at": submission["submitted_at"], "run_ids": run_ids,
                      "submissions": old.get("submissions", []) + [submission]})


# ---------------------------------------------------------------- status
def status_report(root: Path) -> str:
    """Counts by status (the record that counts per run_id), what is still queued, what failed and why."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no results directory {root}")
    best, problems = best_records(root)
    manifest = read_json(root / "manifest.json", {})
    lines = _count_lines(root, manifest, best) + _duplicate_lines(root) + _phase_lines(best)
    failing = [r for r in best.values() if r["status"] not in OK_STATES]
    if failing:
        lines += ["", "failing configurations (`dspbench sweep FILE --retry-failed` reruns them):"]
        for r in sorted(failing, key=lambda r: (r["method"], r["gpus"], r["run_id"])):
            lines += [_failure_line(r)] + _log_hint(root, r["run_id"])
    if problems:
        lines += ["", f"{len(problems)} unreadable record lines (skipped):"] + [f"  {p}" for p in problems[:20]]
    return "\n".join(lines)


PHASES = ("start", "rendezvous", "oracle", "build", "warmup", "timed", "ledger_step", "memory_step", "collect")


def _phase_lines(best: dict[str, dict]) -> list[str]:
    """Where the runs' wall time went (records' phases_s, rank 0's), summed over configurations, and the
    slowest configuration's largest phase: a slow sweep says which part of which run to look at."""
    timed = [r for r in best.values() if r.get("phases_s")]
    if not timed:
        return []
    total = {p: sum(r["phases_s"].get(p) or 0.0 for r in timed) for p in PHASES}
    ranks = sum(r["phases_s"].get("ranks_total") or 0.0 for r in timed)
    slow = max(timed, key=lambda r: r["phases_s"].get("ranks_total") or 0.0)
    worst = max(PHASES, key=lambda p: slow["phases_s"].get(p) or 0.0)
    return [f"time in ranks: {ranks:.1f} s over {len(timed)} configurations: "
            + ", ".join(f"{p} {total[p]:.1f}" for p in PHASES if total[p] >= 0.05),
            f"  slowest: {slow['method']} gpus={slow['gpus']} {slow['mode']}: {slow['phases_s'].get('ranks_total', 0):.1f} s "
            f"({worst} {slow['phases_s'].get(worst, 0):.1f} s)"]


def _count_lines(root: Path, manifest: dict, best: dict[str, dict]) -> list[str]:
    planned = set(manifest.get("run_ids", []))
    counts = Counter(rec["status"] for rec in best.values())
    lines = [f"sweep {manifest.get('name', root.name)} ({root}): {len(best)} configurations recorded"
             + (f" ({len(planned & set(best))} of the {len(planned)} planned)" if planned else "")]
    order = list(STATUS_ORDER) + sorted(set(counts) - set(STATUS_ORDER))
    lines += [f"  {s:<12} {counts[s]}" for s in order if counts[s]]
    if planned:
        lines.append(f"  {'not run yet':<12} {len(planned - set(best))}")
    flying = in_flight(root)
    done = {rid for rid, rec in best.items() if rec["status"] in OK_STATES}
    queued = {rid for rids in flying.values() for rid in rids} - done
    if flying:
        lines.append(f"  queued or running: {len(queued)} configurations in SLURM jobs {', '.join(flying)}")
    return lines


def record_counts(root: Path) -> dict[str, Counter]:
    """run_id -> Counter of the statuses of every record it has (not only the one that counts)."""
    records = read_dir(records_dir(root))[0] if records_dir(root).is_dir() else []
    counts: dict[str, Counter] = {}
    for rec in records:
        counts.setdefault(rec["run_id"], Counter())[rec["status"]] += 1
    return counts


def _duplicate_lines(root: Path) -> list[str]:
    """Configurations that ended more than once as ok/unsupported: work done twice (a second
    sweep on the same directory, a resubmission); failures before an ok are retries, not duplicates."""
    dups = {rid: c for rid, c in record_counts(root).items() if sum(c[s] for s in OK_STATES) > 1}
    if not dups:
        return []
    lines = [f"  DUPLICATES: {len(dups)} configurations have more than one ok/unsupported record:"]
    for rid, c in sorted(dups.items())[:20]:
        lines.append(f"    {rid}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items())))
    return lines


def _failure_line(r: dict) -> str:
    where = (f"{r['method']} {r['model']} T={r['frames']} S={r['spatial']} gpus={r['gpus']} sp={r['sp']} "
             f"{r['mode']} repeat={r.get('repeat', 0)}")
    error = (r.get("error") or "").strip().replace("\n", " | ")
    return f"  {r['run_id']}  {r['status']:<8} {where}: {error[:300]}"


def _log_hint(root: Path, rid: str) -> list[str]:
    """Where the ranks' output is (SLURM/debug jobs) and how each rank ended (slurm/outcome.py): the
    record names the culprit, the others' ends show what followed from it."""
    logs = sorted(root.glob(f"logs/*/*/{rid}.r*.log"))
    if not logs:
        return []
    hints = [f"      rank logs: {logs[-1].parent}/{rid}.r*.log"]
    for path in sorted(logs[-1].parent.glob(f"{rid}.r*.outcome")):
        got = read_json(path, {})
        if got.get("status") not in (None, "ok"):
            hints.append(f"      {path.name.split('.')[-2]}: {got['status']}: {(got.get('error') or '')[:200]}")
    return hints
