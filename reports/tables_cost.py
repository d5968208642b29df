"""Predicted vs measured: each measured configuration beside its cost-model prediction.

Both records share a run_id (bench/calibrate/emulate.py writes the prediction of every launch it measures;
`dspbench predict --records-file` into a sweep's folder does the same by hand). Repeats are
aggregated by median; the baseline/DSP ratios are ratios of those medians.
"""
from __future__ import annotations

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.fmt import Table
from dspbench.reports.style import label, order

# pairs share a run_id (the same configuration); ratios are taken within one side and this key
CONFIG = ["model", "mode", "dtype", "batch", "frames", "spatial", "gpus", "sp", "dp", "grad_ckpt",
          "zero", "cfg", "cfg_parallel", "hardware"]


def _pairs(runs: pd.DataFrame, predicted: pd.DataFrame) -> pd.DataFrame:
    if predicted.empty or runs.empty:
        return pd.DataFrame()
    # the measured side is measured (never a synthetic or another prediction), the other predicted
    key = [c for c in CONFIG if c in runs]        # hardware: once the runs are enriched
    ok = runs[(runs["status"] == "ok") & (runs["source"] == "measured")][["run_id", "method", *key,
                                                                          "step_time_median_s"]]
    predicted = predicted[predicted["source"] == "predicted"]
    pred = predicted[["run_id", "step_time_median_s"]].rename(columns={"step_time_median_s": "predicted_s"})
    both = ok.merge(pred, on="run_id").rename(columns={"step_time_median_s": "measured_s"})
    if both.empty:
        return both
    agg = both.groupby(["method", *key], as_index=False, dropna=False).agg(
        measured_s=("measured_s", "median"), predicted_s=("predicted_s", "median"), n=("run_id", "size"))
    dsp = agg[agg["method"] == "dsp"].set_index(key)[["measured_s", "predicted_s"]]
    idx = agg.set_index(key).index
    agg["ratio_measured"] = agg["measured_s"].values / dsp["measured_s"].reindex(idx).values
    agg["ratio_predicted"] = agg["predicted_s"].values / dsp["predicted_s"].reindex(idx).values
    rank = {m: i for i, m in enumerate(order(agg["method"]))}
    return agg.assign(_o=agg["method"].map(rank)).sort_values([*key, "_o"]).drop(columns="_o")


def _two(x) -> str:
    return "—" if pd.isna(x) else f"{x:.2f}"


def predicted_vs_measured(runs: pd.DataFrame, predicted: pd.DataFrame) -> Table:
    data = _pairs(runs, predicted)
    if data.empty:
        return Table("predicted_vs_measured", "Predicted vs measured step time", data, pd.DataFrame())
    err = data["ratio_predicted"] / data["ratio_measured"] - 1
    d = pd.DataFrame({
        "method": data["method"].map(label), "model": data["model"], "mode": data["mode"],
        "T": data["frames"], "S": data["spatial"], "GPUs": data["gpus"], "SP": data["sp"], "runs": data["n"],
        "measured (s)": data["measured_s"].map(lambda x: fmt.num(x, 3)),
        "predicted (s)": data["predicted_s"].map(lambda x: fmt.num(x, 3)),
        "predicted / measured": (data["predicted_s"] / data["measured_s"]).map(_two),
        "X / DSP measured": data["ratio_measured"].map(_two),
        "X / DSP predicted": data["ratio_predicted"].map(_two),
        "ratio error": [("—" if m == "dsp" or pd.isna(e) else f"{e * 100:+.0f}%")
                        for m, e in zip(data["method"], err)],
    })
    notes = ["Step times are medians over the repeats that have both a measurement and a prediction "
             "(same run_id). Ratio error = (X/DSP predicted) / (X/DSP measured) - 1: how far the cost "
             "model's ranking of the methods is from the measured one."]
    return Table("predicted_vs_measured", "Predicted vs measured step time", data, d.reset_index(drop=True), notes)
