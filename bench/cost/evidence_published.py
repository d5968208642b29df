"""Predicted against published, point by point: docs/gpu-evidence.md's published section.

Each published record (results/published/*.jsonl, written by `dspbench evidence add`) is predicted at
its own configuration on its own hardware profile, eager or compiled as it ran, and its time compared
like with like: an end-to-end latency with the whole pipeline's prediction (text encode, denoise, VAE
decode: bench/cost/pipeline.py), a DiT-only time with the denoising alone. The tuning points and the
held-out points (each record's `published.split`, decided before any term was tuned) are tabled
apart, each group with its within-20% count and its ordering check. A source whose video size is
unstated (`ratios_only`) is compared by its latency relative to its own 1-GPU row, never absolutely.
"""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "results" / "published"
BEGIN, END = "<!-- generated: python -m dspbench.cost.evidence (published) -->", "<!-- end generated (published) -->"
WITHIN, ORDER_GAP = 0.2, 0.05     # the bars: latency within 20%; orderings of configurations > 5% apart
GROUPS = (("tune", "Tuning points"), ("holdout", "Held-out points"))
# a published hardware profile -> the profile whose terms are fitted to its tuning points (bench/cost/tune.py)
TUNED = {"h100-ib": "h100-ib-tuned"}


def published_points(folder: Path = PUBLISHED) -> list[dict]:
    from dspbench.records.io import read_records
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        recs, problems = read_records(path)
        if problems:
            raise ValueError("; ".join(problems))
        out += [r for r in recs if r["source"] == "published"]
    return out


def predicted_point(rec: dict, profile=None) -> dict:
    """The cost model at the record's configuration, on its hardware profile unless another is given:
    seconds like the published time, memory per GPU."""
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.model import predict
    from dspbench.cost.pipeline import stage_seconds
    from dspbench.cost.published import run_config
    from dspbench.models import get_config
    cfg, profile = run_config(_point(rec)), profile or load_profile(rec["hardware_profile"])
    p = predict(cfg, profile, rec["compiled"])
    end_to_end = stage_seconds(cfg, get_config(cfg.model), profile, p.step_s)["seconds"]["total"]
    return {"pred_s": end_to_end if rec["time_includes"] == "end_to_end" else p.step_s,
            "pred_mem_gb": p.mem["peak"] / 1e9, "fits": p.fits}


def _point(rec: dict) -> dict:
    """The source-file keys run_config reads, back from a record."""
    return {"method": rec["method"], "model_ref": rec["model"], "frames": rec["frames"], "spatial": rec["spatial"],
            "gpus": rec["gpus"], "sp": rec["sp"], "dtype": rec["dtype"], "shard": rec["shard"],
            "steps": rec["sample_steps"], "cfg": rec["cfg"], "ulysses_degree": rec.get("ulysses_degree", 0)}


def table(folder: Path = PUBLISHED) -> list[dict]:
    """One row per published point, with its prediction (its hardware's profile, and where one exists the
    profile tuned on the tuning points, bench/cost/tune.py) and its speed-up from its source's 1-GPU row."""
    from dspbench.cost.hardware import load_profile
    rows = []
    for rec in published_points(folder):
        pub = rec["published"]
        rows.append({"source": _source(pub["citation"]), "citation": pub["citation"], "model": pub["model"],
                     "approximated": rec["model_approximated"], "configuration": pub["configuration"],
                     "software": pub["software"], "gpus": rec["gpus"], "hardware": rec["hardware_profile"],
                     "split": pub["split"], "ratios_only": pub["ratios_only"], "published_s": pub["latency_s"],
                     "published_mem_gb": pub.get("memory_gb"), **predicted_point(rec)})
        tuned = TUNED.get(rec["hardware_profile"])
        rows[-1].update(tuned=tuned, tuned_s=predicted_point(rec, load_profile(tuned))["pred_s"] if tuned else None)
    for r in rows:
        base = next((b for b in rows if b["citation"] == r["citation"] and b["software"] == r["software"]
                     and b["gpus"] == 1), None)
        r["speedup_pub"] = base["published_s"] / r["published_s"] if base else None
        r["speedup_pred"] = base["pred_s"] / r["pred_s"] if base else None
        # absolute where the source states the workload; else latency relative to its own 1-GPU row
        # (that row itself is the base, 1 by construction: not judged)
        relative = r["speedup_pub"] / r["speedup_pred"] if base and base is not r else None
        r["ratio"] = relative if r["ratios_only"] else r["pred_s"] / r["published_s"]
        r["tuned_ratio"] = r["tuned_s"] / r["published_s"] if r["tuned_s"] and not r["ratios_only"] else None
    return rows


def _source(citation: str) -> str:
    """A short name: the document the citation names ('docs/performance/flux.md', 'VideoSys README')."""
    head = citation.split(":")[0]
    return head.split(", ")[-1] if ", " in head else head.split(" (")[0]


