"""The report's figures (seaborn on Agg). Each `plot_*` returns (Figure, notes) or (None, why).

One colour per method everywhere (its MethodSpec's, reports/meta.py); units on every axis; figures
with too many panels keep the largest ones and say so in their notes.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
import seaborn as sns

from dspbench.reports.style import RC, colour, label, order

MAX_PANELS = 4     # more panels make figures unreadable, and each costs ~0.15 s to draw
MAX_BARS = 12      # configurations in a bar chart, wrapped in rows of BARS_PER_ROW
BARS_PER_ROW = 6
CONTEXT = ("model", "mode", "dtype", "batch", "cfg_parallel", "hardware", "source")   # panel keys shown only if they vary
OP_COLOURS = {"all_to_all": "#E69F00", "all_gather": "#56B4E9", "reduce_scatter": "#009E73",
              "send_recv": "#F0E442", "all_reduce": "#999999"}


def theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", rc=RC)


LEGEND_IN = 2.6   # inches kept free right of the panels for the legend (layout(): no crop pass)


def layout(fig) -> None:
    """Tight panels left of a legend column: the legend fits inside the figure, so saving needs
    no tight-bbox pass (a full extra draw of every text on a 10,000-record sweep)."""
    w = fig.get_figwidth()
    fig.tight_layout(rect=(0, 0, 1 - LEGEND_IN / w, 1))


def legend_x(fig) -> float:
    return 1 - LEGEND_IN / fig.get_figwidth() + 0.01


def save(fig, folder: Path, name: str) -> dict[str, Path]:
    """PNG and SVG of `fig` (laid out by layout(): legends inside the canvas)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {ext: folder / f"{name}.{ext}" for ext in ("png", "svg")}
    for ext, p in paths.items():   # no timestamps in the files: the same data gives the same bytes
        fig.savefig(p, metadata={"Date": None} if ext == "svg" else {"Software": None})
    plt.close(fig)
    return paths


SOURCE_LINES = {"predicted": "--", "published": ":"}     # measured and synthetic: solid


def line_style(sources: pd.Series) -> str:
    """A line's style by where its numbers come from (a panel holds one source: CONTEXT keys it)."""
    kinds = set(sources)
    return SOURCE_LINES.get(kinds.pop() if len(kinds) == 1 else None, "-")


def varying_context(df: pd.DataFrame, cols=CONTEXT) -> list[str]:
    return [c for c in cols if c in df and df[c].nunique(dropna=False) > 1]


def _ctx_text(k: str, v) -> str:
    """A context value as a label says it: B=2, CFG parallel / CFG batch, else the value."""
    if k == "batch":
        return f"B={int(v)}"
    if k == "cfg_parallel":
        return "CFG parallel" if v else "CFG batch"
    return str(v)


def panel_title(key: dict) -> str:
    shape = f"T={int(key['frames'])} S={int(key['spatial'])}" if "frames" in key else ""
    ctx = " ".join(_ctx_text(k, v) for k, v in key.items() if k not in ("frames", "spatial"))
    return "\n".join(x for x in (ctx, shape) if x)


def split_panels(df: pd.DataFrame, keys: list[str], size_col: str, min_size: int = 1) -> tuple[list, list[str]]:
    """Panel groups with at least `min_size` distinct `size_col` values, the richest kept, key order."""
    groups = [(k, g) for k, g in df.groupby(keys, dropna=False, sort=True) if g[size_col].nunique() >= min_size]
    notes = []
    if len(groups) > MAX_PANELS:
        notes.append(f"{len(groups)} panels; showing the {MAX_PANELS} with the most {size_col} values.")
        rich = sorted(range(len(groups)), key=lambda i: -groups[i][1][size_col].nunique())[:MAX_PANELS]
        groups = [groups[i] for i in sorted(rich)]
    return [(dict(zip(keys, k if isinstance(k, tuple) else (k,))), g) for k, g in groups], notes


