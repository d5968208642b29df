"""All-gather context parallelism (Llama 3's and Megatron-LM's CP without a ring): shard one
sequence dim; inside attention over it every rank keeps its query shard and all-gathers K and V.

Forward: K and V (B', L/N, H, D) travel as one (B', L/N, H, 2D) buffer, all-gathered along L
(one collective: its output is the full K and V, 2M); the local attention then runs the rank's
queries against the whole sequence. Backward (the conjugate): the gradient of the gathered K, V,
partial on every rank (each saw only its queries), is reduce-scattered back to the shards (2M).
Per layer the volume equals the ring's (2M, paper convention), but in one collective per
direction instead of N-1 P2P steps, at the price of holding the full K and V on every rank.
Any head count. Non-causal attention needs no load balancing (Llama 3's zigzag is for causal).

Joint text (full3d, MMDiT): the replicated text K, V join the gathered K, V locally and the text
queries join the rank's queries; every rank holds all of K and V, so each computes the whole text
output itself. Nothing more moves.
"""
from __future__ import annotations

import torch
from torch import nn

from dspbench.methods.comm import layer as comm
from dspbench.methods.common import act_bytes, embed_attention, n_attn, shard_divisible
from dspbench.methods.spec import Look, MethodSpec, Op, Table3

L_DIM = 1   # of q, k, v (B', L, H, D)
TAG = "allgather_kv"


class AllGatherKVAttention(nn.Module):
    """Drop-in for LocalAttention: q, k, v (B', L/N, H, D) -> (B', L/N, H, D)."""

    def __init__(self, local: nn.Module, group):
        super().__init__()
        self.local, self.group = local, group

    def forward(self, q, k, v, joint=None, kmask=None):
        # One buffer: one collective for K and V (one latency), and one reduce-scatter back.
        kv = comm.gather_from_seq(torch.cat([k, v], dim=-1), L_DIM, self.group, TAG)
        k_full, v_full = kv.chunk(2, dim=-1)
        mask = None if kmask is None else kmask.gathered(self.group)   # padded keys (methods/padding.py)
        if joint is None:
            return self.local(q, k_full, v_full, kmask=mask)
        return self.local(q, k_full, v_full, joint=joint, kmask=mask)   # (o, text output, whole on every rank)


def _check(cfg, shape, dims):
    return shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    return embed_attention(model, dims, lambda attn: AllGatherKVAttention(attn.inner, dims.sp_group))


def _forward_ops(cfg, shape, dims, b):
    # nccl-tests size of an all-gather: its output, the full K and V (2M); backward: reduce-scatter.
    return [Op(TAG, "all_gather", 2 * act_bytes(cfg, shape, b), n_attn(cfg, dims.shard))]


METHOD = MethodSpec(
    name="allgather_kv", summary="all-gather K/V (reduce-scatter dK/dV) inside attention over the sharded dim "
                                 "(Llama 3 context parallelism)",
    constraints="the sharded dim % sp == 0; any head count",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops,
    # Table 3: not in the paper, its convention (whole tensors moved per device)
    report=Look(label="All-gather KV (Llama 3 CP)", colour="#E69F00", order=80, table3=Table3("2M", 2)),
)
