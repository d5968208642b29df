"""A calibrated CPU profile's compute per step: one rank's traced kernels at the profile's [kernels].

On a CPU every kernel runs on the thread that dispatches it, so a step is the sum, kernel by kernel
(bench/calibrate/kernels.py measures the costs):

    kernel = s_per_kernel + FLOPs x s_per_gemm_flop                       (gemm; conv at the GEMM rate)
    kernel = s_per_kernel + FLOPs x s_per_attn_flop + tiles x s_per_attn_tile   (attention)
    kernel = s_per_kernel + bytes x s_per_byte[_math|_norm]               (memory-bound, by class)
    kernel = s_per_kernel                                                 (an allocation: no bytes move)

Why classes: on one CPU thread a copy of 0.8 MB moved ~75 GB/s of cache-resident bytes, a
tanh-GELU (transcendental arithmetic per element) ~4, and a norm sits between (measured here); one s_per_byte
priced adds and copies 5-10x too high (CPU replay of axial3d-tiny's kernels, 2026-12-07), so the
methods that add copies (the all-to-alls' permutes) were charged for bytes that cost little.
Attention on short sequences (axial and temporal attentions: 14-32 tokens, hundreds of heads x
batch) costs per work item, not per FLOP: `tiles` = batch x heads x ceil(q length / ATTN_Q_TILE).
A profile calibrated before these terms has s_per_byte only (every memory kernel at it) and no
tile term; it prices as it always did.

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
ATTN_Q_TILE = 64       # query rows per work item of torch's CPU flash attention below 768 tokens
# memory-bound ops by how a CPU thread spends on their bytes (aten op names, as traced)
MATH_OPS = frozenset({"gelu", "gelu_backward", "silu", "silu_backward", "tanh", "tanh_backward", "sigmoid",
                      "sigmoid_backward", "exp", "log", "erf", "sin", "cos", "pow", "sqrt", "rsqrt",
                      "_softmax", "_softmax_backward_data", "_log_softmax", "_log_softmax_backward_data"})
NORM_OPS = frozenset({"native_layer_norm", "native_layer_norm_backward", "native_group_norm",
                      "native_group_norm_backward", "_fused_rms_norm", "_fused_rms_norm_backward"})
ALLOC_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
MEMORY_CLASSES = {"math": "s_per_byte_math", "norm": "s_per_byte_norm", "stream": "s_per_byte"}


@dataclass(frozen=True)
class CpuCompute:
    seconds: float          # per step, this rank
    classes: dict           # kind -> {calls, seconds, flops, bytes} per step (dispatch included)
    dispatch_s: float       # the s_per_kernel share of `seconds`
    collective_calls: float


def per_kernel_s(profile, mode: str) -> float:
    k = profile.kernels
    return float(k.get("s_per_kernel_infer", k["s_per_kernel"]) if mode != "train" else k["s_per_kernel"])


def memory_class(kernel) -> str:
    """alloc, math, norm or stream: what a memory-bound kernel's bytes cost a CPU thread."""
    if kernel.op in ALLOC_OPS:
        return "alloc"
    return "math" if kernel.op in MATH_OPS else "norm" if kernel.op in NORM_OPS else "stream"


def attn_tiles(kernel) -> float:
    """Work items of an attention kernel: batch x heads x query tiles (kernel.attn[0] is batch x heads)."""
    bh, lq = kernel.attn[0], kernel.attn[1]
    return float(bh * -(-lq // ATTN_Q_TILE))


def work_s(kernel, profile) -> float:
    """One call's work, dispatch aside."""
    k = profile.kernels
    if kernel.kind in ("gemm", "conv"):
        return kernel.flops * float(k["s_per_gemm_flop"])
    if kernel.kind == "attention":
        tile = float(k.get("s_per_attn_tile", 0.0))
        return kernel.flops * float(k["s_per_attn_flop"]) + (attn_tiles(kernel) * tile if tile else 0.0)
    cls = memory_class(kernel)
    if cls == "alloc" and "s_per_byte_math" in k:     # a classed profile: an allocation moves no bytes
        return 0.0
    return kernel.bytes * float(k.get(MEMORY_CLASSES.get(cls, "s_per_byte"), k["s_per_byte"]))


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
