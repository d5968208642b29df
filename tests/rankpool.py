"""A persistent pool of forked ranks on gloo: tests send a module-level function, get per-rank results.

Forked once per world size and session (0.1 s instead of seconds per test); each child sets one
torch thread first (forking after threaded torch work deadlocks otherwise) and joins the group
through a file:// store (no ports). After the first rank error the others get a short grace
period, then the pool is torn down and rebuilt on next use, and the first traceback is raised.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import tempfile
import time
import traceback


def _worker(rank: int, world: int, init_file: str, conn) -> None:
    import torch
    torch.set_num_threads(1)
    from dspbench.methods.comm import layer as comm
    comm.init("gloo", rank, world, init_method=f"file://{init_file}", timeout_s=120)
    while True:
        msg = conn.recv_bytes()
        if not msg:
            break
        fn, args, kwargs = pickle.loads(msg)
        try:
            out = ("ok", fn(*args, **kwargs))
        except BaseException:  # noqa: BLE001 - the parent re-raises it
            out = ("err", f"rank {rank}:\n{traceback.format_exc()}")
        conn.send_bytes(pickle.dumps(out))
    comm.destroy()


class RankError(RuntimeError):
    pass


class RankPool:
    def __init__(self, world: int):
        self.world = world
        self._dir = tempfile.mkdtemp(prefix="dspbench-pool-")
        ctx = mp.get_context("fork")
        self.conns, self.procs = [], []
        init_file = os.path.join(self._dir, "init")
        for r in range(world):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(r, world, init_file, child), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        self.healthy = True

    def run(self, fn, *args, timeout: float = 240, **kwargs) -> list:
        payload = pickle.dumps((fn, args, kwargs))
        for c in self.conns:
            c.send_bytes(payload)
        results: list = [None] * self.world
        pending, first_err, deadline = set(range(self.world)), None, time.monotonic() + timeout
        while pending:
            if first_err and time.monotonic() > first_err[1]:
                break
            if time.monotonic() > deadline:
                first_err = first_err or (f"timeout after {timeout}s; ranks {sorted(pending)} still running", 0)
                break
            for r in list(pending):
                if self.conns[r].poll(0.01):
                    status, value = pickle.loads(self.conns[r].recv_bytes())
                    pending.discard(r)
                    if status == "err" and first_err is None:
                        first_err = (value, time.monotonic() + 0.5)
                    results[r] = value
                elif not self.procs[r].is_alive():
                    pending.discard(r)
                    first_err = first_err or (f"rank {r} died (exit code {self.procs[r].exitcode})", 0)
        if first_err:
            self.close()
            raise RankError(first_err[0])
        return results

    def close(self) -> None:
        self.healthy = False
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
