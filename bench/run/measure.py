"""Timing and memory: CUDA events on GPU, barrier + perf_counter on CPU; per-iteration samples."""
from __future__ import annotations

import resource
import statistics
import time

import torch

class StepTimer:
    """Times one step on this rank; the caller barriers first so all ranks start together."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self.end.record()
            self.end.synchronize()
            self.elapsed = self.start.elapsed_time(self.end) / 1e3
        else:
            self.elapsed = time.perf_counter() - self.t0


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), without numpy."""
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(step_times: list[float]) -> dict:
    return {
        "step_time_median_s": statistics.median(step_times),
        "step_time_p10_s": quantile(step_times, 0.1),
        "step_time_p90_s": quantile(step_times, 0.9),
    }


def peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024   # Linux: KiB
