"""Sweeps on a real SLURM (slurm/local_cluster.sh) through submitit: multi-task jobs on gloo, cancel and
kill then resume, a time limit that requeues. About 2 minutes on an idle 2-core machine.

Every test is marked `slurm` and skips with a reason when the cluster is not up (the `partition`
fixture of test_slurm_cluster.py). The golden sbatch script is in test_sweep_golden.py.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from helpers import write_spec

from dspbench.records.io import read_dir
from dspbench.slurm.execute import prepare, run_plan
from dspbench.slurm.results import status_report
from test_slurm_cluster import _run_history, _sacct_state, _wait_sacct_terminal, partition  # noqa: F401

pytestmark = pytest.mark.slurm

HEAD = """
[sweep]
name = "{name}"
cluster = "local"
configs_per_job = {per_job}
[fixed]
model = "stdit-tiny"
frames = 4
spatial = 16
warmup = 0
iters = 1
timeout_s = {timeout}
[cluster]
partition = "{partition}"
"""


def submit_sweep(folder: Path, partition: str, name: str, grid: str, per_job: int = 8, timeout: int = 120,
                 cluster: str = "") -> tuple[Path, list[str]]:
    """Write a tiny sweep spec, submit it with the slurm executor: (results dir, job ids)."""
    head = HEAD.format(name=name, per_job=per_job, timeout=timeout, partition=partition)
    path = write_spec(folder, head + cluster + grid, f"{name}.toml")
    plan, root = prepare(str(path), "slurm", str(folder / name))
    return root, list(run_plan(plan, root))


@pytest.fixture
def submit(tmp_path, partition):   # noqa: F811 - the fixture imported above
    """submit(name, grid, ...) -> (results dir, job ids); cancels what is left at the end."""
    submitted: list[str] = []

    def go(*args, **kwargs):
        root, ids = submit_sweep(tmp_path, partition, *args, **kwargs)
        submitted.extend(ids)
        return root, ids

    yield go
    if submitted:
        subprocess.run(["scancel", *submitted], capture_output=True, timeout=30)


def ok_records(root: Path) -> dict[str, list[str]]:
    """run_id -> statuses; no torn or foreign line anywhere."""
    records, problems = read_dir(root / "records")
    assert problems == []
    out: dict[str, list[str]] = {}
    for r in records:
        out.setdefault(r["run_id"], []).append(r["status"])
    return out


def not_single_ok(root: Path) -> dict[str, list[tuple[str, str]]]:
    """run_id -> (status, error) of every configuration that did not end with exactly one ok record:
    what a failed assertion prints, so a rare CI failure says what happened."""
    records, _ = read_dir(root / "records")
    by_id: dict[str, list[tuple[str, str]]] = {}
    for r in records:
        by_id.setdefault(r["run_id"], []).append((r["status"], (r.get("error") or "")[:300]))
    return {rid: ends for rid, ends in by_id.items() if [s for s, _ in ends] != ["ok"]}


def wait_gone(ids: list[str], timeout: float) -> None:
    """Until SLURM holds none of these jobs (a pending array element cancelled never reaches sacct)."""
    deadline = time.monotonic() + timeout
    while queued := set(subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True,
                                       timeout=30).stdout.split()) & set(ids):
        if time.monotonic() > deadline:
            subprocess.run(["scancel", *queued], capture_output=True, timeout=30)
            pytest.fail(f"jobs {sorted(queued)} still queued or running after {timeout:.0f} s")
        time.sleep(0.5)


def wait_all(ids: list[str], timeout: float) -> list[str]:
    """The final sacct state of each job."""
    wait_gone(ids, timeout)
    return [_wait_sacct_terminal(j, 15) for j in ids]


# ---------------------------------------------------------------- tests
def test_sweep_of_two_and_four_task_jobs_on_gloo(submit):
    grid = '[[grid]]\nmethod = ["dsp"]\nzip = { gpus = [2, 4], sp = [2, 4] }\n'
    root, ids = submit("two_shapes", grid)
    assert len(ids) == 2                                   # one job per allocation shape
    again, _ = prepare(str(root.parent / "two_shapes.toml"), "slurm", str(root))
    assert again.todo == [] and again.skipped["queued or running"] == 2      # no double submission
    assert f"queued or running: 2 configurations in SLURM jobs {', '.join(sorted(ids))}" in status_report(root)
    assert wait_all(ids, timeout=150) == ["COMPLETED", "COMPLETED"]
    recs = ok_records(root)
    assert sorted(recs.values()) == [["ok"], ["ok"]]
    assert sorted(p.stem for p in (root / "records").glob("*.jsonl")) == sorted(ids)   # one file per job
    assert "ok           2" in status_report(root)


def test_cancelled_and_killed_jobs_resume_to_one_ok_record_each(submit):
    grid = '[[grid]]\nmethod = ["single"]\nseed = [0, 1, 2, 3]\n'
    root, ids = submit("cancel_kill", grid, per_job=2)
    assert len(ids) == 2                                   # an array of two 2-configuration jobs
    subprocess.run(["scancel", ids[0]], check=True, timeout=30)
    first = root / "records" / f"{ids[1]}.jsonl"
    deadline = time.monotonic() + 90
    while not (first.exists() and first.read_text().strip()):
        assert time.monotonic() < deadline, f"job {ids[1]} wrote no record ({_sacct_state(ids[1])})"
        time.sleep(0.3)
    subprocess.run(["scancel", "--signal=KILL", ids[1]], check=True, timeout=30)   # mid-sweep, no warning
    wait_gone(ids, timeout=60)
    assert all(s == ["ok"] for s in ok_records(root).values())   # cancelling records no failure

    plan, _ = prepare(str(root.parent / "cancel_kill.toml"), "slurm", str(root))
    assert 2 <= len(plan.todo) <= 3 and plan.skipped["already ok"] == 4 - len(plan.todo)
    more = list(run_plan(plan, root))
    assert wait_all(more, timeout=150) == ["COMPLETED"] * len(more)
    recs = ok_records(root)
    print(f"\nmatrix statuses per run_id: {recs}")   # -s shows it
    assert len(recs) == 4 and all(s == ["ok"] for s in recs.values()), (len(recs), not_single_ok(root))


@pytest.mark.timeout(660)
def test_job_reaching_its_time_limit_requeues_and_completes(submit):
    """A 2-minute job warned 80 s before its limit: the running configuration finishes, the job requeues
    itself with what is left, and completes; every configuration ends with one ok record.
    slurmctld sends USR2 at a periodic check, early rather than late (sbatch(1): "up to 60 seconds
    earlier"; 10-15 s early here, more under load). A USR2 before Python takes the signal over would kill
    the job outright, so it is due 40 s in. Each of ten configurations takes at least 5 s (a `slow`
    rank) on top of its own 2-7 s, so the work outlasts the warning on any machine (fourteen plain
    configurations once finished in 31 s, before any USR2)."""
    grid = ('[[grid]]\nmethod = ["single"]\ninject_fault = ["slow@0"]\nseed = ['
            + ", ".join(map(str, range(10))) + ']\n')
    profile = "time_min = 2\nsignal_delay_s = 80\nmax_requeues = 8\n"
    root, ids = submit("time_limit", grid, per_job=10, timeout=60, cluster=profile)
    assert len(ids) == 1
    assert _wait_sacct_terminal(ids[0], timeout=600) == "COMPLETED"
    history = _run_history(ids[0])
    assert history[0] == "REQUEUED" and history[-1] == "COMPLETED", history
    recs = ok_records(root)
    assert len(recs) == 10 and all(s == ["ok"] for s in recs.values()), (len(recs), not_single_ok(root))


def test_slurm_job_records_name_the_culprit_rank_and_the_kind(submit):
    """Rank 1 (task 1 of a 2-task job) exits, then hangs: the records name rank 1, error then timeout."""
    grid = ('[[grid]]\nmethod = ["dsp"]\ngpus = [2]\nsp = [2]\n'
            '[grid.zip]\nseed = [0, 1]\ninject_fault = ["exit@1", "hang@1"]\n')
    root, ids = submit("culprit", grid, timeout=8)
    assert wait_all(ids, timeout=200) == ["COMPLETED"]
    records, problems = read_dir(root / "records")
    recs = {r["seed"]: r for r in records}
    assert problems == [] and len(records) == 2
    assert recs[0]["status"] == "error" and recs[0]["error"].startswith("rank 1 exited with code"), recs[0]["error"]
    assert recs[1]["status"] == "timeout" and recs[1]["error"].startswith("timeout after 8 s: rank 1 stalled"), \
        recs[1]["error"]
