"""The report's tables, built from the derived frames (see derive.py, commvol.py, paper.py)."""
from __future__ import annotations

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.derive import COMPARE
from dspbench.reports.fmt import Table
from dspbench.reports.provenance import status_label
from dspbench.reports.style import METRIC_STATUSES, label, order

ROW = ["model", "mode", "dtype", "batch", "frames", "spatial", "gpus", "sp"]
# An `unsupported` record whose reason starts so: the method cannot apply to the model at any shape
# or degree (DSP on full attention), shown as n/a rather than as a constraint a run missed.
NOT_APPLICABLE = "not applicable"
ROW_NAMES = {"model": "model", "mode": "mode", "dtype": "dtype", "batch": "B", "frames": "T",
             "spatial": "S", "gpus": "GPUs", "sp": "SP", "dp": "DP", "source": "numbers",
             "hardware": "hardware", "grad_ckpt": "ckpt", "zero": "ZeRO", "cfg": "CFG", "cfg_parallel": "CFG parallel",
             "backend": "backend", "sample_steps": "steps", "software": "software"}


def _row_keys(df: pd.DataFrame) -> list[str]:
    """ROW, plus any other comparison-key column that varies (backend, source, hardware, ...)."""
    shown = [c for c in COMPARE if c not in ROW and c in df and df[c].nunique(dropna=False) > 1]
    if "source" not in shown and "source" in df and (df["source"] != "measured").any():
        shown.append("source")          # predicted and synthetic numbers are always labelled
    return ROW + shown


def _failures(runs: pd.DataFrame) -> dict[tuple, str]:
    """(ROW..., source, method) -> status of failed runs where no run of that method, source and
    ROW has timings: a failed repeat next to a good one is not the configuration's outcome.
    A prediction's failure reads 'predicted oom', never a measured 'oom'."""
    key = ROW + ["source", "method"]
    done = runs["status"].isin(METRIC_STATUSES)
    good = set(runs.loc[done, key].drop_duplicates().itertuples(index=False, name=None))
    reason = runs["error"].astype(str) if "error" in runs else pd.Series("", index=runs.index)
    not_applicable = (runs["status"] == "unsupported") & reason.str.startswith(NOT_APPLICABLE)
    outcome = runs["outcome"].where(~not_applicable, "n/a")
    bad = runs.loc[~done, key].assign(outcome=outcome[~done]).drop_duplicates().itertuples(index=False, name=None)
    return {k[:-1]: status_label(k[-1], k[-3]) for k in bad if k[:-1] not in good}


