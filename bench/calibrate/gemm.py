"""GEMM rate by width: the compute calibration term that tensor-parallel linears need.

A method that shards linear weights (Megatron-SP: `MethodSpec.sharded_params`) does the same
FLOPs per rank as one that shards tokens, but as GEMMs 1/n as wide over n times the rows. On a
CPU (and on a GPU at small widths) a narrow GEMM runs below the full-width rate that the
model-level FLOP/s reflects. This measures, for each hidden width C and each degree n dividing
the world, the forward+backward of a DiT block's four linear shapes (C->3C, C->C, C->4C, 4C->C)
with the tensor-parallel split (column: out/n for qkv and fc1; row: in/n for proj and fc2) at
ROWS tokens, all ranks at once (the slowest rank's time, as every calibration here). The cost
model prices a method's sharded-weight FLOPs at rate(C, n) instead of rate(C, 1)
(bench/cost/model.py); keys are `w<C>_tp<n>`. Nothing here is per method: the width is the input.
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F

from dspbench.calibrate.timing import samples

ROWS = 1024      # tokens per GEMM (the emulated grid's full per-rank token count is 512-2048)


def gemm_key(width: int, degree: int) -> str:
    return f"w{width}_tp{degree}"


def block_linear_shapes(width: int, degree: int) -> list[tuple[int, int]]:
    """(in, out) of a block's linears with the tensor-parallel split of degree n."""
    C, n = width, degree
    return [(C, 3 * C // n), (C // n, C), (C, 4 * C // n), (4 * C // n, C)]


def bench_gemm(widths, world: int, dtype: str, device, iters: int = 5) -> dict[str, float]:
    """{gemm_key(C, n): forward+backward FLOP/s} for every width and every degree n | world.
    The degrees take turns within each iteration, so a load that comes and goes hits them alike
    (their ratio is what the cost model uses); each is the median of its iterations."""
    from dspbench.models.dtypes import TORCH_DTYPES
    dt = TORCH_DTYPES[dtype]
    steps, flops = {}, {}
    for C in widths:
        for n in [d for d in range(1, world + 1) if world % d == 0 and C % d == 0]:
            shapes = block_linear_shapes(C, n)
            xs = [torch.randn(ROWS, i, device=device, dtype=dt, requires_grad=True) for i, _ in shapes]
            ws = [torch.randn(o, i, device=device, dtype=dt, requires_grad=True) for i, o in shapes]
            steps[gemm_key(C, n)] = _step(xs, ws)
            flops[gemm_key(C, n)] = 3 * 2 * ROWS * sum(i * o for i, o in shapes)
    times = {k: samples(fn, 0, 1) for k, fn in steps.items()}       # warm-up, once each
    for _ in range(iters):
        for k, fn in steps.items():
            times[k] += samples(fn, 1, 0)
    return {k: flops[k] / statistics.median(times[k]) for k in steps}


def _step(xs, ws):
    def step():
        for x, w in zip(xs, ws):
            F.linear(x, w).sum().backward()
    return step
