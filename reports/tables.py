"""The report's tables, built from the derived frames (see derive.py, commvol.py, paper.py)."""
from __future__ import annotations

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.derive import COMPARE
from dspbench.reports.fmt import Table
from dspbench.reports.style import METRIC_STATUSES, label, order

ROW = ["model", "mode", "dtype", "batch", "frames", "spatial", "gpus"]
ROW_NAMES = {"model": "model", "mode": "mode", "dtype": "dtype", "batch": "B", "frames": "T",
             "spatial": "S", "gpus": "GPUs", "kind": "numbers", "hardware": "hardware"}


def _row_keys(df: pd.DataFrame) -> list[str]:
    """ROW, plus any other configuration column that varies (backend, kind, hardware, ...)."""
    shown = [c for c in COMPARE if c not in ROW and c in df and df[c].nunique(dropna=False) > 1]
    if "kind" not in shown and "kind" in df and (df["kind"] == "predicted").any():
        shown.append("kind")          # predicted numbers are always labelled as such
    return ROW + shown


def _failures(runs: pd.DataFrame) -> dict[tuple, str]:
    """(ROW..., method) -> status of failed runs where no run of that method and ROW has timings:
    a failed repeat next to a good one is not the configuration's outcome."""
    done = runs["status"].isin(METRIC_STATUSES)
    good = set(runs.loc[done, ROW + ["method"]].itertuples(index=False, name=None))
    bad = runs.loc[~done, ROW + ["method", "status"]].itertuples(index=False, name=None)
    return {k[:-1]: k[-1] for k in bad if k[:-1] not in good}


def _config_frame(best: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    if best.empty:
        return pd.DataFrame(columns=keys)
    return best[keys].drop_duplicates().sort_values(keys, key=_sort_key).reset_index(drop=True)


def _sort_key(col: pd.Series) -> pd.Series:
    return col.astype(str) if col.dtype == object else col


def _per_method(best, cfgs, keys, m, col) -> pd.Series:
    """best[col] of method m aligned to the rows of cfgs (NaN where m has no run)."""
    sub = best[best["method"] == m].set_index(keys)
    return sub[col].reindex(pd.MultiIndex.from_frame(cfgs)).reset_index(drop=True)


def _fill(cells: pd.Series, cfgs: pd.DataFrame, m: str, fails: dict) -> list[str]:
    """Cells with no value show the run's failure status, else a dash."""
    return [c if isinstance(c, str) else fails.get(tuple(k[:len(ROW)]) + (m,), "—")
            for c, k in zip(cells, cfgs.itertuples(index=False))]


def throughput(runs, best, speedups) -> Table:
    keys = _row_keys(best)
    cfgs = _config_frame(best, keys)
    methods = order(best["method"].unique()) if not best.empty else []
    fails = _failures(runs)
    data, disp = cfgs.copy(), cfgs.rename(columns=ROW_NAMES).astype(object)
    for m in methods:
        v, sp, n, spread = (_per_method(best, cfgs, keys, m, c)
                            for c in ("samples_per_s", "sp", "n_repeats", "spread_pct"))
        cells = pd.Series([None if pd.isna(x) else fmt.num(x) + (f" ±{h / 2:.0f}%" if r > 1 else "")
                           + (f" (sp {int(p)})" if p != g else "")
                           for x, r, h, p, g in zip(v, n, spread, sp, cfgs["gpus"])], dtype=object)
        disp[f"{label(m)} (samples/s)"] = _fill(cells, cfgs, m, fails)
        data[f"{m}_samples_per_s"], data[f"{m}_sp"] = v.to_numpy(), sp.to_numpy()
    _add_speedups(data, disp, cfgs, keys, speedups)
    notes = ["samples/s: global throughput, median over repeats (± half the min-max range); "
             "(sp N): the method's best SP degree when it is not the GPU count; "
             "oom/unsupported/timeout/error: the run's status; —: not run. DSP / X: ratio of samples/s."]
    return Table("throughput", "Throughput per method and DSP's speed-up", data, disp, notes)


def _add_speedups(data, disp, cfgs, keys, speedups) -> None:
    if speedups.empty:
        return
    for base in order(speedups["baseline"].unique()):
        v = _per_method(speedups.assign(method=speedups["baseline"]), cfgs, keys, base, "speedup")
        disp[f"DSP / {label(base)}"] = v.map(fmt.times).to_numpy()
        data[f"speedup_vs_{base}"] = v.to_numpy()


def details(agg: pd.DataFrame) -> Table:
    """Every configuration (all SP degrees): step time, throughput per GPU, MFU, comm, memory."""
    cols = ["method", "sp", "shard"] + ROW + ["kind", "n_repeats", "step_time_s", "samples_per_s",
            "samples_per_s_per_gpu", "tokens_per_s_per_gpu", "mfu", "comm_wire_bytes",
            "comm_share", "busbw_bytes_per_s", "mem_per_rank_bytes", "spread_pct"]
    data = agg.reindex(columns=cols).sort_values(ROW + ["method", "sp"], key=_sort_key)
    d = pd.DataFrame({
        "method": data["method"].map(label), "SP": data["sp"].astype("Int64"),
        **{ROW_NAMES[c]: data[c] for c in ROW}, "numbers": data["kind"], "repeats": data["n_repeats"],
        "step (s)": data["step_time_s"].map(fmt.num), "samples/s": data["samples_per_s"].map(fmt.num),
        "samples/s/GPU": data["samples_per_s_per_gpu"].map(fmt.num),
        "tokens/s/GPU": data["tokens_per_s_per_gpu"].map(lambda x: fmt.num(x, 3)),
        "MFU": data["mfu"].map(fmt.pct),
        "comm/rank/step (MiB)": data["comm_wire_bytes"].map(fmt.mib),
        "comm share of step": data["comm_share"].map(fmt.pct),
        "bus bw (GB/s)": (data["busbw_bytes_per_s"] / 1e9).map(lambda x: fmt.num(x, 3)),
        "peak mem/rank (GiB)": data["mem_per_rank_bytes"].map(fmt.gib)})
    notes = ["comm: wire bytes sent per rank per step (nccl-tests convention); comm share and bus "
             "bandwidth from a separate instrumented iteration (ops timed alone, no overlap); "
             "MFU: analytic FLOPs / device peak, — where the peak is unknown (CPU)."]
    return Table("details", "Every configuration: time, throughput, MFU, communication, memory",
                 data, d.reset_index(drop=True), notes)


def memory(runs, best) -> Table:
    keys = _row_keys(best)
    cfgs = _config_frame(best, keys)
    fails = _failures(runs)
    data, disp = cfgs.copy(), cfgs.rename(columns=ROW_NAMES).astype(object)
    for m in (order(best["method"].unique()) if not best.empty else []):
        v = _per_method(best, cfgs, keys, m, "mem_per_rank_bytes")
        data[f"{m}_peak_mem_bytes_per_rank"] = v.to_numpy()
        disp[f"{label(m)} (GiB)"] = _fill(v.map(lambda x: None if pd.isna(x) else fmt.gib(x)), cfgs, m, fails)
    return Table("memory", "Peak memory per rank (max over ranks), each method's best run", data, disp,
                 ["On CPU the peak is the process's resident memory, not an accelerator's; "
                  "— in a measured run: not reported."])


def scaling(sc: pd.DataFrame) -> Table:
    cols = ["scaling", "series", "method", "gpus", "sp", "model", "mode", "frames", "spatial",
            "samples_per_s", "tokens_per_s_per_gpu", "efficiency", "base_gpus", "kind"]
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
