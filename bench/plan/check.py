"""A plan against its measurement: the plan document (`plan --json` or `--report`'s plan.json) and
the records of the sweep it emitted, matched by run_id. Per shape: plan's top choice among the
measured rows, the measured fastest, the measured gap between them, and Kendall's tau (tau-b, ties
in the prediction left out; tau-a beside it) between the predicted and the measured order.
    python -m dspbench.plan.check PLAN.json RESULTS_DIR [--md OUT.md] [--json OUT.json]
A configuration measured several times (the sweep's `repeats`, one run_id each) is matched at every
repeat and scored by its median. The measurement's noise ceiling (plan/ceiling.py) is set beside
the tau: what a predictor that knew the true order would expect against repeats this noisy.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from dspbench.plan.ceiling import ceiling_tau, noise_sd
from dspbench.plan.placement import place_effect, place_line, placed
from dspbench.plan.tau import kendall_tau, kendall_tau_a
from dspbench.records.config import RunConfig
from dspbench.records.io import read_dir

LATENCY = "seconds per video"


def measured_score(rec: dict, metric: str) -> float:
    """The plan's score measured: samples/s, or 1 / step time (seconds per video)."""
    return 1 / rec["step_time_median_s"] if metric == LATENCY else rec["samples_per_s"]


def plan_run_id(rec: dict) -> str:
    """The run_id a record has at repeat 0: a plan row's configuration is ranked at repeat 0, and a
    sweep with `repeats = N` measures it N times under N run_ids (the repeat index is in the run_id)."""
    if not rec.get("repeat"):
        return rec["run_id"]
    from dataclasses import fields, replace
    known = {f.name for f in fields(RunConfig)}
    return replace(RunConfig(**{k: v for k, v in rec.items() if k in known}), repeat=0).run_id()


def measured_comm_s(rec: dict) -> float | None:
    """The instrumented step's communication time (the ledger's per-op seconds, summed), if recorded."""
    t = rec.get("comm_time_s")
    return sum(t.values()) if isinstance(t, dict) else None


def is_measured(rec: dict) -> bool:
    return rec.get("status") == "ok" and rec.get("source", "measured") == "measured"


