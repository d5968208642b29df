"""One sentence per figure saying what it shows (the takeaway), computed from the same frames;
it is the figure's caption in index.md and index.html and the SVG's <desc>."""
from __future__ import annotations

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.style import label


def _top(df: pd.DataFrame, col: str = "gpus") -> pd.DataFrame:
    return df[df[col] == df[col].max()] if not df.empty else df


def throughput(a) -> str:
    b = _top(a.best[a.best["method"] != "single"])
    if b.empty:
        return ""
    r = b.loc[b["samples_per_s"].idxmax()]
    return (f"At {int(r.gpus)} GPUs the fastest run is {label(r.method)} "
            f"({fmt.num(r.samples_per_s)} samples/s, T={int(r.frames)} S={int(r.spatial)}, {r.source}).")


def speedup(a) -> str:
    s = a.speedups
    if s.empty:
        return ""
    won = int((s["speedup"] > 1).sum())
    return (f"DSP is faster in {won} of {len(s)} pairings; median DSP / baseline "
            f"{fmt.times(s['speedup'].median())} (range {s['speedup'].min():.2f}–{s['speedup'].max():.2f}). "
            "Error bars: min–max over repeats, none where a side ran once (n=1).")


def comm_volume(a) -> str:
    v = a.volume
    if v.empty:
        return ""
    top = _top(v, "sp")
    per = top.groupby("method")["fwd_measured"].median().sort_values()
    return (f"At SP {int(top['sp'].max())}, per layer and rank (forward): least "
            f"{label(per.index[0])} ({fmt.mib(per.iloc[0])} MiB), most {label(per.index[-1])} "
            f"({fmt.mib(per.iloc[-1])} MiB). Solid: forward; light: backward; the model-exit gather "
            "and gradient syncs are excluded.")


def scaling(a) -> str:
    sc = a.scaling
    sc = sc[sc["scaling"] == "strong"] if not sc.empty else sc
    if sc.empty:
        return ""
    top = _top(sc)
    eff = top.groupby("method")["efficiency"].median().sort_values(ascending=False)
    return (f"Strong scaling at {int(top['gpus'].max())} GPUs: "
            + ", ".join(f"{label(m)} {fmt.pct(e, 0)}" for m, e in eff.items()) + " of linear.")


def memory(a) -> str:
    b = _top(a.best.dropna(subset=["mem_per_rank_bytes"]))
    if b.empty:
        return ""
    lo, hi = b.loc[b["mem_per_rank_bytes"].idxmin()], b.loc[b["mem_per_rank_bytes"].idxmax()]
    return (f"At {int(lo.gpus)} GPUs: least memory per rank {label(lo.method)} ({fmt.gib(lo.mem_per_rank_bytes)} "
            f"GiB), most {label(hi.method)} ({fmt.gib(hi.mem_per_rank_bytes)} GiB).")


CAPTIONS = {"throughput": throughput, "speedup": speedup, "comm_volume": comm_volume,
            "scaling": scaling, "memory": memory}
