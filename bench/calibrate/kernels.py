"""Rank-side calibration of a CPU's per-kernel costs: what `[kernels]` of a calibrated profile holds.

A method's overhead on a CPU is the kernels it adds (the all-to-all's permutes and copies, a ring's
chunk pairs and log-sum-exp merges, padding, narrower GEMMs) and the collectives it issues. The
collectives are priced per call from the measured alpha-beta per op and tier; this measures what
the kernels cost, so that the same counts (bench/cost/rank_trace.py: the method's own sharding,
traced) price any method on any model. Every kernel of a step on a CPU runs on the host thread
that dispatches it, so one kernel costs

    s_per_kernel + FLOPs x s_per_gemm_flop                          (gemm, conv at the GEMM rate)
    s_per_kernel + FLOPs x s_per_attn_flop + tiles x s_per_attn_tile (attention)
    s_per_kernel + bytes x s_per_byte[_math|_norm]                  (memory-bound ops by class)

(bench/cost/cpu_kernels.py: the classes and tiles.) Micro-benchmarks, all ranks at once (the
slowest rank's time, as every calibration here): the calibration model's forward+backward at a
tiny shape (dispatch-bound: almost all of it is s_per_kernel), GEMMs of a DiT block's shapes at
three sizes, attention at three lengths and at two short lengths over many heads (per-tile
overhead), streaming ops (add, mul, copy, sum) at two sizes, a tanh-GELU and a layer norm. Each
benchmark is traced with the same dispatch mode the cost model counts with, so its kernels, FLOPs,
tiles and bytes per class are the cost model's own counts, and the seven unknowns are one
least-squares solve over all of them (relative residuals: a 1 ms benchmark weighs as much as a
100 ms one). The inference variant of s_per_kernel (no autograd to record) is the tiny model's
forward under no_grad.

Each sample loops its benchmark for at least SAMPLE_MIN_S (timing.loop_samples). Why: an emulated
cluster runs more ranks than cores (4 on 2 here), and a step's compute, between its collectives,
lasts milliseconds on every rank at once, so each rank gets its share of a core. A lone 0.3 ms
call after a barrier finishes inside one scheduler slice, before the ranks sharing its core run:
timed that way the short benchmarks read a whole core and the long ones a shared one (a 4x larger
GEMM took 9x longer, a 16x longer attention 33x), and the solve mixed the two states. Looped, every
benchmark is timed in the shared state a step's kernels run in.
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from dspbench.calibrate.timing import loop_samples

UNKNOWNS = ("s_per_kernel", "s_per_gemm_flop", "s_per_attn_flop", "s_per_attn_tile", "s_per_byte",
            "s_per_byte_math", "s_per_byte_norm")
COUNTS = ("kernels", "gemm_flops", "attn_flops", "attn_tiles", "mem_bytes", "math_bytes", "norm_bytes")
GEMM_ROWS = (256, 1024, 4096)
ATTN_LENS = (64, 256, 1024)
ATTN_SHORT = ((16, 64), (32, 32))     # (length, batch) at the model's heads: axial and temporal attentions
MEM_ROWS = 4096
STREAM_ROWS = (4096, 16384)
TINY_SHAPE = (1, 1, 4)     # B, T, S of the dispatch-bound model run
SAMPLE_MIN_S = 0.05        # a sample spans many scheduler slices (a few ms each) on every rank at once
SAMPLE_MAX_CALLS = 256


def counts(fn) -> dict:
    """COUNTS of fn as the cost model counts them (rank_trace; classes and tiles: cost/cpu_kernels.py)."""
    from dspbench.cost.cpu_kernels import MEMORY_CLASSES, attn_tiles, memory_class
    from dspbench.cost.rank_trace import trace_ops
    kernels, _ = trace_ops(fn)
    out = dict.fromkeys(COUNTS, 0.0)
    for k, n in kernels.items():
        out["kernels"] += n
        if k.kind in ("gemm", "conv"):
            out["gemm_flops"] += k.flops * n
        elif k.kind == "attention":
            out["attn_flops"] += k.flops * n
            out["attn_tiles"] += attn_tiles(k) * n
        else:
            cls = memory_class(k)
            if cls != "alloc":      # each class's bytes are the count beside its unknown
                out[COUNTS[UNKNOWNS.index(MEMORY_CLASSES[cls])]] += k.bytes * n
    return out


def _row(name: str, fn, iters: int) -> dict:
    times, calls = loop_samples(fn, iters, 2, SAMPLE_MIN_S, SAMPLE_MAX_CALLS)
    return {"name": name, **counts(fn), "seconds": statistics.median(times), "times_s": times,
            "calls_per_sample": calls}


def _tiny_model(model: str, dtype, device):
    from dspbench.models import Shape, build_model, get_config, make_inputs
    from dspbench.run.oracle import mse
    cfg = get_config(model)
    torch.manual_seed(0)
    net = build_model(cfg).to(device=device, dtype=dtype)
    x, t, y, target = make_inputs(cfg, Shape(*TINY_SHAPE), dtype=dtype, device=device)

    def train():
        net.zero_grad(set_to_none=True)
        mse(net(x, t, y), target).backward()

    def infer():
        with torch.no_grad():
            net(x, t, y)
    return cfg, train, infer


def _gemm(rows: int, width: int, dtype, device):
    x = torch.randn(rows, width, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(4 * width, width, device=device, dtype=dtype, requires_grad=True)
    return lambda: F.linear(x, w).sum().backward()


def _attention(length: int, heads: int, head_dim: int, dtype, device, batch: int = 1):
    q, k, v = (torch.randn(batch, heads, length, head_dim, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    return lambda: F.scaled_dot_product_attention(q, k, v).sum().backward()


def _stream(rows: int, width: int, dtype, device):
    """Streaming ops without autograd: an add, a mul, a copy of a permuted view, a sum."""
    x = torch.randn(rows, width, device=device, dtype=dtype)
    b = torch.randn(rows, width, device=device, dtype=dtype)

    def chain():
        with torch.no_grad():
            h = x + b
            h = h * 1.5
            h.t().contiguous().sum()
    return chain


def _gelu(rows: int, width: int, dtype, device):
    x = torch.randn(rows, width, device=device, dtype=dtype, requires_grad=True)
    return lambda: F.gelu(x, approximate="tanh").sum().backward()


def _norm(rows: int, width: int, dtype, device):
    x = torch.randn(rows, width, device=device, dtype=dtype, requires_grad=True)
    return lambda: F.layer_norm(x, (width,)).sum().backward()


def benchmark_rows(model: str, dtype: str, device, iters: int = 5) -> tuple[list[dict], dict]:
    """(the training rows of the solve, the no-grad tiny-model row) on this rank, all ranks at once."""
    from dspbench.models.dtypes import TORCH_DTYPES
    dt = TORCH_DTYPES[dtype]
    cfg, train, infer = _tiny_model(model, dt, device)
    C, H = cfg.hidden, cfg.heads
    rows = [_row(f"{model} fwd+bwd at B T S {TINY_SHAPE}", train, iters)]
    rows += [_row(f"linear {r}x{C} -> {4 * C} fwd+bwd", _gemm(r, C, dt, device), iters) for r in GEMM_ROWS]
    rows += [_row(f"attention {H} heads x {L} x {C // H} fwd+bwd", _attention(L, H, C // H, dt, device), iters)
             for L in ATTN_LENS]
    rows += [_row(f"attention {b} x {H} heads x {L} x {C // H} fwd+bwd", _attention(L, H, C // H, dt, device, b), iters)
             for L, b in ATTN_SHORT]
    rows += [_row(f"add, mul, permuted copy, sum {r}x{C} (no grad)", _stream(r, C, dt, device), iters)
             for r in STREAM_ROWS]
    rows.append(_row(f"gelu (tanh) {MEM_ROWS}x{C} fwd+bwd", _gelu(MEM_ROWS, C, dt, device), iters))
    rows.append(_row(f"layer_norm {MEM_ROWS}x{C} fwd+bwd", _norm(MEM_ROWS, C, dt, device), iters))
    return rows, _row(f"{model} forward (no grad) at B T S {TINY_SHAPE}", infer, iters)


def solve(rows: list[dict]) -> dict:
    """The UNKNOWNS from t_i = sum_j COUNTS_ij x UNKNOWN_j, least squares on relative residuals, each
    clamped above 0 (a rate cannot be infinite)."""
    import numpy as np
    A = np.array([[r.get(c, 0.0) for c in COUNTS] for r in rows], dtype=float)
    t = np.array([r["seconds"] for r in rows], dtype=float)
    x, *_ = np.linalg.lstsq(A / t[:, None], np.ones(len(t)), rcond=None)
    x = np.maximum(x, 1e-18)
    fitted = A @ x
    return {**dict(zip(UNKNOWNS, map(float, x))),
            "residuals": [float(f / s - 1) for f, s in zip(fitted, t)]}


def infer_per_kernel(row: dict, fit: dict) -> float:
    """s_per_kernel without autograd: the no-grad forward's time less its work, per kernel."""
    work = sum(row.get(c, 0.0) * fit[u] for c, u in zip(COUNTS[1:], UNKNOWNS[1:]))
    return max(row["seconds"] - work, 0.0) / max(row["kernels"], 1.0)


