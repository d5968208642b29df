"""Prediction intervals from a calibrated profile's measured spread (bench/calibrate/quality.py).

A calibration repeats every measurement and stores, per term, the measured range relative to the
median the profile uses: compute [min, max] / median of the step time, each collective op's
[min, max] / median per size (each calibration-table point moves by its own; alpha-beta, used
for other group sizes, by the op's worst), and the ring-overlap probe's fractions. Each term is
one knob of the model; an interval is the prediction at the knobs' ends:
- step time: every time at its low end (overlap at its highest) and every time at its high end
  (step time rises with every time and falls with overlap, so these two corners bound it);
- baseline/DSP ratio: the two steps are measured in separate launches whose noise is independent
  (what the calibration's repeats measured is launch-to-launch and call-to-call noise), so the
  interval is [base low / DSP high, base high / DSP low].
A datasheet profile has no measured spread: no interval (None), the point alone.
"""
from __future__ import annotations

from dataclasses import replace

from dspbench.cost.hardware import GB, Link, Profile


def knobs(profile: Profile) -> dict[str, tuple[float, float]]:
    """{knob: (low, high)}: 'compute' and 'op:<op>' are time factors (an op's worst size), 'overlap'
    a fraction."""
    cal = profile.calibration
    if not cal:
        return {}
    out = {"compute": tuple(cal.get("compute_range", (1.0, 1.0)))}
    out.update({f"op:{op}": tuple(r) for op, r in cal.get("link_range", {}).items()})
    fr = cal.get("overlap_fractions") or []
    if fr and profile.ring_overlap:
        out["overlap"] = (min(fr), max(fr))
    return out


def _scaled_link(link: Link, ends: dict[str, int], worst: dict, by_size: dict) -> Link:
    """The link with each op's times at one end (0: low, 1: high) of their measured range: each
    table point by its own size's range, alpha and bandwidth (other group sizes) by the worst."""
    def point(op, size, t):
        if op not in ends:
            return t
        rng = {s: (lo, hi) for s, lo, hi in by_size.get(op, ())}.get(size, worst[op])
        return t * rng[ends[op]]
    f = {op: worst[op][e] for op, e in ends.items()}
    return replace(link,
                   time_s_op={op: [[s, point(op, s, t)] for s, t in pts] for op, pts in link.time_s_op.items()},
                   alpha_s_op={**link.alpha_s_op, **{op: link.alpha(op) * x for op, x in f.items()}},
                   busbw_GBps={**link.busbw_GBps, **{op: link.busbw(op) / GB / x for op, x in f.items()}})


def at(profile: Profile, ends: dict[str, int]) -> Profile:
    """The profile with each knob at one end of its range (0: low, 1: high; time factors divide rates)."""
    k = knobs(profile)
    c = k["compute"][ends["compute"]] if "compute" in ends else 1.0
    worst = {n[3:]: r for n, r in k.items() if n.startswith("op:")}
    ops = {n[3:]: e for n, e in ends.items() if n.startswith("op:")}
    by_size = profile.calibration.get("link_range_by_size", {})
    return replace(profile, flops_per_s={d: v / c for d, v in profile.flops_per_s.items()},
                   module_overhead_s=profile.module_overhead_s * c, compute_scale=profile.compute_scale * c,
                   peak_flops={d: v / c for d, v in profile.peak_flops.items()},
                   intra=_scaled_link(profile.intra, ops, worst, by_size),
                   inter=_scaled_link(profile.inter, ops, worst, by_size),
                   **_overlap_at(profile, k, ends))


def _overlap_at(profile: Profile, k: dict, ends: dict) -> dict:
    """The ring overlap at the knob's end; a measured intra-node fraction moves by the same factor."""
    if "overlap" not in ends:
        return {}
    f = k["overlap"][ends["overlap"]]
    intra = profile.ring_overlap_intra
    if intra is not None and profile.ring_overlap:
        intra = min(1.0, intra * f / profile.ring_overlap)
    return {"ring_overlap": f, "ring_overlap_intra": intra}


