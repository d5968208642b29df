"""USP, Unified Sequence Parallelism (Fang & Zhao 2024; yunchang, xDiT): Ulysses x Ring.

The SP group of N ranks is a u x r sub-mesh, Ulysses innermost: SP ranks i*u .. i*u+u-1 form a
Ulysses sub-group, SP ranks j, j+u, .., j+(r-1)*u a ring sub-group. The grid is sharded on one
sequence dim (`dims.shard`), as for ulysses and ring; inside attention over it:
  q, k, v (B', L/N, H, D) -a2a(H->L) in the Ulysses group-> (B', L/r, H/u, D),
  ring attention over the ring group (every member holds the same H/u heads),
  out (B', L/r, H/u, D) -a2a(L->H) in the Ulysses group-> (B', L/N, H, D).
Degrees: u = the largest divisor of N that divides the head count, r = N / u. Per attention a
Ulysses all-to-all moves (u-1)/u of M/N and a ring step 2M/N, so as much Ulysses as the heads
allow is the cheapest split (xDiT's advice too). u = N is Ulysses, u = 1 is Ring.

Joint text (full3d, MMDiT; xDiT's joint attention): each rank takes its Ulysses sub-group's H/u
heads of the replicated text q, k, v (no comm), the ring treats the text K, V as a local block
(ring.py), and the text output is all-gathered over heads in the Ulysses sub-group (u > 1).
"""
from __future__ import annotations

from torch import nn

from dspbench.methods.comm import layer as comm
from dspbench.methods.common import act_bytes, embed_attention, n_attn, shard_divisible, text_bytes
from dspbench.methods.ring import RingAttention
from dspbench.methods.spec import Look, MethodSpec, Op, conjugates
from dspbench.methods.ulysses import gather_heads, joint_heads

L_DIM, H_DIM = 1, 2   # of q, k, v (B', L, H, D)


def degrees(heads: int, sp: int, ulysses: int = 0) -> tuple[int, int]:
    """(ulysses, ring) degrees: the requested u (`--ulysses-degree`), else the largest u dividing
    both sp and heads; r = sp / u. A requested u that does not divide sp is `check()`'s reason."""
    u = ulysses or max(d for d in range(1, sp + 1) if sp % d == 0 and heads % d == 0)
    return u, sp // u if sp % u == 0 else 0


class USPAttention(nn.Module):
    """Drop-in for LocalAttention: q, k, v (B', L/N, H, D) -> (B', L/N, H, D)."""

    def __init__(self, local: nn.Module, ulysses, ring):
        super().__init__()
        # A size-1 sub-group is skipped (None here would mean the whole world to comm).
        self.ulysses = ulysses
        self.attend = RingAttention(ring) if ring is not None else local

    def forward(self, q, k, v, joint=None, kmask=None):
        g = self.ulysses
        if g is None:
            if joint is None:
                return self.attend(q, k, v, kmask=kmask)
            return self.attend(q, k, v, joint=joint, kmask=kmask)
        # (B', L/N, H, D) -a2a(H->L)-> (B', L/r, H/u, D); padded keys' mask gathered alike
        q, k, v = (comm.all_to_all(t, H_DIM, L_DIM, g, "usp_qkv") for t in (q, k, v))
        kmask = None if kmask is None else kmask.gathered(g)
        if joint is None:   # (B', L/r, H/u, D) -a2a(L->H)-> (B', L/N, H, D)
            return comm.all_to_all(self.attend(q, k, v, kmask=kmask), L_DIM, H_DIM, g, "usp_out")
        o, ot = self.attend(q, k, v, joint=joint_heads(joint, g), kmask=kmask)
        return comm.all_to_all(o, L_DIM, H_DIM, g, "usp_out"), gather_heads(ot, g, "usp_joint_out")


_GROUPS: dict = {}   # (id(sp_group), sp, u) -> (sp_group, ulysses, ring); sp_group kept so ids stay unique