def bench_kernels(model: str, dtype: str, device, iters: int = 5) -> dict:
    """[kernels] of a CPU profile, with the rows it was solved from."""
    rows, infer = benchmark_rows(model, dtype, device, iters)
    fit = solve(rows)
    return {"model": model, "dtype": dtype, **fit, "s_per_kernel_infer": infer_per_kernel(infer, fit),
            "rows": [{k: v for k, v in r.items() if k != "times_s"} for r in rows + [infer]]}


STEP_RATIO_WARN = 0.2   # the calibration model's step off its kernels' sum by more than this: a profile warning


def add_step_ratio(prof: dict, compute: dict) -> None:
    """Into the profile dict's [calibration]: the calibration model's measured forward+backward over the
    sum of its traced kernels at the [kernels] just solved (`kernel_step_ratio`), with its source, and a
    warning beyond STEP_RATIO_WARN. Reported, not applied: one model at one shape, as noisy as a run
    (1.10-1.34 over four calibrations on 2 cores, 2026-12-07); a step's kernels cost more than each
    looped alone (cold caches across the step's working set, the allocator, autograd between kernels)."""
    from dspbench.cost.cpu_kernels import cpu_compute
    from dspbench.cost.hardware import from_dict
    from dspbench.records.config import RunConfig
    B, T, S = compute["shape"]
    cfg = RunConfig(method="single", model=f"{compute['model']}[depth={compute['depth']}]", frames=T, spatial=S,
                    batch=B, sp=1, gpus=1, mode="train", dtype=compute["dtype"])
    priced = cpu_compute(cfg, from_dict(prof)).seconds
    ratio = compute["fwd_bwd_s"] / priced
    cal = prof.setdefault("calibration", {})
    cal["kernel_step_ratio"] = ratio
    prof.setdefault("sources", {})["calibration.kernel_step_ratio"] = (
        f"measured: {compute['model']} forward+backward at B T S {B} {T} {S} (all ranks at once, slowest rank) "
        f"{compute['fwd_bwd_s'] * 1e3:.1f} ms over its traced kernels at these [kernels] costs "
        f"{priced * 1e3:.1f} ms; reported, not applied")
    if abs(ratio - 1) > STEP_RATIO_WARN:
        cal.setdefault("warnings", []).append(
            f"the calibration model's step took {ratio:.2f}x the sum of its kernels at the measured costs: "
            "compute predicted from this profile is likely off by about that")
