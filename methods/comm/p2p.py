"""The comm layer's point-to-point band: exchanges with named neighbours, no autograd.

`exchange_with_peer` (CFG parallelism's noise-prediction swap between the two halves) and
`exchange_halo` (a patch-parallel convolution's edge rows, methods/vae_patch.py). Both post their
sends and receives as one batch, wait, and record one `send_recv` ledger event of the bytes this
rank sent; split from methods/comm/layer.py, and with it the only modules that call torch.distributed.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from dspbench.methods.comm import ledger
from dspbench.methods.comm.layer import Group, group_ranks, nbytes, on_meta, phase, rank, size, stopwatch


def _swap(pairs: list[tuple[int, torch.Tensor, torch.Tensor]], group: Group, tag: str) -> None:
    """Send each `send` to its group rank and receive its `recv` from it, all posted at once;
    one ledger event of the bytes sent."""
    peers = group_ranks(group)
    ops = [op for r, send, recv in pairs for op in (dist.P2POp(dist.isend, send, peers[r], group),
                                                     dist.P2POp(dist.irecv, recv, peers[r], group))]
    with stopwatch(group, pairs[0][1].device) as w:
        for work in ([] if on_meta(pairs[0][1]) else dist.batch_isend_irecv(ops)):
            work.wait()
    ledger.record("send_recv", phase(), size(group), sum(nbytes(send) for _, send, _ in pairs), tag, w.elapsed)


def exchange_with_peer(x: torch.Tensor, group: Group, tag: str) -> torch.Tensor:
    """Send `x` to the other rank of a two-rank `group` and return its tensor of the same shape (CFG
    parallelism's noise-prediction exchange)."""
    if size(group) != 2:
        raise ValueError(f"exchange_with_peer needs a group of 2 ranks, got {size(group)}")
    recv = torch.empty_like(x, memory_format=torch.contiguous_format)
    _swap([(1 - rank(group), x.contiguous(), recv)], group, tag)
    return recv


def exchange_halo(x: torch.Tensor, dim: int, rows: int, group: Group, tag: str) -> torch.Tensor:
    """`x` (this rank's slab of `dim`, the group's slabs in rank order) with `rows` rows of each
    neighbour's slab on its side: the previous rank's last rows before, the next rank's first after,
    zeros past the group's ends (a convolution's own zero padding there). The halo exchange of a
    patch-parallel convolution."""
    n, r = size(group), rank(group)
    if rows > x.shape[dim]:
        raise ValueError(f"a halo of {rows} rows needs slabs of at least that many, this one has {x.shape[dim]}")
    edge = list(x.shape)
    edge[dim] = rows
    before, after = x.new_zeros(edge), x.new_zeros(edge)
    pairs = ([(r - 1, x.narrow(dim, 0, rows).contiguous(), before)] if r > 0 else []) + \
            ([(r + 1, x.narrow(dim, x.shape[dim] - rows, rows).contiguous(), after)] if r < n - 1 else [])
    if pairs:
        _swap(pairs, group, tag)
    return torch.cat([before, x, after], dim)