def panel_grid(n: int, w: float = 4.2, h: float = 3.4):
    cols = 2 if n == 4 else min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols + LEGEND_IN, h * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def bar_rows(configs: list[str], per_config: int):
    """(figure, [(axes, configurations)]): grouped bars wrapped in rows; one long row is unreadable."""
    chunks = [configs[i:i + BARS_PER_ROW] for i in range(0, len(configs), BARS_PER_ROW)]
    width = max(8.0, 1.1 * len(chunks[0]) * max(1, per_config) ** 0.5 + 2 + LEGEND_IN)
    fig, axes = plt.subplots(len(chunks), 1, figsize=(width, 3.8 * len(chunks)), squeeze=False)
    return fig, list(zip(axes[:, 0], chunks))


def _legend(fig, methods) -> None:
    """The method legend right of the panels, level with the top row (call after the layout)."""
    handles = [plt.Line2D([], [], color=colour(m), marker="o", lw=2, label=label(m)) for m in methods]
    top = max(ax.get_position().y1 for ax in fig.axes if ax.get_visible())
    fig.legend(handles=handles, title="method", loc="upper left", bbox_to_anchor=(legend_x(fig), top))


def _gpus(n) -> str:
    return f"{int(n)} GPU" + ("s" if n != 1 else "")


def config_labels(df: pd.DataFrame, ctx: list[str]) -> list[str]:
    """'<varying context>\\n<n> GPUs T=.. S=..' per row: the x labels of bar charts."""
    rows = df[ctx + ["gpus", "frames", "spatial"]].itertuples(index=False)
    return [" ".join(_ctx_text(k, v) for k, v in zip(ctx, r[:len(ctx)]))
            + f"\n{_gpus(r[-3])} T={int(r[-2])} S={int(r[-1])}" for r in rows]


def pick_configs(df: pd.DataFrame) -> tuple[list[str], list[str]]:
    """At most MAX_BARS of df's `config` labels: the most GPUs and longest sequences (where methods
    differ most), shown in increasing order."""
    d = df.assign(_tok=df["frames"] * df["spatial"]).drop_duplicates("config")
    if len(d) <= MAX_BARS:
        return list(d.sort_values(["gpus", "frames", "spatial"])["config"]), []
    keep = d.sort_values(["gpus", "_tok"], ascending=False).head(MAX_BARS)
    note = (f"{len(d)} configurations; showing the {MAX_BARS} with the most GPUs and the longest "
            "sequences (all are in the tables).")
    return list(keep.sort_values(["gpus", "frames", "spatial"])["config"]), [note]


def _log_if_decades(ax, values) -> None:
    """Log y where values span more than a decade: one slow point must not flatten the rest."""
    v = pd.Series(values).dropna()
    v = v[v > 0]
    if len(v) > 1 and v.max() / v.min() > 10:
        ax.set_yscale("log")
        # plain numbers: log axes' default 10^k labels go through mathtext (a parser: seconds)
        ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(mticker.NullFormatter())


def _gpu_axis(ax, gpus) -> None:
    ax.set_xscale("log", base=2)
    ticks = sorted({int(g) for g in gpus})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()


def plot_throughput(best: pd.DataFrame):
    """Samples/s vs GPUs per method, one panel per sequence shape (and context that varies)."""
    if best.empty or best["gpus"].nunique() < 2:
        return None, "throughput vs GPUs: skipped, the sweep has a single GPU count."
    keys = varying_context(best) + ["frames", "spatial"]
    panels, notes = split_panels(best, keys, "gpus", min_size=2)
    if not panels:
        return None, "throughput vs GPUs: skipped, no sequence shape ran on two or more GPU counts."
    theme()
    fig, axes = panel_grid(len(panels))
    for ax, (key, g) in zip(axes, panels):
        for m in order(g["method"].unique()):
            d = g[g["method"] == m].sort_values("gpus")
            # n=1: no error bar (a zero-height bar would promise a spread that was never measured)
            err = None if (d["n_repeats"] < 2).all() else [
                d["samples_per_s"] - d["samples_per_s_min"], d["samples_per_s_max"] - d["samples_per_s"]]
            ax.errorbar(d["gpus"], d["samples_per_s"], yerr=err, color=colour(m), marker="o", lw=2,
                        elinewidth=3, capsize=0, ls=line_style(d["source"]))
        _gpu_axis(ax, best["gpus"])
        _log_if_decades(ax, g["samples_per_s"])
        ax.set(title=panel_title(key), xlabel="GPUs (world size)", ylabel="throughput (samples/s)")
    layout(fig)
    _legend(fig, order(best["method"].unique()))
    return fig, notes


