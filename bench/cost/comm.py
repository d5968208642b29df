"""Communication time of one step: the method's analytic plan, priced with an alpha-beta model.

For one call of collective `op` with nccl-tests size S in a group of n ranks on link level L:

    t = alpha_L(op) * steps(op, n) + wire_bytes(op, S, n) / busbw_L(op)

`wire_bytes` is the ledger's (methods/comm/ledger.py: S * BUS_FACTOR), so busbw is exactly the
nccl-tests bus bandwidth a calibration measures. A calibrated profile measured with n ranks also
holds each op's time by size; for groups of n ranks that table is interpolated instead. steps: n-1 for ring-style all-gather,
reduce-scatter and pairwise all-to-all, 2(n-1) for ring all-reduce, 1 for a p2p hop.

Tiers: plan_times prices each call by the tiers its group crosses (bench/cost/tiers.py: a group
inside a node pays the intra tier; across nodes, ring hops pay their slowest hop, a hierarchical
all-to-all its intra and inter parts, a node's link shared by its ranks). `group_link` is the
one-level view (the level a group's slowest hop is on).

DeepSpeed ZeRO's own traffic (`--zero 1|2`; bench/run/zero.py runs the engine, whose collectives
are not in the ledger) is accounted here too: `engine_ops` for the cost model, `engine_comm` for the
record's `engine_comm`.
"""
from __future__ import annotations

from collections import defaultdict

from dspbench.cost.hardware import Link, Profile
from dspbench.cost.tiers import members, span_of, tier_time, wire_bytes
from dspbench.methods.dims import Dims
from dspbench.methods.comm.ledger import key


def group_link(profile: Profile, dims: Dims, group: str) -> Link:
    """The link level a group's collectives pay (see module docstring)."""
    g = profile.gpus_per_node
    if group == "sp":
        return profile.intra if dims.sp <= g and g % dims.sp == 0 else profile.inter
    return profile.intra if dims.world <= g else profile.inter


def plan_times(profile: Profile, plan, dims: Dims, a2a: str | None = None) -> dict[str, float]:
    """{'tag/op.phase': seconds per step} for a method's plan [(phase, Op)] (methods/spec.py), each
    call priced by the tiers its group (or USP sub-group) crosses (bench/cost/tiers.py). a2a "list":
    every all-to-all also pays the reference style's extra copies (Profile.a2a_list_extra_s_per_byte)."""
    out: dict[str, float] = defaultdict(float)
    extra = profile.a2a_list_extra_s_per_byte() if a2a == "list" else 0.0
    for phase, o in plan:
        n = o.group_size(dims)   # a sub-group's (USP's) or the whole SP/DP group's
        if o.count and n > 1:
            span = span_of(members(o.op, o.group, o.ranks, dims), dims.world, profile.gpus_per_node)
            copies = o.payload * extra if o.op == "all_to_all" else 0.0
            out[key(o.op, phase, o.tag)] += o.count * (tier_time(profile, o.op, o.payload, span) + copies)
    return dict(out)


def plan_wire(plan, dims: Dims) -> dict[str, float]:
    """{'op.phase': wire bytes per rank per step}, as the record's `comm` field."""
    out: dict[str, int] = defaultdict(int)
    for phase, o in plan:
        n = o.group_size(dims)   # a sub-group's (USP's) or the whole SP/DP group's
        if o.count and n > 1:
            out[key(o.op, phase)] += o.count * wire_bytes(o.op, o.payload, n)
    return dict(out)


# ---------------------------------------------------------------- ZeRO's own collectives, accounted
def engine_ops(spec, mcfg, dims, dtype_bytes: int, stage: int) -> list:
    """DeepSpeed's ZeRO collectives per step as [(phase, Op)], accounted (they are not recorded).

    ZeRO 1 and 2 move the same bytes (Rajbhandari et al. SC'20, Sec. 7.2.1): the gradients
    reduce-scattered in fp32 over the group that replicates them (the world; Megatron-SP: DP),
    and the updated parameter partitions all-gathered in the model dtype after the optimizer
    step (phase `step`). Op group "dp" with `ranks` = that group's size: it crosses nodes
    exactly when the world does (bench cost_comm.group_link).
    """
    from dspbench.methods.spec import Op
    from dspbench.models.params import param_count
    sharded = spec.sharded_params(mcfg)
    local = param_count(mcfg) - sharded + sharded // dims.sp
    n = dims.dp if sharded else dims.sp * dims.dp
    if stage == 0 or n == 1:
        return []
    return [("bwd", Op("zero_grads", "reduce_scatter", 4 * local, 1, "dp", ranks=n)),
            ("step", Op("zero_params", "all_gather", dtype_bytes * local, 1, "dp", ranks=n))]


def engine_comm(spec, mcfg, dims, dtype_bytes: int, stage: int) -> dict[str, int]:
    """{'tag/op.phase': wire bytes per rank per step} of `engine_ops` (the record's `engine_comm`)."""
    return {f"{o.tag}/{o.op}.{ph}": o.payload * (o.ranks - 1) // o.ranks
            for ph, o in engine_ops(spec, mcfg, dims, dtype_bytes, stage)}
