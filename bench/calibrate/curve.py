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

from dspbench.models.dtypes import TORCH_DTYPES

GEMM_TOKENS = (256, 1024, 4096, 16384, 65536)
GEMM_WIDTHS = (1152, 3072, 5120)
ATTN_LENS = (256, 1024, 4096, 16384)
ATTN_HEAD_DIMS = (64, 128)
ATTN_WIDTH = 2048                # heads x head dim for the attention grid


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


def call_kernels() -> int:
    """Kernels the call probe's module issues per call (counted as the cost model counts a DiT's)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from dspbench.cost.curve import is_kernel

    class _Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += is_kernel(func)
            return func(*args, **(kwargs or {}))
    m = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 64))
    counter = _Count()
    with counter, torch.no_grad():
        m(torch.randn(4, 64))
    return counter.n


def model_call_seconds(model: str, device, dtype, depth: int, compiled: bool, iters: int = 5) -> dict:
    """One eager (or torch.compile'd) forward of `model` cut to `depth` blocks at a tiny shape (T 2,
    S 16): host-bound, so it measures the fixed cost per call and per kernel that the curve's host
    terms predict."""
    from dspbench.cost.curve import kernels_per_forward
    from dspbench.models import Shape, build_model, get_config
    from dspbench.models.inputs import make_inputs
    cfg = get_config(model, depth=depth)
    m = build_model(cfg).to(device=device, dtype=dtype).eval()
    x, t, y, _ = make_inputs(cfg, Shape(1, 2, 16), dtype=dtype, device=device)
    t0 = time.perf_counter()
    fn = torch.compile(m) if compiled else m
    with torch.no_grad():
        fn(x, t, y)
        _sync(device)
        first = time.perf_counter() - t0
        s = median_time(lambda: fn(x, t, y), device, iters, warmup=2)
    return {"model": model, "depth": depth, "compiled": compiled, "call_s": s, "first_call_s": first,
            "kernels_eager": kernels_per_forward(model) * depth // get_config(model).depth}


def vae_seconds(device, dtype, T: int, H: int, W: int, iters: int = 2) -> dict:
    """The video VAE decoder (models/vae.py, Wan 2.1's structure) on T x H' x W' latents."""
    from dspbench.models.vae import WAN21_VAE, VAEDecoder, decoder_flops
    d = VAEDecoder(WAN21_VAE).to(device=device, dtype=dtype).eval()
    z = torch.randn(1, WAN21_VAE.z_channels, T, H, W, device=device, dtype=dtype)
    with torch.no_grad():
        s = median_time(lambda: d(z), device, iters, warmup=1)
    peak = torch.cuda.max_memory_allocated() if torch.device(device).type == "cuda" else None
    return {"latent": [T, H, W], "decode_s": s, "flops": decoder_flops(WAN21_VAE, T, H, W), "peak_mem_bytes": peak}


def measure(device: str, dtype: str, iters: int = 5, grid: dict = FULL_GRID) -> dict:
    dt = TORCH_DTYPES[dtype]
    name = torch.cuda.get_device_name(0) if torch.device(device).type == "cuda" else "cpu"
    return {"device": name, "dtype": dtype, "torch": torch.__version__,
            "gemm": gemm_rates(device, dt, grid["tokens"], grid["widths"], iters),
            "attn": attn_rates(device, dt, grid["lens"], ATTN_HEAD_DIMS, iters, width=grid["attn_width"]),
            "launch_s": launch_seconds(device), "call_s": call_seconds(device, dt), "call_kernels": call_kernels(),
            "source": "measured"}


def write_curve_profile(res: dict, base: str, out: str, source: str) -> None:
    """The base profile with the curve fitted to `res` (and its VAE rate, where measured)."""
    from dspbench.cost.curve import fit_curve
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.profile_toml import dumps
    prof = load_profile(base)
    raw = json.loads(json.dumps(prof.raw))
    table, latency = fit_curve(res, float(prof.peak_flops[res["dtype"]]))
    if res.get("vae"):
        fractions = [v["flops"] / v["decode_s"] / prof.peak_flops[res["dtype"]] for v in res["vae"]]
        table["conv_peak_fraction"] = float(f"{statistics.median(fractions):.4g}")
    raw["name"], raw["kind"] = f"{prof.name}-curve", "calibrated"
    raw.setdefault("compute", {})["curve"] = table
    raw.setdefault("sources", {})["compute.curve"] = (
        f"measured on {res['device']} ({res['dtype']}, torch {res['torch']}) by python -m dspbench.calibrate.curve: "
        f"{source}; fit with per-sample probe latencies "
        + ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in latency.items()) + " (bench/cost/curve.py fit_curve)")
    with open(out, "w") as f:
        f.write(dumps(raw, f"{raw['name']}: {prof.name} with a device curve measured on {res['device']}"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dspbench.calibrate.curve", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="bf16", choices=sorted(TORCH_DTYPES))
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--small", action="store_true", help="a CPU-sized grid (tests)")
    p.add_argument("--fixed-models", nargs="*", default=[], metavar="MODEL",
                   help="also time one forward of each model cut to --fixed-depth blocks at a tiny shape (host-bound)")
    p.add_argument("--fixed-depth", type=int, default=4)
    p.add_argument("--compile", action="store_true", help="time those forwards under torch.compile too")
    p.add_argument("--vae", nargs="*", default=[], metavar="TxHxW",
                   help="also time the VAE decoder (models/vae.py) on these latent sizes, e.g. 21x60x104")
    p.add_argument("--skip-grid", action="store_true", help="only the --fixed-models and --vae measurements")
    p.add_argument("--profile-out", default=None, metavar="PATH",
                   help="also write --base with a [compute.curve] fitted to these measurements (a profile predict reads)")
    p.add_argument("--base", default="h200-ib", help="the datasheet profile --profile-out refines")
    p.add_argument("--json", required=True, help="where to write the measurements")
    a = p.parse_args(argv)
    res = (measure(a.device, a.dtype, a.iters, SMALL_GRID if a.small else FULL_GRID) if not a.skip_grid
           else {"device": a.device, "dtype": a.dtype, "torch": torch.__version__, "source": "measured"})
    dt = TORCH_DTYPES[a.dtype]
    res["fixed"] = [model_call_seconds(m, a.device, dt, a.fixed_depth, c)
                    for m in a.fixed_models for c in ([False, True] if a.compile else [False])]
    res["vae"] = [vae_seconds(a.device, dt, *map(int, size.split("x"))) for size in a.vae]
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    if a.profile_out:
        write_curve_profile(res, a.base, a.profile_out, a.json)
    print(json.dumps({k: v for k, v in res.items() if k not in ("gemm", "attn")}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
