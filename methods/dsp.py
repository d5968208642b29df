"""DSP, Dynamic Sequence Parallelism (Zhao et al., ICML 2025).

The token grid (B, T, S, C) enters the blocks sharded on T, so spatial attention, cross-attention
and the MLP run locally. Around every attention over T the grid is switched to an S shard by one
all-to-all and back by another: 2 switches per spatial+temporal layer, nothing inside any module.
Each switch is stateless (in and out of the same seam), which keeps it correct under activation
checkpointing's recompute. Non-divisible T or S: padded (`pads`, methods/padding.py) or, with
`--pad never`, rejected by `check()`.

K sequence dims (the paper's general case; axial3d has T, H, W): T is still sharded at entry and
every attention over another dim is local. Around attention over T the shard moves to the first
other sequence dim, in the model's order, that N divides (S; H, else W, for axial3d), chosen from
the tensor's extents, so the same 2 switches of M/N per attention over T hold for any K.

Where DSP stops: a self-attention that spans every sequence dim at once (full3d: today's video
DiTs attend over all T x H' x W' tokens) leaves no dim to hold the shard on while it runs, so no
switch can make it local. `check()` says so, worded as not applicable (NOT_APPLICABLE) rather than
as a constraint a different shape or degree would meet.
"""
from __future__ import annotations

from functools import partial

from dspbench.methods.comm import layer as comm
from dspbench.methods.common import act_bytes, attentions, n_attn, seq_dims_divisible, shard_sequence
from dspbench.methods.spec import Look, MethodSpec, Op, Table3


ENTRY = "T"   # the sequence dim sharded where the token grid enters the blocks
NOT_APPLICABLE = "not applicable: no sequence dim along which every attention is local"


def switch_target(extents: dict[str, int], n: int) -> str | None:
    """Where the shard goes during attention over ENTRY: the first other dim (model order) n divides."""
    return next((d for d, e in extents.items() if d != ENTRY and e % n == 0), None)


def applicability(cfg) -> str | None:
    """Why DSP cannot apply to this model at any shape or degree, or None: some self-attention
    spans every sequence dim, so no switch leaves it a dim to hold the shard on."""
    full = [span for span in cfg.attn_spans if set(span) >= set(cfg.seq_dims)]
    if full:
        return (f"{NOT_APPLICABLE} ({cfg.layout}'s self-attention spans {' x '.join(full[0])} at once; "
                "DSP needs every attention to leave one sequence dim unattended)")
    return None


def pads(cfg, extents: dict[str, int], dims) -> tuple[str, ...]:
    """Padded when the degree does not divide them: T (sharded at entry) and, if no other dim
    divides, the first other one (the switch target)."""
    return (ENTRY,) + (() if switch_target(extents, dims.sp) else (next(d for d in extents if d != ENTRY),))


def _check(cfg, shape, dims):
    if (reason := applicability(cfg)) is not None:
        return reason
    # T and the switch target are sharded at some stage; heads are never split.
    extents = cfg.seq_extents(shape)
    reason = seq_dims_divisible(shape, dims.sp, ENTRY)
    if reason is None and switch_target(extents, dims.sp) is None:
        reason = "; ".join(seq_dims_divisible(shape, dims.sp, d) for d in extents if d != ENTRY)
    return reason


def _switch_in(m, args, seq: dict[str, int], group):
    x = args[0]
    # The target is read from the full extents of the T shard; the matching hook below reuses it.
    m.dsp_target = seq[switch_target({d: x.shape[i] for d, i in seq.items()}, comm.size(group))]
    # (B, T/N, .., D, .., C) -a2a(D->T)-> (B, T, .., D/N, .., C), D the target (S; H or W)
    return (comm.all_to_all(x, m.dsp_target, seq[ENTRY], group, "switch"),)


def _switch_out(m, args, out, seq: dict[str, int], group):
    # (B, T, .., D/N, .., C) -a2a(T->D)-> (B, T/N, .., D, .., C): back to the entry shard.
    return comm.all_to_all(out, seq[ENTRY], m.dsp_target, group, "switch")


def _parallelize(model, dims):
    seq, g = model.cfg.seq_dims, dims.sp_group
    shard_sequence(model, seq[ENTRY], g)
    for attn in attentions(model, axis=seq[ENTRY]):
        attn.register_forward_pre_hook(partial(_switch_in, seq=seq, group=g))
        attn.register_forward_hook(partial(_switch_out, seq=seq, group=g))
    return model


def _forward_ops(cfg, shape, dims, b):
    # Each switch moves this rank's whole shard: M/N, two per attention over T.
    return [Op("switch", "all_to_all", act_bytes(cfg, shape, b) // dims.sp, 2 * n_attn(cfg))]


METHOD = MethodSpec(
    name="dsp", summary="dynamic switch between T and S shards (1 all-to-all per switch)",
    constraints="T % sp == 0 and S % sp == 0 (axial3d: H or W % sp == 0); any head count",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops, pads=pads,
    # the strongest hue: every figure compares against DSP
    report=Look(label="DSP", colour="#D55E00", order=10, table3=Table3("2M/N", 2, per_n=True)),
)
