"""Run a module-level function on N fresh ranks (from a forkserver) and return every rank's result.

For micro-benchmarks and calibration (the harness has its own launcher with heartbeats and a
record per outcome). Each child sets its torch threads (and, on NCCL, its GPU) first, joins
through a file:// store (no ports), and reports a result or its traceback; the first failure or
the deadline raises.
"""
from __future__ import annotations

import os
import tempfile
import time
import traceback


def _child(fn, args, rank: int, world: int, init_file: str, threads: int, timeout_s: float, backend: str,
           conn) -> None:
    import torch
    torch.set_num_threads(threads)
    from .methods import comm
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        comm.init(backend, rank, world, init_method=f"file://{init_file}", timeout_s=timeout_s)
        conn.send(("ok", fn(*args)))
        comm.destroy()
    except BaseException:  # noqa: BLE001 - re-raised by the parent
        conn.send(("err", f"rank {rank}:\n{traceback.format_exc()}"))
    conn.close()


def run_ranks(fn, world: int, *args, threads: int = 1, timeout_s: float = 1800, backend: str = "gloo") -> list:
    from .launch import rank_context
    ctx = rank_context()
    with tempfile.TemporaryDirectory(prefix="dspbench-ranks-") as tmp:
        conns, procs = [], []
        for r in range(world):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(fn, args, r, world, os.path.join(tmp, "init"), threads,
                                                 timeout_s, backend, child), daemon=True)
            p.start()
            child.close()
            conns.append(parent)
            procs.append(p)
        try:
            return _collect(conns, procs, timeout_s)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(timeout=5)


def _collect(conns, procs, timeout_s: float) -> list:
    results, pending, deadline = [None] * len(procs), set(range(len(procs))), time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"ranks {sorted(pending)} still running after {timeout_s:g} s")
        for r in sorted(pending):
            if conns[r].poll(0.02):
                status, value = conns[r].recv()
                if status == "err":
                    raise RuntimeError(value)
                results[r] = value
                pending.discard(r)
            elif not procs[r].is_alive() and not conns[r].poll(0):
                raise RuntimeError(f"rank {r} died (exit code {procs[r].exitcode})")
    return results
