"""Load one sweep, `results/<sweep>/`, into a tidy DataFrame: one row per run and repeat.

Records are read with `dspbench.records.io.read_records` (corrupt or truncated lines and foreign
schema versions come back as "file:line: ..." problems and are skipped; the rest loads). A
re-run appends a second record with the same run_id; we keep one per run_id: a measured `ok`
record beats a prediction, which beats failures, and among equals the newest wins: `recorded_at`
(ISO 8601) when records carry it, else file order (sorted paths, then line order).
A predicted record (`source` predicted) whose run_id was also measured (the emulated cluster
writes both) is not a duplicate but the measurement's prediction: it goes to `Sweep.predicted`
(newest per run_id).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dspbench.records.io import read_records
from dspbench.reports import meta
from dspbench.reports.provenance import normalise

# Columns every downstream step may rely on (absent from old or partial records: NaN/None).
NUMERIC = ("batch", "frames", "spatial", "hidden", "depth", "heads", "params", "world_size", "gpus",
           "sp", "dp", "sample_steps", "warmup", "iters", "seed", "repeat", "step_time_median_s",
           "step_time_p10_s", "step_time_p90_s", "samples_per_s", "tokens_per_s", "mfu",
           "peak_mem_bytes", "comm_wire_bytes", "oracle_max_abs_err", "zero", "mem_budget_mib", "_line",
           "s_per_video", "s_per_sample_step", "predicted_end_to_end_s")
INTEGER = ("batch", "frames", "spatial", "hidden", "depth", "heads", "world_size", "gpus", "sp", "dp",
           "sample_steps", "repeat", "zero", "mem_budget_mib")
OBJECT = ("method", "model", "mode", "dtype", "backend", "shard", "launcher", "status", "error",
          "grad_ckpt", "comm", "comm_tagged", "comm_time_s", "environ", "peak_mem_bytes_per_rank",
          "comm_formula_match", "recorded_at", "comm_formula", "oracle_errors", "source", "outcome",
          "file", "step_times_s", "cfg", "cfg_parallel", "sp_auto", "placement", "compiled", "software", "hardware_profile",
          "time_includes", "model_approximated", "published")


def _rank(df: pd.DataFrame) -> pd.Series:
    """0: a measured (or synthetic) ok; 1: a prediction that fits; 2: any failure."""
    ok = df["outcome"] == "ok"
    return (~ok).astype(int) * 2 + (ok & (df["source"] == "predicted")).astype(int)


@dataclass
class Sweep:
    name: str
    root: Path
    runs: pd.DataFrame                       # one row per kept record
    problems: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    manifest: dict = field(default_factory=dict)
    predicted: pd.DataFrame = field(default_factory=pd.DataFrame)   # predictions of measured run_ids


def load_sweep(root: str | Path) -> Sweep:
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no results directory {root}")
    manifest, problems = _manifest(root)
    rows = []
    for path in sorted(root.rglob("*.jsonl")):
        recs, probs = read_records(path, lines=True)
        problems += probs
        rel = path.relative_to(root).as_posix()
        for r in recs:
            normalise(r)
            r["file"] = rel           # where the raw record lives, for the report's row links
        rows += recs
    meta.learn_records(rows)     # each method's label and colour, as the code that ran it declared
    runs, predicted = _split_predictions(_frame(rows))
    runs, duplicates = _dedupe(runs)
    name = str(manifest.get("name") or manifest.get("sweep") or root.name)
    return Sweep(name, root, runs, problems, duplicates, manifest, predicted)


def _split_predictions(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(records, predictions of run_ids that also have a measured record, newest per run_id)."""
    if df.empty:
        return df, df
    pred = df["source"] == "predicted"
    paired = pred & df["run_id"].isin(set(df.loc[~pred, "run_id"]))
    predicted, _ = _dedupe(df[paired])
    return df[~paired].reset_index(drop=True), predicted


def _manifest(root: Path) -> tuple[dict, list[str]]:
    path = root / "manifest.json"
    if not path.exists():
        return {}, []
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return {}, [f"{path}: unreadable manifest ({e}), ignored"]
    if not isinstance(data, dict):
        return {}, [f"{path}: manifest is not a JSON object, ignored"]
    return data, []


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame()
    df["order"] = range(len(df))        # file order: the tie-break when there is no timestamp
    for col in OBJECT:
        if col not in df:
            df[col] = None
    for col in NUMERIC:
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else float("nan")
    # The record names the world size; RunConfig calls it gpus. Either may be present.
    df["gpus"] = df["gpus"].fillna(df["world_size"])
    df["world_size"] = df["world_size"].fillna(df["gpus"])
    df["dp"] = df["dp"].fillna(df["gpus"] / df["sp"])
    df["grad_ckpt"] = df["grad_ckpt"].fillna(False).astype(bool)
    df["cfg"] = df["cfg"].fillna(False).astype(bool)
    df["cfg_parallel"] = df["cfg_parallel"].fillna(False).astype(bool)   # records before the flag
    df["software"] = df["software"].fillna("eager")       # eager unless said (predict --compiled, published)
    df["zero"] = df["zero"].fillna(0)
    df["mem_budget_mib"] = df["mem_budget_mib"].fillna(0)       # records before the field: no budget
    df["sp_auto"] = df["sp_auto"].fillna(False).astype(bool)
    # the harness stamps environ.recorded_at; a top-level recorded_at (if any) wins
    stamped = [e.get("recorded_at") if isinstance(e, dict) else None for e in df["environ"]]
    df["recorded_at"] = df["recorded_at"].fillna(pd.Series(stamped, index=df.index, dtype=object))
    df["recorded_at"] = pd.to_datetime(df["recorded_at"], errors="coerce", utc=True, format="ISO8601")
    for col in ("mode", "dtype", "backend", "shard"):
        df[col] = df[col].fillna("?")
    df["sample_steps"] = df["sample_steps"].fillna(1)
    df["repeat"] = df["repeat"].fillna(0)
    for col in INTEGER:     # integers stay integers (2, not 2.0) unless a record lacks the field
        if df[col].notna().all():
            df[col] = df[col].astype("int64")
    return df


def _dedupe(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    if df.empty:
        return df, []
    epoch = pd.Timestamp(0, tz="UTC")
    newest = (df["recorded_at"] - epoch).dt.total_seconds().fillna(float("-inf"))  # untimed lose
    df = df.assign(_rank=_rank(df), _ts=newest)
    df = df.sort_values(["run_id", "_rank", "_ts", "order"], ascending=[True, True, False, False])
    dup = df["run_id"].duplicated(keep=False)
    notes = []
    for rid, grp in df[dup].groupby("run_id", sort=True):
        kept = grp.iloc[0]
        notes.append(f"run_id {rid}: {len(grp)} records ({', '.join(grp['status'].astype(str))}); "
                     f"kept the {kept['status']} record from {kept['file']}")
    df = df.drop_duplicates("run_id", keep="first").drop(columns=["_rank", "_ts"])
    return df.sort_values("order").reset_index(drop=True), notes