def compare(doc: dict, records: list[dict], places: list[tuple[dict, int]] | None = None) -> dict:
    """places: (record, place in its job) from `placement.placed`, for the place diagnosis."""
    by_id = {}
    for rec in records:
        if is_measured(rec):
            by_id.setdefault(plan_run_id(rec), []).append(rec)
    rows = []
    for r in doc["rows"]:
        recs = by_id.get(RunConfig(**r["config"]).run_id())
        if recs:
            recs = sorted(recs, key=lambda x: measured_score(x, doc["metric"]))
            scores = [measured_score(x, doc["metric"]) for x in recs]
            mid = recs[len(recs) // 2]
            rows.append({"rank": r["rank"], "config": _describe(r), "predicted": r["score"],
                         "predicted_low": r["score_low"], "predicted_high": r["score_high"],
                         "measured": scores[len(scores) // 2], "measured_min": scores[0], "measured_max": scores[-1],
                         "repeats": len(scores),
                         "by_repeat": {int(x.get("repeat") or 0): measured_score(x, doc["metric"]) for x in recs},
                         "predicted_step_s": r.get("step_time_s"), "predicted_compute_s": r.get("compute_s"),
                         "predicted_comm_s": r.get("comm_s"), "predicted_exposed_comm_s": r.get("exposed_comm_s"),
                         "measured_step_s": mid.get("step_time_median_s"), "measured_comm_s": measured_comm_s(mid)})
    if not rows:
        return {"rows": [], "note": "no measured record matches a ranked row"}
    top = rows[0]
    fastest = max(rows, key=lambda x: x["measured"])
    out = {"rows": rows, "top": top["config"], "fastest": fastest["config"],
           "gap": fastest["measured"] / top["measured"] - 1,
           "kendall_tau": kendall_tau([x["predicted"] for x in rows], [x["measured"] for x in rows]),
           "kendall_tau_a": kendall_tau_a([x["predicted"] for x in rows], [x["measured"] for x in rows]),
           "repeat_tau": repeat_tau(rows), "single_repeat_tau": single_repeat_tau(rows),
           "pairs_apart": pairs_apart(rows), "noise_sd": noise_sd(rows), "ceiling_tau": ceiling_tau(rows),
           "metric": doc["metric"], "measured": len(rows), "ranked": len(doc["rows"])}
    if places is not None:      # only where the records' files were read: no claim without them
        out["place_effect"] = _place_effect(doc, places)
    return out


def _place_effect(doc: dict, places: list[tuple[dict, int]]) -> dict | None:
    ranked = {RunConfig(**r["config"]).run_id() for r in doc["rows"]}
    scores = [(plan_run_id(rec), place, measured_score(rec, doc["metric"])) for rec, place in places
              if plan_run_id(rec) in ranked]
    return place_effect(scores)


APART = 0.10      # rows predicted this far apart (relative) are a call the plan makes, not a tie


def pairs_apart(rows: list[dict]) -> list[int]:
    """[in the measured order, of] the pairs of rows whose predictions differ by APART or more."""
    agree = total = 0
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            hi, lo = (a, b) if a["predicted"] >= b["predicted"] else (b, a)
            if hi["predicted"] >= lo["predicted"] * (1 + APART):
                total += 1
                agree += hi["measured"] > lo["measured"]
    return [agree, total]


def _repeats(rows: list[dict]) -> list[int]:
    return sorted({k for x in rows for k in x["by_repeat"]})


def single_repeat_tau(rows: list[dict]) -> float | None:
    """The prediction against one repeat at a time (tau-b, averaged over the repeats): like with like
    beside `repeat_tau`, which also compares single repeats."""
    taus = [kendall_tau([x["predicted"] for x in rows if k in x["by_repeat"]],
                        [x["by_repeat"][k] for x in rows if k in x["by_repeat"]]) for k in _repeats(rows)]
    taus = [t for t in taus if t is not None]
    return sum(taus) / len(taus) if taus else None


def repeat_tau(rows: list[dict]) -> float | None:
    """The measurement against itself: Kendall's tau-b between the orders two repeats give the rows,
    averaged over every pair of repeats: one repeat's order against another's, the rough bound beside
    the prediction's tau against one repeat (plan/ceiling.py estimates the bound for the median of the
    repeats; None with fewer than 2 repeats)."""
    repeats = _repeats(rows)
    taus = []
    for i, a in enumerate(repeats):
        for b in repeats[i + 1:]:
            both = [x for x in rows if a in x["by_repeat"] and b in x["by_repeat"]]
            t = kendall_tau([x["by_repeat"][a] for x in both], [x["by_repeat"][b] for x in both])
            if t is not None:
                taus.append(t)
    return sum(taus) / len(taus) if taus else None


def _describe(r: dict) -> str:
    from dspbench.plan.rank import describe
    return describe(r) + (f", shard {r['shard'][0]}" if r["sp"] > 1 and len(r["shard"]) > 1 else "")


def markdown(doc: dict, result: dict) -> str:
    unit = "samples/s" if doc["metric"] != LATENCY else "1/s (1 / latency)"
    out = [f"## {doc['workload']} on {doc['request']['gpus']} x {doc['hardware']}", "",
           f"`{doc.get('command', '')}`", "", f"predicted verdict: {doc['verdict']}", ""]
    if not result["rows"]:
        return "\n".join(out + [result["note"]]) + "\n"
    out += [f"plan's top choice (measured rows): {result['top']}; measured fastest: {result['fastest']}; "
            f"measured gap {result['gap']:+.1%}; Kendall's tau-b {_tau(result['kendall_tau'])} "
            f"(tau-a {_tau(result.get('kendall_tau_a'))}; against one repeat at a time "
            f"{_tau(result.get('single_repeat_tau'))}, the repeats against each other {_tau(result.get('repeat_tau'))}) "
            f"over {result['measured']} measured of {result['ranked']} ranked", "",
            _ceiling_line(result), "",
            *([place_line(result["place_effect"]), ""] if "place_effect" in result else []),
            f"| plan rank | configuration | predicted {unit} [interval] | measured {unit} median [min-max] (n) "
            "| pred/meas | predicted step s (compute + comm, exposed) | measured step s (instrumented comm) |",
            "|---|---|---|---|---|---|---|"]
    out += [f"| {x['rank']} | {x['config']} | {x['predicted']:.3g} "
            f"[{x['predicted_low']:.3g}-{x['predicted_high']:.3g}] | "
            f"{x['measured']:.3g} [{x['measured_min']:.3g}-{x['measured_max']:.3g}] (n={x['repeats']}) | "
            f"{x['predicted'] / x['measured']:.2f} | {_stage(x)} | {_s(x['measured_step_s'])} "
            f"({_s(x['measured_comm_s'])}) |" for x in result["rows"]]
    return "\n".join(out) + "\n"


def _ceiling_line(result: dict) -> str:
    if result.get("ceiling_tau") is None:
        return "noise ceiling: - (fewer than 2 rows measured twice)"
    return (f"noise ceiling: a predictor that knew every row's true score would expect tau-b "
            f"{result['ceiling_tau']:.2f} against this measurement (its repeats differ by {result['noise_sd']:.1%} "
            "per repeat, pooled; plan/ceiling.py)")


def _s(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _stage(x: dict) -> str:
    return (f"{_s(x['predicted_step_s'])} ({_s(x['predicted_compute_s'])} + {_s(x['predicted_comm_s'])}, "
            f"{_s(x['predicted_exposed_comm_s'])})")


def _tau(t: float | None) -> str:
    return "-" if t is None else f"{t:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plan", type=Path, help="the plan document (plan --json > FILE, or --report's plan.json)")
    ap.add_argument("results", type=Path, help="the emitted sweep's results folder")
    ap.add_argument("--md", type=Path, default=None, help="also write the comparison as markdown here")
    ap.add_argument("--json", type=Path, default=None, help="also write the comparison as JSON here")
    a = ap.parse_args(argv)
    doc = json.loads(a.plan.read_text())
    records, _ = read_dir(a.results)
    result = compare(doc, records, placed(a.results, is_measured))
    text = markdown(doc, result)
    print(text, end="")
    if a.md:
        a.md.write_text(text)
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
