"""build_report(results_dir): one sweep's records -> tables, figures, index.md and index.html."""
from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dspbench.reports import derive, figures, figures_cost, paper, render, tables, tables_comm, tables_cost
from dspbench.reports.collect import Sweep, load_sweep
from dspbench.reports.commvol import volume_table
from dspbench.reports.envinfo import environment_table
from dspbench.reports.fmt import Table
from dspbench.reports.style import label, order


log = logging.getLogger("dspbench.reports")


@dataclass
class Analysis:
    sweep: Sweep
    runs: pd.DataFrame            # one row per kept record, with derived columns
    agg: pd.DataFrame             # one row per configuration (repeats aggregated)
    best: pd.DataFrame            # each method's best run per configuration
    speedups: pd.DataFrame
    scaling: pd.DataFrame
    volume: pd.DataFrame
    tables: list[Table] = field(default_factory=list)


def analyse(results_dir) -> Analysis:
    sweep = load_sweep(results_dir)
    runs = derive.enrich(sweep.runs)
    agg = derive.aggregate(runs)
    best = derive.best(agg)
    sp = derive.speedups(best)
    a = Analysis(sweep, runs, agg, best, sp, derive.scaling(best), volume_table(runs))
    a.tables = [tables.throughput(runs, best, sp), tables.scaling(a.scaling), tables.memory(runs, best),
                tables_comm.volume(a.volume), tables_comm.per_op_time(runs), *paper.tables(best, sp),
                tables_cost.predicted_vs_measured(runs, sweep.predicted), tables.details(agg)]
    return a


FIGURES = (
    ("throughput", "Throughput vs GPUs", lambda a: figures.plot_throughput(a.best)),
    ("speedup", "DSP speed-up over each baseline", lambda a: figures.plot_speedup(a.speedups)),
    ("comm_volume", "Communication per layer by op and phase", lambda a: figures_cost.plot_comm_volume(a.runs)),
    ("scaling", "Strong and weak scaling", lambda a: figures.plot_scaling(a.scaling)),
    ("memory", "Peak memory per rank", lambda a: figures_cost.plot_memory(a.best)),
)


def build_report(results_dir, out_dir=None, jobs: int | None = None) -> Path:
    """Write `<out_dir>/index.md` and a self-contained `index.html`; return the HTML's path.

    `jobs`: processes drawing figures (default: up to 2 where fork exists; 1 = in this process).
    """
    results_dir = Path(results_dir)
    out = Path(out_dir) if out_dir is not None else results_dir / "report"
    a = analyse(results_dir)
    for problem in a.sweep.problems:
        log.warning(problem)
    collect = start_figures(a, out / "figures", jobs)      # drawn while the tables are written
    tabs = [_environment(a), status_table(a.runs), *a.tables]
    try:
        for t in tabs:
            t.write(out / "tables")
    finally:
        figs = collect()                                   # always reap the figure workers
    blocks = _blocks(a, tabs, figs)
    (out / "index.md").write_text(render.markdown(blocks, out))
    page = out / "index.html"
    page.write_text(render.html_page(blocks, f"dspbench report: {a.sweep.name}"))
    return page


HEAVY_FIRST = (0, 2, 4, 1, 3)   # FIGURES by drawing cost, so two workers finish together
_WORKER: tuple = ()              # (analysis, folder) in a figure worker, inherited through fork


def _draw(a: Analysis, folder: Path, i: int):
    name, title, plot = FIGURES[i]
    fig, notes = plot(a)
    if fig is None:
        return ("figure", title, None, [notes])
    return ("figure", title, figures.save(fig, folder, name), notes)


def _init_worker(a: Analysis, folder: Path) -> None:
    global _WORKER
    _WORKER = (a, folder)


def _draw_in_worker(i: int):
    return _draw(*_WORKER, i)


def start_figures(a: Analysis, folder: Path, jobs: int | None = None):
    """Start drawing the figures (matplotlib is single-threaded and most of a report's time);
    returns a function that waits for their blocks, in FIGURES order."""
    if jobs is None:
        jobs = min(2, os.cpu_count() or 1) if "fork" in mp.get_all_start_methods() else 1
    if jobs <= 1:
        return lambda: [_draw(a, folder, i) for i in range(len(FIGURES))]
    # fork: the workers inherit the analysis instead of unpickling it
    pool = mp.get_context("fork").Pool(jobs, initializer=_init_worker, initargs=(a, folder))
    pending = pool.map_async(_draw_in_worker, HEAVY_FIRST, chunksize=1)

    def collect() -> list:
        try:
            got = dict(zip(HEAVY_FIRST, pending.get()))
        finally:
            pool.close()
            pool.join()
        return [got[i] for i in range(len(FIGURES))]
    return collect


