"""One look for every figure and table: method order, a fixed colour per method, units, labels.

A method keeps its colour in every figure (the reader learns it once), so the palette is a fixed
dict, not seaborn's cycle; methods plugged in later get stable greys by name.
"""
from __future__ import annotations

import zlib

import matplotlib

matplotlib.use("Agg")   # reports run headless (CI, SLURM nodes): never ask for a display

METHOD_ORDER = ("dsp", "dsp_hybrid", "ulysses", "ulysses_all", "ulysses_deepspeed", "ring", "ring_flash",
                "allgather_kv", "torch_cp", "usp", "megatron_sp", "megatron_lm", "single")
# Okabe-Ito (colour-blind safe; USP: Tol's wine); DSP gets the strongest hue: every figure compares against it.
PALETTE = {
    "dsp": "#D55E00",
    "dsp_hybrid": "#F0A070",      # DSP's hue, lighter: DSP with Ulysses inside full attention
    "ulysses": "#0072B2",
    "ulysses_deepspeed": "#56B4E9",
    "ulysses_all": "#004C7A",
    "ring": "#009E73",
    "ring_flash": "#66C2A5",      # the ring's hue, lighter: the library's ring beside ours
    "allgather_kv": "#E69F00",
    "torch_cp": "#332288",
    "usp": "#882255",
    "megatron_sp": "#CC79A7",
    "megatron_lm": "#E6B3D0",     # Megatron-SP's hue, lighter: the same method keeping shards, re-gathering
    "single": "#7F7F7F",
}
LABELS = {
    "dsp": "DSP", "dsp_hybrid": "DSP + Ulysses (full attention)", "ulysses": "Ulysses", "ulysses_deepspeed": "DeepSpeed-Ulysses",
    "ulysses_all": "Ulysses (every attention)",
    "ring": "Ring Attention", "ring_flash": "ring-flash-attn", "allgather_kv": "All-gather KV (Llama 3 CP)",
    "torch_cp": "torch context_parallel", "usp": "USP (Ulysses × Ring)", "megatron_sp": "Megatron-SP",
    "megatron_lm": "Megatron-LM SP (re-gather)",
    "single": "single device",
}
# Paper Table 3 (forward, per layer, paper's convention): the formula and its factor of M. Ulysses
# has two rows, the two conventions the paper's versions use: in the sharded dim's block only
# (4M/N, ICML "less than 25%"/v5 "at least 50%") and in both blocks (8M/N, v1 and "75% less").
PAPER_TABLE3 = {
    "dsp": ("2M/N", lambda n: 2 / n), "ulysses": ("4M/N", lambda n: 4 / n),
    "ulysses_all": ("8M/N", lambda n: 8 / n), "ulysses_deepspeed": ("4M/N", lambda n: 4 / n), "ring": ("2M", lambda n: 2.0),
    "megatron_sp": ("8M", lambda n: 8.0),
    "megatron_lm": ("8M", lambda n: 8.0),     # the forward of megatron_sp; its backward adds the re-gathers
    # not in the paper: the same convention (whole tensors moved per device) for the newer methods
    "allgather_kv": ("2M", lambda n: 2.0), "ring_flash": ("2M", lambda n: 2.0), "torch_cp": ("2M", lambda n: 2.0),
}
_GREYS = ("#4D4D4D", "#999999", "#B3B3B3", "#333333", "#666666")
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


def colour(method: str) -> str:
    if method in PALETTE:
        return PALETTE[method]
    return _GREYS[zlib.crc32(method.encode()) % len(_GREYS)]


def label(method: str) -> str:
    return LABELS.get(method, method)


def order(methods) -> list[str]:
    """Known methods in the fixed order, then any others alphabetically."""
    methods = set(methods)
    return [m for m in METHOD_ORDER if m in methods] + sorted(methods - set(METHOD_ORDER))
