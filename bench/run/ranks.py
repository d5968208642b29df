"""The one supervisor of rank processes started here, for runs, calibration and micro-benchmarks.

Ranks start from a forkserver (never by forking this process), die with their parent, and talk
back over a pipe: ("beat", step) heartbeats, then one final message, ("ok", value) or
(kind, message, traceback). `supervise` polls them until every rank has finished, the first
failure's grace period is over, or the deadline passes, and says which of those happened.
`run_ranks(fn, world, ...)` is the simple form: every rank's value, or an exception.
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field

GRACE_S = 3.0   # after the first failure, how long the other ranks get to report theirs


def rank_context(backend: str = "gloo"):
    """Start ranks from a clean forkserver, never by forking this process.

    Forking a process that has already run threaded torch work (OpenMP pools) can deadlock the
    child even when it resets its thread count; a forkserver is a fresh interpreter that imported
    torch and dspbench once (preload) and forks every rank from there: safe and still fast.
    CUDA needs the same: a CUDA context does not survive fork.
    """
    ctx = mp.get_context("forkserver")
    # torch._dynamo: torch.optim's constructor imports it on first use (1.4 s on 2 cores); preloaded
    # once here instead of in every training rank of every configuration (docs/metrics.md, phases_s)
    ctx.set_forkserver_preload(["torch", "torch._dynamo", "dspbench.run.worker", "dspbench.run.launch"])
    return ctx


def die_with_parent() -> None:
    """Linux: SIGKILL this child if the launching process dies, so no rank is ever orphaned."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Finished:
    """How a group of ranks ended: each rank's value, the failures in arrival order, the ranks still
    running at the deadline (empty unless it passed) and the step each rank last started."""
    values: list
    failures: list[tuple] = field(default_factory=list)     # (kind, message, traceback)
    timed_out: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)


@contextmanager
def started(ctx, target, world: int, args_of):
    """Start `world` processes running target(*args_of(rank), conn); kill any still alive on exit."""
    conns, procs = [], []
    try:
        for rank in range(world):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=target, args=(*args_of(rank), child), daemon=True)
            p.start()
            child.close()
            conns.append(parent)
            procs.append(p)
        yield conns, procs
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=10)


def supervise(conns, procs, timeout_s: float, grace_s: float = GRACE_S) -> Finished:
    deadline, pending = time.monotonic() + timeout_s, set(range(len(procs)))
    done = Finished(values=[None] * len(procs), steps=[-1] * len(procs))
    failed_at = None
    while pending:
        now = time.monotonic()
        if failed_at is not None and now > failed_at + grace_s:
            break
        if now > deadline:
            done.timed_out = sorted(pending)
            break
        for rank in sorted(pending):
            msg = _poll(conns[rank], procs[rank], rank, done.steps)
            if msg is None:
                continue
            pending.discard(rank)
            if msg[0] == "ok":
                done.values[rank] = msg[1]
            else:
                done.failures.append(msg)
                failed_at = failed_at or time.monotonic()
        time.sleep(0.01)
    return done


def _poll(conn, proc, rank: int, steps: list[int]):
    """A rank's final message, a synthesised one if it died silently, or None while it runs."""
    try:
        while conn.poll():
            msg = conn.recv()
            if msg[0] != "beat":
                return msg
            steps[rank] = msg[1]
    except (EOFError, OSError):
        pass
    if proc.is_alive():
        return None
    code = proc.exitcode
    if code == -signal.SIGKILL:
        return ("oom", f"rank {rank}: killed by SIGKILL (most likely the out-of-memory killer)", "")
    return ("error", f"rank {rank}: exited with code {code} without reporting", "")


# ---------------------------------------------------------------- run_ranks: a function on N ranks
def _fn_child(fn, args, rank: int, world: int, init_file: str, threads: int, timeout_s: float, backend: str,
              conn) -> None:
    die_with_parent()
    import torch
    torch.set_num_threads(threads)
    from dspbench.methods.comm import layer as comm
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        comm.init(backend, rank, world, init_method=f"file://{init_file}", timeout_s=timeout_s)
        conn.send(("ok", fn(*args)))
        comm.destroy()
    except BaseException as e:  # noqa: BLE001 - re-raised by the parent
        conn.send(("error", f"rank {rank}: {type(e).__name__}: {e}", traceback.format_exc()))
    conn.close()


def run_ranks(fn, world: int, *args, threads: int = 1, timeout_s: float = 1800, backend: str = "gloo") -> list:
    """fn(*args) on `world` fresh ranks joined through a file:// store (no ports); every rank's value.

    For calibration and micro-benchmarks: the first failure raises RuntimeError (with its
    traceback), the deadline TimeoutError."""
    with tempfile.TemporaryDirectory(prefix="dspbench-ranks-") as tmp:
        init = os.path.join(tmp, "init")
        with started(rank_context(backend), _fn_child, world,
                     lambda r: (fn, args, r, world, init, threads, timeout_s, backend)) as (conns, procs):
            done = supervise(conns, procs, timeout_s, grace_s=0.0)
    if done.failures:
        kind, message, tb = done.failures[0]
        raise RuntimeError(f"{message}\n{tb}")
    if done.timed_out:
        raise TimeoutError(f"ranks {done.timed_out} still running after {timeout_s:g} s")
    return done.values
