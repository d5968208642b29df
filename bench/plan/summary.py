"""Plan checks of several shapes in one table: per folder (plan.json + the emitted sweep's results/),
plan's top choice, the measured fastest, the gap, Kendall's tau, and how noisy the measurement was;
then the bars over all of them: top choice fastest or within 5% with mean tau (issue 25's), and tau
on every shape (issue 41's, stricter).
    python -m dspbench.plan.summary FOLDER [FOLDER ...] [--md OUT.md]
Every number is recomputed from the records (plan.check), never copied from an earlier check.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from dspbench.plan.ceiling import MAX_REPEATS, repeats_for
from dspbench.plan.check import compare, is_measured
from dspbench.plan.placement import placed
from dspbench.records.io import read_dir

WITHIN = 0.05        # the bar: plan's top choice measured fastest, or within 5% of it
TAU_BAR = 0.8        # the bar: mean Kendall's tau-b over the shapes (issue 25); issue 41's: on every shape
NOISY = 0.60         # a row whose repeats spread more than this (micro/noise.py's bound) is flagged


def shape_row(folder: Path) -> dict:
    doc = json.loads((folder / "plan.json").read_text())
    result = compare(doc, read_dir(folder / "results")[0], placed(folder / "results", is_measured))
    rows = result["rows"]
    spreads = [(x["measured_max"] - x["measured_min"]) / x["measured"] for x in rows]
    return {"folder": folder.name, "hardware": doc["hardware"], "workload": doc["workload"],
            "top": result.get("top"), "fastest": result.get("fastest"), "gap": result.get("gap"),
            "tau": result.get("kendall_tau"), "tau_a": result.get("kendall_tau_a"),
            "repeat_tau": result.get("repeat_tau"), "single_repeat_tau": result.get("single_repeat_tau"),
            "ceiling_tau": result.get("ceiling_tau"), "noise_sd": result.get("noise_sd"),
            "repeats_for_bar": repeats_for(rows, TAU_BAR) if rows else None,
            "measured": len(rows), "ranked": len(doc["rows"]), "pairs_apart": result.get("pairs_apart", [0, 0]),
            "worst_spread": max(spreads, default=None), "noisy_rows": sum(s > NOISY for s in spreads),
            "first_place": _first_place(result.get("place_effect"))}


def _first_place(effect: dict | None) -> float | None:
    """The first configuration of a job against the mean place (plan/placement.py); None: not separable."""
    return None if effect is None else effect["ratio"][0] - 1


def verdict(rows: list[dict]) -> dict:
    scored = [r for r in rows if r["tau"] is not None]
    return {"shapes": len(rows), "within": sum(r["gap"] is not None and r["gap"] <= WITHIN for r in rows),
            "mean_tau": statistics.fmean(r["tau"] for r in scored) if scored else None,
            "shapes_at_tau_bar": sum(r["tau"] >= TAU_BAR for r in scored),
            "mean_tau_a": statistics.fmean(r["tau_a"] for r in scored) if scored else None,
            "mean_repeat_tau": _mean(r["repeat_tau"] for r in rows),
            "mean_single_repeat_tau": _mean(r["single_repeat_tau"] for r in rows),
            "mean_ceiling_tau": _mean(r["ceiling_tau"] for r in rows),
            "pairs_apart": [sum(r["pairs_apart"][0] for r in rows), sum(r["pairs_apart"][1] for r in rows)]}


def _mean(values) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def markdown(rows: list[dict]) -> str:
    out = ["| folder | hardware profile | plan's top choice | measured fastest | gap | tau-b | tau-a "
           "| tau-b, one repeat | repeats' tau-b | noise per repeat | ceiling tau-b | repeats for a ceiling >= 0.8 | pairs >= 10% apart in order | rows measured (of ranked) | worst spread | rows spread > 60% | first in its job |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['folder']} | {r['hardware']} | {r['top']} | {r['fastest']} | {_pct(r['gap'])} | "
            f"{_num(r['tau'])} | {_num(r['tau_a'])} | {_num(r['single_repeat_tau'])} | {_num(r['repeat_tau'])} | "
            f"{_pct(r['noise_sd'], sign=False, digits=1)} | {_num(r['ceiling_tau'])} | {_repeats(r['repeats_for_bar'])} | {r['pairs_apart'][0]} of {r['pairs_apart'][1]} | {r['measured']} ({r['ranked']}) | "
            f"{_pct(r['worst_spread'], sign=False)} | {r['noisy_rows']} | {_place(r['first_place'])} |" for r in rows]
    v = verdict(rows)
    met = v["within"] == v["shapes"] and v["mean_tau"] is not None and v["mean_tau"] >= TAU_BAR
    out += ["", f"shapes: {v['shapes']}; top choice measured fastest or within {WITHIN:.0%}: {v['within']} of "
            f"{v['shapes']}; mean tau-b {_num(v['mean_tau'])} (tau-a {_num(v['mean_tau_a'])}); one repeat at a "
            f"time: the prediction {_num(v['mean_single_repeat_tau'])}, another repeat {_num(v['mean_repeat_tau'])}; "
            f"pairs predicted >= 10% apart in the measured order: {v['pairs_apart'][0]} of {v['pairs_apart'][1]}; "
            f"the bar (every shape within {WITHIN:.0%}, mean tau >= {TAU_BAR}): {'met' if met else 'NOT met'}; "
            f"tau-b >= {TAU_BAR} on every shape: {v['shapes_at_tau_bar']} of {v['shapes']} "
            f"({'met' if v['within'] == v['shapes_at_tau_bar'] == v['shapes'] else 'NOT met'}); "
            f"noise ceiling (a predictor that knew the true order, against these measurements): mean tau-b "
            f"{_num(v['mean_ceiling_tau'])}"]
    return "\n".join(out) + "\n"


def _num(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _pct(v, sign: bool = True, digits: int = 0) -> str:
    return "-" if v is None else (f"{v:+.1%}" if sign else f"{v:.{digits}%}")


def _place(v) -> str:
    return "not separable" if v is None else f"{v:+.1%}"


def _repeats(n) -> str:
    return f"> {MAX_REPEATS}" if n is None else str(n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", type=Path, nargs="+", help="folders holding plan.json and results/")
    ap.add_argument("--md", type=Path, default=None, help="also write the table here")
    a = ap.parse_args(argv)
    missing = [str(f) for f in a.folders if not (f / "plan.json").is_file() or not (f / "results").is_dir()]
    if missing:
        ap.error(f"no plan.json or results/ in: {', '.join(missing)}")
    text = markdown([shape_row(f) for f in a.folders])
    print(text, end="")
    if a.md:
        a.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
