"""Ulysses around every self-attention: the baseline the DSP paper's v1 numbers and Table 3's "75%" imply.

`ulysses` all-to-alls only inside the attention over the sharded dim (4M/N per spatial+temporal
layer, the other attention is local). The paper's v1 accounting counts Ulysses in both blocks,
8M/N per layer, which is what a model gets when every attention is wrapped in the same
sequence-parallel attention module, as VideoSys/OpenDiT do: q, k, v and the output are
all-to-alled around each attention whatever the attention's axis.

Over the sharded dim that is plain Ulysses (scatter heads, gather the sequence). Over any other
dim the shard sits in the attention's batch B' (B x the other dims), so the all-to-all scatters
heads and gathers B': each rank then attends over the whole batch with H/N heads, and the output's
all-to-all undoes exactly that permutation. Correct, and 4 all-to-alls of M/N per attention.
"""
from __future__ import annotations

from dspbench.methods.common import act_bytes, embed_attention, heads_divisible, shard_divisible, text_bytes
from dspbench.methods.spec import Look, MethodSpec, Op, Table3
from dspbench.methods.ulysses import B_DIM, L_DIM, UlyssesAttention


def _check(cfg, shape, dims):
    return heads_divisible(cfg, dims.sp, "ulysses_all") or shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    def inner_for(attn):
        gather = L_DIM if dims.shard_dim in attn.axes else B_DIM   # full3d: axes (T, S), axis None
        return UlyssesAttention(attn.inner, dims.sp_group, gather_dim=gather)
    return embed_attention(model, dims, inner_for, every=True)


def _forward_ops(cfg, shape, dims, b):
    # Every self-attention (one per sequence dim per layer) moves this rank's shard 4 times.
    shard, attns = act_bytes(cfg, shape, b) // dims.sp, cfg.n_self_attn
    return [Op("ulysses_qkv", "all_to_all", shard, 3 * attns),
            Op("ulysses_out", "all_to_all", shard, attns),
            Op("ulysses_joint_out", "all_gather", text_bytes(cfg, shape, b), cfg.n_text_out)]   # full3d joint


METHOD = MethodSpec(
    name="ulysses_all", summary="Ulysses head/sequence all-to-all inside every self-attention (paper v1: 8M/N)",
    constraints="heads % sp == 0 and the sharded dim % sp == 0",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops,
    # Table 3 in both blocks (paper v1 and "75% less")
    report=Look(label="Ulysses (every attention)", colour="#004C7A", order=40, table3=Table3("8M/N", 8, per_n=True)),
    splits_heads=True,
)
