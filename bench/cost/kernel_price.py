"""One rank's kernels priced one by one on a GPU's rate table: the compute of a GPU prediction.

Each kernel of bench/cost/rank_trace.py costs max(FLOPs / rate, bytes / achieved bandwidth) + the
device's gap between kernels: GEMMs at the table's dense rate for their dtype, reduced for small
problems by the saturating form rate x F / (F + half_flops) (too few tiles to fill the SMs);
attention at its implementation's rate for its head dim, length and pass (bench/cost/kernel_rates.py);
convolutions at the conv rate; everything else (norms, elementwise, RoPE, copies, the ring's LSE
merges, padding) by the bytes it reads and writes at HBM speed. The host issues the same kernels
(eager: a fixed host time per kernel and per model call, the profile's [host]); launches are
asynchronous, so a call takes the larger of the two.

The attention implementation is the run's `attn_kernel`: `auto` is what a user gets on that GPU
with the declared stack (SDPA's choice on the architecture: cuDNN attention on Hopper with torch >= 2.5,
torch's flash kernel, which is FlashAttention-2's, elsewhere). A ring's blocks need the log-sum-exp and
always run torch's flash kernel (methods/attn_kernels.py) unless the run uses flash-attn itself
(fa2 / fa3): under an SDPA-only choice (cudnn, sdpa_efficient, math) a ring-family method's attention
is priced as sdpa_flash.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspbench.cost.kernel_rates import Rate, RateTable, attention_rate

CLASSES = ("attention", "gemm", "memory", "conv")
RING_FAMILY = frozenset({"ring", "usp", "ring_flash"})
SDPA_ONLY = frozenset({"cudnn", "sdpa_efficient", "math"})
AUTO_BY_ARCH = {"hopper": "cudnn", "ampere": "sdpa_flash", "ada": "sdpa_flash"}
DTYPE_KEYS = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
MAX_FLASH_HEAD_DIM = 256   # flash kernels' largest head; SDPA takes the math path beyond it
BWD_FACTOR = 2.5


@dataclass(frozen=True)
class KernelCost:
    kernel: object          # rank_trace.Kernel
    calls: float            # per model call of one rank
    seconds: float          # one call of the kernel, gap included
    bound: str              # compute | memory
    rate: Rate | None       # the rate that priced it (compute-bound) or the bandwidth's source

    @property
    def total_s(self) -> float:
        return self.seconds * self.calls


def resolve_attn_kernel(requested: str, table: RateTable, method: str) -> str:
    """The implementation priced for a method's attention on this GPU (module docstring)."""
    impl = AUTO_BY_ARCH.get(table.arch, "sdpa_flash") if requested in ("", "auto") else requested
    if impl in SDPA_ONLY and method in RING_FAMILY:
        return "sdpa_flash"
    return impl


def price_kernel(k, table: RateTable, peak_hbm_Bps: float, impl: str) -> tuple[float, str, Rate | None]:
    """(seconds of one call, compute|memory, rate source) of one kernel."""
    eff = table.hbm_efficiency()
    bw = peak_hbm_Bps * eff.value
    gap = table.device_gap().value
    mem_s = k.bytes / bw
    dtype = DTYPE_KEYS.get(k.dtype, "bf16")
    if k.kind == "gemm":
        sat, half = table.gemm(dtype)
        rate = sat.value * k.flops / (k.flops + half) if half else sat.value
        compute, src = k.flops / rate, sat
    elif k.kind == "attention" and (impl == "math" or k.attn[3] > MAX_FLASH_HEAD_DIM):
        compute, mem_s, src = math_attention(k, table, bw, dtype)
    elif k.kind == "attention":
        bh, lq, lk, d, _causal, pass_ = k.attn
        rate, src, hd = attention_rate(table, impl, d, lq, lk, pass_, dtype)
        compute = k.flops * hd / d / rate     # a padded head computes its padded width
    elif k.kind == "conv":
        src = table.conv(dtype)
        compute = k.flops / src.value
    else:
        return mem_s + gap, "memory", Rate(bw, eff.kind, eff.source)
    if mem_s > compute:
        return mem_s + gap, "memory", Rate(bw, eff.kind, eff.source)
    return compute + gap, "compute", src


def math_attention(k, table: RateTable, bw: float, dtype: str) -> tuple[float, float, Rate]:
    """(compute s, memory s, rate) of attention as the math path runs it (head dims past flash's 256 fall
    back to it, as SDPA does): QK^T and PV as batched GEMMs at the GEMM rate, and the L_q x L_k scores
    written, read by the softmax, written as P and read by PV (4 passes; the backward 2.5x all of it)."""
    bh, lq, lk, d, _causal, pass_ = k.attn
    sat, half = table.gemm(dtype)
    per_gemm = 2.0 * lq * lk * d
    rate = sat.value * per_gemm / (per_gemm + half) if half else sat.value
    scale = BWD_FACTOR if pass_ == "bwd" else 1.0
    scores = bh * lq * lk * ELEMENT_BYTES.get(dtype, 2) * 4 * scale
    return k.flops / rate, (k.bytes + scores) / bw, Rate(rate, sat.kind, f"math attention at the GEMM rate: {sat.source}")


def price_rank(rk, table: RateTable, peak_hbm_Bps: float, impl: str) -> list[KernelCost]:
    out = []
    for k, n in rk.items():
        s, bound, rate = price_kernel(k, table, peak_hbm_Bps, impl)
        out.append(KernelCost(k, n, s, bound, rate))
    return out


def by_class(costs: list[KernelCost]) -> dict[str, float]:
    """Seconds per kernel class of one model call."""
    out = dict.fromkeys(CLASSES, 0.0)
    for c in costs:
        out[c.kernel.kind] = out.get(c.kernel.kind, 0.0) + c.total_s
    return out


def sources(costs: list[KernelCost]) -> dict[str, dict]:
    """Per kernel class: its seconds, calls, achieved FLOP/s over them and each distinct rate source used."""
    out = {}
    for c in costs:
        d = out.setdefault(c.kernel.kind, {"seconds": 0.0, "calls": 0.0, "flops": 0.0, "sources": {}})
        d["seconds"] += c.total_s
        d["calls"] += c.calls
        d["flops"] += c.kernel.flops * c.calls
        if c.rate is not None:
            key = c.rate.label()
            d["sources"][key] = d["sources"].get(key, 0.0) + c.total_s
    return out
