"""Derived metrics: per-run columns, repeats aggregated, DSP's speed-ups, scaling efficiency.

Conventions (see docs/reports.md):
- throughput is global (all data-parallel replicas): samples/s; per GPU = samples/s / world size;
- comm bytes are wire bytes per rank per step (nccl-tests); bus bandwidth = wire bytes / time for
  every op (ledger.py), timed in a separate instrumented iteration, so the comm share of step time
  is an estimate without overlap;
- comparisons pair rows on the full comparison key (COMPARE: model, mode, dtype, batch, T, S,
  GPUs, SP, DP, checkpointing, ZeRO stage, CFG, sampling steps, backend, emulated memory budget,
  source (measured, predicted, synthetic, published), hardware, eager or compiled) and
  pick each method's best shard there: no ratio ever divides a measured number by a predicted
  one (or a published one), or numbers from two machines, models or SP degrees.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from dspbench.reports.envinfo import hardware_label
from dspbench.reports.style import METRIC_STATUSES

# The comparison key: two rows are compared (DSP / X, paper vs ours, A vs B) only when all agree.
COMPARE = ("model", "mode", "dtype", "batch", "frames", "spatial", "gpus", "sp", "dp", "grad_ckpt",
           "zero", "cfg", "cfg_parallel", "sample_steps", "backend", "mem_budget_mib", "source", "hardware",
           "software")
CONFIG = COMPARE + ("method", "shard")
GRAD_TAGS = ("grad_sync", "dp_grad_sync")     # ledger tags of gradient synchronisation


def enrich(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-run derived columns (every row, whatever its status)."""
    df = runs.copy()
    df["hardware"] = [hardware_label(e, b) for e, b in zip(df["environ"], df["backend"])]
    df["tokens_per_sample"] = df["frames"] * df["spatial"]
    df["global_batch"] = df["batch"] * df["dp"]
    df["samples_per_s"] = df["samples_per_s"].fillna(df["global_batch"] / df["step_time_median_s"])
    df["tokens_per_s"] = df["tokens_per_s"].fillna(df["samples_per_s"] * df["tokens_per_sample"])
    df["samples_per_s_per_gpu"] = df["samples_per_s"] / df["gpus"]
    df["tokens_per_s_per_gpu"] = df["tokens_per_s"] / df["gpus"]
    df["tokens_per_gpu"] = df["global_batch"] * df["tokens_per_sample"] / df["gpus"]
    timed = [_timed_comm(c, t) for c, t in zip(df["comm"], df["comm_time_s"])]
    df["comm_time_total_s"] = [t for _, t in timed]
    df["comm_share"] = df["comm_time_total_s"] / df["step_time_median_s"]
    df["busbw_bytes_per_s"] = [b / t if t else np.nan for b, t in timed]
    split = [_split_comm(t) for t in df["comm_tagged"]]
    df["comm_sp_bytes"] = [a for a, _ in split]
    df["comm_grad_bytes"] = [b for _, b in split]
    per_rank = [_max(v) for v in df["peak_mem_bytes_per_rank"]]
    df["mem_per_rank_bytes"] = df["peak_mem_bytes"].fillna(pd.Series(per_rank, index=df.index))
    return df


def _timed_comm(comm, times) -> tuple[float, float]:
    """(wire bytes of the timed ops, their total seconds); NaN when the run timed no comm."""
    if not isinstance(times, dict) or not times:
        return np.nan, np.nan
    comm = comm if isinstance(comm, dict) else {}
    return float(sum(comm.get(k, 0) for k in times)), float(sum(times.values()))


def _split_comm(tagged) -> tuple[float, float]:
    """(SP traffic, gradient sync) wire bytes per rank per step, from the ledger's tags."""
    if not isinstance(tagged, dict):
        return np.nan, np.nan
    grad = sum(v for k, v in tagged.items() if k.split("/", 1)[0] in GRAD_TAGS)
    return float(sum(tagged.values()) - grad), float(grad)


def _max(v) -> float:
    return float(max(v)) if isinstance(v, (list, tuple)) and v else np.nan


def aggregate(df: pd.DataFrame) -> pd.DataFrame:
    """Median and spread over repeats, one row per configuration (runs that carry timings only)."""
    ok = df[df["status"].isin(METRIC_STATUSES)]
    agg = ok.groupby(list(CONFIG), dropna=False, sort=True).agg(
        n_repeats=("repeat", "size"),
        step_time_s=("step_time_median_s", "median"),
        samples_per_s=("samples_per_s", "median"),
        samples_per_s_min=("samples_per_s", "min"),
        samples_per_s_max=("samples_per_s", "max"),
        tokens_per_s=("tokens_per_s", "median"),
        samples_per_s_per_gpu=("samples_per_s_per_gpu", "median"),
        tokens_per_s_per_gpu=("tokens_per_s_per_gpu", "median"),
        tokens_per_gpu=("tokens_per_gpu", "first"),
        mfu=("mfu", "median"),
        mem_per_rank_bytes=("mem_per_rank_bytes", "median"),
        comm_wire_bytes=("comm_wire_bytes", "median"),
        comm_sp_bytes=("comm_sp_bytes", "median"),
        comm_grad_bytes=("comm_grad_bytes", "median"),
        file=("file", "first"),
        line=("_line", "first"),
        comm_time_total_s=("comm_time_total_s", "median"),
        comm_share=("comm_share", "median"),
        busbw_bytes_per_s=("busbw_bytes_per_s", "median"),
    ).reset_index()
    agg["spread_pct"] = 100 * (agg["samples_per_s_max"] - agg["samples_per_s_min"]) / agg["samples_per_s"]
    return agg


