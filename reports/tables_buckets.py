"""Bucketed workloads (records with bucket_weight > 0): each bucket's row, then the mix per method.

The mix is folded by records/buckets.mix: samples/s over the mix (time-weighted), the padding waste
(sample-weighted share of padded tokens), each bucket's best SP degree and the mix at those degrees.
"""
from __future__ import annotations

import pandas as pd

from dspbench.records.buckets import mix
from dspbench.reports import fmt
from dspbench.reports.fmt import Table
from dspbench.reports.style import label

GROUP = ["model", "mode", "dtype", "gpus", "source"]


def bucketed(runs: pd.DataFrame) -> pd.DataFrame:
    if "bucket_weight" not in runs.columns:
        return runs.iloc[0:0]
    return runs[runs["bucket_weight"].fillna(0) > 0]


def tables(runs: pd.DataFrame) -> list[Table]:
    b = bucketed(runs)
    return [] if b.empty else [per_bucket(b), summary(b)]


def _shape(t, s) -> str:
    return f"{int(t)} x {int(s)}"


def per_bucket(b: pd.DataFrame) -> Table:
    cols = GROUP + ["method", "sp", "frames", "spatial", "bucket_weight", "padded_frames", "padded_spatial",
                    "pad_token_share", "status", "samples_per_s"]
    data = (b.reindex(columns=cols).groupby(cols[:-1], dropna=False, sort=True)["samples_per_s"].mean()
            .reset_index())
    disp = pd.DataFrame({
        "model": data["model"], "GPUs": data["gpus"], "method": data["method"].map(label), "SP": data["sp"],
        "bucket T x S": [_shape(t, s) for t, s in zip(data["frames"], data["spatial"])],
        "weight": data["bucket_weight"].map(fmt.num),
        "padded T x S": ["—" if pd.isna(t) else _shape(t, s)
                         for t, s in zip(data["padded_frames"], data["padded_spatial"])],
        "padded tokens": data["pad_token_share"].map(fmt.pct),
        "status": data["status"], "samples/s": data["samples_per_s"].map(fmt.num), "numbers": data["source"]})
    notes = ["Each bucket is its own configuration (its own records). Padded T x S: what the method runs "
             "(methods/padding.py: sharded dims the degree does not divide, padded keys masked); padded "
             "tokens: their share of the padded grid (of per-token compute and activation bytes)."]
    return Table("buckets", "Bucketed workload: every bucket", data, disp.reset_index(drop=True), notes)


def summary(b: pd.DataFrame) -> Table:
    rows = []
    for key, g in b.groupby(GROUP + ["method"], dropna=False, sort=True):
        ok = g[g["status"] == "ok"].groupby(["sp", "frames", "spatial", "bucket_weight"], as_index=False).agg(
            samples_per_s=("samples_per_s", "mean"), pad_token_share=("pad_token_share", "mean"))
        m = mix(ok.to_dict("records"))
        n_buckets = g[["frames", "spatial"]].drop_duplicates().shape[0]
        best = ", ".join(f"{_shape(t, s)}: {m['best_sp'].get((t, s)) or '—'}"
                         for t, s, _ in sorted({(r.frames, r.spatial, r.bucket_weight) for r in g.itertuples()}))
        for sp in sorted(g["sp"].dropna().unique()):
            got = m["per_sp"].get(sp, {"samples_per_s": None, "missing": n_buckets})
            rows.append(dict(zip(GROUP + ["method"], key), sp=sp, buckets=n_buckets, missing=got["missing"],
                             samples_per_s=got["samples_per_s"], pad_token_share=got.get("pad_token_share"),
                             best_sp=best, best_sp_samples_per_s=m["best_sp_samples_per_s"]))
    data = pd.DataFrame(rows)
    disp = pd.DataFrame({
        "model": data["model"], "GPUs": data["gpus"], "method": data["method"].map(label), "SP": data["sp"],
        "buckets run": [f"{n - k} of {n}" for n, k in zip(data["buckets"], data["missing"])],
        "samples/s over the mix": data["samples_per_s"].map(fmt.num),
        "padding waste": data["pad_token_share"].map(fmt.pct),
        "best SP per bucket": data["best_sp"],
        "mix at each bucket's best SP": data["best_sp_samples_per_s"].map(fmt.num),
        "numbers": data["source"]})
    notes = ["Samples/s over the mix: sum of weights / sum of weight / samples/s over the buckets (each "
             "bucket a share of the samples, run in batches of its own shape); — where a bucket did not "
             "run at that degree. Padding waste: the sample-weighted share of padded tokens."]
    return Table("bucket_mix", "Bucketed workload: the mix per method", data, disp.reset_index(drop=True), notes)
