"""Compute that knows its size, and the fixed cost of every launch: the cost model's device curve.

One constant efficiency prices a 1k-token GEMM like a 64k-token one. On an H200 (results/gpu-h200/
curve.json) a bf16 linear's forward+backward ran from 2.9 to 737 TFLOP/s over the shapes a DiT
takes per rank, and SDPA from 133 to 490 TFLOP/s over lengths 256 to 16384; as SP grows, each
rank's GEMMs shrink and slide down that curve. A profile's `[compute.curve]` holds:

- `gemm_peak_fraction`, `gemm_half_flops`: a GEMM of W FLOPs runs at
  peak x gemm_peak_fraction x W / (W + gemm_half_flops) (the saturating form of a roofline whose
  small end is too few tiles to fill the SMs);
- `attn_peak_fraction`, `attn_half_len`: attention over sequences of length L runs at
  peak x attn_peak_fraction x L / (L + attn_half_len) (short sequences: many small tiles, the
  softmax's bookkeeping per row);
- `host_s_per_kernel`: host time to issue one kernel from eager PyTorch inside modules (Python,
  dispatch, launch), and `call_host_s`: fixed host time per model call (the sampler's step, the
  embedding of the timestep). Launches are asynchronous, so a call costs
  max(device time, host time): the host term decides small problems, not large ones;
- `compiled_host_factor`: the share of eager host time left under torch.compile with CUDA graphs
  (`--compiled`).

`fit_curve(curve_json)` fits the first four to `python -m dspbench.calibrate.curve` output (each
a least-squares fit of log rate, points whose time is under MIN_KERNEL_S left out: they time the
launch, not the math), and takes the host terms from its launch and call probes.
`kernels_per_forward(model)` counts the kernels one forward issues (aten ops that are not views),
on the meta device: any size, no memory.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

MIN_KERNEL_S = 2e-4     # a measured GEMM or SDPA shorter than this times its launch, not its math

# aten ops that only relabel memory (no kernel); the rest of an eager forward launches one each
VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze",
    "split", "split_with_sizes", "slice", "select", "as_strided", "detach", "alias", "unbind", "chunk",
    "flatten", "unflatten", "view_as", "expand_as", "narrow", "lift_fresh", "empty", "_reshape_alias",
})


@dataclass(frozen=True)
class Curve:
    gemm_peak_fraction: float
    gemm_half_flops: float
    attn_peak_fraction: float
    attn_half_len: float
    host_s_per_kernel: float = 0.0
    call_host_s: float = 0.0
    compiled_host_factor: float = 0.85
    conv_peak_fraction: float = 0.14

    def gemm_efficiency(self, flops_per_gemm: float) -> float:
        w = max(flops_per_gemm, 1.0)
        return self.gemm_peak_fraction * w / (w + self.gemm_half_flops)

    def attn_efficiency(self, length: float) -> float:
        L = max(length, 1.0)
        return self.attn_peak_fraction * L / (L + self.attn_half_len)

    def host_s(self, kernels: int, calls: float, compiled: bool) -> float:
        eager = kernels * self.host_s_per_kernel * calls + self.call_host_s * calls
        return eager * (self.compiled_host_factor if compiled else 1.0)


def from_table(d: dict) -> Curve | None:
    """A profile's [compute.curve] table, or None where it has none (the constant efficiency stays)."""
    if not d:
        return None
    return Curve(**{k: float(v) for k, v in d.items() if k in Curve.__dataclass_fields__})


