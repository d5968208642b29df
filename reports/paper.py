"""Paper vs ours: v1 Figure 3 (training throughput) and the v1 inference latencies.

The paper's numbers ship in paper_data/ (see its README for the source and accuracy). Ours are
each method's best run on the same configuration; a row says on what hardware it was measured,
or that a cost model predicted it.
"""
from __future__ import annotations

from importlib.resources import files

import numpy as np
import pandas as pd

ULYSSES = ("ulysses_deepspeed", "ulysses")   # the paper's baseline is DeepSpeed-Ulysses: prefer it


def paper_file(name: str):
    """A file shipped in reports/paper_data/ (a Traversable: `.open()` it)."""
    return files("dspbench.reports").joinpath("paper_data", name)


def paper_data(name: str) -> pd.DataFrame:
    with paper_file(name).open() as f:
        return pd.read_csv(f)


SOURCE_ORDER = {"measured": 0, "predicted": 1, "synthetic": 2}   # which of ours to show first


def _ours(best: pd.DataFrame, modes, gpus, frames, spatial, method) -> pd.Series | None:
    best = best[best["source"] != "published"]     # published numbers are cited, not ours
    m = best[best["mode"].isin(modes) & (best["gpus"] == gpus) & (best["frames"] == frames)
             & (best["spatial"] == spatial) & (best["method"] == method)]
    if m.empty:
        return None
    m = m.assign(_s=m["source"].map(SOURCE_ORDER).fillna(3))
    return m.sort_values(["_s", "samples_per_s"], ascending=[True, False]).iloc[0]  # measured first


def _pair(speedups: pd.DataFrame, gpus, frames, spatial) -> pd.Series | None:
    """Our DSP and Ulysses on one row of speedups: both sides share the full comparison key
    (model, dtype, B, SP = GPUs, source, hardware, ...), so the ratio never crosses it.
    Measured before predicted before synthetic; DeepSpeed-Ulysses before our Ulysses."""
    if speedups.empty:
        return None
    m = speedups[(speedups["mode"] == "train") & (speedups["gpus"] == gpus) & (speedups["sp"] == gpus)
                 & (speedups["source"] != "published")
                 & (speedups["frames"] == frames) & (speedups["spatial"] == spatial)
                 & speedups["baseline"].isin(ULYSSES)]
    if m.empty:
        return None
    m = m.assign(_s=m["source"].map(SOURCE_ORDER).fillna(3), _b=m["baseline"].map(ULYSSES.index))
    return m.sort_values(["_s", "_b", "model"]).iloc[0]


def _on(r) -> str:
    """What both sides of our ratio are: the shared key, stated once."""
    return (f"{r['source']} on {r['hardware']} ({r['model']}, {r['dtype']}, B={int(r['batch'])}, "
            f"SP={int(r['sp'])}, ZeRO {int(r['zero'])}; DSP and {r['baseline']} both)")


def fig3_table(best: pd.DataFrame, speedups: pd.DataFrame) -> pd.DataFrame:
    """Each v1 Figure 3 point beside our DSP and Ulysses of the same (SP = GPUs, T, S), train."""
    rows = []
    for p in paper_data("v1_fig3.csv").itertuples():
        r = _pair(speedups, p.sp, p.frames, p.spatial_tokens)
        row = {"gpus": p.sp, "frames": p.frames, "spatial": p.spatial_tokens,
               "paper_ulysses": p.ulysses_samples_per_s, "paper_dsp": p.dsp_samples_per_s,
               "paper_ratio": p.dsp_samples_per_s / p.ulysses_samples_per_s,
               "ours_dsp": r.samples_per_s if r is not None else np.nan,
               "ours_ulysses": r.samples_per_s_base if r is not None else np.nan,
               "ours_baseline": r.baseline if r is not None else "",
               "ours_source": r.source if r is not None else "",
               "ours_on": _on(r) if r is not None else "not run"}
        row["ours_ratio"] = row["ours_dsp"] / row["ours_ulysses"]
        rows.append(row)
    return pd.DataFrame(rows)


def inference_table(best: pd.DataFrame) -> pd.DataFrame:
    """The reference README's latencies beside ours (seconds per sample, same T, S and GPUs)."""
    rows = []
    paper = paper_data("v1_inference.csv")
    single = float(paper.loc[paper["method"] == "single", "latency_s"].iloc[0])
    for p in paper.itertuples():
        names = ULYSSES if p.method in ULYSSES else (p.method,)
        # only `sample` mode is a whole generation (sample_steps forward passes), as the README's
        ours = next((r for n in names if (r := _ours(best, ["sample"], p.gpus, p.frames,
                                                           p.spatial, n)) is not None), None)
        rows.append({"setting": p.setting, "gpus": p.gpus, "method": p.method, "frames": p.frames,
                     "spatial": p.spatial, "paper_latency_s": float(p.latency_s),
                     "paper_speedup_vs_1gpu": single / p.latency_s,
                     "ours_latency_s": (1 / ours.samples_per_s) if ours is not None else np.nan,
                     "ours_on": f"{ours.source} on {ours.hardware} ({ours.model}, {ours['dtype']}, "
                                f"{int(ours.sample_steps)} steps, SP={int(ours.sp)})" if ours is not None
                                else "not run"})
    return pd.DataFrame(rows)


