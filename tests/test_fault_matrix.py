"""The fault-injection matrix: every configuration ends exactly once with a correct status.

| fault                      | executor        | test                                              |
|----------------------------|-----------------|---------------------------------------------------|
| kill -9 during submission  | slurm (real)    | test_kill_9_during_submission_*                   |
| kill -9 during a job       | slurm (real)    | test_sweep_slurm.py::test_cancelled_and_killed_*  |
| kill -9 during a job       | local           | test_kill_9_of_a_local_sweep_mid_configuration_*  |
| two sweeps at once         | slurm (real)    | test_two_slurm_sweeps_at_once_*                   |
| two sweeps at once         | local           | test_sweep_exactly_once.py::test_local_sweeps_*   |
| torn tail                  | local           | test_a_torn_records_tail_*                        |
The SLURM cases use the local cluster (slurm/local_cluster.sh), are marked `slurm` and skip without
it; each uses its own sweep name (the SLURM job name) and results directory.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from dspbench.slurm.execute import prepare, run_plan
from dspbench.slurm.journal import read_journal
from dspbench.slurm.results import record_counts, status_report
from helpers import tiny_sweep
from test_slurm_cluster import partition  # noqa: F401
from test_sweep_slurm import wait_gone


def head(name: str, partition: str) -> str:
    return tiny_sweep(name, configs_per_job=1) + f'[cluster]\npartition = "{partition}"\n'


# Two allocation shapes, so two job arrays: a kill between them leaves one submitted, one not.
GRID = '[[grid]]\nmethod = ["single"]\ngpus = [1]\nseed = [0, 1]\n\n[[grid]]\nmethod = ["dsp"]\ngpus = [2]\nsp = [2]\n'


def spec(tmp_path: Path, partition: str) -> tuple[Path, Path]:
    name = f"fm-{uuid.uuid4().hex[:8]}"          # the SLURM job name: unique on a shared cluster
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(head(name, partition) + GRID))
    return path, tmp_path / "results"


def journalled_jobs(root: Path) -> list[str]:
    """Every job id SLURM gave this directory: the journal's, plus any squeue shows for its tokens."""
    arrays, _ = read_journal(root)
    ids = [j for a in arrays.values() for j in a["job_ids"]]
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%k"], capture_output=True, text=True, timeout=30)
    ids += [ln.split("|")[0] for ln in out.stdout.splitlines() if ln.split("|")[-1].strip() in arrays]
    return sorted(set(ids))


def settle(root: Path, timeout: float = 240) -> dict:
    try:
        wait_gone(journalled_jobs(root), timeout)
    finally:
        if left := journalled_jobs(root):
            subprocess.run(["scancel", *left], capture_output=True, timeout=30)
    return record_counts(root)


def exactly_once_ok(counts: dict, n: int) -> None:
    print(f"\nmatrix counts per run_id: {({rid: dict(c) for rid, c in sorted(counts.items())})}")   # -s shows it
    assert len(counts) == n and all(c == {"ok": 1} for c in counts.values()), counts


SWEEP = [sys.executable, "-m", "dspbench.cli", "sweep"]
# The submitter, killed by SIGKILL right after the first array's sbatch returned and before its job ids
# reach the journal: the narrowest window (monkeypatched here, in the child; no hook in the code).
KILL_AFTER_SBATCH = textwrap.dedent("""
    import os, signal, sys
    from dspbench.slurm import execute
    execute.write_submitted = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
    from dspbench.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.slurm
@pytest.mark.timeout(400)
@pytest.mark.parametrize("when", ["after_sbatch", "when_squeue_shows_it"])
def test_kill_9_during_submission_then_resume_runs_each_configuration_once(tmp_path, partition, when):  # noqa: F811
    path, root = spec(tmp_path, partition)
    args = ["sweep", str(path), "--results", str(root), "--executor", "slurm"]
    if when == "after_sbatch":
        p = subprocess.run([sys.executable, "-c", KILL_AFTER_SBATCH, *args], capture_output=True, timeout=120)
        assert p.returncode == -signal.SIGKILL
    else:
        p = subprocess.Popen(SWEEP + args[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        name = path.stem
        while p.poll() is None and not subprocess.run(["squeue", "-h", "--name", name], capture_output=True,
                                                      text=True, timeout=30).stdout.strip():
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
    try:
        plan, _ = prepare(str(path), "slurm", str(root))
        flying = plan.skipped["queued or running"] + plan.skipped["already ok"]
        assert flying >= 1 and len(plan.todo) + flying == 3, (plan.todo, plan.skipped)
        run_plan(plan, root)
    finally:
        counts = settle(root)
    exactly_once_ok(counts, 3)
    assert "DUPLICATES" not in status_report(root)


@pytest.mark.slurm
@pytest.mark.timeout(400)
def test_two_slurm_sweeps_at_once_submit_each_configuration_once(tmp_path, partition):  # noqa: F811
    path, root = spec(tmp_path, partition)
    cmd = SWEEP + [str(path), "--results", str(root), "--executor", "slurm", "--wait"]
    try:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        arrays, _ = read_journal(root)
        submitted = [r for a in arrays.values() for rids in a["elements"] for r in rids]
        assert len(submitted) == len(set(submitted)) == 3, arrays     # the second found them queued
    finally:
        counts = settle(root)
    exactly_once_ok(counts, 3)


def test_kill_9_of_a_local_sweep_mid_configuration_then_resume_runs_each_once(tmp_path):
    path = tmp_path / "local.toml"
    path.write_text(textwrap.dedent(head("local", "debug")
                                    + '[[grid]]\nmethod = ["single"]\ninject_fault = ["slow@0"]\nseed = [0, 1]\n'))
    root = tmp_path / "results"
    cmd = SWEEP + [str(path), "--results", str(root)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not record_counts(root):           # kill once the first configuration is recorded
        assert p.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)         # the sweep and its ranks, as a terminal's kill would not
    p.wait()
    assert subprocess.run(cmd, capture_output=True, timeout=240).returncode == 0
    exactly_once_ok(record_counts(root), 2)


def test_a_torn_records_tail_reruns_that_configuration_once_and_is_reported(tmp_path):
    """The writer of the last record was killed mid-line (simulated: the file cut inside it). A resume
    reruns that configuration, once; the torn line is reported file:line as a data problem."""
    path = tmp_path / "torn.toml"
    path.write_text(textwrap.dedent(head("torn", "debug")
                                    + '[[grid]]\nmethod = ["single"]\nseed = [0, 1]\n'))
    root = tmp_path / "results"
    cmd = SWEEP + [str(path), "--results", str(root)]
    assert subprocess.run(cmd, capture_output=True, timeout=240).returncode == 0
    (records,) = (root / "records").glob("*.jsonl")
    data = records.read_bytes()
    records.write_bytes(data[:data.rindex(b"\n", 0, len(data) - 1) + 40])     # cut 40 bytes into the last line
    torn_rid = data.rsplit(b"\n", 2)[1].split(b'"run_id": "')[1][:12].decode()
    plan, _ = prepare(str(path), "local", str(root))
    assert [c.run_id() for c in plan.todo] == [torn_rid]
    assert subprocess.run(cmd, capture_output=True, timeout=240).returncode == 0
    exactly_once_ok(record_counts(root), 2)
    assert f"{records}:2: corrupt record skipped" in status_report(root)
