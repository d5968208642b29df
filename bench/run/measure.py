"""Timing and memory: CUDA events on GPU, barrier + perf_counter on CPU; per-iteration samples."""
from __future__ import annotations

import ctypes
import resource
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

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


class _MallInfo2(ctypes.Structure):        # glibc >= 2.33, malloc.h
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2():
    try:
        fn = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return fn


_MALLINFO2 = _mallinfo2()
LIVE_PEAK = ("CPU: the most bytes malloc had handed out (glibc mallinfo2, all arenas), sampled after "
             "every tensor operation of an untimed step after the timed ones")


def live_heap_bytes() -> int | None:
    """Bytes the C heap has allocated and not freed (in use, mmapped blocks included); None without glibc."""
    if _MALLINFO2 is None:
        return None
    m = _MALLINFO2()
    return int(m.uordblks + m.hblkhd)


class LivePeak(TorchDispatchMode):
    """The peak of live_heap_bytes over a region, sampled after each tensor operation.

    Why not the resident peak: glibc keeps freed blocks in its heap, so the resident size also
    counts every transient the process ever freed. Megatron-SP's full-size gathered buffers came out
    39-57 MiB per rank above DSP in resident memory (stdit-tiny T=32 S=256, 4 ranks), where the
    tensors autograd saves differ by 12 MiB and the live peaks by 1 MiB. Live bytes are what a device
    allocator's peak counts (torch.cuda.max_memory_allocated), and what the memory model predicts.
    Sampling costs a call per operation (about 0.3 us), so only an untimed step runs under it."""

    def __enter__(self):
        self.peak = live_heap_bytes() or 0
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, live_heap_bytes() or 0)
        return out


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class PhaseClock:
    """Wall time of a run's phases on one rank (`phases_s` in the record): where a configuration's
    seconds go besides its timed steps (process start, rendezvous, oracle, model build, warm-up, the
    ledger's and the memory probe's extra steps). Host wall clock, unsynchronised: coarse by design."""

    def __init__(self, phases: dict | None = None):
        self.phases = dict(phases or {})
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = round(now - self._t, 4)
        self._t = now