def _config_frame(best: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    if best.empty:
        return pd.DataFrame(columns=keys)
    return best[keys].drop_duplicates().sort_values(keys, key=_sort_key).reset_index(drop=True)


def _sort_key(col: pd.Series) -> pd.Series:
    return col.astype(str) if col.dtype == object else col


def _per_method(best, cfgs, keys, m, cols: list[str]) -> pd.DataFrame:
    """best[cols] of method m aligned to the rows of cfgs (NaN where m has no run)."""
    sub = best.loc[best["method"] == m, keys + cols]
    return cfgs[keys].merge(sub, on=keys, how="left")[cols].reset_index(drop=True)


def _fill(cells: pd.Series, cfgs: pd.DataFrame, m: str, fails: dict) -> list[str]:
    """Cells with no value show the run's failure status, else a dash."""
    src = cfgs["source"] if "source" in cfgs else ["measured"] * len(cfgs)
    return [c if isinstance(c, str) else fails.get(tuple(k[:len(ROW)]) + (s, m), "—")
            for c, k, s in zip(cells, cfgs.itertuples(index=False), src)]


def throughput(runs, best, speedups) -> Table:
    keys = _row_keys(best)
    cfgs = _config_frame(best, keys)
    methods = order(best["method"].unique()) if not best.empty else []
    fails = _failures(runs)
    data, disp = cfgs.copy(), cfgs.rename(columns=ROW_NAMES).astype(object)
    for m in methods:
        al = _per_method(best, cfgs, keys, m, ["samples_per_s", "n_repeats", "samples_per_s_min",
                                               "samples_per_s_max"])
        v, n, lo, hi = (al[c] for c in al.columns)
        cells = pd.Series([None if pd.isna(x) else fmt.spread(x, a, b, r)
                           for x, r, a, b in zip(v, n, lo, hi)], dtype=object)
        disp[f"{label(m)} (samples/s)"] = _fill(cells, cfgs, m, fails)
        data[f"{m}_samples_per_s"], data[f"{m}_n"] = v.to_numpy(), n.to_numpy()
    _add_speedups(data, disp, cfgs, keys, speedups)
    notes = ["samples/s: global throughput, median [min–max] over repeats, or (n=1) for one run; "
             "oom/unsupported/timeout/error: the run's status (a cost model's: 'predicted oom'); n/a: the method cannot apply to this model (DSP on full 3-D attention); "
             "—: not run. DSP / X: DSP's samples/s over X's on the same row (same key, same source), "
             "[range] pairing the repeats' extremes."]
    return Table("throughput", "Throughput per method and DSP's speed-up", data, disp, notes)


def _add_speedups(data, disp, cfgs, keys, speedups) -> None:
    if speedups.empty:
        return
    for base in order(speedups["baseline"].unique()):
        s = speedups.assign(method=speedups["baseline"],
                            n=speedups[["n_repeats", "n_repeats_base"]].min(axis=1))
        al = _per_method(s, cfgs, keys, base, ["speedup", "speedup_lo", "speedup_hi", "n"])
        v, lo, hi, n = (al[c] for c in al.columns)
        disp[f"DSP / {label(base)}"] = [fmt.ratio_spread(x, a, b, k) for x, a, b, k in zip(v, lo, hi, n)]
        data[f"speedup_vs_{base}"] = v.to_numpy()


def details(agg: pd.DataFrame) -> Table:
    """Every configuration (all SP degrees): step time, throughput per GPU, MFU, comm, memory."""
    cols = ["method", "shard"] + ROW + ["source", "hardware", "n_repeats", "step_time_s", "samples_per_s",
            "samples_per_s_min", "samples_per_s_max", "samples_per_s_per_gpu", "tokens_per_s_per_gpu",
            "mfu", "comm_wire_bytes", "comm_sp_bytes", "comm_grad_bytes", "comm_share",
            "busbw_bytes_per_s", "mem_per_rank_bytes", "file", "line"]
    data = agg.reindex(columns=cols).sort_values(ROW + ["method"], key=_sort_key)
    d = pd.DataFrame({
        "method": data["method"].map(label),
        **{ROW_NAMES[c]: data[c] for c in ROW}, "numbers": data["source"], "hardware": data["hardware"],
        "step (s)": data["step_time_s"].map(fmt.num),
        "samples/s": [fmt.spread(x, a, b, n) for x, a, b, n in zip(data["samples_per_s"], data["samples_per_s_min"],
                                                                   data["samples_per_s_max"], data["n_repeats"])],
        "tokens/s/GPU": data["tokens_per_s_per_gpu"].map(fmt.num),
        "MFU": data["mfu"].map(fmt.pct),
        "SP comm (MiB/step)": data["comm_sp_bytes"].map(fmt.mib),
        "grad sync (MiB/step)": data["comm_grad_bytes"].map(fmt.mib),
        "comm share": data["comm_share"].map(fmt.pct),
        "bus bw (GB/s)": (data["busbw_bytes_per_s"] / 1e9).map(fmt.num),
        "peak mem/rank (GiB)": data["mem_per_rank_bytes"].map(fmt.gib)})
    notes = ["Per rank per step, wire bytes (nccl-tests convention): SP comm = the method's own "
             "traffic (switches, all-to-alls, ring, TP collectives, the model-exit gather); grad sync "
             "= the all-reduce of replicated parameters' gradients (ledger tags grad_sync, "
             "dp_grad_sync), which dominates on a tiny model. Comm share and bus bandwidth from a "
             "separate instrumented iteration (ops timed alone, no overlap); MFU: analytic FLOPs / "
             "device peak, — where the peak is unknown (CPU)."]
    links = [(f, int(n)) if isinstance(f, str) and not pd.isna(n) else None
             for f, n in zip(data["file"], data["line"])]
    return Table("details", "Every configuration: time, throughput, MFU, communication, memory",
                 data, d.reset_index(drop=True), notes, links)


def memory(runs, best) -> Table:
    keys = _row_keys(best)
    cfgs = _config_frame(best, keys)
    fails = _failures(runs)
    data, disp = cfgs.copy(), cfgs.rename(columns=ROW_NAMES).astype(object)
    for m in (order(best["method"].unique()) if not best.empty else []):
        v = _per_method(best, cfgs, keys, m, ["mem_per_rank_bytes"])["mem_per_rank_bytes"]
        data[f"{m}_peak_mem_bytes_per_rank"] = v.to_numpy()
        disp[f"{label(m)} (GiB)"] = _fill(v.map(lambda x: None if pd.isna(x) else fmt.gib(x)), cfgs, m, fails)
    return Table("memory", "Peak memory per rank (max over ranks), each method's best run", data, disp,
                 ["On CPU the peak is the C heap's live bytes at most (the record's mem_peak_step; a record "
                  "without it: the resident peak), the whole process's, not an accelerator's; "
                  "— in a measured run: not reported."])


def scaling(sc: pd.DataFrame) -> Table:
    cols = ["scaling", "series", "method", "gpus", "sp", "model", "mode", "frames", "spatial",
            "samples_per_s", "tokens_per_s_per_gpu", "efficiency", "base_gpus", "source"]
    data = sc.reindex(columns=cols)
    if not data.empty:
        data = data.assign(_o=data["method"].map({m: i for i, m in enumerate(order(data["method"]))}))
        data = data.sort_values(["scaling", "series", "_o", "gpus"]).drop(columns="_o")
    d = pd.DataFrame({"scaling": data["scaling"], "series": data["series"],
                      "method": data["method"].map(label), "GPUs": data["gpus"], "SP": data["sp"],
                      "T": data["frames"], "S": data["spatial"],
                      "samples/s": data["samples_per_s"].map(fmt.num),
                      "tokens/s/GPU": data["tokens_per_s_per_gpu"].map(lambda x: fmt.num(x, 3)),
                      "efficiency": data["efficiency"].map(fmt.pct)})
    return Table("scaling", "Strong and weak scaling efficiency", data, d.reset_index(drop=True),
                 ["efficiency = tokens/s per GPU relative to the series' smallest GPU count "
                  "(a single-device run at 1 GPU is every method's base when present); strong: fixed "
                  "T and S; weak: fixed tokens per GPU (T grows with the GPUs)."])
