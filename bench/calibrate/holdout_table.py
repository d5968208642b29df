"""The held-out validation's table and summary (pure: rows in, text out; tests/test_holdout.py).

A row is one measured launch: (rate, model, T, S, method, round) with its prediction (point and
interval) and the machine's load average when it started. Ratios baseline/DSP pair each launch with
DSP's launch of the same round (same model, shape, rate), so a machine's slow drift cancels.
"""
from __future__ import annotations

import statistics

TOL = 0.15


def _key(r: dict) -> tuple:
    return (r["rate"], r["model"], r["T"], r["S"], r["round"])


def _inside(x, lo, hi) -> bool | None:
    return None if x is None or lo is None or hi is None else lo <= x <= hi


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each row gains the measured ratio to its round's DSP launch, the errors and the coverage."""
    dsp = {_key(r): r["measured"] for r in rows if r["method"] == "dsp"}
    for r in rows:
        m, d = r["measured"], dsp.get(_key(r))
        r["step_err"] = r["pred"] / m - 1 if m else None
        r["step_covered"] = _inside(m, r["pred_low"], r["pred_high"])
        r["ratio_meas"] = m / d if (m and d and r["method"] != "dsp") else None
        ok = r["ratio_meas"] is not None and r["ratio_pred"] is not None
        r["ratio_err"] = r["ratio_pred"] / r["ratio_meas"] - 1 if ok else None
        r["ratio_within"] = abs(r["ratio_err"]) <= TOL if ok else None
        r["ratio_covered"] = _inside(r["ratio_meas"], r["ratio_low"], r["ratio_high"])
    return rows


def _frac(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    return f"{sum(xs)}/{len(xs)} ({sum(xs) / len(xs):.0%})" if xs else "0/0"


def summary(rows: list[dict]) -> str:
    ratio = [r for r in rows if r["method"] != "dsp"]
    loads = [r["loadavg_1m"] for r in rows]
    lines = [f"- baseline/DSP ratios within {TOL:.0%} of the prediction: {_frac([r['ratio_within'] for r in ratio])}",
             f"- ratio interval covers the measured ratio: {_frac([r['ratio_covered'] for r in ratio])}",
             f"- step time within {TOL:.0%}: {_frac([abs(r['step_err']) <= TOL if r['step_err'] is not None else None for r in rows])}",
             f"- step-time interval covers the measured step: {_frac([r['step_covered'] for r in rows])}",
             f"- failed launches: {sum(r['measured'] is None for r in rows)} of {len(rows)}"]
    if loads:
        lines.append(f"- load average (1 min) at each launch: min {min(loads):.1f}, median "
                     f"{statistics.median(loads):.1f}, max {max(loads):.1f}")
    spread = _round_spread(ratio)
    if spread:
        lines.append(f"- measured ratio from round to round, (max - min) / median per point over its rounds: median "
                     f"{statistics.median(spread):.0%}, max {max(spread):.0%} over {len(spread)} points with 2+ rounds "
                     f"(the measurement's own noise: no prediction can agree more closely than this)")
    for m in sorted({r["method"] for r in ratio}):
        sel = [r for r in ratio if r["method"] == m]
        errs = [r["ratio_err"] for r in sel if r["ratio_err"] is not None]
        span = f", error {min(errs):+.0%} to {max(errs):+.0%}" if errs else ""
        lines.append(f"- {m}/dsp: within {TOL:.0%} {_frac([r['ratio_within'] for r in sel])}, covered "
                     f"{_frac([r['ratio_covered'] for r in sel])}{span}")
    return "\n".join(lines)


def _round_spread(rows: list[dict]) -> list[float]:
    """Per (rate, model, shape, method): (max - min) / median of its measured ratios over rounds."""
    by: dict[tuple, list[float]] = {}
    for r in rows:
        if r["ratio_meas"] is not None:
            by.setdefault((r["rate"], r["model"], r["T"], r["S"], r["method"]), []).append(r["ratio_meas"])
    return [(max(v) - min(v)) / statistics.median(v) for v in by.values() if len(v) >= 2]


def _f(x, fmt=".3f") -> str:
    return "-" if x is None else format(x, fmt)


def points_table(rows: list[dict]) -> str:
    head = ("| rate | model | T x S | method | round | load | predicted step (s) [interval] | measured step (s) | "
            "step err | in interval | ratio predicted [interval] | ratio measured | ratio err | within 15% | covered |")
    lines = [head, "|" + "---|" * 15]
    yn = lambda b: "-" if b is None else ("yes" if b else "**no**")
    for r in sorted(rows, key=lambda r: (r["rate"], r["model"], r["T"], r["S"], r["method"], r["round"])):
        pct = lambda x: "-" if x is None else f"{x * 100:+.0f}%"
        lines.append(
            f"| {r['rate']} | {r['model']} | {r['T']} x {r['S']} | {r['method']} | {r['round']} | {r['loadavg_1m']:.1f} | "
            f"{_f(r['pred'])} [{_f(r['pred_low'])}-{_f(r['pred_high'])}] | {_f(r['measured'])} | {pct(r['step_err'])} | "
            f"{yn(r['step_covered'])} | {_f(r['ratio_pred'], '.2f')} [{_f(r['ratio_low'], '.2f')}-"
            f"{_f(r['ratio_high'], '.2f')}] | {_f(r['ratio_meas'], '.2f')} | {pct(r['ratio_err'])} | "
            f"{yn(r['ratio_within'])} | {yn(r['ratio_covered'])} |")
    return "\n".join(lines)
