"""Compute that knows its size: GEMM and attention rates by shape, and fixed costs per launch.

One constant efficiency prices a 64-token GEMM like a 64k-token one; on a GPU the small one runs
far below peak (too few tiles to fill the SMs, launch-bound). This measures, on one device:

- `gemm`: forward+backward FLOP/s of a linear (tokens x width -> width') at a grid of token counts
  and widths (the shapes a DiT block's linears take per rank as SP grows), keyed `t<tokens>_w<width>`;
- `attn`: forward+backward FLOP/s of scaled_dot_product_attention at a grid of sequence lengths
  (head dim 64 and 128, heads such that heads x head dim = 1152..3072), keyed `l<len>_d<head_dim>`;
- `launch_s`: the time of one tiny kernel in a long back-to-back loop (a launch's fixed cost);
- `call_s`: the host time of one small eager module call (Python + dispatch), the fixed cost per
  model call that a compiled graph removes most of.

The cost model fits an efficiency curve eff(work) = peak_fraction * work / (work + half_work) to
these (bench/cost/curve.py); datasheet profiles carry a stated default. Run as
`python -m dspbench.calibrate.curve --device cuda --dtype bf16 --json OUT.json` (bench/gpu/check.sh).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

GEMM_TOKENS = (256, 1024, 4096, 16384, 65536)
GEMM_WIDTHS = (1152, 3072, 5120)
ATTN_LENS = (256, 1024, 4096, 16384)
ATTN_HEAD_DIMS = (64, 128)
ATTN_WIDTH = 2048                # heads x head dim for the attention grid
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def median_time(fn, device, iters: int, warmup: int = 2, per: int = 1) -> float:
    """Median over iters of the wall time of fn() / per, synchronised on the device."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - t0) / per)
    return statistics.median(times)


def gemm_rates(device, dtype, tokens=GEMM_TOKENS, widths=GEMM_WIDTHS, iters: int = 5) -> dict:
    """{t<tokens>_w<width>: fwd+bwd FLOP/s} of a width -> width linear (MLP-like 4x width too costly)."""
    out = {}
    for C in widths:
        w = torch.randn(C, C, device=device, dtype=dtype, requires_grad=True)
        for n in tokens:
            x = torch.randn(n, C, device=device, dtype=dtype, requires_grad=True)

            def step(x=x, w=w):
                F.linear(x, w).sum().backward()
            s = median_time(step, device, iters)
            out[f"t{n}_w{C}"] = 3 * 2 * n * C * C / s
            del x
    return out


def attn_rates(device, dtype, lens=ATTN_LENS, head_dims=ATTN_HEAD_DIMS, iters: int = 5,
               max_tokens: int = 65536, width: int = ATTN_WIDTH) -> dict:
    """{l<len>_d<head_dim>: fwd+bwd FLOP/s} of SDPA at batch max(1, max_tokens // len) sequences."""
    out = {}
    for d in head_dims:
        h = max(1, width // d)
        for L in lens:
            b = max(1, max_tokens // L)
            q, k, v = (torch.randn(b, h, L, d, device=device, dtype=dtype, requires_grad=True) for _ in range(3))

            def step(q=q, k=k, v=v):
                F.scaled_dot_product_attention(q, k, v).sum().backward()
            s = median_time(step, device, iters)
            out[f"l{L}_d{d}"] = 3 * 4 * b * h * L * L * d / s      # fwd 4*L^2*d per head; bwd ~2x
            del q, k, v
    return out


def launch_seconds(device, loops: int = 2000) -> float:
    """One tiny kernel's time in a back-to-back loop: the fixed cost every launch pays."""
    x = torch.zeros(8, device=device)

    def many():
        for _ in range(loops):
            x.add_(1.0)
    return median_time(many, device, iters=5, per=loops)


def call_seconds(device, dtype) -> float:
    """Host time of one small eager module call (LayerNorm -> Linear -> GELU -> Linear): the fixed cost
    per call of Python and dispatch, with work too small to matter."""
    m = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 64), torch.nn.GELU(),
                            torch.nn.Linear(64, 64)).to(device=device, dtype=dtype)
    x = torch.randn(4, 64, device=device, dtype=dtype)

    def many():
        with torch.no_grad():
            for _ in range(200):
                m(x)
    return median_time(many, device, iters=5, per=200)


SMALL_GRID = {"tokens": (64, 256), "widths": (64, 128), "lens": (64, 256), "attn_width": 128}
FULL_GRID = {"tokens": GEMM_TOKENS, "widths": GEMM_WIDTHS, "lens": ATTN_LENS, "attn_width": ATTN_WIDTH}


def measure(device: str, dtype: str, iters: int = 5, grid: dict = FULL_GRID) -> dict:
    dt = DTYPES[dtype]
    name = torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else "cpu"
    return {"device": name, "dtype": dtype, "torch": torch.__version__,
            "gemm": gemm_rates(device, dt, grid["tokens"], grid["widths"], iters),
            "attn": attn_rates(device, dt, grid["lens"], ATTN_HEAD_DIMS, iters, width=grid["attn_width"]),
            "launch_s": launch_seconds(device), "call_s": call_seconds(device, dt),
            "source": "measured"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dspbench.calibrate.curve", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--small", action="store_true", help="a CPU-sized grid (tests)")
    p.add_argument("--json", required=True, help="where to write the measurements")
    a = p.parse_args(argv)
    res = measure(a.device, a.dtype, a.iters, SMALL_GRID if a.small else FULL_GRID)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    print(json.dumps({k: v for k, v in res.items() if k not in ("gemm", "attn")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
