"""Two-tier pricing: which tiers a collective's group crosses, and its time on them.

Ranks are a dp x sp mesh with SP innermost (methods/dims.py), placed node-major (SLURM's block
distribution: ranks 0..G-1 on the first node). A group's *span* is how many of its ranks share a
node (m) and how many nodes it covers (k). Inside one node (k = 1) a collective pays the intra
tier. Across nodes:
- ring-style ops (all-gather, reduce-scatter, all-reduce, a ring-attention hop): every step moves
  one chunk per hop in lockstep and k hops of the ring cross a node boundary, so each step is as
  slow as its slowest hop: max(intra time, inter time) over the same steps and chunk sizes;
- all-to-all (hierarchical): each rank sends (m-1)/n of its payload to peers on its node (intra)
  and (n-m)/n to the other nodes (inter); the two parts are posted together, so max of the two.
- a node's inter-node link is shared: all its ranks run the same collective at the same time, in
  their own groups. With `nics_per_node` NICs (datasheet: one per GPU; the emulated cluster: one
  veth per node), inter-node traffic is slowed by share = max(1, flows / nics): flows = the
  ranks on the node (all-to-all: each sends to other nodes) or the node's groups (ring: one
  crossing hop out of the node per group).
A calibrated profile may hold measured tables per tier: intra (a node's ranks), inter (one rank
per node) and span (the whole node-spanning world); a table is used for the group shape it was
measured on, and the inter table for one-rank-per-node groups at share x the bytes (f flows of x
bytes through one link take about as long as one flow of f x).
"""
from __future__ import annotations

from dataclasses import dataclass

from dspbench.cost.hardware import Link, Profile
from dspbench.methods.dims import Dims
from dspbench.methods.comm.ledger import BUS_FACTOR


@dataclass(frozen=True)
class Span:
    n: int          # ranks in the group
    per_node: int   # ranks of the group on each node it covers
    nodes: int
    flows: int      # groups of this kind with ranks on one node (each runs the collective at once)
    node_ranks: int  # ranks of the world on one node


def members(op: str, group: str, ranks: int, dims: Dims) -> list[int]:
    """World ranks of the first group an op of the plan runs in (all are alike under node-major
    placement). USP's sub-groups: Ulysses (its all-to-alls) consecutive, ring (its hops) strided;
    a "dp" op over the whole world (ZeRO sharding over every replica of SP-replicated parameters)."""
    if group == "cfg":      # CFG parallelism's peer pair: rank r and r + world/2
        return dims.cfg_groups()[0]
    if group == "dp":       # ZeRO's engine ops: ranks = the whole world (SP-replicated parameters)
        return list(range(dims.world)) if ranks == dims.world and ranks != dims.dp else dims.dp_groups()[0]
    sp = dims.sp_groups()[0]
    if not ranks or ranks == dims.sp:
        return sp
    return sp[::dims.sp // ranks] if op == "send_recv" else sp[:ranks]


def span_of(group: list[int], world: int, gpus_per_node: int) -> Span:
    nodes = {r // gpus_per_node for r in group}
    per_node = max(sum(1 for r in group if r // gpus_per_node == nd) for nd in nodes)
    node_ranks = min(gpus_per_node, world)
    return Span(len(group), per_node, len(nodes), max(1, node_ranks // per_node), node_ranks)


def _alpha_beta(link: Link, op: str, wire: float, steps: int, share: float = 1.0) -> float:
    return link.alpha(op) * steps + wire * share / link.busbw(op)


# ---------------------------------------------------------------- one call on one link
def steps(op: str, n: int) -> int:
    if op == "send_recv":
        return 1
    return 2 * (n - 1) if op == "all_reduce" else n - 1


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


def tier_time(profile: Profile, op: str, payload: float, s: Span) -> float:
    """Seconds of one call of `op` (nccl-tests size `payload`) in a group of span `s`."""
    if s.nodes == 1:
        return op_time(profile.intra, op, payload, s.n)
    measured = profile.span.measured_time(op, payload, s.n) if profile.span.per_node == s.per_node else None
    if measured is not None:
        return measured
    nics = profile.nics_per_node or profile.gpus_per_node
    if op == "all_to_all":
        share = max(1.0, s.node_ranks / nics)
        inter = _alpha_beta(profile.inter, op, payload * (s.n - s.per_node) / s.n, s.n - s.per_node, share)
        intra = _alpha_beta(profile.intra, op, payload * (s.per_node - 1) / s.n, s.per_node - 1)
        if s.per_node == 1:     # every peer on another node: the inter tier's own table applies
            inter = op_time(profile.inter, op, payload * share, s.n)
        return max(inter, intra)
    share = max(1.0, s.flows / nics)
    if s.per_node == 1:
        return op_time(profile.inter, op, payload * share, s.n)
    wire = payload * BUS_FACTOR[op](s.n)
    inter = _alpha_beta(profile.inter, op, wire, steps(op, s.n), share)
    return max(inter, _alpha_beta(profile.intra, op, wire, steps(op, s.n)))
