"""Megatron-SP as Megatron-LM runs it: the tensor-parallel linears and sequence-parallel regions of
`megatron_sp`, but each column-parallel linear keeps only its input's sequence shard for the
backward and all-gathers it again there for the weight gradient (Korthikanti et al. 2022, Sec. 4.2.2;
Megatron-LM's sequence-parallel linear). It trades `megatron_sp`'s full-length saved inputs
(`MethodSpec.unsharded_saved`) for one more all-gather of M per gathered linear in the backward.
"""
from __future__ import annotations

from functools import partial

from dspbench.methods import megatron_sp
from dspbench.methods.common import act_bytes
from dspbench.methods.spec import Look, MethodSpec, Op, Table3, conjugates


def _backward_ops(cfg, shape, dims, b):
    fwd = megatron_sp.METHOD.forward_ops(cfg, shape, dims, b)
    regather = Op("tp_regather", "all_gather", act_bytes(cfg, shape, b), megatron_sp.gathered_inputs(cfg))
    return conjugates(fwd) + [regather]


METHOD = MethodSpec(
    name="megatron_lm",
    summary="megatron_sp keeping the sequence shard, all-gathered again in the backward (Megatron-LM)",
    constraints=megatron_sp.METHOD.constraints,
    check=megatron_sp.tp_check("megatron_lm"),
    parallelize=partial(megatron_sp.METHOD.parallelize, regather=True),
    forward_ops=megatron_sp.METHOD.forward_ops,
    backward_ops=_backward_ops,
    sharded_params=megatron_sp.METHOD.sharded_params,
    # Megatron-SP's hue, lighter; Table 3: megatron_sp's forward (its backward adds the re-gathers)
    report=Look(label="Megatron-LM SP (re-gather)", colour="#E6B3D0", order=120, table3=Table3("8M", 8)),
    splits_heads=True,
)
