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
from dspbench.methods.comm.ledger import wire_bytes as ledger_wire_bytes


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


def ring_overlap_share(profile: Profile, plan, dims: Dims) -> float:
    """The share of a plan's ring hops (tags ring_*) that hides under attention: each hop's time
    weighted by the overlap of the tier its ring is on (Profile.ring_overlap_for: a ring inside a
    node, a ring across nodes). The profile's one fraction where nothing is ring."""
    total = hidden = 0.0
    for _, o in plan:
        n = o.group_size(dims)
        if o.op != "send_recv" or not o.tag.startswith("ring_") or not o.count or n < 2:
            continue
        span = span_of(members(o.op, o.group, o.ranks, dims), dims.world, profile.gpus_per_node)
        t = o.count * tier_time(profile, o.op, o.payload, span)
        total += t
        hidden += t * profile.ring_overlap_for(span.nodes)
    return hidden / total if total > 0 else profile.ring_overlap


def plan_wire(plan, dims: Dims) -> dict[str, float]:
    """{'op.phase': wire bytes per rank per step}, as the record's `comm` field."""
    out: dict[str, int] = defaultdict(int)
    for phase, o in plan:
        n = o.group_size(dims)   # a sub-group's (USP's) or the whole SP/DP group's
        if o.count and n > 1:
            out[key(o.op, phase)] += o.count * wire_bytes(o.op, o.payload, n)
    return dict(out)


# ---------------------------------------------------------------- ZeRO's own collectives, accounted
# DeepSpeed pads each flat parameter group to this many elements per rank of the group
# (stage_1_and_2.py: nccl_start_alignment_factor = 2, times the group's size).
ZERO_ALIGN = 2


def engine_ops(spec, mcfg, dims, dtype_bytes: int, stage: int) -> list:
    """DeepSpeed's ZeRO collectives per step as [(phase, Op)], as its engine issues them (the run
    records them in its engine ledger, methods/comm/external.py; tests/test_zero.py holds the two equal).

    Over the group that replicates the parameters (the world; Megatron-SP: DP), ZeRO 1 and 2 alike:
    - bwd: the gradients all-reduced in fp32, in buckets of `reduce_bucket_size` elements. DeepSpeed
      (0.19: `use_multi_rank_bucket_allreduce`, on by default) all-reduces each bucket and keeps its
      partition, where the ZeRO paper (Rajbhandari et al. SC'20, Sec. 7.2.1) reduce-scatters: twice
      the gradient wire bytes. The bytes are exact; the calls are the buckets filled, counted as full
      buckets and the rest (the engine closes a bucket at a parameter's edge, so a model larger than a
      bucket may make one call more);
    - step: the gradient norm (one fp32 element all-reduced; over the model-parallel group first where
      there is one, Megatron-SP's SP group) and the updated parameter partitions
      all-gathered in the model dtype, the flat group padded to ZERO_ALIGN elements per rank.
    Op group "dp" with `ranks` = that group's size: it crosses nodes exactly when the world does.
    """
    from dspbench.methods.spec import Op
    from dspbench.models.params import param_count
    from dspbench.records.engine import BUCKET_ELEMS
    sharded = spec.sharded_params(mcfg)
    local = param_count(mcfg) - sharded + sharded // dims.sp
    n = dims.dp if sharded else dims.sp * dims.dp
    if stage == 0 or n == 1:
        return []
    full, rest = divmod(local, BUCKET_ELEMS)
    grads = [("bwd", Op("zero_grads", "all_reduce", 4 * BUCKET_ELEMS, full, "dp", ranks=n))] if full else []
    if rest:
        grads.append(("bwd", Op("zero_grads", "all_reduce", 4 * rest, 1, "dp", ranks=n)))
    padded = -(-local // (ZERO_ALIGN * n)) * ZERO_ALIGN * n
    # a model-parallel engine (Megatron-SP's SP group) sums the norm over that group too
    norm = [("step", Op("zero_norm", "all_reduce", 4, 1, "sp"))] if sharded and dims.sp > 1 else []
    return grads + norm + [("step", Op("zero_norm", "all_reduce", 4, 1, "dp", ranks=n)),
                           ("step", Op("zero_params", "all_gather", dtype_bytes * padded, 1, "dp", ranks=n))]


def engine_comm(spec, mcfg, dims, dtype_bytes: int, stage: int) -> dict[str, int]:
    """{'tag/op.phase': wire bytes per rank per step} of `engine_ops`: the formula the record's
    measured `engine_comm` is checked against (`engine_comm_formula`)."""
    out: dict[str, int] = defaultdict(int)
    for ph, o in engine_ops(spec, mcfg, dims, dtype_bytes, stage):
        out[key(o.op, ph, o.tag)] += o.count * ledger_wire_bytes(o.op, o.payload, o.group_size(dims))   # exact, as recorded
    return dict(out)
