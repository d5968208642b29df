"""Prediction intervals from a calibrated profile's measured spread (bench/calibrate/quality.py).

A calibration repeats every measurement and stores, per term, the measured range relative to the
median the profile uses: compute [min, max] / median of the step time, each collective op's
worst [min, max] / median over its sizes, and the ring-overlap probe's fractions. Each term is
one knob of the model; an interval is the prediction at the knobs' ends:
- step time: every time at its low end (overlap at its highest) and every time at its high end
  (step time rises with every time and falls with overlap, so these two corners bound it);
- baseline/DSP ratio: both methods share the knobs (one machine, one moment), so the ratio is
  evaluated at every corner of the knobs and the interval is its min and max.
A datasheet profile has no measured spread: no interval (None), the point alone.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

from dspbench.cost.hardware import GB, Link, Profile


def knobs(profile: Profile) -> dict[str, tuple[float, float]]:
    """{knob: (low, high)}: 'compute' and 'op:<op>' are time factors, 'overlap' a fraction."""
    cal = profile.calibration
    if not cal:
        return {}
    out = {"compute": tuple(cal.get("compute_range", (1.0, 1.0)))}
    out.update({f"op:{op}": tuple(r) for op, r in cal.get("link_range", {}).items()})
    fr = cal.get("overlap_fractions") or []
    if fr and profile.ring_overlap:
        out["overlap"] = (min(fr), max(fr))
    return out


def _scaled_link(link: Link, ops: dict[str, float]) -> Link:
    """The link with each op's time multiplied by its factor (table, alpha and bandwidth alike)."""
    return replace(link,
                   time_s_op={op: [[s, t * ops.get(op, 1.0)] for s, t in pts] for op, pts in link.time_s_op.items()},
                   alpha_s_op={**link.alpha_s_op, **{op: link.alpha(op) * f for op, f in ops.items()}},
                   busbw_GBps={**link.busbw_GBps, **{op: link.busbw(op) / GB / f for op, f in ops.items()}})


def at(profile: Profile, corner: dict[str, float]) -> Profile:
    """The profile with each knob at the given value (time factors divide rates)."""
    c = corner.get("compute", 1.0)
    ops = {k[3:]: v for k, v in corner.items() if k.startswith("op:")}
    return replace(profile, flops_per_s={k: v / c for k, v in profile.flops_per_s.items()},
                   peak_flops={k: v / c for k, v in profile.peak_flops.items()},
                   intra=_scaled_link(profile.intra, ops), inter=_scaled_link(profile.inter, ops),
                   ring_overlap=corner.get("overlap", profile.ring_overlap))


def step_interval(step_fn, profile: Profile) -> tuple[float, float] | None:
    """(low, high) of step_fn(profile) over the measured ranges, or None without them."""
    k = knobs(profile)
    if not k:
        return None
    low = {n: (hi if n == "overlap" else lo) for n, (lo, hi) in k.items()}
    high = {n: (lo if n == "overlap" else hi) for n, (lo, hi) in k.items()}
    return step_fn(at(profile, low)), step_fn(at(profile, high))


def ratio_interval(base_fn, dsp_fn, profile: Profile) -> tuple[float, float] | None:
    """(min, max) of base_fn/dsp_fn over every corner of the measured ranges, or None."""
    k = knobs(profile)
    if not k:
        return None
    names = list(k)
    ratios = []
    for ends in itertools.product((0, 1), repeat=len(names)):
        p = at(profile, {n: k[n][e] for n, e in zip(names, ends)})
        ratios.append(base_fn(p) / dsp_fn(p))
    return min(ratios), max(ratios)
