"""The report's text sections: what ran (manifest as a small table + the full JSON), caveats
(true ones only), the synthetic-data banner, the status table, and the compare section."""
from __future__ import annotations

import json

import pandas as pd

from dspbench.reports.envinfo import environment_table
from dspbench.reports.fmt import Table
from dspbench.reports.provenance import status_label
from dspbench.reports.style import label, order


def banner(runs: pd.DataFrame) -> list:
    """What the numbers are where not all are ours and measured: synthetic fixtures, published citations."""
    count = lambda s: int((runs["source"] == s).sum()) if not runs.empty else 0
    out = []
    if count("synthetic"):
        out.append(("banner", f"Synthetic data: {count('synthetic')} of {len(runs)} runs are synthetic fixtures "
                              "(a toy cost model for tests and benchmarks), not measurements. Do not quote them."))
    if count("published"):
        out.append(("banner", f"Published data: {count('published')} of {len(runs)} rows are published measurements "
                              f"({published_sources(runs)}), cited, not run here: labelled 'published', beside the "
                              "measured and predicted rows, never in a ratio with them. Their times are what the "
                              "source timed (end to end unless a row says otherwise)."))
    return out


def published_sources(runs: pd.DataFrame) -> str:
    """The citations of the published rows, each with what its time includes."""
    pub = runs[runs["source"] == "published"]
    cites = {}
    for p, inc in zip(pub["published"], pub["time_includes"]):
        if isinstance(p, dict):
            cites.setdefault(p.get("citation", "?"), inc)
    return "; ".join(f"{c} [{inc or '?'}]" for c, inc in sorted(cites.items()))


def status_table(runs: pd.DataFrame) -> Table:
    """Runs by method and status; a prediction's status says so ('predicted oom')."""
    if runs.empty:
        return Table("status", "Runs by method and status (after de-duplication)", pd.DataFrame(), pd.DataFrame())
    lab = [status_label(o, s) for o, s in zip(runs["outcome"].fillna(runs["status"]), runs["source"])]
    counts = pd.crosstab(runs["method"], pd.Series(lab, index=runs.index, name="status"))
    counts = counts.reindex(order(counts.index))
    data = counts.reset_index()
    disp = data.astype(object)
    disp["method"] = disp["method"].map(label)
    return Table("status", "Runs by method and status (after de-duplication)", data, disp)


def environment(runs: pd.DataFrame) -> Table:
    env = environment_table(runs)
    return Table("environment", "Where the numbers come from", env, env.astype(object))


def what_ran(runs: pd.DataFrame, sweep, status: Table) -> list:
    r, s = runs, sweep
    if r.empty:
        facts = [f"no records under `{s.root}` (nothing ran yet, or every line was unreadable: "
                 "see Data problems)"]
    else:
        files = sorted(set(r["file"].dropna()))
        facts = [f"{len(r)} runs from {len(files)} record file(s) under `{s.root}`",
                 f"methods: {', '.join(label(m) for m in order(r['method'].dropna().unique()))}",
                 f"models: {_vals(r['model'])}; modes: {_vals(r['mode'])}; dtypes: {_vals(r['dtype'])}",
                 f"GPUs (world size): {_ints(r['gpus'])}; frames T: {_ints(r['frames'])}; "
                 f"spatial tokens S: {_ints(r['spatial'])}; repeats: {_ints(r['repeat'] + 1, 'max')}"]
    blocks = [("h2", "What was run"), ("list", facts)]
    if s.manifest:        # a small table of the short facts, the whole manifest one click away
        short = [(k, str(v)) for k, v in s.manifest.items()
                 if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 120]
        if short:
            blocks.append(("kv", short))
        blocks.append(("details", "Sweep manifest (manifest.json, full)",
                       json.dumps(s.manifest, indent=1, sort_keys=True, default=str)))
    blocks.append(("table", status))
    errors = r[r["error"].notna() & (r["status"] != "ok")] if not r.empty else r
    if not errors.empty:
        blocks.append(("p", "Failed runs (first 10):"))
        blocks.append(("list", [f"{e.method} gpus={_i(e.gpus)} T={_i(e.frames)} S={_i(e.spatial)}: "
                                f"{status_label(e.outcome, e.source)}: {str(e.error)[:200]}"
                                for e in errors.head(10).itertuples()]))
    return blocks


def _vals(col: pd.Series) -> str:
    return ", ".join(sorted(map(str, col.dropna().unique())))


