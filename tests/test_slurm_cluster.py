"""Smoke tests of the local single-node SLURM cluster (slurm/local_cluster.sh) and of submitit on it.

Start the cluster first (root, Debian):  bash slurm/local_cluster.sh up
Every test here is marked ``slurm`` and is skipped when ``sinfo`` is missing or the cluster is not up.

The job functions are module-level: submitit pickles them by reference, so the job's Python must be
able to ``import test_slurm_cluster``; the executors put this directory on PYTHONPATH (slurm_setup).
Keep the module's top-level imports light: every job imports it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

try:
    import submitit
except ImportError:  # the sbatch tests still run; the submitit ones skip
    submitit = None

pytestmark = pytest.mark.slurm

TESTS_DIR = Path(__file__).resolve().parent
PARTITION = os.environ.get("SLURM_LOCAL_PARTITION", "debug")
UP_HINT = "start it with: bash slurm/local_cluster.sh up"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE")


# --------------------------------------------------------------------------- helpers
def _run(*cmd: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def partition() -> str:
    """The partition to submit to; skips the test when there is no usable cluster."""
    if shutil.which("sinfo") is None:
        pytest.skip(f"SLURM is not installed (no `sinfo` on PATH); {UP_HINT}")
    try:
        r = _run("sinfo", "-h", "-p", PARTITION, "-o", "%T", timeout=20)
    except subprocess.TimeoutExpired:
        pytest.skip(f"SLURM cluster not up (`sinfo` timed out); {UP_HINT}")
    states = r.stdout.split()
    if r.returncode != 0 or not any(s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing") for s in states):
        why = (r.stderr.strip() or f"partition {PARTITION!r} node states: {states or 'none'}").splitlines()[-1]
        pytest.skip(f"SLURM cluster not up ({why}); {UP_HINT}")
    return PARTITION


def _sacct_state(job_id: str) -> str:
    r = _run("sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State")
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _wait_sacct_terminal(job_id: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = _sacct_state(job_id)
        if state.split(" ")[0] in TERMINAL:
            return state
        time.sleep(0.5)
    _run("scancel", job_id)
    pytest.fail(f"job {job_id} not finished after {timeout:.0f} s (sacct state: {state!r})")


def _run_history(job_id: str) -> list[str]:
    """States of every run of a job (sacct -D), once the last run is finished."""
    _wait_sacct_terminal(job_id, timeout=15)
    r = _run("sacct", "-j", job_id, "-X", "-n", "-P", "-D", "-o", "State")
    return r.stdout.split()


def _sbatch(*args: str) -> str:
    r = _run("sbatch", "--parsable", "-p", PARTITION, "-t", "2", *args)
    assert r.returncode == 0, f"sbatch failed: {r.stderr.strip()}"
    return r.stdout.strip().split(";")[0]


def _executor(folder: Path, timeout_min: int = 5, **params) -> "submitit.AutoExecutor":
    if submitit is None:
        pytest.skip("submitit is not installed (pip install 'dspbench[slurm]')")
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
    ex.update_parameters(
        slurm_partition=PARTITION,
        timeout_min=timeout_min,
        nodes=1,
        cpus_per_task=1,
        # the job must import this module (functions are pickled by reference)
        slurm_setup=[f"export PYTHONPATH={TESTS_DIR}${{PYTHONPATH:+:$PYTHONPATH}}"],
        **params,
    )
    return ex


def _results(job, timeout: float) -> list:
    """job.results(), but fail (and cancel the job) instead of hanging past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not job.done():
        if time.monotonic() > deadline:
            job.cancel(check=False)
            pytest.fail(
                f"submitit job {job.job_id} not done after {timeout:.0f} s "
                f"(sacct: {_sacct_state(job.job_id)!r})\n--- stderr:\n{job.stderr() or ''}"
            )
        time.sleep(0.5)
    return job.results()


# --------------------------------------------------------------------------- job functions
def gloo_all_reduce_rank() -> dict:
    """Runs in each SLURM task: torch.distributed over gloo, all_reduce of the rank."""
    import datetime

    import submitit
    import torch
    import torch.distributed as dist

    env = submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    try:
        t = torch.tensor([float(env.rank)])
        dist.all_reduce(t)
        return {"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": t.item(), "master": env.master_addr}
    finally:
        dist.destroy_process_group()


if submitit is not None:

    class ResumeAfterRequeue(submitit.helpers.Checkpointable):
        """First run: signal that it started, then sleep until preempted. After the requeue: return."""

        def __call__(self, started: str, restarts: int = 0):
            if restarts:
                return ("resumed", restarts)
            Path(started).touch()
            time.sleep(120)
            return ("never preempted", restarts)

        def checkpoint(self, started: str, restarts: int = 0):
            return submitit.helpers.DelayedSubmission(self, started, restarts + 1)


# --------------------------------------------------------------------------- tests
def test_sbatch_wrap_completes_and_sacct_reports_it(partition, tmp_path):
    out = tmp_path / "out.txt"
    job_id = _sbatch("-o", str(out), "--wrap", "echo hello from $SLURM_JOB_ID")
    state = _wait_sacct_terminal(job_id, timeout=45)
    assert state == "COMPLETED", f"job {job_id}: {state}"
    assert out.read_text().strip() == f"hello from {job_id}"


def test_fake_gpus_are_schedulable(partition, tmp_path):
    out = tmp_path / "gpu.txt"
    job_id = _sbatch("--gpus-per-node=8", "-o", str(out), "--wrap", "echo $CUDA_VISIBLE_DEVICES $SLURM_GPUS_ON_NODE")
    assert _wait_sacct_terminal(job_id, timeout=45) == "COMPLETED"
    assert out.read_text().split() == ["0,1,2,3,4,5,6,7", "8"]
    # more GPUs than the node has: rejected at submission, not left pending forever
    r = _run("sbatch", "-p", PARTITION, "-t", "1", "--gpus-per-node=9", "--wrap", "true")
    assert r.returncode != 0, f"a 9-GPU job was accepted: {r.stdout}"


def test_submitit_two_tasks_gloo_all_reduce(partition, tmp_path):
    ex = _executor(tmp_path, tasks_per_node=2, gpus_per_node=0)
    job = ex.submit(gloo_all_reduce_rank)
    results = _results(job, timeout=90)
    assert sorted(r["rank"] for r in results) == [0, 1], results
    assert all(r["world"] == 2 and r["sum"] == 1.0 for r in results), results  # 0 + 1 on both ranks
    assert _wait_sacct_terminal(job.job_id, timeout=15) == "COMPLETED"


def test_submitit_preempted_job_is_requeued_and_resumes(partition, tmp_path):
    if submitit is None:
        pytest.skip("submitit is not installed")
    started = tmp_path / "started"
    ex = _executor(tmp_path / "job", tasks_per_node=1)
    job = ex.submit(ResumeAfterRequeue(), str(started))
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, f"job {job.job_id} did not start (sacct: {_sacct_state(job.job_id)!r})"
        time.sleep(0.3)
    job._interrupt()  # what SLURM does on preemption: SIGTERM + USR2 -> checkpoint + scontrol requeue
    assert _results(job, timeout=75) == [("resumed", 1)]
    assert _run_history(job.job_id) == ["REQUEUED", "COMPLETED"]
