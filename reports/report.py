"""build_report(results_dir): one sweep's records -> tables, figures, index.md and index.html."""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dspbench.reports import (captions, claims, derive, figures, figures_cost, headline, paper, render, render_html,
                              sections, tables, tables_buckets, tables_comm, tables_cost)
from dspbench.reports.collect import Sweep, load_sweep
from dspbench.reports.commvol import volume_table
from dspbench.reports.fmt import Table


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


def analyse(results_dir, with_tables: bool = True) -> Analysis:
    """The frames every table and figure is drawn from (and the tables, unless with_tables=False:
    build_report builds them while the figure workers draw)."""
    sweep = load_sweep(results_dir)
    runs = derive.enrich(sweep.runs)
    agg = derive.aggregate(runs)
    best = derive.best(agg)
    sp = derive.speedups(best)
    a = Analysis(sweep, runs, agg, best, sp, derive.scaling(best), volume_table(runs))
    if with_tables:
        add_tables(a)
    return a


def add_tables(a: Analysis) -> None:
    runs, best, sp = a.runs, a.best, a.speedups
    a.tables = [tables.throughput(runs, best, sp), tables.scaling(a.scaling), tables.memory(runs, best),
                tables_comm.volume(a.volume), tables_comm.per_op_time(runs), *tables_buckets.tables(runs),
                *paper.tables(best, sp),
                tables_cost.predicted_vs_measured(runs, a.sweep.predicted), tables.details(a.agg)]


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
    a = analyse(results_dir, with_tables=False)
    for problem in a.sweep.problems:
        log.warning(problem)
    collect = start_figures(a, out / "figures", jobs)      # drawn while the tables are built
    try:
        add_tables(a)
        status = sections.status_table(a.runs)
        compare = sections.compare_section(a.runs)
        tabs = [sections.environment(a.runs), status, *a.tables, *[b[1] for b in compare if b[0] == "table"]]
        for t in tabs:
            t.write(out / "tables")
    finally:
        figs = collect()                                   # always reap the figure workers
    blocks = _blocks(a, tabs[0], status, figs, compare)
    for b in blocks:
        if b[0] == "table" and b[1].name.startswith(("headline_", "protocol_")):
            b[1].write(out / "tables")
    (out / "index.md").write_text(render.markdown(blocks, out))
    page = out / "index.html"
    rel_root = os.path.relpath(results_dir.resolve(), out.resolve()).replace(os.sep, "/")
    page.write_text(render_html.page(blocks, f"dspbench report: {a.sweep.name}", rel_root))
    return page


HEAVY_FIRST = (0, 2, 4, 1, 3)   # FIGURES by drawing cost, so two workers finish together
_WORKER: tuple = ()              # (analysis, folder) in a figure worker, inherited through fork


def _draw(a: Analysis, folder: Path, i: int):
    name, title, plot = FIGURES[i]
    fig, notes = plot(a)
    if fig is None:
        return ("figure", title, None, [notes], "")
    caption = captions.CAPTIONS[name](a)
    paths = figures.save(fig, folder, name)
    svg = paths["svg"].read_text()          # the file, too, says what it shows
    paths["svg"].write_text(render_html.add_title(svg, title, caption or title, name))
    return ("figure", title, paths, notes, caption)


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


def _blocks(a: Analysis, env: Table, status: Table, figs: list, compare: list) -> list:
    s = a.sweep
    speed = next(f for f, spec in zip(figs, FIGURES) if spec[0] == "speedup")
    rest = [f for f, spec in zip(figs, FIGURES) if spec[0] != "speedup"]
    return [("h1", f"dspbench report: {s.name}"), *sections.banner(a.runs),
            *headline.blocks(a, speed), *claims.blocks(a.runs), ("toc",),
            *sections.what_ran(a.runs, s, status),
            ("h2", "Caveats"), ("list", sections.caveats(a)),
            ("h2", "Hardware and software"), ("table", env),
            ("h2", "Tables"), *[("table", t) for t in a.tables],
            *compare,
            ("h2", "Figures"), *rest,
            ("h2", "Data problems"), ("list", s.problems + s.duplicates)]
