"""What a run costs: communication volume per layer by op and phase, memory per rank."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from dspbench.reports.commvol import per_op_per_layer
from dspbench.reports.figures import (OP_COLOURS, bar_rows, config_labels, panel_grid, panel_title, split_panels, pick_configs,
                      varying_context, layout, legend_x, theme)
from dspbench.reports.style import GIB, MIB, colour, label, order


BWD_ALPHA = 0.45   # backward = the op's colour, lighter (hatching costs seconds to render)


def _op_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Long frame: one row per (configuration, method, op.phase) of per-layer bytes per rank."""
    ok = runs[(runs["status"] == "ok") & (runs["sp"] > 1)]
    ok = ok[ok["comm_tagged"].map(lambda t: isinstance(t, dict)).astype(bool)].sort_values("repeat")
    ok = ok.drop_duplicates(["method", "model", "mode", "dtype", "batch", "frames", "spatial", "sp",
                             "shard"])
    rows = []
    cols = ["method", "model", "mode", "dtype", "batch", "frames", "spatial", "sp", "hardware", "source"]
    for r in ok[cols + ["comm_tagged", "depth", "sample_steps"]].to_dict("records"):
        passes = r["sample_steps"] if r["mode"] == "sample" else 1
        for k, v in per_op_per_layer(r["comm_tagged"], r["depth"] * passes).items():
            op, phase = k.rsplit(".", 1)
            rows.append({**{c: r[c] for c in cols}, "op": op, "phase": phase, "bytes": v})
    return pd.DataFrame(rows)


def plot_comm_volume(runs: pd.DataFrame):
    """Stacked bars: per-layer wire bytes per rank by op and phase, per method, per configuration."""
    ops = _op_frame(runs)
    if ops.empty:
        return None, "communication volume: skipped, no run with SP > 1 carries a ledger."
    keys = varying_context(ops) + ["frames", "spatial", "sp"]
    panels, notes = split_panels(ops, keys, "method")
    theme()
    fig, axes = panel_grid(len(panels), w=4.6, h=3.8)
    shown = pd.concat([g for _, g in panels])
    segs = sorted({(o, p) for o, p in zip(shown["op"], shown["phase"])}, key=lambda x: (x[1] != "fwd", x))
    for ax, (key, g) in zip(axes, panels):
        methods = order(g["method"].unique())
        bottom = np.zeros(len(methods))
        for op, phase in segs:
            d = g[(g["op"] == op) & (g["phase"] == phase)].groupby("method")["bytes"].sum()
            h = d.reindex(methods).fillna(0).to_numpy() / MIB
            ax.bar(range(len(methods)), h, bottom=bottom, color=OP_COLOURS.get(op, "#BBBBBB"),
                   alpha=BWD_ALPHA if phase == "bwd" else 1.0, edgecolor="white", lw=0.5)
            bottom += h
        ax.set_xticks(range(len(methods)), [label(m) for m in methods], rotation=20, ha="right")
        for tick, m in zip(ax.get_xticklabels(), methods):
            tick.set_color(colour(m))               # the method's colour, as in every other figure
        title = panel_title({k: v for k, v in key.items() if k != "sp"})
        ax.set(title=f"SP={int(key['sp'])} {title}", xlabel="method",
               ylabel="sent per rank per layer (MiB)")
    handles = [Patch(facecolor=OP_COLOURS.get(o, "#BBBBBB"), alpha=BWD_ALPHA if p == "bwd" else 1.0,
                     label=f"{o}.{p}") for o, p in segs]
    layout(fig)
    fig.legend(handles=handles, title="op.phase", loc="upper left", bbox_to_anchor=(legend_x(fig), 0.97))
    return fig, notes


def plot_memory(best: pd.DataFrame):
    """Peak memory per rank, grouped bars per configuration, one colour per method."""
    b = best.dropna(subset=["mem_per_rank_bytes"])
    if b.empty:
        return None, "memory per rank: skipped, no run reports peak memory."
    ctx = varying_context(b)
    b = b.assign(config=config_labels(b, ctx))
    # A method run at several SP degrees on one configuration (a bucket sweep's SP 1 and 2): its fastest.
    b = b.sort_values("samples_per_s").drop_duplicates(["method", "config"], keep="last")
    configs, notes = pick_configs(b)
    methods = order(b["method"].unique())
    b = b[b["config"].isin(configs)].assign(GiB=b["mem_per_rank_bytes"] / GIB, method=b["method"].map(label))
    theme()
    fig, rows = bar_rows(configs, len(methods))
    width = 0.8 / len(methods)
    for ax, chunk in rows:      # plain bars: seaborn's barplot costs 3x for the same picture
        for i, m in enumerate(methods):
            d = b[b["method"] == label(m)].set_index("config")["GiB"].reindex(chunk)
            ax.bar(np.arange(len(chunk)) + (i - (len(methods) - 1) / 2) * width, d, width,
                   color=colour(m), label=label(m))
        ax.set_xticks(np.arange(len(chunk)), chunk)
        ax.set(xlabel="configuration", ylabel="peak memory per rank (GiB)")
    layout(fig)
    rows[0][0].legend(title="method", loc="upper left", bbox_to_anchor=(legend_x(fig), 1.0),
                      bbox_transform=fig.transFigure)
    return fig, notes
