"""Rank-side tasks of the DeepSpeed tests: our Ulysses against DeepSpeed's DistributedAttention.

DeepSpeed is imported here only inside the tasks, i.e. in the pool's ranks, never in the pytest
process that forks them.
"""
from __future__ import annotations

import torch

from dspbench.methods.comm import external as comm_external, layer as comm
from dspbench.methods.comm.ledger import Ledger
from dspbench.methods.ulysses import UlyssesAttention
from dspbench.models.layers import LocalAttention
from oracle_tasks import dims_for


def _events(led: Ledger) -> list[tuple]:
    """(phase, op, group size, payload) per event, in a fixed order (tags and times left out)."""
    return sorted((e.phase, e.op, e.group_size, e.payload_bytes) for e in led.events)


def _run(attn, q, k, v, g, call):
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    with Ledger() as led:
        o = call(attn, q, k, v)
        o.backward(g)
    return o.detach(), [t.grad for t in (q, k, v)], led


def attention_case(shape: tuple, seed: int = 0, gather: int = 1) -> dict:
    """Our UlyssesAttention, DeepSpeed's raw DistributedAttention and the method's wrapper of it on
    the same random shards of q, k, v and the output gradient (fp32): (B, L/N, H, D) for gather=1
    (attention over the sharded dim), (B/N, L, H, D) for gather=0 (`ulysses_all`'s attention over
    a dim it treats as batch, whose shard sits in B)."""
    from dspbench.methods.ulysses_deepspeed import DeepSpeedUlyssesAttention, init_deepspeed
    init_deepspeed()
    import deepspeed.comm as ds_comm
    from deepspeed.sequence.layer import DistributedAttention

    n, r = comm.world_size(), comm.world_rank()
    group = dims_for(n).sp_group
    B, L, H, D = shape
    gen = torch.Generator().manual_seed(seed)        # the same full tensors on every rank
    full = [torch.randn(B, L, H, D, generator=gen) for _ in range(4)]
    q, k, v, g = (t.chunk(n, gather)[r].contiguous() for t in full)

    ours = _run(UlyssesAttention(LocalAttention(), group, gather), q, k, v, g, lambda a, *t: a(*t))
    before = ds_comm.all_to_all_single
    with comm_external.record_external_all_to_all(ds_comm, tag_for=lambda: "deepspeed"):
        raw = _run(DistributedAttention(LocalAttention(), group, scatter_idx=2, gather_idx=gather),
                   q, k, v, g, lambda a, *t: a(*t, 1 - gather))   # batch_dim_idx: 0 batch-first, 1 seq-first
    method = _run(DeepSpeedUlyssesAttention(LocalAttention(), group, gather), q, k, v, g, lambda a, *t: a(*t))

    # Single-device reference: full attention, this rank's rows of output and input gradients.
    ref = _run(LocalAttention(), *full[:3], full[3], lambda a, *t: a(*t))
    ref_o, ref_grads = ref[0].chunk(n, gather)[r], [t.chunk(n, gather)[r] for t in ref[1]]

    def errs(res, o, grads):
        return {"out": (res[0] - o).abs().max().item(),
                "grad": max((a - b).abs().max().item() for a, b in zip(res[1], grads))}

    return {
        "raw_vs_ours": errs(raw, ours[0], ours[1]),
        "method_vs_ours": errs(method, ours[0], ours[1]),
        "ours_vs_ref": errs(ours, ref_o, ref_grads),
        "bit_exact": torch.equal(raw[0], ours[0]) and all(torch.equal(a, b) for a, b in zip(raw[1], ours[1])),
        "events": {"ours": _events(ours[2]), "raw": _events(raw[2]), "method": _events(method[2])},
        "raw_tags": sorted({e.tag for e in raw[2].events}),
        "counts": {"ours": ours[2].counts(), "method": method[2].counts()},
        "totals": {"ours": ours[2].totals(), "method": method[2].totals()},
        "restored": ds_comm.all_to_all_single is before,
    }
