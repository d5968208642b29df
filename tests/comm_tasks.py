"""Rank-side tasks for the comm-layer tests."""
from __future__ import annotations

import torch

from dspbench.methods.comm import layer as comm
from dspbench.methods.comm.ledger import Ledger

PAIRS = {
    "all_to_all": lambda x, g: comm.all_to_all(x, 2, 1, g, "t"),
    "all_to_all_rev": lambda x, g: comm.all_to_all(x, 1, 3, g, "t"),
    "gather_from_seq": lambda x, g: comm.gather_from_seq(x, 1, g, "t"),
    "reduce_scatter_to_seq": lambda x, g: comm.reduce_scatter_to_seq(x, 2, g, "t"),
    "split": lambda x, g: comm.split(x, 1, g),
    "gather": lambda x, g: comm.gather(x, 2, g, "t"),
}


def adjoint_case(name: str, seed: int = 0):
    """<f(x), y> summed over ranks must equal <x, f^T(y)> summed over ranks (f^T = the backward).

    Returns this rank's two inner products; the parent sums them. `split` takes a replicated input
    and `gather` makes a replicated output (one loss on every rank): there the replicated side is
    one object, counted once, and its data is the same on every rank.
    """
    n, r = comm.world_size(), comm.world_rank()
    g = torch.Generator().manual_seed(seed + (0 if name == "split" else r))
    x = torch.randn(2, 4 * n, 4 * n, 3, generator=g, dtype=torch.float64).requires_grad_()
    with Ledger() as led:
        fx = PAIRS[name](x, None)
        gy = torch.Generator().manual_seed(100 + seed + (0 if name == "gather" else r))
        y = torch.randn(fx.shape, generator=gy, dtype=torch.float64)
        fx.backward(y)
    return {"fwd": (fx.detach() * y).sum().item(), "bwd": (x.detach() * x.grad).sum().item(),
            "events": [(e.op, e.phase, e.payload_bytes, e.wire_bytes) for e in led.events],
            "x": x.detach(), "fx": fx.detach()}


def all_to_all_layout(n_scatter: int = 2, n_gather: int = 1):
    """The switch moves exactly the right elements: compare with a gathered reference."""
    n, r = comm.world_size(), comm.world_rank()
    full = torch.arange(2 * 4 * n * 4 * n * 3, dtype=torch.float32).reshape(2, 4 * n, 4 * n, 3)
    mine = full.chunk(n, n_gather)[r]                       # sharded on the gather dim
    out = comm.all_to_all(mine, n_scatter, n_gather, None, "t")
    return torch.equal(out, full.chunk(n, n_scatter)[r])


def a2a_styles_case(scatter: int, gather: int):
    """The same all-to-all (and its backward) in the `single` and the `list` style: outputs,
    gradients and ledger events equal."""
    n, r = comm.world_size(), comm.world_rank()
    g = torch.Generator().manual_seed(r)
    x = torch.randn(2, 4 * n, 4 * n, 3, generator=g)
    y = torch.randn(comm.all_to_all(x, scatter, gather, None, "t").shape, generator=g)
    out = {}
    for style in comm.A2A_STYLES:
        prev = comm.set_a2a_style(style)
        try:
            xs = x.clone().requires_grad_()
            with Ledger() as led:
                fx = comm.all_to_all(xs, scatter, gather, None, "t")
                fx.backward(y)
        finally:
            comm.set_a2a_style(prev)
        out[style] = (fx.detach(), xs.grad, [(e.op, e.phase, e.payload_bytes, e.wire_bytes, e.tag) for e in led.events])
    return {"equal": torch.equal(out["single"][0], out["list"][0]) and torch.equal(out["single"][1], out["list"][1]),
            "events": (out["single"][2], out["list"][2])}
