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