def orderings(rows: list[dict], pred: str = "pred_s") -> tuple[int, list[str]]:
    """(pairs checked, the ones predicted the wrong way): two configurations of one source, software and
    GPU count whose published times differ by more than ORDER_GAP; the faster must be predicted faster
    (by `pred`: the hardware profile's prediction, or 'tuned_s')."""
    pairs, wrong = 0, []
    for a, b in combinations(rows, 2):
        if (a["citation"], a["software"], a["gpus"]) != (b["citation"], b["software"], b["gpus"]):
            continue
        fast, slow = (a, b) if a["published_s"] < b["published_s"] else (b, a)
        if slow["published_s"] / fast["published_s"] - 1 <= ORDER_GAP:
            continue
        pairs += 1
        if fast[pred] >= slow[pred]:
            wrong.append(f"{fast['model']} {fast['software']} {fast['gpus']} GPUs: {fast['configuration']} "
                         f"published faster than {slow['configuration']}, predicted slower")
    return pairs, wrong


def _fmt(x, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def group_markdown(rows: list[dict], title: str) -> list[str]:
    lines = [f"### {title}", "",
             "| source | model | hardware | software | configuration | GPUs | published (s) | predicted (s) | "
             "predicted / published | speed-up from 1 GPU, published | predicted | memory per GPU (GB), published | predicted | "
             "predicted, tuned profile (s) | tuned / published |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = _fmt(r["ratio"]) + (" (relative to 1 GPU)" if r["ratios_only"] else "")
        model = r["model"] + (f" ({r['approximated']})" if r["approximated"] else "")
        lines.append(f"| {r['source']} | {model} | {r['hardware']} | {r['software']} | {r['configuration']} | "
                     f"{r['gpus']} | {r['published_s']:.2f} | {r['pred_s']:.2f} | {ratio} | "
                     f"{_fmt(r['speedup_pub'])} | {_fmt(r['speedup_pred'])} | {_fmt(r['published_mem_gb'], '.1f')} | "
                     f"{_fmt(r['pred_mem_gb'] if r['published_mem_gb'] else None, '.1f')} | "
                     f"{_fmt(r['tuned_s'])} | {_fmt(r['tuned_ratio'])} |")
    return lines + ["", *summary(rows), ""]


def summary(rows: list[dict]) -> list[str]:
    judged = [r for r in rows if r["ratio"] is not None]
    within = sum(abs(r["ratio"] - 1) <= WITHIN for r in judged)
    speed = [r for r in rows if r["gpus"] > 1 and r["speedup_pub"]]
    speed_ok = sum(abs(r["speedup_pred"] / r["speedup_pub"] - 1) <= 0.1 for r in speed)
    mem = [r for r in rows if r["published_mem_gb"]]
    mem_ok = sum(abs(r["pred_mem_gb"] / r["published_mem_gb"] - 1) <= WITHIN for r in mem)
    pairs, wrong = orderings(rows)
    tuned = [r for r in rows if r["tuned_ratio"] is not None]
    t_within = sum(abs(r["tuned_ratio"] - 1) <= WITHIN for r in tuned)
    t_pairs, t_wrong = orderings([r for r in rows if r["tuned_s"]], "tuned_s")
    out = [f"Within 20% of the published time: {within} of {len(judged)} "
           f"(a ratios-only source: its latency relative to its own 1-GPU row, that row not counted). "
           f"Speed-up from 1 GPU within 10%: {speed_ok} of {len(speed)}. Memory per GPU within 20%: {mem_ok} of {len(mem)}. "
           f"Ordering (same source, software and GPU count, published times more than 5% apart): "
           f"{pairs - len(wrong)} of {pairs} pairs predicted the right way round."]
    out += [f"- wrong way round: {w}" for w in wrong]
    if tuned:
        names = ", ".join(sorted({r["tuned"] for r in tuned}))
        out += ["", f"With the tuned profile ({names}), on the {len(tuned)} rows it applies to: within 20% "
                    f"{t_within} of {len(tuned)}; ordering {t_pairs - len(t_wrong)} of {t_pairs} pairs the right way round."]
        out += [f"- wrong way round (tuned): {w}" for w in t_wrong]
    return out


def markdown(rows: list[dict]) -> str:
    lines = [BEGIN, ""]
    for split, title in GROUPS:
        lines += group_markdown([r for r in rows if r["split"] == split], title)
    cross, wrong = orderings(rows)
    inner = sum(orderings([r for r in rows if r["split"] == s])[0] for s, _ in GROUPS)
    lines += [f"Pairs across the two groups (a tuning point against a held-out one at one GPU count): "
              f"{cross - inner}.", "", END]
    return "\n".join(lines)


def render(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    return head + markdown(table()) + rest.split(END, 1)[1]

