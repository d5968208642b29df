"""The submission journal of a sweep's results directory, and what SLURM still holds of it.

`submissions.log` (one JSON object a line, appended with one write and fsync'd; not *.jsonl, which
is for records) gets two lines per job array:
- `intent`, written *before* sbatch: a fresh token and the run_ids of each array element, in order;
- `submitted`, written right after sbatch returns: the token and the job ids.
Every array is submitted with its token as the SLURM comment and the sweep's job name. Planning asks
SLURM (squeue by job name) which jobs are pending or running and maps each back to run_ids through
its token and array index, so a submitter killed at any point, even between sbatch and the
`submitted` line, never lets a resume submit work that is already queued or running.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

JOURNAL = "submissions.log"


def journal_path(root: Path) -> Path:
    return Path(root) / JOURNAL


def append_line(path: Path, entry: dict) -> None:
    """One write(2) on O_APPEND, then fsync: the line is on disk before the caller goes on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(entry, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(f"short write to {path}")
        os.fsync(fd)
    finally:
        os.close(fd)


def new_token() -> str:
    return "dspbench-" + uuid.uuid4().hex[:16]


def write_intent(root: Path, token: str, name: str, elements: list[list[str]]) -> None:
    append_line(journal_path(root), {"kind": "intent", "token": token, "name": name, "elements": elements})


def write_submitted(root: Path, token: str, job_ids: list[str]) -> None:
    append_line(journal_path(root), {"kind": "submitted", "token": token, "job_ids": job_ids})


def read_journal(root: Path) -> tuple[dict[str, dict], list[str]]:
    """token -> {"name", "elements", "job_ids"}; a torn last line (a killed writer) is skipped."""
    arrays: dict[str, dict] = {}
    path = journal_path(root)
    if not path.exists():
        return arrays, []
    problems = []
    for lineno, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
            entry = arrays.setdefault(e["token"], {"name": "", "elements": [], "job_ids": []})
            if e["kind"] == "intent":
                entry.update(name=e["name"], elements=e["elements"])
            else:
                entry["job_ids"] = e["job_ids"]
        except (ValueError, KeyError, TypeError):
            problems.append(f"{path}:{lineno}: unreadable journal line skipped")
    return arrays, problems


class SlurmQueryError(ValueError):
    """SLURM could not say what is queued: planning a SLURM sweep without it could resubmit live work
    (a ValueError: the CLI prints it as one line and exits 2)."""


def squeue_by_name(names: set[str]) -> list[tuple[str, str]]:
    """(job id as submitit names it: 123_4 or 123, comment) of pending/running jobs with these names."""
    if not names:
        return []
    cmd = ["squeue", "-h", "-r", "--name", ",".join(sorted(names)), "-o", "%i|%k"]
    try:   # -r: one line per array element
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SlurmQueryError(f"`{' '.join(cmd)}` failed: {e}") from None
    if out.returncode != 0:
        raise SlurmQueryError(f"`{' '.join(cmd)}` failed: {out.stderr.strip()}")
    return [tuple(line.split("|", 1)) for line in out.stdout.splitlines() if "|" in line]


def in_flight(root: Path, strict: bool = False) -> dict[str, list[str]]:
    """job id -> run_ids, for this directory's jobs that SLURM still holds (pending or running).

    strict (SLURM planning): a failing squeue is an error. Otherwise (status, local executors on a
    machine without SLURM) nothing is taken to be in flight when squeue is missing or fails."""
    arrays, _ = read_journal(root)
    if not arrays:
        return {}
    if shutil.which("squeue") is None:
        if strict:
            raise SlurmQueryError("squeue not found: cannot tell which of this sweep's jobs are still queued")
        return {}
    try:
        live = squeue_by_name({a["name"] for a in arrays.values() if a["name"]})
    except SlurmQueryError:
        if strict:
            raise
        return {}
    flying: dict[str, list[str]] = {}
    for job_id, comment in live:
        array = arrays.get(comment.strip())
        if array is None:          # same job name, another results directory
            continue
        if "[" in job_id:          # a pending range not split by -r: count every element in flight
            flying[job_id] = [r for rids in array["elements"] for r in rids]
            continue
        index = int(job_id.split("_", 1)[1]) if "_" in job_id else 0
        if index < len(array["elements"]):
            flying[job_id] = array["elements"][index]
    return dict(sorted(flying.items()))