def corners(profile: Profile) -> tuple[Profile, Profile] | None:
    """The profile at its fastest and at its slowest corner, or None without measured ranges."""
    k = knobs(profile)
    if not k:
        return None
    low = {n: int(n == "overlap") for n in k}        # every time low, the overlap high
    high = {n: int(n != "overlap") for n in k}
    return at(profile, low), at(profile, high)


def step_interval(step_fn, profile: Profile) -> tuple[float, float] | None:
    """(low, high) of step_fn(profile) over the measured ranges, or None without them."""
    ends = corners(profile)
    return None if ends is None else (step_fn(ends[0]), step_fn(ends[1]))


def ratio_interval(base_fn, dsp_fn, profile: Profile) -> tuple[float, float] | None:
    """(low, high) of base_fn/dsp_fn: the two are measured in separate launches, whose noise is
    independent, so each end pairs one method's low step with the other's high one."""
    b, d = step_interval(base_fn, profile), step_interval(dsp_fn, profile)
    if b is None or d is None:
        return None
    return b[0] / d[1], b[1] / d[0]


# A datasheet profile's efficiencies are assumptions (bench/cost/profiles/*.toml [sources]):
# compute at 0.45 of peak ("40-50% MFU is typical"), links at 0.8 of their rate ("~80%"), ring
# hops fully hidden. Their stated ranges become the knobs of an *assumed* interval: compute
# efficiency 0.40-0.50 (time x 0.9-1.125), link efficiency 0.6-0.9 (time x 0.89-1.33), ring overlap
# half to all. Not a measured spread: callers label it (`dspbench plan`: interval_source).
ASSUMED_COMPUTE = (0.45 / 0.50, 0.45 / 0.40)
ASSUMED_LINK = (0.8 / 0.9, 0.8 / 0.6)
ASSUMED_OVERLAP = (0.5, 1.0)
ASSUMED_OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")
ASSUMED_SOURCE = ("assumed: datasheet profile, compute efficiency 0.40-0.50, link efficiency 0.6-0.9, "
                  "ring overlap 0.5-1 (bench/cost/interval.py)")
# a GPU datasheet profile prices each kernel at its table's rate: the same time factors on the kernels
ASSUMED_KERNEL_SOURCE = ("assumed: datasheet profile, kernel times x 0.9-1.125 of their rate tables', link efficiency "
                         "0.6-0.9, ring overlap 0.5-1 (bench/cost/interval.py)")


def with_assumed_spread(profile: Profile) -> tuple[Profile, str]:
    """(profile whose knobs have ranges, where the ranges come from): a calibrated profile as it is
    (its measured spread), a datasheet one with the assumed ranges above."""
    if knobs(profile):
        return profile, f"measured: calibration spread of {profile.name}"
    cal = {"compute_range": list(ASSUMED_COMPUTE), "link_range": {op: list(ASSUMED_LINK) for op in ASSUMED_OPS}}
    if profile.ring_overlap:
        cal["overlap_fractions"] = [profile.ring_overlap * f for f in ASSUMED_OVERLAP]
    from dspbench.cost.hardware import prices_by_kernel
    return replace(profile, calibration=cal), ASSUMED_KERNEL_SOURCE if prices_by_kernel(profile) else ASSUMED_SOURCE


def shared_corners(profile: Profile) -> list[Profile]:
    """The profile at the four corners of (compute, communication) ranges, each at its low or high
    end (communication low with the overlap high): what two configurations priced on the same
    cluster share, so their ratio is taken corner by corner (`dspbench plan`). [] without ranges."""
    k = knobs(profile)
    if not k:
        return []
    comm = [n for n in k if n.startswith("op:")]
    out = []
    for c in (0, 1):
        for m in (0, 1):
            ends = {"compute": c, **{n: m for n in comm}}
            if "overlap" in k:
                ends["overlap"] = 1 - m
            out.append(at(profile, ends))
    return out
