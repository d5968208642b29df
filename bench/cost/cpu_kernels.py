"""A calibrated CPU profile's compute per step: one rank's traced kernels at the profile's [kernels].

On a CPU every kernel runs on the thread that dispatches it, so a step is the sum, kernel by kernel
(bench/calibrate/kernels.py measures the four costs):

    kernel = s_per_kernel + FLOPs x s_per_<gemm|attn>_flop     (gemm, conv at the GEMM rate; attention)
    kernel = s_per_kernel + bytes x s_per_byte                 (memory-bound: norms, copies, merges, padding)

The kernels are the method's own (bench/cost/rank_trace.py: its `parallelize` applied and rank 0
traced), so what a method adds is counted, not fitted: Ulysses' and DSP's permutes around each
all-to-all, a ring's N chunk pairs and its log-sum-exp merges, Megatron's narrower GEMMs, the
padded grid. Collectives are priced apart (bench/cost/comm.py, per call by op, size and tier);
each call also costs the host one dispatch (the comm layer's op), counted with the kernels.
Inference and sampling dispatch without autograd: s_per_kernel_infer.
"""
from __future__ import annotations

from dataclasses import dataclass

KINDS = ("gemm", "attention", "conv", "memory")


@dataclass(frozen=True)
class CpuCompute:
    seconds: float          # per step, this rank
    classes: dict           # kind -> {calls, seconds, flops, bytes} per step (dispatch included)
    dispatch_s: float       # the s_per_kernel share of `seconds`
    collective_calls: float


def per_kernel_s(profile, mode: str) -> float:
    k = profile.kernels
    return float(k.get("s_per_kernel_infer", k["s_per_kernel"]) if mode != "train" else k["s_per_kernel"])


def work_s(kernel, profile) -> float:
    """One call's work, dispatch aside."""
    k = profile.kernels
    if kernel.kind in ("gemm", "conv"):
        return kernel.flops * float(k["s_per_gemm_flop"])
    if kernel.kind == "attention":
        return kernel.flops * float(k["s_per_attn_flop"])
    return kernel.bytes * float(k["s_per_byte"])


def cpu_compute(cfg, profile) -> CpuCompute:
    from dspbench.cost.gpu_compute import model_calls, trace_key
    from dspbench.cost.rank_trace import rank_kernels
    rk = rank_kernels(trace_key(cfg))
    s = per_kernel_s(profile, cfg.mode)
    calls = model_calls(cfg)
    classes = {kind: {"calls": 0.0, "seconds": 0.0, "flops": 0.0, "bytes": 0.0} for kind in KINDS}
    for kernel, n in rk.items():
        c = classes[kernel.kind]
        c["calls"] += n * calls
        c["seconds"] += n * calls * (s + work_s(kernel, profile))
        c["flops"] += n * calls * kernel.flops
        c["bytes"] += n * calls * kernel.bytes
    colls = sum(n for _, n in rk.collectives) * calls
    seconds = sum(c["seconds"] for c in classes.values()) + colls * s
    return CpuCompute(seconds * profile.compute_scale, classes, (rk.count * calls + colls) * s, colls)
