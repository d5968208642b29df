"""How the ring's error grows with ring size in low precision, on one device (no network needed).

A ring of N ranks is simulated by splitting K, V into N blocks and merging the blocks' partial
attentions by log-sum-exp exactly as methods/ring.py does; the error is against fp32 whole
attention. Prints a table; used by the GPU check to record the bf16 tolerance per ring size.
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from dspbench.methods.attn_kernels import block_forward
from dspbench.methods.ring import merge_partial


def ring_forward(q, k, v, n: int) -> torch.Tensor:
    scale = q.shape[-1] ** -0.5
    out = lse = None
    for kb, vb in zip(k.chunk(n, dim=2), v.chunk(n, dim=2)):
        o, l, _ = block_forward(q, kb, vb, scale)   # the third: what a CUDA backward would need
        out, lse = (o.float(), l) if out is None else merge_partial(out, lse, o, l)
    return out


def measure(device: str, dtype: torch.dtype, sizes=(1, 2, 4, 8, 16, 32), L: int = 4096, H: int = 16, D: int = 72):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, L, D, generator=g) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v)          # fp32 on CPU
    low = [t.to(device=device, dtype=dtype) for t in (q, k, v)]
    rows = []
    for n in sizes:
        err = (ring_forward(*low, n).float().cpu() - ref).abs()
        rows.append({"ring_size": n, "max_abs_err": err.max().item(), "mean_abs_err": err.mean().item()})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--json", default=None, help="also write the rows to this file")
    a = p.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    rows = measure(a.device, dtype, L=a.seq)
    print(f"ring attention error vs fp32 whole attention ({a.device}, {a.dtype}, L={a.seq}, 16 heads x 72)")
    print("| ring size | max abs err | mean abs err |\n|---|---|---|")
    for r in rows:
        print(f"| {r['ring_size']} | {r['max_abs_err']:.3e} | {r['mean_abs_err']:.3e} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