def _i(x) -> str:
    return "?" if pd.isna(x) else str(int(x))


def _ints(col: pd.Series, how: str = "all") -> str:
    vals = sorted({int(v) for v in col.dropna()})
    if not vals:
        return "?"
    return str(vals[-1]) if how == "max" else ", ".join(map(str, vals))


def caveats(a) -> list[str]:
    r = a.runs
    out = []
    if r.empty:
        return ["No records: nothing to qualify."]
    if (r["backend"] == "gloo").any() or r["hardware"].astype(str).str.startswith("CPU").any():
        out.append("CPU/gloo timings are not GPU performance: they show how the methods' compute and "
                   "communication trade off on this machine, not what an H100/H800 cluster achieves.")
    out.append("Byte convention: wire bytes each rank sends per step (nccl-tests); the paper's Table 3 "
               "counts whole tensors moved per device, = wire × N/(N-1) per layer (both shown).")
    out.append("Communication time comes from a separate instrumented iteration (barrier before each "
               "op, timed alone): the comm share of step time ignores overlap and is an estimate.")
    src = r["source"].value_counts()
    pred, syn, paired = int(src.get("predicted", 0)), int(src.get("synthetic", 0)), len(a.sweep.predicted)
    if pred:
        out.append(f"{pred} run(s) are predicted by a cost model, not measured: tables label them in "
                   "their 'numbers' column and never put them in a cell or ratio with measured ones; "
                   "figures draw them dashed.")
    if syn:
        out.append(f"{syn} run(s) are synthetic fixtures, not measurements.")
    if paired:
        out.append(f"{paired} measured run(s) also have a cost-model prediction (same run_id): the "
                   "'Predicted vs measured' table sets them side by side.")
    pub = int(src.get("published", 0))
    if pub:
        out.append(f"{pub} run(s) are published measurements (cited, not run here): tables label them "
                   "'published' in their 'numbers' column, figures draw them dotted; a published time is "
                   "what its source timed (`time_includes`: end to end, text encoding and VAE included, "
                   "unless said), while measured and predicted step times here are the denoising loop, so "
                   "the two are compared only with `dspbench compare --by source`, which pairs like with like.")
    if not pred and not syn and not paired and not pub:
        out.append("Every number here is measured; none is predicted by a cost model, published or synthetic.")
    if not a.agg.empty and (a.agg["n_repeats"] < 2).any():
        out.append("Some configurations ran once (n=1): no spread is shown for them, and no error bars.")
    return out


COMPARE_ROWS = 40     # a report's compare section; `dspbench compare` gives every configuration


def compare_section(runs: pd.DataFrame) -> list:
    """Each method against DSP (same key), when the sweep has DSP and another SP method: the
    COMPARE_ROWS configurations with the most GPUs and the longest sequences (bootstraps cost)."""
    from dspbench.reports.compare import by_method, table
    methods = [m for m in order(runs["method"].dropna().unique()) if m not in ("dsp", "single")]
    if runs.empty or "dsp" not in set(runs["method"]) or not methods:
        return [("h2", "Compare: each method vs DSP")]
    runs = _largest(runs, COMPARE_ROWS // len(methods) or 1)
    frames = [by_method(runs, "dsp", m) for m in methods]
    df = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(
        not f.empty for f in frames) else frames[0]
    t = table(df.assign(method=df["b"]) if not df.empty else df, "Step time of each method vs DSP (B/A, A = DSP)")
    if n_cfg := runs.attrs.get("cut"):
        t.notes.append(f"{n_cfg}: `dspbench compare dsp METHOD --by method --results DIR` lists them all.")
    return [("h2", "Compare: each method vs DSP"), ("table", t)]


def _largest(runs: pd.DataFrame, n: int) -> pd.DataFrame:
    """Runs of the n configurations (shape x GPUs x source ...) with the most GPUs, longest sequences."""
    from dspbench.reports.derive import COMPARE
    keys = runs[list(COMPARE)].drop_duplicates()
    if len(keys) <= n:
        return runs
    keys = keys.assign(_t=keys["frames"] * keys["spatial"]).sort_values(["gpus", "_t"], ascending=False).head(n)
    out = runs.merge(keys.drop(columns="_t"), on=list(COMPARE))
    out.attrs["cut"] = (f"{len(runs[list(COMPARE)].drop_duplicates())} configurations; showing the {n} "
                        "with the most GPUs and the longest sequences")
    return out
