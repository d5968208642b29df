"""Paper-scale predictions: the cost model on datasheet profiles, beside the paper's numbers.

Nothing here is fit to the paper: the profiles hold datasheet numbers and stated assumptions
(bench/cost/profiles/*.toml). Every table is built as rows first (`tables()`), written as data
for reports (reports/paper_data/predictions.json: read without importing bench) and as markdown
(docs/paper-predictions.md, bench/cost/paper_text.py); tests/test_paper_predictions.py fails when
either drifts from what this module generates.
    python -m dspbench.cost.paper [--out results/predicted/paper.jsonl] [--md ...] [--json ...]
"""
from __future__ import annotations

import argparse
import csv
import json
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

from dspbench.cost import paper_full3d, paper_readings
from dspbench.cost.autosp import resolved
from dspbench.cost.consistency import MFU_PUBLISHED_MAX, implied_busbw, implied_mfu, predicted_ratio, verdict
from dspbench.cost.hardware import load_profile
from dspbench.cost.predict import predicted_record
from dspbench.records.config import RunConfig
from dspbench.records.io import append_record

PAPER_DATA = files("dspbench.reports.paper_data")   # the paper's numbers: data shared with reports
METHODS = ("dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm")
BASELINES = ("ulysses", "ulysses_all")               # the two Ulysses conventions (docs/paper-setup.md)
FIG3_SHAPES = ((64, 4096), (128, 4096), (256, 4096), (128, 9216))
INFER_STEPS = 100   # assumption: OpenSora v1.0's IDDPM sampler, 100 steps
TRAIN = dict(model="stdit-xl", dtype="bf16", grad_ckpt=True, backend="nccl", mode="train", zero=2)
INFER = dict(model="stdit-xl", frames=80, spatial=1024, batch=1, cfg=True, mode="sample",
             sample_steps=INFER_STEPS, dtype="bf16", backend="nccl")


def _paper(name: str) -> list[dict]:
    with PAPER_DATA.joinpath(name).open() as f:
        return list(csv.DictReader(f))


def _fig3_paper() -> dict:
    return {(int(r["sp"]), int(r["frames"]), int(r["spatial_tokens"])):
            {"ulysses": float(r["ulysses_samples_per_s"]), "dsp": float(r["dsp_samples_per_s"])}
            for r in _paper("v1_fig3.csv")}


def _ratio(a, b):
    return a / b if a and b else None


def fig3(emit) -> list[dict]:
    prof, paper, rows = load_profile("h800-nvlink"), _fig3_paper(), []
    for sp in (2, 4, 8):
        for T, S in FIG3_SHAPES:
            recs = {m: emit(predicted_record(RunConfig(method=m, frames=T, spatial=S, gpus=sp, sp=sp, **TRAIN), prof))
                    for m in METHODS}
            p, dsp = paper.get((sp, T, S), {}), recs["dsp"]["samples_per_s"]
            for m, r in recs.items():
                pred, ref = r["samples_per_s"], p.get(m if m != "ulysses_all" else "ulysses")
                rows.append({"sp": sp, "frames": T, "spatial": S, "method": m, "predicted": pred,
                             "paper": ref if m in p else None, "error": _ratio(pred, p.get(m)) and pred / p[m] - 1,
                             "pred_dsp_over": _ratio(dsp, pred), "paper_dsp_over": _ratio(p.get("dsp"), ref),
                             "comm_share": _ratio(r["predicted_comm_time_s"], r["step_time_median_s"]) if pred else None,
                             "mfu": r["mfu"], "hfu": r["hfu"], "status": r["status"], "note": r["error"]})
    return rows


def consistency() -> list[dict]:
    """For each paper point of v1 Figure 3: the MFU its throughputs need and the all-to-all bus
    bandwidth its DSP/Ulysses ratio needs under our model, per baseline (bench/cost/consistency.py)."""
    prof, rows = load_profile("h800-nvlink"), []
    peak = prof.peak_flops["bf16"]
    link = prof.intra.busbw("all_to_all") / 1e9
    for (sp, T, S), p in sorted(_fig3_paper().items()):
        ratio = p["dsp"] / p["ulysses"]
        dsp = RunConfig(method="dsp", frames=T, spatial=S, gpus=sp, sp=sp, **TRAIN)
        bw, bound, pred, fits = {}, {}, {}, True
        for m in BASELINES:
            bw[m], bound[m] = implied_busbw(dsp, replace(dsp, method=m), prof, ratio)
            pred[m], ok = predicted_ratio(dsp, replace(dsp, method=m), prof)
            fits = fits and ok
        mfu = {m: implied_mfu("stdit-xl", T, S, p[m], sp, peak) for m in ("dsp", "ulysses")}
        rows.append({"sp": sp, "frames": T, "spatial": S, "paper_dsp": p["dsp"], "paper_ulysses": p["ulysses"],
                     "paper_ratio": ratio, "dsp_mfu": mfu["dsp"][0], "dsp_hfu": mfu["dsp"][1],
                     "ulysses_mfu": mfu["ulysses"][0], "ulysses_hfu": mfu["ulysses"][1],
                     **{f"pred_ratio_{m}": pred[m] for m in BASELINES}, "pred_fits": fits,
                     **{f"busbw_{m}": bw[m] for m in BASELINES}, **{f"bound_{m}": bound[m] for m in BASELINES},
                     "link_busbw": link,
                     "verdict": verdict(mfu["dsp"][0], mfu["dsp"][1], bw, bound, ratio, link)})
    return rows