def sub_groups(dims, u: int):
    """This rank's (Ulysses, ring) sub-groups, None where of size 1; built once per SP mesh."""
    key = (id(dims.sp_group), dims.sp, u)
    if key not in _GROUPS:   # every rank takes the same branch: the calls are world-collective
        _GROUPS[key] = (dims.sp_group, *_new_sub_groups(dims.sp, u))
    return _GROUPS[key][1:]


def _new_sub_groups(sp: int, u: int):
    # new_group is collective over the world: every rank creates every SP group's sub-groups and
    # keeps its own. SP groups are consecutive blocks of sp world ranks (methods/dims.py).
    r, me, mine = sp // u, comm.world_rank(), [None, None]
    for start in range(0, comm.world_size(), sp):
        meshes = ([[start + i * u + j for j in range(u)] for i in range(r)] if u > 1 else [],
                  [[start + i * u + j for i in range(r)] for j in range(u)] if r > 1 else [])
        for which, groups in enumerate(meshes):
            for ranks in groups:
                g = comm.new_group(ranks)
                if me in ranks:
                    mine[which] = g
    return tuple(mine)


def _check(cfg, shape, dims):
    u, r = degrees(cfg.heads, dims.sp, dims.ulysses)
    if not r:
        return f"usp: the Ulysses degree {u} (--ulysses-degree) does not divide the SP degree {dims.sp}"
    if cfg.heads % u:   # by construction of the default degree; an explicit one may not divide
        return f"usp splits heads over its Ulysses degree {u}: heads={cfg.heads} is not divisible"
    return shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    u = degrees(model.cfg.heads, dims.sp, dims.ulysses)[0]
    ulysses, ring = sub_groups(dims, u) if dims.sp > 1 else (None, None)
    return embed_attention(model, dims, lambda attn: USPAttention(attn.inner, ulysses, ring))


def _ops(cfg, shape, dims, b) -> tuple[int, int, int, int]:
    u, r = degrees(cfg.heads, dims.sp, dims.ulysses)
    shard = act_bytes(cfg, shape, b) // dims.sp   # one rank's q, k, v or out, before and after the a2a
    return u, r, shard, n_attn(cfg, dims.shard)


def _ulysses_ops(cfg, shape, b, u, shard, n):
    a2a = n if u > 1 else 0
    return [Op("usp_qkv", "all_to_all", shard, 3 * a2a, ranks=u), Op("usp_out", "all_to_all", shard, a2a, ranks=u),
            Op("usp_joint_out", "all_gather", text_bytes(cfg, shape, b), cfg.n_text_out if u > 1 else 0, ranks=u)]


def _forward_ops(cfg, shape, dims, b):
    u, r, shard, n = _ops(cfg, shape, dims, b)
    # The ring passes this rank's K and V (B', L/r, H/u, D): 2M/N, r-1 times per attention.
    return _ulysses_ops(cfg, shape, b, u, shard, n) + [Op("ring_kv", "send_recv", 2 * shard, (r - 1) * n, ranks=r)]


def _backward_ops(cfg, shape, dims, b):
    u, r, shard, n = _ops(cfg, shape, dims, b)
    dkv = 2 * act_bytes(cfg, shape, 4) // dims.sp   # fp32 dK, dV accumulators, r hops home (ring.py)
    ulysses = conjugates(_ulysses_ops(cfg, shape, b, u, shard, n))
    return ulysses + [Op("ring_kv", "send_recv", 2 * shard, (r - 1) * n, ranks=r),
                      Op("ring_dkv", "send_recv", dkv, r * n if r > 1 else 0, ranks=r)]


METHOD = MethodSpec(
    name="usp", summary="Ulysses x Ring (USP): head all-to-all in sub-groups of u, K/V ring across r = sp/u",
    constraints="the sharded dim % sp == 0; u = --ulysses-degree, else the largest divisor of sp dividing heads",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops, backward_ops=_backward_ops,
    # Tol's wine
    report=Look(label="USP (Ulysses × Ring)", colour="#882255", order=100),
)
