"""The axes a plan enumerates: each a RunConfig field and the values to try for one request.

A new knob is one line here (e.g. CFG-parallel, padding, a Ulysses degree of USP), once RunConfig
has its field and the cost model prices it: the product, the legality check (the method's
`check()`), the pricing, the merging of equivalent rows and the emitted sweep all follow. Axes
after CORE are variants: candidates that differ only in them and price the same (to the byte and
the nanosecond) are one row listing the values (DSP's `shard`; `--a2a` where a method has no
all-to-all), and the first value is the one a sweep pins.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Callable

from dspbench.methods import available
from dspbench.models import get_config
from dspbench.records.config import A2A_STYLES, RunConfig

NO_SP = "single"   # SP degree 1 is the model without sequence parallelism, whatever the method


@dataclass(frozen=True)
class Request:
    """What the user asked: the workload (a RunConfig whose enumerated fields are ignored) and the methods."""
    base: RunConfig
    methods: tuple[str, ...]
    lean: bool = False    # only the first value of the axes the cost model does not price apart
    buckets: tuple = ()   # `--buckets`: a weighted shape mix ((T, S, weight), ...) replacing base's T and S


@dataclass(frozen=True)
class Axis:
    field: str
    values: Callable[[Request], tuple]
    help: str
    priced_apart: bool = True   # False: the cost model prices every value the same (tests check it);
                                # `plan --report`'s many plans (explore.py) then try the first only


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def _shards(r: Request) -> tuple[str, ...]:
    """The sequence dims an embedded method may shard: the user's first, then the model's others."""
    dims = tuple(get_config(r.base.model).seq_dims)
    return (r.base.shard,) + tuple(d for d in dims if d != r.base.shard) if r.base.shard in dims else dims


def _train(values: tuple, default) -> Callable[[Request], tuple]:
    return lambda r: values if r.base.mode == "train" else (default,)


AXES = (
    Axis("method", lambda r: r.methods, "sequence-parallel method (--methods)"),
    Axis("sp", lambda r: _divisors(r.base.gpus), "SP degree, a divisor of --gpus; the rest is DP"),
    Axis("grad_ckpt", _train((False, True), False), "activation checkpointing (train)"),
    Axis("zero", _train((0, 1, 2), 0), "ZeRO stage (train)"),
    Axis("shard", _shards, "the sequence dim embedded methods shard"),
    # priced apart since the cost model charges the reference style's extra copies (bench/cost/comm.py)
    Axis("a2a", lambda r: A2A_STYLES, "all-to-all convention"),
    # CFG on/off is the workload (guidance doubles the work), not a setting: the user's --cfg.
    Axis("cfg", lambda r: (r.base.cfg,), "classifier-free guidance (sample mode, --cfg)"),
    # CFG parallel (sample mode with --cfg): cond and uncond on two halves of the GPUs, SP inside each
    # (an SP degree that does not divide half the GPUs is `unsupported` with its reason)
    Axis("cfg_parallel", lambda r: (False, True) if r.base.cfg and r.base.mode == "sample" else (False,),
         "CFG's two passes on two halves of the GPUs (sample mode with --cfg)"),
    # e.g. Axis("pad", ...)
    # USP's split (--ulysses-degree): 0 (the largest Ulysses degree dividing the heads) and every explicit
    # one; candidates keep only the degrees that divide their SP degree (and usp's only)
    Axis("ulysses_degree", lambda r: (0,) + tuple(d for d in _divisors(r.base.gpus)) if "usp" in r.methods else (0,),
         "usp's Ulysses degree (ring degree SP / U)"),
)
CORE = ("method", "sp", "grad_ckpt", "zero")     # a row's identity; the rest are variants


def all_methods() -> tuple[str, ...]:
    return tuple(available())


def candidates(request: Request) -> list[RunConfig]:
    """Every point of the axes' product, SP 1 only as the method without SP (`single`) and
    `single` only at SP 1 (any method at SP 1 is the same run)."""
    values = [axis.values(request)[:1] if request.lean and not axis.priced_apart else axis.values(request)
              for axis in AXES]
    out = []
    for point in itertools.product(*values):
        kw = dict(zip((a.field for a in AXES), point))
        if (kw["method"] == NO_SP) != (kw["sp"] == 1):
            continue
        u = kw.get("ulysses_degree", 0)
        if u and (kw["method"] != "usp" or kw["sp"] % u):
            continue
        out.append(replace(request.base, **kw))
    return out


def variant_fields() -> tuple[str, ...]:
    return tuple(a.field for a in AXES if a.field not in CORE)
