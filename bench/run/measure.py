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
    """Peak since the last `reset_peak_memory`: CUDA's allocator peak, or on Linux CPU the
    process's resident high-water mark (VmHWM; ru_maxrss where /proc is missing: never reset)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return _status_kib("VmHWM") * 1024 or int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def current_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    return _status_kib("VmRSS") * 1024


def reset_peak_memory(device: torch.device) -> bool:
    """Start a new peak (after the oracle and the warm-up, so neither is counted). On CPU, writing
    5 to /proc/self/clear_refs resets VmHWM to the current RSS (Linux >= 4.0, proc(5)). False where
    the peak cannot be reset: the record then carries the process's lifetime peak."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return True
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
