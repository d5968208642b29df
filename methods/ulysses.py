"""DeepSpeed-Ulysses: shard one sequence dim; attention over it all-to-alls q, k, v and the output.

Inside the attention over the sharded dim: q, k, v (B', L/N, H, D) -a2a(H->L)-> (B', L, H/N, D),
local attention, then the output back (B', L, H/N, D) -a2a(L->H)-> (B', L/N, H, D): 4 all-to-alls.
Attention over the other dim, cross-attention and the MLP are local. Needs heads % N == 0.
"""
from __future__ import annotations

from torch import nn

from dspbench.methods import comm
from dspbench.methods.common import act_bytes, attentions, heads_divisible, n_attn, shard_divisible, shard_sequence
from dspbench.methods.spec import MethodSpec, Op

L_DIM, H_DIM = 1, 2   # of q, k, v (B', L, H, D)


class UlyssesAttention(nn.Module):
    def __init__(self, local: nn.Module, group):
        super().__init__()
        self.local, self.group = local, group

    def forward(self, q, k, v):
        g = self.group
        q, k, v = (comm.all_to_all(t, H_DIM, L_DIM, g, "ulysses_qkv") for t in (q, k, v))
        o = self.local(q, k, v)
        return comm.all_to_all(o, L_DIM, H_DIM, g, "ulysses_out")


def _check(cfg, shape, dims):
    return heads_divisible(cfg, dims.sp, "ulysses") or shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    shard_sequence(model, dims.shard_dim, dims.sp_group)
    for attn in attentions(model, axis=dims.shard_dim):
        attn.inner = UlyssesAttention(attn.inner, dims.sp_group)
    return model


def _forward_ops(cfg, shape, dims, b):
    shard = act_bytes(cfg, shape, b) // dims.sp
    return [Op("ulysses_qkv", "all_to_all", shard, 3 * n_attn(cfg)),
            Op("ulysses_out", "all_to_all", shard, n_attn(cfg))]


METHOD = MethodSpec(
    name="ulysses", summary="head/sequence all-to-all inside attention over the sharded dim",
    constraints="heads % sp == 0 and the sharded dim % sp == 0",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops,
)
