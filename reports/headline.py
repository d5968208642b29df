"""The headline box, first on the page: what a reader came for, before any detail.

DSP / each baseline per GPU count (with n and the spread, or n=1), per-layer communication as a
multiple of M per method, where the numbers come from (measured / predicted / synthetic), and
when, from which commit, on which hosts. Every ratio pairs rows on the full comparison key
(derive.COMPARE), so each cell is labelled by its row's source and hardware.
"""
from __future__ import annotations

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.envinfo import get
from dspbench.reports.fmt import Table
from dspbench.reports.style import label, order

GROUP = ["source", "hardware", "model", "mode", "gpus"]
GROUP_NAMES = {"source": "numbers", "hardware": "hardware", "model": "model", "mode": "mode", "gpus": "GPUs"}


def speedup_table(sp: pd.DataFrame) -> Table:
    """Rows: (source, hardware, model, mode, GPUs); a column per baseline. One configuration in a
    row: its ratio with the repeats' range (or n=1); several: their median [min–max], k configs."""
    if sp.empty:
        return Table("headline_speedup", "DSP / baseline (samples/s ratio)", sp, pd.DataFrame())
    rows, data = [], []
    for key, g in sp.groupby(GROUP, sort=True, dropna=False):
        row = dict(zip([GROUP_NAMES[c] for c in GROUP], key))
        for b in order(g["baseline"].unique()):
            d = g[g["baseline"] == b]
            row[f"DSP / {label(b)}"] = _cell(d)
            data.append({**dict(zip(GROUP, key)), "baseline": b, "configs": len(d),
                         "speedup_median": d["speedup"].median(), "speedup_min": d["speedup_lo"].min(),
                         "speedup_max": d["speedup_hi"].max()})
        rows.append(row)
    disp = pd.DataFrame(rows).fillna("—")
    disp = disp[[c for c in disp.columns if c != "hardware"] + ["hardware"]]
    return Table("headline_speedup", "DSP / baseline, samples/s ratio (>1: DSP faster)",
                 pd.DataFrame(data), disp,
                 ["Each ratio pairs DSP and the baseline on the full key (model, mode, dtype, B, T, S, "
                  "GPUs, SP, DP, checkpointing, ZeRO, CFG, source, hardware): a row never mixes "
                  "measured with predicted numbers. One configuration: median [min–max] over its "
                  "repeats (n=1: one run). Several: median [min–max] over the configurations."])


def _cell(d: pd.DataFrame) -> str:
    if len(d) == 1:
        r = d.iloc[0]
        n = min(r["n_repeats"], r["n_repeats_base"])
        return fmt.ratio_spread(r["speedup"], r["speedup_lo"], r["speedup_hi"], n)
    return (f"{fmt.times(d['speedup'].median())} [{d['speedup'].min():.2f}–{d['speedup'].max():.2f}] "
            f"over {len(d)} configs")


def comm_table(vol: pd.DataFrame) -> Table:
    """Per-layer forward communication as a multiple of M, per method and SP degree N."""
    if vol.empty:
        return Table("headline_comm", "Per-layer communication (× M)", vol, pd.DataFrame())
    v = vol.groupby(["method", "sp"], as_index=False).agg(xM=("paper_fwd_xM", "median"),
                                                         table3=("table3", "first"), t3=("table3_xM", "first"))
    rows = []
    for m in order(v["method"].unique()):
        d = v[v["method"] == m]
        row = {"method": label(m), "Table 3": d["table3"].iloc[0] or "—"}
        for r in d.sort_values("sp").itertuples():
            row[f"N={int(r.sp)} measured"] = f"{fmt.num(r.xM)} M"
        rows.append(row)
    disp = pd.DataFrame(rows).fillna("—")
    return Table("headline_comm", "Per-layer communication, forward, as a multiple of M", v, disp,
                 ["M = one activation (B·T·S·C·bytes); paper convention (wire × N/(N-1)) so the "
                  "numbers read against the paper's Table 3. Gradient sync is not per layer: see the "
                  "'grad sync' column of the details table."])


def facts(runs: pd.DataFrame) -> list[tuple[str, str]]:
    counts = runs["source"].value_counts()
    src = ", ".join(f"{int(counts.get(s, 0))} {s}" for s in ("measured", "predicted", "published", "synthetic"))
    hw = "; ".join(f"{h} ({s})" for s, h in sorted(set(zip(runs["source"], runs["hardware"]))))
    when = runs["recorded_at"].dropna()
    date = (f"{when.min():%Y-%m-%d %H:%M} to {when.max():%Y-%m-%d %H:%M} UTC" if not when.empty else "unknown")
    envs = runs["environ"]
    shas = sorted({str(get(e, "git_sha"))[:10] + (" (dirty)" if get(e, "git_dirty") else "")
                   for e in envs if get(e, "git_sha")})
    hosts = set()
    for e in envs:
        h = get(e, "hosts")
        hosts.update([h] if isinstance(h, str) else (h or []))
    return [("numbers", f"{src} run(s)"), ("hardware", hw or "—"), ("recorded", date),
            ("git SHA", ", ".join(shas[:4]) + (" ..." if len(shas) > 4 else "") or "—"),
            ("hosts", ", ".join(sorted(map(str, hosts))[:6]) + (" ..." if len(hosts) > 6 else "") or "—")]


def blocks(a, speedup_fig) -> list:
    """The headline as report blocks (the HTML wraps them in one box)."""
    return [("raw", '<section class="headline" id="headline"><h2>Headline</h2>', "## Headline"),
            ("kv", facts(a.runs)), ("table", speedup_table(a.speedups)), ("table", comm_table(a.volume)),
            speedup_fig, ("raw", "</section>", "")]
