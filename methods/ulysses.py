"""DeepSpeed-Ulysses: shard one sequence dim; attention over it all-to-alls q, k, v and the output.

Inside the attention over the sharded dim: q, k, v (B', L/N, H, D) -a2a(H->L)-> (B', L, H/N, D),
local attention, then the output back (B', L, H/N, D) -a2a(L->H)-> (B', L/N, H, D): 4 all-to-alls.
Attention over the other dim, cross-attention and the MLP are local. Needs heads % N == 0.

Joint text (full3d, MMDiT): the text q, k, v are replicated, so each rank takes its own H/N heads
of them without communication and joins them to the gathered sequence; the text output
(B, Ly, H/N, D) is all-gathered over heads so every rank holds the whole text stream again
(backward: reduce-scatter), one more collective per attention.
"""
from __future__ import annotations

from torch import nn

from dspbench.methods.comm import layer as comm
from dspbench.methods.common import act_bytes, embed_attention, heads_divisible, n_attn, shard_divisible, text_bytes
from dspbench.methods.spec import Look, MethodSpec, Op, Table3

B_DIM, L_DIM, H_DIM = 0, 1, 2   # of q, k, v (B', L, H, D)


class UlyssesAttention(nn.Module):
    """q, k, v sharded on `gather_dim` (L: the attended dim; B': a dim attention treats as batch)
    -a2a(H->gather_dim)-> whole on it with H/N heads, local attention, and the output back."""

    def __init__(self, local: nn.Module, group, gather_dim: int = L_DIM):
        super().__init__()
        self.local, self.group, self.gather_dim = local, group, gather_dim

    def forward(self, q, k, v, joint=None, kmask=None):
        g, d = self.group, self.gather_dim
        q, k, v = (comm.all_to_all(t, H_DIM, d, g, "ulysses_qkv") for t in (q, k, v))
        # Padded keys (methods/padding.py): gathering L gathers every rank's key mask too.
        mask = None if kmask is None else kmask.gathered(g) if d == L_DIM else kmask
        if joint is None:
            return comm.all_to_all(self.local(q, k, v, kmask=mask), d, H_DIM, g, "ulysses_out")
        # Text joins the attended sequence: only where that is what was gathered (full3d: always L).
        assert d == L_DIM, "joint text needs the attended dim gathered (gather_dim == L)"
        o, ot = self.local(q, k, v, joint=joint_heads(joint, g), kmask=mask)
        return comm.all_to_all(o, d, H_DIM, g, "ulysses_out"), gather_heads(ot, g, "ulysses_joint_out")


def joint_heads(joint, group):
    """This rank's heads of the replicated text q, k, v (no comm; backward: zero-padded, partial).
    A None (the last block's text queries) stays None."""
    return [None if t is None else comm.split(t, H_DIM, group) for t in joint]


def gather_heads(ot, group, tag: str):
    """(B, Ly, H/N, D) -> (B, Ly, H, D) on every rank; backward: reduce-scatter of the partial gradients."""
    return None if ot is None else comm.gather_from_seq(ot, H_DIM, group, tag)


def _check(cfg, shape, dims):
    return heads_divisible(cfg, dims.sp, "ulysses") or shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    return embed_attention(model, dims, lambda attn: UlyssesAttention(attn.inner, dims.sp_group))


def forward_ops(cfg, shape, dims, b):
    shard = act_bytes(cfg, shape, b) // dims.sp
    n = n_attn(cfg, dims.shard)
    return [Op("ulysses_qkv", "all_to_all", shard, 3 * n), Op("ulysses_out", "all_to_all", shard, n),
            Op("ulysses_joint_out", "all_gather", text_bytes(cfg, shape, b), cfg.n_text_out)]


METHOD = MethodSpec(
    name="ulysses", summary="head/sequence all-to-all inside attention over the sharded dim",
    constraints="heads % sp == 0 and the sharded dim % sp == 0",
    check=_check, parallelize=_parallelize, forward_ops=forward_ops,
    # Table 3 in the sharded dim's block only (ICML "less than 25%", v5 "at least 50%")
    report=Look(label="Ulysses", colour="#0072B2", order=30, table3=Table3("4M/N", 4, per_n=True)),
    splits_heads=True,
)
