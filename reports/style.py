"""One look for every figure and table: method order, a fixed colour per method, units, labels.

A method keeps its colour in every figure (the reader learns it once), so colours are fixed per
method, not seaborn's cycle. Each method declares its label, colour, order and Table 3 row on its
MethodSpec (`report`), and records carry them (reports/meta.py); a method that declares none gets
its name and a palette colour picked by its name.
"""
from __future__ import annotations

import matplotlib

from dspbench.reports.meta import colour, label, order, table3

matplotlib.use("Agg")   # reports run headless (CI, SLURM nodes): never ask for a display

METRIC_STATUSES = ("ok", "predicted")   # records that carry timings (predicted: cost model)
GIB = 1024 ** 3
MIB = 1024 ** 2

RC = {
    "svg.fonttype": "none",       # keep text as text in SVG: searchable, and smaller
    "svg.hashsalt": "dspbench",   # stable element ids: the same data gives the same SVG
    "figure.dpi": 100,
    "savefig.dpi": 80,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    # read at a browser's width (the SVG scales to the page): 13-15 px text, not 7
    "font.size": 14, "axes.titlesize": 14, "axes.labelsize": 14, "xtick.labelsize": 12,
    "ytick.labelsize": 12, "legend.fontsize": 12, "legend.title_fontsize": 12,
}


__all__ = ["GIB", "METRIC_STATUSES", "MIB", "RC", "colour", "label", "order", "table3"]