def plot_speedup(speedups: pd.DataFrame):
    """DSP's speed-up over each baseline per configuration (bars coloured by the baseline)."""
    if speedups.empty:
        return None, "DSP speed-up: skipped, no configuration has both DSP and a baseline."
    s = speedups.copy()
    ctx = varying_context(s)
    s["config"] = config_labels(s, ctx)
    configs, notes = pick_configs(s)
    s = s[s["config"].isin(configs)]
    bases = order(s["baseline"].unique())
    theme()
    fig, rows = bar_rows(configs, len(bases))
    width = 0.8 / len(bases)
    for ax, chunk in rows:
        for i, b in enumerate(bases):
            d = s[s["baseline"] == b].set_index("config").reindex(chunk)
            x = np.arange(len(chunk)) + (i - (len(bases) - 1) / 2) * width
            # n=1 on either side: no error bar (rows with no speed-up draw no bar at all)
            one = ((d[["n_repeats", "n_repeats_base"]].min(axis=1) < 2) | d["speedup"].isna()).to_numpy()
            err = [(d["speedup"] - d["speedup_lo"]).clip(lower=0).mask(one), (d["speedup_hi"] - d["speedup"]).clip(lower=0).mask(one)]
            ax.bar(x, d["speedup"], width, yerr=None if one.all() else err, color=colour(b),
                   label=f"over {label(b)}", capsize=3)
        ax.axhline(1.0, color="black", lw=1, ls=":")
        ax.set_xticks(np.arange(len(chunk)), chunk)
        ax.set(xlabel="configuration", ylabel="DSP / baseline (samples/s)")
    layout(fig)
    rows[0][0].legend(title="baseline", loc="upper left", bbox_to_anchor=(legend_x(fig), 1.0),
                      bbox_transform=fig.transFigure)
    return fig, notes


SERIES_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))


def plot_scaling(sc: pd.DataFrame):
    """Strong and weak scaling efficiency (%) vs GPUs, one panel each; ideal = 100 %."""
    if sc.empty:
        return None, "scaling curves: skipped, no series with two or more GPU counts."
    kinds = [k for k in ("strong", "weak") if (sc["scaling"] == k).any()]
    theme()
    fig, axes = panel_grid(len(kinds), w=5.2, h=4.0)
    methods, notes = order(sc["method"].unique()), []
    for ax, kind in zip(axes, kinds):
        d = sc[sc["scaling"] == kind]
        # series with the most GPU counts first, then in numeric order of their shape
        d = d.sort_values(["frames" if kind == "strong" else "tokens_per_gpu", "spatial"], kind="stable")
        counts = d.groupby("series", sort=False)["gpus"].nunique()
        series = list(counts.sort_values(ascending=False, kind="stable").index)
        if len(series) > len(SERIES_STYLES):
            notes.append(f"{kind}: {len(series)} series, showing {len(SERIES_STYLES)}.")
            series = series[:len(SERIES_STYLES)]
        for (ls, mk), ser in zip(SERIES_STYLES, series):
            for m in methods:
                g = d[(d["series"] == ser) & (d["method"] == m)].sort_values("gpus")
                ax.plot(g["gpus"], 100 * g["efficiency"], color=colour(m), ls=ls, marker=mk, lw=1.8)
        ax.axhline(100, color="black", lw=1, ls=":")
        _gpu_axis(ax, d["gpus"])
        ax.legend(handles=[plt.Line2D([], [], color="black", ls=ls, marker=mk, label=ser)
                           for (ls, mk), ser in zip(SERIES_STYLES, series)],
                  title="series", loc="lower left", fontsize=11, title_fontsize=11)
        fixed = "fixed T and S" if kind == "strong" else "fixed tokens per GPU"
        ax.set(title=f"{kind} scaling ({fixed})", xlabel="GPUs (world size)",
               ylabel="efficiency (% of linear, tokens/s/GPU)")
    layout(fig)
    _legend(fig, methods)
    return fig, notes
