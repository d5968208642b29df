"""Rank-side calibration of a CPU's per-kernel costs: what `[kernels]` of a calibrated profile holds.

A method's overhead on a CPU is the kernels it adds (the all-to-all's permutes and copies, a ring's
chunk pairs and log-sum-exp merges, padding, narrower GEMMs) and the collectives it issues. The
collectives are priced per call from the measured alpha-beta per op and tier; this measures what
the kernels cost, so that the same counts (bench/cost/rank_trace.py: the method's own sharding,
traced) price any method on any model. Every kernel of a step on a CPU runs on the host thread
that dispatches it, so one kernel costs

    s_per_kernel + FLOPs / rate(kind)      (gemm, attention, conv: conv at the GEMM rate)
    s_per_kernel + bytes / mem_Bps         (everything else: norms, elementwise, copies, merges)

Four micro-benchmarks, all ranks at once (the slowest rank's time, as every calibration here):
the calibration model's forward+backward at a tiny shape (dispatch-bound: almost all of it is
s_per_kernel), GEMMs of a DiT block's shapes at three sizes, attention at three lengths, and a
chain of memory-bound ops (norm, GELU, add, mul) at an activation's size. Each benchmark is traced
with the same dispatch mode the cost model counts with, so its kernels, FLOPs and bytes are the
cost model's own counts, and the four unknowns are one least-squares solve over all of them
(relative residuals: a 1 ms benchmark weighs as much as a 100 ms one). The inference variant of
s_per_kernel (no autograd to record) is the tiny model's forward under no_grad.
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from dspbench.calibrate.timing import samples

UNKNOWNS = ("s_per_kernel", "s_per_gemm_flop", "s_per_attn_flop", "s_per_byte")
GEMM_ROWS = (256, 1024, 4096)
ATTN_LENS = (64, 256, 1024)
MEM_ROWS = 4096
TINY_SHAPE = (1, 1, 4)     # B, T, S of the dispatch-bound model run


def counts(fn) -> dict:
    """{kernels, gemm_flops, attn_flops, mem_bytes} of fn as the cost model counts them (rank_trace)."""
    from dspbench.cost.rank_trace import trace_ops
    kernels, _ = trace_ops(fn)
    out = dict.fromkeys(("kernels", "gemm_flops", "attn_flops", "mem_bytes"), 0.0)
    for k, n in kernels.items():
        out["kernels"] += n
        if k.kind in ("gemm", "conv"):
            out["gemm_flops"] += k.flops * n
        elif k.kind == "attention":
            out["attn_flops"] += k.flops * n
        else:
            out["mem_bytes"] += k.bytes * n
    return out


def _row(name: str, fn, iters: int) -> dict:
    times = samples(fn, iters, 2)
    return {"name": name, **counts(fn), "seconds": statistics.median(times), "times_s": times}


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


def _attention(length: int, heads: int, head_dim: int, dtype, device):
    q, k, v = (torch.randn(1, heads, length, head_dim, device=device, dtype=dtype, requires_grad=True)
               for _ in range(3))
    return lambda: F.scaled_dot_product_attention(q, k, v).sum().backward()


def _memory(rows: int, width: int, dtype, device):
    x = torch.randn(rows, width, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(rows, width, device=device, dtype=dtype)

    def chain():
        h = F.layer_norm(x, (width,))
        h = F.gelu(h, approximate="tanh") + b
        (h * 1.5).sum().backward()
    return chain


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
    rows.append(_row(f"layer_norm, gelu, add, mul {MEM_ROWS}x{C} fwd+bwd", _memory(MEM_ROWS, C, dt, device), iters))
    return rows, _row(f"{model} forward (no grad) at B T S {TINY_SHAPE}", infer, iters)


def solve(rows: list[dict]) -> dict:
    """The four unknowns from t_i = kernels_i s + gemm_flops_i / g + attn_flops_i / a + bytes_i / m,
    least squares on relative residuals, each clamped above 0 (a rate cannot be infinite)."""
    import numpy as np
    A = np.array([[r["kernels"], r["gemm_flops"], r["attn_flops"], r["mem_bytes"]] for r in rows], dtype=float)
    t = np.array([r["seconds"] for r in rows], dtype=float)
    x, *_ = np.linalg.lstsq(A / t[:, None], np.ones(len(t)), rcond=None)
    x = np.maximum(x, 1e-18)
    fitted = A @ x
    return {**dict(zip(UNKNOWNS, map(float, x))),
            "residuals": [float(f / s - 1) for f, s in zip(fitted, t)]}


def infer_per_kernel(row: dict, fit: dict) -> float:
    """s_per_kernel without autograd: the no-grad forward's time less its work, per kernel."""
    work = (row["gemm_flops"] * fit["s_per_gemm_flop"] + row["attn_flops"] * fit["s_per_attn_flop"]
            + row["mem_bytes"] * fit["s_per_byte"])
    return max(row["seconds"] - work, 0.0) / max(row["kernels"], 1.0)


def bench_kernels(model: str, dtype: str, device, iters: int = 5) -> dict:
    """[kernels] of a CPU profile, with the rows it was solved from."""
    rows, infer = benchmark_rows(model, dtype, device, iters)
    fit = solve(rows)
    return {"model": model, "dtype": dtype, **fit, "s_per_kernel_infer": infer_per_kernel(infer, fit),
            "rows": [{k: v for k, v in r.items() if k != "times_s"} for r in rows + [infer]]}
