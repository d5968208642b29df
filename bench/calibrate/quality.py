"""How good a calibration is: the spread of its repeated measurements and the machine's load.

Every measurement is repeated (collectives: `--iters` per size; compute: `--compute-iters` and a
quick re-check after everything else; the ring-overlap probe: `--overlap-repeats`). Per term the
profile stores the measured range relative to the median it uses, [min/median, max/median]
([calibration] in the profile, per collective also per size; bench/cost/interval.py turns it into
predicted intervals), and:
- spread = relative interquartile range (q3 - q1) / median per measurement (robust to one
  outlier, which the range, and so the interval, still carries); a collective's spread is that of
  one call at every calibrated size (ladder_spreads: sizes weigh by their time, as in a step);
- warnings: load average (1 min) above the cores (another job is computing: compute is what is
  left of the machine), a spread above WARN_SPREAD, compute re-check off by more than RECHECK_TOL;
- refusal: a worst spread above MAX_SPREAD means an interval wider than +-MAX_SPREAD/2 on every
  prediction (it cannot tell methods 15% apart): `calibrate` writes no profile unless `--force`.
"""
from __future__ import annotations

import os
import statistics

WARN_SPREAD = 0.2      # above this a term's measurements differ by more than 20% of their median
MAX_SPREAD = 0.6       # above this a prediction's interval spans more than +-30%: refuse (unless --force)
RECHECK_TOL = 0.2      # compute re-measured at the end differs by more than 20%: the machine changed


def load() -> dict:
    one, five, _ = os.getloadavg()
    return {"loadavg_1m": round(one, 2), "loadavg_5m": round(five, 2), "cores": os.cpu_count() or 1}


def rel_range(samples: list[float]) -> list[float]:
    """[min/median, max/median] of repeated times (1, 1 for one sample)."""
    med = statistics.median(samples)
    return [min(samples) / med, max(samples) / med] if med > 0 else [1.0, 1.0]


def spread(samples: list[float]) -> float:
    """Relative interquartile range, (q3 - q1) / median: how far the median the profile uses can be
    trusted. One outlier among the repeats (a TCP retransmit, a descheduled rank) moves the range,
    which the intervals carry, but not this."""
    med = statistics.median(samples)
    if len(samples) < 2 or med <= 0:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return (q3 - q1) / med


def ladder_spreads(rows: list[dict]) -> dict[str, float]:
    """Per op, the spread of one call at every calibrated size: sample i of the ladder is the sum
    over sizes (and tiers) of each size's sample i. Each size weighs by its time, as in a step:
    a 4 KiB call that takes 1 ms in one sample and 3 ms in the next (the scheduler, 4 ranks on 2
    cores) is 200% of itself but a few ms of a ladder, and of a step, that takes hundreds. The
    per-size ranges stay in the profile (link_range_by_size) and widen the intervals of
    predictions made of small calls (bench/cost/interval.py)."""
    ladders: dict[str, list[float]] = {}
    for r in rows:
        times = r["times_s"]
        acc = ladders.setdefault(r["op"], [0.0] * len(times))
        for i, t in enumerate(times[:len(acc)]):
            acc[i] += t
        del acc[len(times):]
    return {op: spread(v) for op, v in ladders.items()}


def assess(result: dict, before: dict, after: dict) -> dict:
    """The [calibration] table of a profile: load, ranges per term, worst spread, warnings."""
    comp = result["compute"]
    comp_times = comp["fwd_bwd_times_s"] + [comp["recheck_s"]]
    link, by_size = {}, {}
    link_spread = ladder_spreads(result["collectives"])
    for r in result["collectives"]:
        lo, hi = rel_range(r["times_s"])
        old = link.get(r["op"], [1.0, 1.0])
        link[r["op"]] = [min(old[0], lo), max(old[1], hi)]
        by_size.setdefault(r["op"], []).append([r["size"], lo, hi])
    ov = result.get("overlap")
    q = {**{k: v for k, v in before.items() if k != "cores"}, "cores": before["cores"],
         "loadavg_1m_after": after["loadavg_1m"], "compute_range": rel_range(comp_times),
         "compute_recheck": comp["recheck_s"] / comp["fwd_bwd_s"], "link_range": link,
         "link_range_by_size": by_size,
         "overlap_fractions": ov["fractions"] if ov else [],
         "overlap_probe_fractions": ov["probe_fractions"] if ov else []}
    spreads = {"compute": spread(comp_times), **link_spread}
    q["worst_spread"], q["worst_term"] = max((v, k) for k, v in spreads.items())
    q["warnings"] = warnings(q, spreads)
    return q


def warnings(q: dict, spreads: dict) -> list[str]:
    out = []
    # Before the ranks start only: afterwards the load average counts the calibration's own ranks
    # (4 busy ranks on 2 cores read 2+ on an idle machine); a change during it shows in the re-check.
    if q["loadavg_1m"] > q["cores"]:
        out.append(f"machine loaded: load average {q['loadavg_1m']:.1f} on {q['cores']} cores before calibrating "
                   "(compute measured is what other jobs left; it will differ when they stop)")
    for term, s in sorted(spreads.items()):
        if s > WARN_SPREAD:
            out.append(f"{term}: repeated measurements' interquartile range {s:.0%} of their median "
                       f"(> {WARN_SPREAD:.0%})")
    if abs(q["compute_recheck"] - 1) > RECHECK_TOL:
        out.append(f"compute re-checked at the end took {q['compute_recheck']:.2f}x the first measurement "
                   f"(> {RECHECK_TOL:.0%} off): the machine changed during calibration")
    return out


def meaningless(q: dict) -> str | None:
    """Why a profile with this quality must not be written (None if it may)."""
    if q["worst_spread"] > MAX_SPREAD:
        return (f"{q['worst_term']} spread {q['worst_spread']:.0%} > {MAX_SPREAD:.0%}: predictions from this "
                f"profile would carry intervals of more than +-{MAX_SPREAD / 2:.0%}")
    return None
