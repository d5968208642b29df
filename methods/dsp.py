"""DSP, Dynamic Sequence Parallelism (Zhao et al., ICML 2025).

The token grid (B, T, S, C) enters the blocks sharded on T, so spatial attention, cross-attention
and the MLP run locally. Around every attention over T the grid is switched to an S shard by one
all-to-all and back by another: 2 switches per spatial+temporal layer, nothing inside any module.
Each switch is stateless (in and out of the same seam), which keeps it correct under activation
checkpointing's recompute. Non-divisible T or S is rejected by `check()` (no padding).
"""
from __future__ import annotations

from ..models import S_DIM, T_DIM
from . import comm
from .common import act_bytes, attentions, n_attn, seq_dims_divisible, shard_sequence
from .spec import MethodSpec, Op


def _check(cfg, shape, dims):
    # Both dims are sharded at some stage; heads are never split.
    return seq_dims_divisible(shape, dims.sp, "T") or seq_dims_divisible(shape, dims.sp, "S")


def _parallelize(model, dims):
    g = dims.sp_group
    shard_sequence(model, T_DIM, g)
    for attn in attentions(model, axis=T_DIM):
        # (B, T/N, S, C) -a2a(S->T)-> (B, T, S/N, C) before; the reverse after.
        attn.register_forward_pre_hook(
            lambda m, args: (comm.all_to_all(args[0], S_DIM, T_DIM, g, "switch"),))
        attn.register_forward_hook(
            lambda m, args, out: comm.all_to_all(out, T_DIM, S_DIM, g, "switch"))
    return model


def _forward_ops(cfg, shape, dims, b):
    # Each switch moves this rank's whole shard: M/N, two per attention over T.
    return [Op("switch", "all_to_all", act_bytes(cfg, shape, b) // dims.sp, 2 * n_attn(cfg))]


METHOD = MethodSpec(
    name="dsp", summary="dynamic switch between T and S shards (1 all-to-all per switch)",
    constraints="T % sp == 0 and S % sp == 0; any head count",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops,
)
