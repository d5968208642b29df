"""Timing of one calibration measurement: after a barrier, the slowest rank's time, per iteration."""
from __future__ import annotations

import math
import statistics
import time

import torch

from dspbench.methods.comm import layer as comm


def sync() -> None:
    """CUDA work is asynchronous: a host timer must wait for it (a no-op on CPU)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def samples(fn, iters: int, warmup: int, per: int = 1) -> list[float]:
    """The slowest rank's time of fn() / per, once per iteration (the spread is the calibration's
    quality; `per`: calls fn makes, loop_samples)."""
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
        times.append(float(comm.all_reduce_max_(dt, None)[0]) / per)
    return times


LOOP_MIN_S = 0.02     # a looped sample lasts at least this long (one call of a small collective is ~1 ms of jitter)
LOOP_MAX_CALLS = 64


def loop_samples(fn, iters: int, warmup: int, min_s: float = LOOP_MIN_S,
                 max_calls: int = LOOP_MAX_CALLS) -> tuple[list[float], int]:
    """nccl-tests' timing: per sample, `k` back-to-back calls after one barrier, the slowest rank's
    time / k; returns (samples, k). One call of a small collective on TCP varies by milliseconds
    (0.5-8 ms for a 4 KiB all-reduce here, idle): a lone call per sample measures that jitter, and
    its median misses what a step of many such calls pays, their mean. k makes each sample last
    about `min_s` (from one timed call, the same k on every rank)."""
    first = samples(fn, 1, warmup)[0]
    k = max(1, min(max_calls, math.ceil(min_s / max(first, 1e-6))))
    return samples(lambda: [fn() for _ in range(k)], iters, 0, per=k), k


def timed(fn, iters: int, warmup: int) -> float:
    """Median over iterations of the slowest rank's time of fn()."""
    return statistics.median(samples(fn, iters, warmup))
