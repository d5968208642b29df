"""Timing of one calibration measurement: after a barrier, the slowest rank's time, per iteration."""
from __future__ import annotations

import statistics
import time

import torch

from dspbench.methods import comm


def sync() -> None:
    """CUDA work is asynchronous: a host timer must wait for it (a no-op on CPU)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def samples(fn, iters: int, warmup: int) -> list[float]:
    """The slowest rank's time of fn(), once per iteration (the spread is the calibration's quality)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        comm.barrier()
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        times.append(float(comm.all_reduce_max_(dt, None)[0]))
    return times


def timed(fn, iters: int, warmup: int) -> float:
    """Median over iterations of the slowest rank's time of fn()."""
    return statistics.median(samples(fn, iters, warmup))