def ratio_summary(speedups: pd.DataFrame) -> pd.DataFrame:
    """Our DSP/Ulysses ratios on every configuration we ran, with where they come from."""
    s = speedups[speedups["baseline"].isin(ULYSSES)] if not speedups.empty else speedups
    cols = ["mode", "model", "gpus", "sp", "frames", "spatial", "baseline", "speedup", "speedup_lo",
            "speedup_hi", "n_repeats", "n_repeats_base", "source", "hardware"]
    return s[cols].reset_index(drop=True) if not s.empty else pd.DataFrame(columns=cols)


CLAIMS_NOTE = ("Predicted by the cost model on datasheet profiles (h800-nvlink, h100-ib), not measured, except the "
               "communication claim (the ledger measures every method's bytes); `tokens_after_patch` reads v1 Figure "
               "3's S as tokens per frame (1024x1024 video), `latent_positions` as latent positions (S/4 tokens, "
               "512x512). Generated with docs/paper-predictions.md (python -m dspbench.cost.paper).")


def claim_verdicts() -> pd.DataFrame:
    """One row per claim and reading, from paper_data/predictions.json (bench/cost/paper_readings.py)."""
    import json
    with paper_file("predictions.json").open() as f:
        claims = json.load(f).get("claims", [])
    rows = [{"claim": c["claim"], "reading": r, "evidence": ev, "status": c["status"][r]}
            for c in claims for r, ev in c["evidence"].items()]
    return pd.DataFrame(rows, columns=["claim", "reading", "evidence", "status"])


PAPER_RATIO_NOTE = ("Paper v1 Figure 3: DSP/DeepSpeed-Ulysses 1.43-2.22 (training, STDiT-XL/2, H800, "
                    "SP 2-4); reference README inference: 45 s / 22 s = 2.05 on 8x H800.")


def tables(best: pd.DataFrame, speedups: pd.DataFrame) -> list:
    from dspbench.reports import fmt
    from dspbench.reports.fmt import Table
    from dspbench.reports.style import label
    f3 = fig3_table(best, speedups)
    d3 = pd.DataFrame({"GPUs (= SP)": f3["gpus"], "T": f3["frames"], "S": f3["spatial"],
                       "paper Ulysses": f3["paper_ulysses"].map(fmt.num),
                       "paper DSP": f3["paper_dsp"].map(fmt.num),
                       "paper DSP/Ulysses": f3["paper_ratio"].map(fmt.times),
                       "ours Ulysses": f3["ours_ulysses"].map(fmt.num),
                       "ours DSP": f3["ours_dsp"].map(fmt.num),
                       "ours DSP/Ulysses": f3["ours_ratio"].map(fmt.times),
                       "ours: both sides": f3["ours_on"]})
    inf = inference_table(best)
    di = pd.DataFrame({"setting": inf["setting"], "T": inf["frames"], "S": inf["spatial"],
                       "paper latency (s)": inf["paper_latency_s"].map(fmt.num),
                       "paper speed-up vs 1 GPU": inf["paper_speedup_vs_1gpu"].map(fmt.times),
                       "ours latency (s/sample)": inf["ours_latency_s"].map(fmt.num),
                       "ours: what": inf["ours_on"]})
    rs = ratio_summary(speedups)
    n = rs[["n_repeats", "n_repeats_base"]].min(axis=1)
    dr = pd.DataFrame({"mode": rs["mode"], "model": rs["model"], "GPUs": rs["gpus"], "SP": rs["sp"],
                       "T": rs["frames"], "S": rs["spatial"], "baseline": rs["baseline"].map(label),
                       "ours DSP/Ulysses": [fmt.ratio_spread(x, a, b, k) for x, a, b, k in
                                            zip(rs["speedup"], rs["speedup_lo"], rs["speedup_hi"], n)],
                       "numbers": rs["source"], "hardware": rs["hardware"]})
    if f3["ours_on"].eq("not run").all():    # nothing of ours to set beside the paper: one line
        d3 = d3.iloc[0:0]
    if inf["ours_on"].eq("not run").all():
        di = di.iloc[0:0]
    src = ("Paper: arXiv 2403.10266 v1 Figure 3, digitized (±0.01 samples/s); STDiT-XL/2 training on "
           "H800, bf16, ZeRO-2, gradient checkpointing. Ours: each method's best run of the same "
           "T, S and GPU count (= SP) in train mode, DSP and Ulysses always from one configuration "
           "(same model, dtype, batch, source, hardware: 'ours: both sides'), measured before "
           "predicted; 'not run' where the sweep has none. Paper and ours sit side by side: no "
           "ratio divides one by the other.")
    verdicts = claim_verdicts()
    return [Table("paper_claims", "The paper's claims, one verdict each (both readings of v1 Figure 3's axis)",
                  verdicts, verdicts, [CLAIMS_NOTE]),
            Table("paper_fig3", "Paper vs ours: v1 Figure 3 training throughput (samples/s)", f3, d3, [src]),
            Table("paper_inference", "Paper vs ours: inference latency, 80 frames at 512x512", inf, di,
                  ["Paper: VideoSys (OpenDiT) README, OpenSora v1.0 on H800."]),
            Table("dsp_vs_ulysses", "Our DSP/Ulysses ratio on every configuration", rs, dr,
                  [PAPER_RATIO_NOTE])]