def best(agg: pd.DataFrame) -> pd.DataFrame:
    """Each method's fastest run per configuration (over its shard: SP is part of the key)."""
    if agg.empty:
        return agg
    idx = agg.groupby(list(COMPARE) + ["method"], dropna=False)["samples_per_s"].idxmax()
    return agg.loc[idx.dropna()].sort_values(list(COMPARE) + ["method"]).reset_index(drop=True)


def speedups(b: pd.DataFrame, of: str = "dsp") -> pd.DataFrame:
    """`of`'s speed-up over every other method on the same configuration (the full key); the
    range pairs the extremes of the repeats; n_repeats / n_repeats_base say how many there were."""
    cols = ["baseline", "speedup", "speedup_lo", "speedup_hi", "n_repeats", "n_repeats_base"]
    if b.empty or of not in set(b["method"]):
        return pd.DataFrame(columns=list(COMPARE) + cols)
    keep = list(COMPARE) + ["method", "n_repeats", "samples_per_s", "samples_per_s_min", "samples_per_s_max"]
    ours = b[b["method"] == of][keep]
    # `single` is the no-parallelism reference (data parallel only), not an SP baseline
    base = b[~b["method"].isin([of, "single"])][keep]
    m = ours.merge(base, on=list(COMPARE), suffixes=("", "_base"))
    m = m.rename(columns={"method_base": "baseline"})
    m = m[m["sp"] > 1]          # both at SP 1: the same single-device model, no contest
    m["speedup"] = m["samples_per_s"] / m["samples_per_s_base"]
    m["speedup_lo"] = m["samples_per_s_min"] / m["samples_per_s_max_base"]   # worst pairing
    m["speedup_hi"] = m["samples_per_s_max"] / m["samples_per_s_min_base"]
    return m.sort_values(list(COMPARE) + ["baseline"]).reset_index(drop=True)


def scaling(b: pd.DataFrame) -> pd.DataFrame:
    """Strong (fixed sequence) and weak (fixed tokens per GPU) scaling efficiency per method.

    Efficiency = tokens/s per GPU relative to the series' smallest GPU count (1.0 = linear). At one
    GPU every method is the single-device model, so a `single` run there is every series' base.
    """
    cols = ["scaling", "series", "method", "gpus", "efficiency"]
    if b.empty:
        return pd.DataFrame(columns=cols)
    fixed = [c for c in COMPARE if c not in ("gpus", "frames", "sp", "dp")]
    d = _with_single_base(b).sort_values("gpus")
    # a series is one line per method: name whatever else varies in the sweep (model, mode, ...)
    varying = [c for c in fixed if c != "spatial" and d[c].nunique(dropna=False) > 1]
    ctx = d[varying].astype(str).agg(" ".join, axis=1) + " " if varying else ""
    out = []
    for kind, keys in (("strong", fixed + ["frames"]), ("weak", fixed + ["tokens_per_gpu"])):
        g = d.groupby(keys + ["method"], dropna=False, sort=False)
        s = d.assign(scaling=kind, base_gpus=g["gpus"].transform("first"),
                     efficiency=d["tokens_per_s_per_gpu"] / g["tokens_per_s_per_gpu"].transform("first"),
                     _n=g["gpus"].transform("nunique"), _t=g["frames"].transform("first"))
        s = s[s["_n"] >= 2]
        if s.empty:   # assigning a Series to an empty frame would adopt its index: rows of NaN
            continue
        sp = s["spatial"].astype(int).astype(str)
        s["series"] = ctx + ("T=" + s["_t"].astype(int).astype(str) + " S=" + sp if kind == "strong" else
                             s["tokens_per_gpu"].astype(int).astype(str) + " tokens/GPU, S=" + sp)
        out.append(s.drop(columns=["_n", "_t"]))
    res = pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)
    return res if not res.empty else pd.DataFrame(columns=cols)


def _with_single_base(b: pd.DataFrame) -> pd.DataFrame:
    single = b[(b["method"] == "single") & (b["gpus"] == 1)]
    clones = [single.assign(method=m) for m in set(b["method"]) - {"single"}
              if not ((b["method"] == m) & (b["gpus"] == 1)).any()]
    return pd.concat([b] + clones, ignore_index=True) if clones else b
