"""Communication time of one step: the method's analytic plan, priced with an alpha-beta model.

For one call of collective `op` with nccl-tests size S in a group of n ranks on link level L:

    t = alpha_L(op) * steps(op, n) + wire_bytes(op, S, n) / busbw_L(op)

`wire_bytes` is the ledger's (methods/ledger.py: S * BUS_FACTOR), so busbw is exactly the
nccl-tests bus bandwidth a calibration measures. A calibrated profile measured with n ranks also
holds each op's time by size; for groups of n ranks that table is interpolated instead. steps: n-1 for ring-style all-gather,
reduce-scatter and pairwise all-to-all, 2(n-1) for ring all-reduce, 1 for a p2p hop.

Level: ranks are a dp x sp mesh with SP innermost (methods/dims.py), placed node by node. The SP
group is intra-node while sp <= gpus_per_node; the DP group (stride sp) crosses nodes as soon as
the world does. A group that crosses nodes pays the inter-node level for all its bytes (its ring
or its all-to-all is as slow as its slowest hop).
"""
from __future__ import annotations

from collections import defaultdict

from dspbench.cost.hardware import Link, Profile
from dspbench.methods.dims import Dims
from dspbench.methods.ledger import BUS_FACTOR, key


def steps(op: str, n: int) -> int:
    if op == "send_recv":
        return 1
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def group_link(profile: Profile, dims: Dims, group: str) -> Link:
    """The link level a group's collectives pay (see module docstring)."""
    g = profile.gpus_per_node
    if group == "sp":
        return profile.intra if dims.sp <= g and g % dims.sp == 0 else profile.inter
    return profile.intra if dims.world <= g else profile.inter


def wire_bytes(op: str, payload: float, n: int) -> float:
    """The ledger's wire bytes (S * BUS_FACTOR), as a float: predicted payloads need not divide by n."""
    return payload * BUS_FACTOR[op](n)


def op_time(link: Link, op: str, payload: int, n: int) -> float:
    """Seconds of one call (n > 1): the calibration table where it was measured with n ranks,
    else alpha-beta on the ledger's wire bytes."""
    measured = link.measured_time(op, payload, n)
    if measured is not None:
        return measured
    return link.alpha(op) * steps(op, n) + wire_bytes(op, payload, n) / link.busbw(op)


def plan_times(profile: Profile, plan, dims: Dims) -> dict[str, float]:
    """{'tag/op.phase': seconds per step} for a method's plan [(phase, Op)] (methods/spec.py).

    A sub-group call pays its enclosing group's level (conservative for a sub-group that would
    fit in a node while its SP group does not)."""
    out: dict[str, float] = defaultdict(float)
    for phase, o in plan:
        n = o.group_size(dims)   # a sub-group's (USP's) or the whole SP/DP group's
        if o.count and n > 1:
            out[key(o.op, phase, o.tag)] += o.count * op_time(group_link(profile, dims, o.group), o.op, o.payload, n)
    return dict(out)


def plan_wire(plan, dims: Dims) -> dict[str, float]:
    """{'op.phase': wire bytes per rank per step}, as the record's `comm` field."""
    out: dict[str, int] = defaultdict(int)
    for phase, o in plan:
        n = o.group_size(dims)   # a sub-group's (USP's) or the whole SP/DP group's
        if o.count and n > 1:
            out[key(o.op, phase)] += o.count * wire_bytes(o.op, o.payload, n)
    return dict(out)