def inference(emit) -> list[dict]:
    """v1's inference latencies (CFG as a batch of 2, as OpenSora v1.0 samples), and the same 8
    GPUs with CFG parallelism (`cfg_parallel`: cond and uncond on two groups of SP 4, one exchange
    of the noise prediction per step), which the paper's 45 s and 22 s did not use."""
    prof, base = load_profile("h800-nvlink"), RunConfig(**INFER)
    refs = {r["method"]: float(r["latency_s"]) for r in _paper("v1_inference.csv")}
    cases = [("1x H800", "single", 1, 1, False, refs["single"]),
             ("8x H800 Ulysses", "ulysses", 8, 8, False, refs["ulysses_deepspeed"]),
             ("8x H800 Ulysses (every attention)", "ulysses_all", 8, 8, False, refs["ulysses_deepspeed"]),
             ("8x H800 DSP", "dsp", 8, 8, False, refs["dsp"]), ("8x H800 Ring", "ring", 8, 8, False, None),
             ("8x H800 Megatron-SP", "megatron_sp", 8, 8, False, None),
             ("2x H800 CFG parallel (2 x 1)", "single", 2, 1, True, None),
             ("8x H800 Ulysses, CFG parallel (2 x SP 4)", "ulysses", 8, 4, True, None),
             ("8x H800 DSP, CFG parallel (2 x SP 4)", "dsp", 8, 4, True, None)]
    rows = []
    for label, m, g, sp, cfg_parallel, ref in cases:
        r = emit(predicted_record(replace(base, method=m, gpus=g, sp=sp, cfg_parallel=cfg_parallel), prof))
        t = r["step_time_median_s"]
        mfu = implied_mfu("stdit-xl", 80, 1024, 1 / ref, g, prof.peak_flops["bf16"], mode="sample",
                          passes=INFER_STEPS * 2)[0] if ref else None
        rows.append({"setting": label, "method": m, "gpus": g, "sp": sp, "cfg_parallel": cfg_parallel,
                     "predicted_s": t, "compute_s": r["predicted_compute_time_s"],
                     "comm_s": r["predicted_comm_time_s"], "paper_s": ref, "error": t / ref - 1 if ref else None,
                     "paper_mfu": mfu})
    return rows


SCALING_FRAMES = (128, 256, 512, 1024)
SCALING_GPUS = (8, 16, 32, 64, 128)


def scaling(emit, model: str, frames=SCALING_FRAMES, gpu_counts=SCALING_GPUS) -> list[dict]:
    prof, rows = load_profile("h100-ib"), []
    for T in frames:
        for gpus in gpu_counts:
            for m in METHODS:
                cfg, reason = resolved(RunConfig(method=m, frames=T, spatial=4096, gpus=gpus, sp="auto",
                                                 **{**TRAIN, "model": model}), prof)
                r = emit(predicted_record(cfg, prof))
                rows.append({"model": model, "frames": T, "gpus": gpus, "method": m, "sp": r["sp"],
                             "samples_per_s": r["samples_per_s"], "status": "no fit" if reason else r["status"]})
    return rows


def tables(emit=lambda rec: rec) -> dict:
    f3 = fig3(emit)
    t = {"generated_by": "python -m dspbench.cost.paper", "source": "predicted",
         "profiles": ["h800-nvlink", "h100-ib"], "mfu_published_max": MFU_PUBLISHED_MAX,
         "fig3": f3, "consistency": consistency(), "inference": inference(emit),
         "scaling": scaling(emit, "stdit-xl") + scaling(emit, "stdit-3b"),
         # both readings of the v1 figure's axis, and one verdict per claim (bench/cost/paper_readings.py)
         "readings": paper_readings.readings(_fig3_paper(), TRAIN),
         # today's video DiTs (full3d), rendered: bench/cost/paper_full3d.py
         "full3d_markdown": paper_full3d.training(emit) + [""] + paper_full3d.inference(emit)}
    t["claims"] = paper_readings.claims(t)
    return t


def main(argv=None) -> int:
    from dspbench.cost.paper_text import markdown
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/predicted/paper.jsonl")
    ap.add_argument("--md", default="docs/paper-predictions.md")
    ap.add_argument("--json", default="reports/paper_data/predictions.json")
    a = ap.parse_args(argv)
    out = Path(a.out)

    def emit(rec):
        append_record(out, rec)
        return rec

    t = tables(emit)
    Path(a.json).write_text(json.dumps(t, indent=1, sort_keys=True) + "\n")
    Path(a.md).write_text(markdown(t))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