def status_table(runs: pd.DataFrame) -> Table:
    counts = pd.crosstab(runs["method"], runs["status"]) if not runs.empty else pd.DataFrame()
    counts = counts.reindex(order(counts.index)) if not counts.empty else counts
    data = counts.reset_index()
    disp = data.astype(object)
    if not disp.empty:
        disp["method"] = disp["method"].map(label)
    return Table("status", "Runs by method and status (after de-duplication)", data, disp)


def _what_ran(a: Analysis, status: Table) -> list:
    r, s = a.runs, a.sweep
    files = sorted(set(r["source"].dropna()))
    facts = [f"{len(r)} runs from {len(files)} record file(s) under `{s.root}`",
             f"methods: {', '.join(label(m) for m in order(r['method'].dropna().unique()))}",
             f"models: {', '.join(sorted(map(str, r['model'].dropna().unique())))}; modes: "
             f"{', '.join(sorted(map(str, r['mode'].unique())))}; dtypes: {', '.join(sorted(map(str, r['dtype'].unique())))}",
             f"GPUs (world size): {_ints(r['gpus'])}; frames T: {_ints(r['frames'])}; "
             f"spatial tokens S: {_ints(r['spatial'])}; repeats: {_ints(r['repeat'] + 1, 'max')}"]
    if r.empty:
        facts = [f"no records under `{s.root}` (nothing ran yet, or every line was unreadable: "
                 "see Data problems)"]
    blocks = [("h2", "What was run"), ("list", facts)]
    if s.manifest:   # the sweep's own description, one line per key
        blocks.append(("p", "Sweep manifest (`manifest.json`):"))
        blocks.append(("code", "\n".join(f"{k}: {json.dumps(v, sort_keys=True, default=str)[:500]}"
                                          for k, v in s.manifest.items())))
    blocks.append(("table", status))
    errors = r[r["error"].notna() & (r["status"] != "ok")]
    if not errors.empty:
        blocks.append(("p", "Failed runs (first 10):"))
        blocks.append(("list", [f"{e.method} gpus={_i(e.gpus)} T={_i(e.frames)} S={_i(e.spatial)}: "
                                f"{e.status}: {str(e.error)[:200]}" for e in errors.head(10).itertuples()]))
    return blocks


def _i(x) -> str:
    return "?" if pd.isna(x) else str(int(x))


def _ints(col: pd.Series, how: str = "all") -> str:
    vals = sorted({int(v) for v in col.dropna()})
    if not vals:
        return "?"
    return str(vals[-1]) if how == "max" else ", ".join(map(str, vals))


def _caveats(a: Analysis) -> list[str]:
    r = a.runs
    out = []
    if (r["backend"] == "gloo").any() or r["hardware"].astype(str).str.startswith("CPU").any():
        out.append("CPU/gloo timings are not GPU performance: they show how the methods' compute and "
                   "communication trade off on this machine, not what an H100/H800 cluster achieves.")
    out.append("Byte convention: wire bytes each rank sends per step (nccl-tests); the paper's Table 3 "
               "counts whole tensors moved per device, = wire × N/(N-1) per layer (both shown).")
    out.append("Communication time comes from a separate instrumented iteration (barrier before each "
               "op, timed alone): the comm share of step time ignores overlap and is an estimate.")
    pred, paired = int((r["status"] == "predicted").sum()), len(a.sweep.predicted)
    if pred:
        out.append(f"{pred} run(s) are predicted by a cost model (status `predicted`), not measured: "
                   "tables say so in their 'numbers' column, figures draw them dashed.")
    if paired:
        out.append(f"{paired} measured run(s) also have a cost-model prediction (same run_id): the "
                   "'Predicted vs measured' table sets them side by side.")
    if not pred and not paired:
        out.append("Every number here is measured; none is predicted by a cost model.")
    if not r.empty and (a.agg.get("n_repeats", pd.Series([2])) < 2).any():
        out.append("Some configurations ran once: no spread is available for them.")
    return out


def _environment(a: Analysis) -> Table:
    env = environment_table(a.runs)
    return Table("environment", "Where the numbers come from", env, env.astype(object))


def _blocks(a: Analysis, tables: list[Table], figs: list) -> list:
    env, status, *rest = tables
    s = a.sweep
    return [("h1", f"dspbench report: {s.name}"), *_what_ran(a, status),
            ("h2", "Hardware and software"), ("table", env),
            ("h2", "Caveats"), ("list", _caveats(a)),
            ("h2", "Tables"), *[("table", t) for t in rest],
            ("h2", "Figures"), *figs,
            ("h2", "Data problems"), ("list", s.problems + s.duplicates)]