def _fit_with_latency(points: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(asymptote, half, latency) minimising sum (log t - log(h + F (x + half) / (a x)))^2 over the probe's
    (x, F, t): x the size, F the FLOPs timed, t the time of one sample. Each sample of the probe pays a
    fixed latency h (launch, autograd, the synchronisation that ends it) that a model's thousands of
    asynchronous kernels do not pay one by one: fitted here so that it does not pass for inefficiency."""
    best = None
    top = max(f / t for _, f, t in points)
    for hi in range(0, 101):
        h = hi * 1e-5
        for i in range(121):
            half = min(x for x, _, _ in points) * 10 ** (i / 20.0 - 2)
            for ai in range(41):
                a = top * (0.8 + ai * 0.01)
                err = sum((math.log(h + f * (x + half) / (a * x)) - math.log(t)) ** 2 for x, f, t in points)
                if best is None or err < best[0]:
                    best = (err, a, half, h)
    return best[1], best[2], best[3]


def fit_curve(probe: dict, peak_flops: float) -> dict:
    """The [compute.curve] table for a profile, from the curve probe's JSON (bench/calibrate/curve.py)."""
    gemm, attn = [], []
    for key, rate in probe["gemm"].items():
        n, c = (int(v[1:]) for v in key.split("_"))
        flops = 3 * 2 * n * c * c                    # forward + backward of one n x c x c GEMM
        gemm.append((2.0 * n * c * c, flops, flops / rate))
    for key, rate in probe["attn"].items():
        length, d = (int(v[1:]) for v in key.split("_"))
        flops = 3 * 4.0 * max(1, 65536 // length) * max(1, 2048 // d) * length * length * d
        attn.append((float(length), flops, flops / rate))
    if len(gemm) < 3 or len(attn) < 3:
        raise ValueError("the curve probe needs at least three GEMM and three attention points to fit a curve")
    ga, gh, glat = _fit_with_latency(gemm)
    aa, ah, alat = _fit_with_latency(attn)
    # four significant figures, not decimals: a CPU rehearsal's fractions of a GPU peak are ~1e-4 and
    # must not round to zero
    table = {"gemm_peak_fraction": float(f"{ga / peak_flops:.4g}"), "gemm_half_flops": float(f"{gh:.3g}"),
             "attn_peak_fraction": float(f"{aa / peak_flops:.4g}"), "attn_half_len": float(f"{ah:.3g}"),
             "host_s_per_kernel": float(f"{probe['call_s'] / probe.get('call_kernels', 5):.3g}"),
             "call_host_s": float(f"{probe['call_s']:.3g}")}
    return table, {"gemm_probe_latency_s": glat, "attn_probe_latency_s": alat}


@dataclass(frozen=True)
class ForwardCosts:
    """What one forward issues, read off a meta-device trace: GEMMs as {fwd FLOPs of one call: calls},
    attentions as [(length, FLOPs)], convolutions' FLOPs, the bytes every other kernel reads and writes,
    and the number of kernels."""
    gemms: dict
    attn: list
    conv_flops: float
    elementwise_bytes: float
    kernels: int


_GEMMS = {"mm", "addmm", "bmm", "baddbmm"}


def _nbytes(t) -> int:
    import torch
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


@functools.lru_cache(maxsize=256)
def forward_costs(model: str, batch: int, frames: int, spatial: int, dtype: str = "bf16") -> ForwardCosts:
    """Trace one forward of the unparallelized model on the meta device at this shape (no memory, no
    arithmetic) and sort its kernels: GEMMs (2MNK each), attention (caught before torch decomposes it:
    flash kernels on a GPU), convolutions, and the rest, memory-bound, by the bytes they move."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode
    from dspbench.models import Shape, build_model, get_config
    from dspbench.models.inputs import make_inputs
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    gemms, attn, other = {}, [], {"bytes": 0, "kernels": 0, "conv": 0.0}

    class _Attention(TorchFunctionMode):      # SDPA: one fused kernel on a GPU, priced by its length
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is F.scaled_dot_product_attention:
                q, k = args[0], args[1]
                attn.append((k.shape[-2], 4.0 * q.shape[:-2].numel() * q.shape[-2] * k.shape[-2] * q.shape[-1]))
                other["kernels"] += 1
                return torch.empty(*q.shape[:-1], args[2].shape[-1], dtype=q.dtype, device=q.device)
            return func(*args, **kwargs)

    class _Kernels(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if name in VIEW_OPS:
                return out
            other["kernels"] += 1
            if name in _GEMMS:
                a, b = args[-2], args[-1]
                flops = 2.0 * a.shape[:-1].numel() * a.shape[-1] * b.shape[-1]
                gemms[flops] = gemms.get(flops, 0) + 1
            elif name == "convolution":
                with FlopCounterMode(display=False) as fc:
                    func(*args, **(kwargs or {}))
                other["conv"] += fc.get_total_flops()
            else:
                outs = out if isinstance(out, (tuple, list)) else [out]
                other["bytes"] += sum(_nbytes(t) for t in [*args, *outs])
            return out

    cfg = get_config(model)
    with torch.device("meta"):
        m = build_model(cfg).to(dtypes[dtype])
    x, t, y, _ = make_inputs(cfg, Shape(batch, frames, spatial), dtype=dtypes[dtype], device="meta")
    with _Attention(), _Kernels(), torch.no_grad():
        m(x, t, y)
    return ForwardCosts(gemms, attn, other["conv"], float(other["bytes"]), other["kernels"])


def is_kernel(func) -> bool:
    """An aten op that launches a kernel (not one that only relabels memory)."""
    return func.__name__.split(".")[0] not in VIEW_OPS


def kernels_per_forward(model: str) -> int:
    """Kernels one forward issues: the count does not depend on the shape (no per-token loops)."""
    return forward_costs(model, 1, 2, 16).kernels


def device_seconds(curve: Curve, costs: ForwardCosts, calls: float, sp: int, peak: float, hbm_Bps: float) -> float:
    """Device seconds of `calls` forwards whose kernels are `costs` (one call's, every rank), on one of
    `sp` ranks: each GEMM at the curve's rate for its size on this rank (1/sp of its rows; a tensor-
    parallel GEMM of width C/sp has the same size), each attention at its length's rate, convolutions at
    the conv fraction, and the memory-bound rest at HBM speed (hbm_Bps already derated)."""
    gemm = sum(n * f / curve.gemm_efficiency(f / sp) for f, n in costs.gemms.items())
    attn = sum(f / curve.attn_efficiency(L) for L, f in costs.attn)
    conv = costs.conv_flops / curve.conv_peak_fraction if costs.conv_flops else 0.0
    return calls / sp * ((gemm + attn + conv) / peak + costs.elementwise_bytes / hbm_Bps)
