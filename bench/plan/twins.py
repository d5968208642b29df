"""Twins: configurations that execute the same collectives and the same local kernels, decided by
mechanism, never by equal predicted seconds (two different mechanisms may price alike, and one
mechanism under two names may not, where a profile carries a per-method term).

A candidate's mechanism is what its ranks do in one step, as the cost model counted it:
- its collectives (methods/spec.py's analytic plan, with ZeRO's engine ops and the CFG exchange),
  each by phase, op, payload, calls and the world ranks of its group (so the tiers it crosses),
  and whether it is a ring-attention hop (interleaved with the attention's blocks, which it may
  hide under); tags are left out, since they are each method's own names for the same call;
- the all-to-all convention, where the plan has an all-to-all (`--a2a` changes nothing else);
- the sequence dim sharded at the blocks' entry: which attention an embedded method's collectives
  wrap, so which kernels see a shard (ring around attention over T runs other kernels than around
  attention over S, with the same bytes);
- its local kernels' shapes: the grid every rank computes on (padded where the method pads), the
  weights it shards (tensor-parallel GEMMs of width C/sp), and the bytes of each part of its memory
  (what each rank holds: its activations' shapes, the full-length inputs a training step saves). The
  attention's own layout follows from the collectives around it (an all-to-all scatters heads, a
  ring hop passes K/V blocks), so it needs no separate field.
USP with Ulysses degree 1 is ring, with Ulysses degree SP is Ulysses; DeepSpeed's Ulysses is ours;
dsp_hybrid is DSP on factorized layouts and Ulysses on full 3-D ones; Megatron-LM's regather only
changes the backward, so in sample or infer mode it is megatron_sp.
"""
from __future__ import annotations

from collections import Counter

from dspbench.cost.model import Prediction
from dspbench.cost.tiers import members
from dspbench.methods import Dims, get_method
from dspbench.models import get_config
from dspbench.records.config import RunConfig

RING_HOP = "ring_"     # the tag prefix of ring-attention hops (the cost model's overlap reads the same)


def _dims(cfg: RunConfig) -> Dims:
    return Dims(sp=int(cfg.sp), dp=cfg.dp, shard=cfg.shard, cfg=cfg.cfg_degree, ulysses=cfg.ulysses_degree)


def collectives(cfg: RunConfig, p: Prediction) -> tuple:
    """The step's collectives without their tags: a sorted multiset of (phase, op, payload, group's
    world ranks, ring hop) -> calls. Calls in a group of one rank move nothing and are left out."""
    dims, calls = _dims(cfg), Counter()
    for phase, o in p.plan:
        if o.count and o.group_size(dims) > 1:
            group = tuple(members(o.op, o.group, o.ranks, dims))
            calls[(phase, o.op, o.payload, group, o.tag.startswith(RING_HOP))] += o.count
    return tuple(sorted(calls.items()))


def local_work(cfg: RunConfig, p: Prediction) -> tuple:
    """The shapes of one rank's kernels, as the cost model knows them (module docstring)."""
    spec, mcfg = get_method(cfg.method), get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
    grid = (p.grid.batch, p.grid.frames, p.grid.spatial) if p.grid else None
    parts = tuple(sorted((k, round(v)) for k, v in p.mem.items()))
    return (grid, spec.sharded_params(mcfg), parts)


def mechanism(cfg: RunConfig, p: Prediction) -> tuple:
    """What makes two candidates of one request twins (equal keys) or not."""
    calls = collectives(cfg, p)
    a2a = cfg.a2a if any(op == "all_to_all" for (_, op, *_), _ in calls) else None
    return (cfg.mode, cfg.gpus, cfg.dtype, cfg.sp, cfg.dp, cfg.cfg_degree, cfg.shard, calls, a2a, local_work(cfg, p))


def name(row: dict) -> str:
    """A twin's name: its method, and USP's split (its automatic one resolved: Ulysses as far as the
    heads allow)."""
    cfg = row["config"]
    if cfg.method != "usp":
        return cfg.method
    from dspbench.methods.usp import degrees
    u, r = degrees(get_config(cfg.model).heads, int(cfg.sp), cfg.ulysses_degree)
    return f"usp at Ulysses {u} x ring {r}"
