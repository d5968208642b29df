"""Launchers: start the ranks of one run and bring back rank 0's metrics or the first failure.

- local: this process forks (gloo) or spawns (nccl) the ranks itself, rendezvous through a file,
  and watches them: the first failure or the deadline ends the run, and every rank is killed.
- env / torchrun: this process is one rank; RANK, WORLD_SIZE, MASTER_ADDR, ... come from the
  environment (torchrun sets them; so does submitit's TorchDistributedEnvironment().export()).
- slurm: as env, with the variables derived from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import traceback

from dspbench.facts.build import Outcome
from dspbench.records.config import RunConfig
from dspbench.records.io import write_atomic
from dspbench.run.ranks import die_with_parent, rank_context, started, supervise


def classify(exc: BaseException) -> str:
    import torch
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return "oom"
    return "error"


def threads_per_rank(cfg: RunConfig) -> int:
    return cfg.threads or max(1, (os.cpu_count() or 1) // cfg.gpus)


# ---------------------------------------------------------------- local
def _child(cfg: RunConfig, rank: int, init_method: str, progress: bool, launched_at: float, conn) -> None:
    entered = time.time()
    die_with_parent()
    import torch
    torch.set_num_threads(threads_per_rank(cfg))   # first: threaded work before fork can deadlock
    from dspbench.methods.comm import layer as comm
    from dspbench.run.worker import run_rank
    try:
        comm.init(cfg.backend, rank, cfg.gpus, init_method=init_method, timeout_s=cfg.timeout_s)
        joined = time.time()
        metrics = run_rank(cfg, progress, beat=lambda step: conn.send(("beat", step)), joined_s=joined - entered)
        if metrics is not None:   # rank 0: how long its process took to start (spawn, imports)
            metrics["phases_s"] = {"start": round(entered - launched_at, 4), **metrics["phases_s"]}
        conn.send(("ok", metrics))
    except BaseException as e:  # noqa: BLE001 - reported to the launcher, which decides
        conn.send((classify(e), f"rank {rank}: {type(e).__name__}: {e}", traceback.format_exc()))
        conn.close()
        os._exit(1)   # peers may be stuck in a collective with us: do not wait for a clean teardown
    conn.close()
    comm.destroy()


def launch_local(cfg: RunConfig, progress: bool = False) -> Outcome:
    """Start cfg.gpus ranks here (run/ranks.py) and turn how they ended into one Outcome."""
    launched = time.time()
    with tempfile.TemporaryDirectory(prefix="dspbench-run-") as tmp:
        init_method = f"file://{tmp}/rendezvous" if cfg.backend == "gloo" else _tcp_init()
        with started(rank_context(cfg.backend), _child, cfg.gpus,
                     lambda rank: (cfg, rank, init_method, progress, launched)) as (conns, procs):
            done = supervise(conns, procs, cfg.timeout_s)
    if done.values and done.values[0] is not None and "phases_s" in done.values[0]:
        # the launcher's wall time of the whole run: start to the ranks' exit (teardown included)
        done.values[0]["phases_s"]["ranks_total"] = round(time.time() - launched, 4)
    if done.timed_out and not done.failures:
        return Outcome("timeout", timeout_message(cfg, set(done.timed_out), done.steps))
    if done.failures:
        return root_cause(done.failures)
    return Outcome("ok", metrics=done.values[0])


def _tcp_init() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


# Messages of ranks that only saw a peer go away: never the root cause when another rank says more.
PEER_SYMPTOMS = ("Connection closed by peer", "Read error", "Connection reset", "Broken pipe",
                  "remote worker", "NCCL communicator was aborted", "Timed out", "timed out")


def root_cause(failures: list[tuple]) -> Outcome:
    primary = [f for f in failures if not any(s in f[1] for s in PEER_SYMPTOMS)] or failures
    first = primary[0]
    others = [f[1].split(":", 1)[0] for f in failures if f is not first]
    note = f" (then {', '.join(others)} failed on the lost peer)" if others else ""
    return Outcome(first[0], first[1] + note)


def timeout_message(cfg: RunConfig, pending: set[int], steps: list[int]) -> str:
    """Name the rank(s) that fell behind: the others are usually waiting for them in a collective."""
    behind = [r for r in sorted(pending) if steps[r] == min(steps[q] for q in pending)]
    ahead = max(steps)
    where = "before its first step" if steps[behind[0]] < 0 else f"after starting step {steps[behind[0]]}"
    names = ", ".join(f"rank {r}" for r in behind)
    return (f"timeout after {cfg.timeout_s:g} s: {names} stalled {where}"
            + (f" while others reached step {ahead}" if ahead > steps[behind[0]] else "")
            + f" (ranks {sorted(pending)} unfinished)")


# ---------------------------------------------------------------- env / torchrun / slurm
ENV_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")   # torch.distributed's env://
SLURM_VARS = ("SLURM_PROCID", "SLURM_NTASKS")                       # the rest have defaults


def require_env(launcher: str, names: tuple[str, ...], hint: str) -> None:
    """Every variable a launcher needs, all missing ones named at once (a usage error: exit 2)."""
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise ValueError(f"--launcher {launcher} needs {', '.join(names)} in the environment; missing: "
                         f"{', '.join(missing)}. {hint}")


def slurm_to_env() -> None:
    """Derive torch.distributed's env:// variables from SLURM's (as srun sets them per task)."""
    require_env("slurm", SLURM_VARS, "Run it as a step of an allocation (srun dspbench run --launcher slurm ..."
                ", inside sbatch or salloc), or use --launcher local to start the ranks here.")
    env = os.environ
    env.setdefault("RANK", env["SLURM_PROCID"])
    env.setdefault("WORLD_SIZE", env["SLURM_NTASKS"])
    env.setdefault("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))
    if "MASTER_ADDR" not in env:
        nodes = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "127.0.0.1"
        env["MASTER_ADDR"] = _first_host(nodes)
    # every task computes it alone, so it can only be a function of the job; kept below Linux's
    # ephemeral range (32768-60999), where srun's and slurmd's own sockets take their ports
    env.setdefault("MASTER_PORT", str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 12768))


def _first_host(nodelist: str) -> str:
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.split():
            return out.stdout.split()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return nodelist.split(",")[0].split("[")[0]


def launch_env(cfg: RunConfig, progress: bool = False, outcome_prefix: str | None = None) -> Outcome:
    """This process is one rank of an externally launched world; rank 0 gets the metrics.

    outcome_prefix (sweep jobs): this rank writes `<prefix>.r<rank>.beat` (the step it started,
    each step) and `<prefix>.r<rank>.outcome` (how it ended), so the job can name the culprit rank."""
    if cfg.launcher == "slurm":
        slurm_to_env()
    require_env(cfg.launcher, ENV_VARS, "torchrun sets them (torchrun --nproc-per-node N -m dspbench.cli run "
                "--launcher torchrun ...); or use --launcher local to start the ranks here.")
    import torch
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != cfg.gpus:
        return Outcome("error", f"--gpus {cfg.gpus} but the launcher started {world} ranks (WORLD_SIZE)")
    if cfg.threads or "OMP_NUM_THREADS" not in os.environ:   # --threads wins, then the launcher's OMP_NUM_THREADS
        torch.set_num_threads(threads_per_rank(cfg))
    from dspbench.methods.comm import layer as comm
    from dspbench.run.worker import run_rank
    rank = int(os.environ.get("RANK", "0"))
    files = {k: f"{outcome_prefix}.r{rank}.{k}" for k in ("beat", "outcome")} if outcome_prefix else None
    beat = (lambda step: write_atomic(files["beat"], str(step))) if files else (lambda step: None)
    try:
        comm.init(cfg.backend, rank, world, init_method="env://", timeout_s=cfg.timeout_s)
        outcome = Outcome("ok", metrics=run_rank(cfg, progress, beat=beat))
    except BaseException as e:  # noqa: BLE001
        outcome = Outcome(classify(e), f"rank {rank}: {type(e).__name__}: {e}")
    if files:
        write_atomic(files["outcome"], json.dumps({"status": outcome.status, "error": outcome.error}))
    comm.destroy()
    return outcome
