"""DSP with a Ulysses fallback for full attention: DSP where attention is local along some dim,
head-sharding only where it is local along none (hybrid3d: factorized blocks and full blocks).

DSP's switch moves the shard to a sequence dim the next attention does not attend over. A full
3-D attention spans every sequence dim, so the only dim left to shard during it is the heads:
its switch is Ulysses' (q, k, v from the T shard to an H/N-heads shard, the output back). So with
the grid sharded on T at entry:
- attention over S only (spatial): local, no communication;
- attention over T only (temporal): DSP's 2 switches T <-> S around it, M/N each;
- attention over every dim (full): 3 + 1 all-to-alls of M/N inside it (methods/ulysses.py).
On stdit this is DSP, on full3d it is Ulysses; on a hybrid model it is the cheapest of both per
attention (2M/N vs 4M/N). Constraints: T % N; S % N where temporal attention switches; heads % N
where a full attention head-shards.
"""
from __future__ import annotations

from functools import partial

from dspbench.methods import dsp
from dspbench.methods.common import act_bytes, attentions, heads_divisible, seq_dims_divisible, shard_sequence, text_bytes
from dspbench.methods.spec import Look, MethodSpec, Op
from dspbench.methods.ulysses import UlyssesAttention

NAME = "dsp_hybrid"


def _kinds(cfg) -> tuple[int, int]:
    """(attentions over T that a switch makes local, full attentions) in the whole model."""
    full = sum(set(span) >= set(cfg.seq_dims) for span in cfg.attn_spans)
    switched = sum(dsp.ENTRY in span and not set(span) >= set(cfg.seq_dims) for span in cfg.attn_spans)
    return cfg.stack_depth * switched, cfg.stack_depth * full


def _check(cfg, shape, dims):
    switched, full = _kinds(cfg)
    reason = seq_dims_divisible(shape, dims.sp, dsp.ENTRY)
    if reason is None and full:
        reason = heads_divisible(cfg, dims.sp, f"{NAME} (full attention)")
    if reason is None and switched and dsp.switch_target(cfg.seq_extents(shape), dims.sp) is None:
        reason = "; ".join(seq_dims_divisible(shape, dims.sp, d) for d in cfg.seq_dims if d != dsp.ENTRY)
    return reason


def _pads(cfg, extents, dims):
    """T (the entry shard) and, where temporal attention switches, DSP's switch target."""
    return dsp.pads(cfg, extents, dims) if _kinds(cfg)[0] else (dsp.ENTRY,)


def _parallelize(model, dims):
    seq, g = model.cfg.seq_dims, dims.sp_group
    shard_sequence(model, seq[dsp.ENTRY], g)
    for attn in attentions(model, axis=seq[dsp.ENTRY]):
        if set(attn.axes) >= set(seq.values()):   # local along no dim: shard the heads inside
            attn.inner = UlyssesAttention(attn.inner, g)
        else:                                      # local along another dim: switch to it around
            attn.register_forward_pre_hook(partial(dsp._switch_in, seq=seq, group=g))
            attn.register_forward_hook(partial(dsp._switch_out, seq=seq, group=g))
    return model


def _forward_ops(cfg, shape, dims, b):
    switched, full = _kinds(cfg)
    shard = act_bytes(cfg, shape, b) // dims.sp
    return [Op("switch", "all_to_all", shard, 2 * switched),
            Op("ulysses_qkv", "all_to_all", shard, 3 * full), Op("ulysses_out", "all_to_all", shard, full),
            Op("ulysses_joint_out", "all_gather", text_bytes(cfg, shape, b), cfg.n_text_out)]


METHOD = MethodSpec(
    name=NAME, summary="DSP switches where attention is local along a dim, Ulysses head all-to-alls where it is not",
    constraints="T % sp == 0; S % sp == 0 if temporal attention; heads % sp == 0 if full attention",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops, pads=_pads,
    # DSP's hue, lighter: DSP with Ulysses inside full attention
    report=Look(label="DSP + Ulysses (full attention)", colour="#F0A070", order=20),
    splits_heads=True,
)
