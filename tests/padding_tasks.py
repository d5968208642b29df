"""Rank-side tasks of the padding tests: several methods per call (one pool round trip each)."""
from __future__ import annotations

from dspbench.methods import padding
from oracle_tasks import oracle_case


def oracle_cases(methods: list[str], model: str, shape: tuple, sp: int, **kw) -> dict:
    """{method: oracle_case(...)} on this rank."""
    return {m: oracle_case(m, model, shape, sp, **kw) for m in methods}


def with_plan_levers(fill: float, mask_keys: bool, method: str, model: str, shape: tuple, sp: int, **kw) -> dict:
    """oracle_case with the padded tokens set to `fill` and the key masks on or off (PadPlan's test levers)."""
    prev = padding.PadPlan.fill, padding.PadPlan.mask_keys
    padding.PadPlan.fill, padding.PadPlan.mask_keys = fill, mask_keys
    try:
        return oracle_case(method, model, shape, sp, **kw)
    finally:
        padding.PadPlan.fill, padding.PadPlan.mask_keys = prev


def sliced_cases(methods: list[str], model: str, run_shape: tuple, sp: int, budget: int, leak: bool = False,
                 **over) -> dict:
    """Each method's oracle check as a run of `run_shape` does it above a full-check budget of
    `budget` (lowered in this rank for the test): on check_shape's slice. `leak`: padded tokens huge
    and the key masks off (a broken padding path), which a check that pads must catch."""
    from dspbench.models import Shape, get_config
    from dspbench.run import oracle
    prev = oracle.FULL_CHECK_BUDGET
    oracle.FULL_CHECK_BUDGET = budget
    try:
        ocfg, oshape = oracle.check_shape(get_config(model, **over), Shape(*run_shape), sp)
    finally:
        oracle.FULL_CHECK_BUDGET = prev
    sliced = (oshape.batch, oshape.frames, oshape.spatial)
    run = (lambda m: with_plan_levers(1e3, False, m, model, sliced, sp, **over)) if leak else \
        (lambda m: oracle_case(m, model, sliced, sp, **over))
    assert ocfg.depth == get_config(model, **over).depth      # the tiny model's depth is already the slice's
    return {m: {**run(m), "checked_shape": sliced} for m in methods}
