"""The paper's protocol and its claims: each method at its minimum SP, the rest data-parallel.

Rows are runs whose SP the memory model chose (`sp = "auto"`, the record's `sp_auto`): at each
sequence length every method runs at the smallest SP degree that fits (the emulated budget
`mem_budget_mib` on a CPU cluster, the device's memory on GPUs), so unlike every other comparison in
the report, DSP / X here may divide runs at *different* SP degrees. That is the paper's protocol and
each cell says its SP and how many nodes its SP group spans. Every other key is shared (COMPARE less
T, S, SP and DP). The claims are checked on those rows, and on the cost model's prediction of the
same protocol at paper scale (paper_data/predictions.json `scaling`, H100 nodes of 8), side by side.
"""
from __future__ import annotations

import json
import math

import pandas as pd

from dspbench.reports.derive import COMPARE
from dspbench.reports.fmt import Table
from dspbench.reports.paper import paper_file
from dspbench.reports.style import label, order

KEY = [c for c in COMPARE if c not in ("frames", "spatial", "sp", "dp")]
PAPER_GPUS_PER_NODE = 8          # the predictions' profile (h100-ib): nodes of 8


def protocol_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (key, T, S, method) of sp_auto runs: median samples/s over ok repeats, its SP,
    the nodes its SP group spans, and the status when no repeat was ok."""
    if runs.empty or "sp_auto" not in runs or not runs["sp_auto"].any():
        return pd.DataFrame()
    r = runs[runs["sp_auto"] | (runs["status"].isin(("unsupported", "oom")) & (runs["sp"].isna()))]
    r = r[r["method"].notna()]
    rows = []
    for key, g in r.groupby(KEY + ["frames", "spatial", "method"], dropna=False, sort=True):
        ok = g[g["status"] == "ok"]
        # the repeats that failed (a measured peak just over the budget) are counted beside the others
        row = {**dict(zip(KEY + ["frames", "spatial", "method"], key)), "failed": len(g) - len(ok), "repeats": len(g)}
        if ok.empty:
            st = g.iloc[0]
            row.update(status=str(st["status"]), sp=_num(st["sp"]), nodes=None, samples_per_s=math.nan,
                       why=str(st["error"] or "")[:160])
        else:
            row.update(status="ok", sp=_num(ok["sp"].iloc[0]), nodes=_span(ok["placement"].iloc[0]),
                       samples_per_s=float(ok["samples_per_s"].median()), why="")
        rows.append(row)
    return pd.DataFrame(rows)


def _num(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def _span(placement) -> int | None:
    return int(placement["sp_group_nodes"]) if isinstance(placement, dict) and "sp_group_nodes" in placement else None


def paper_rows() -> pd.DataFrame:
    """The cost model's minimum-SP protocol at paper scale (predicted, h100-ib), in protocol_rows' form."""
    with paper_file("predictions.json").open() as f:
        d = json.load(f)
    rows = []
    for s in d.get("scaling", []):
        sp = s.get("sp")
        ok = s.get("status") == "predicted" and sp
        rows.append({"source": "predicted", "hardware": "h100-ib (datasheet profile)", "model": s["model"],
                     "gpus": s["gpus"], "frames": s["frames"], "spatial": s.get("spatial", 4096),
                     "method": s["method"], "status": "ok" if ok else s.get("status", "?"), "sp": sp,
                     "nodes": math.ceil(sp / PAPER_GPUS_PER_NODE) if ok else None,
                     "samples_per_s": s["samples_per_s"] if ok else math.nan, "why": ""})
    return pd.DataFrame(rows)


def ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """DSP / X per (setting, T, S, X), both ok: the ratio, X's SP and the nodes its SP group spans."""
    if rows.empty:
        return pd.DataFrame()
    setting = [c for c in rows.columns if c in KEY]
    out = []
    for key, g in rows.groupby(setting + ["frames", "spatial"], dropna=False, sort=True):
        d = g[(g["method"] == "dsp") & (g["status"] == "ok")]
        if d.empty:
            continue
        d = d.iloc[0]
        for x in g[(g["method"] != "dsp") & (g["status"] == "ok")].itertuples():
            out.append({**dict(zip(setting + ["frames", "spatial"], key)), "baseline": x.method,
                        "ratio": d["samples_per_s"] / x.samples_per_s, "sp": x.sp, "nodes": x.nodes})
    return pd.DataFrame(out)


def claims(rows: pd.DataFrame) -> list[str]:
    """The paper's qualitative claims, each checked on `rows` (one setting), with its evidence."""
    rat = ratios(rows)
    lines = [_ahead_of_ulysses(rat), *_falls_off(rat), _longest(rows)]
    return [x for x in lines if x]


def _ahead_of_ulysses(rat: pd.DataFrame) -> str:
    """Counted per length: DSP is ahead at a length when it beats every Ulysses implementation there
    (ulysses and ulysses_deepspeed are one method, two implementations, never two lengths)."""
    u = rat[rat["baseline"].isin(("ulysses", "ulysses_deepspeed"))] if not rat.empty else rat
    u = u[u["sp"] > 1] if not u.empty else u      # SP 1 is data parallelism alone: the same run
    if u.empty:
        return "DSP ahead of Ulysses: no length where both ran with SP > 1."
    setting = [c for c in u.columns if c in KEY]
    worst = u.groupby(setting + ["frames", "spatial"], dropna=False)["ratio"].min()
    ahead = int((worst > 1).sum())
    verdict = "holds" if ahead == len(worst) else ("does not hold" if ahead == 0 else "holds in part")
    return (f"DSP ahead of Ulysses: {verdict}, at {ahead} of {len(worst)} lengths with SP > 1 "
            f"(DSP / Ulysses {u['ratio'].min():.2f} to {u['ratio'].max():.2f}).")


def _falls_off(rat: pd.DataFrame) -> list[str]:
    """Per baseline: DSP / X where X's SP group stays in a node vs where it spans nodes."""
    if rat.empty:
        return []
    out = []
    for b in order(rat["baseline"].unique()):
        g = rat[(rat["baseline"] == b) & (rat["sp"] > 1)]
        inside, across = g[g["nodes"] == 1], g[g["nodes"] > 1]
        if across.empty:
            continue
        if inside.empty:
            out.append(f"{label(b)}: SP spans nodes at every length with SP > 1 (DSP / {label(b)} "
                       f"{_med(across)}); nothing inside a node to compare with.")
            continue
        verdict = "falls off" if across["ratio"].median() > inside["ratio"].median() else "does not fall off"
        out.append(f"{label(b)} {verdict} once its SP crosses nodes: DSP / {label(b)} {_med(inside)} with SP "
                   f"inside a node, {_med(across)} across nodes.")
    return out


def _med(g: pd.DataFrame) -> str:
    lo, hi = g["ratio"].min(), g["ratio"].max()
    return f"{g['ratio'].median():.2f}" + (f" [{lo:.2f}-{hi:.2f}, {len(g)} lengths]" if len(g) > 1 else "")


def _longest(rows: pd.DataFrame) -> str:
    ok = rows[rows["status"] == "ok"]
    if ok.empty:
        return ""
    tokens = (ok["frames"] * ok["spatial"]).groupby(ok["method"]).max()
    return "Longest sequence that ran, per method: " + ", ".join(
        f"{label(m)} {_tokens(int(tokens[m]))}" for m in order(tokens.index)) + "."


def _tokens(n: int) -> str:
    return f"{n / 2**20:.2g}M tokens" if n >= 2**20 else f"{n / 2**10:.3g}K tokens" if n >= 2**10 else f"{n} tokens"


def table(rows: pd.DataFrame, name: str, title: str) -> Table:
    """Wide: one row per (setting, T x S), per method `samples/s (SP n, k nodes)` or why not, then DSP / X."""
    if rows.empty:
        return Table(name, title, rows, pd.DataFrame())
    setting = [c for c in ("source", "hardware", "model", "gpus", "mem_budget_mib") if c in rows.columns]
    methods = order(rows["method"].unique())
    disp = []
    for key, g in rows.groupby(setting + ["frames", "spatial"], dropna=False, sort=True):
        k = dict(zip(setting + ["frames", "spatial"], key))
        row = {"numbers": k["source"], "model": k["model"], "GPUs": int(k["gpus"]),
               "T x S": f"{int(k['frames'])} x {int(k['spatial'])}"}
        if k.get("mem_budget_mib"):
            row["budget"] = f"{int(k['mem_budget_mib'])} MiB"
        for m in methods:
            row[label(m)] = _cell(g[g["method"] == m])
        r = ratios(g)           # this row's runs only: one setting, one T x S
        for m in methods:
            if m != "dsp":
                x = r[r["baseline"] == m] if not r.empty else r
                row[f"DSP / {label(m)}"] = f"{x['ratio'].iloc[0]:.2f}" if not x.empty else "—"
        row["hardware"] = k["hardware"]
        disp.append(row)
    notes = ["Each method at its own minimum SP (sp = \"auto\": the smallest degree the memory model fits), "
             "the rest data-parallel: a ratio here may divide runs at different SP degrees, as the paper "
             "does; every other setting is shared. Cells: samples/s, the median of the repeats that ran "
             "(SP degree, nodes its SP group spans); OOM: measured over the memory budget; no SP fits: "
             "the memory model found no degree, nothing ran."]
    return Table(name, title, rows, pd.DataFrame(disp).fillna("—"), notes)


def _cell(g: pd.DataFrame) -> str:
    if g.empty:
        return "—"
    r = g.iloc[0]
    if r["status"] == "unsupported" and "OOM" in str(r["why"]):
        return "no SP fits"                 # the memory model's verdict: nothing ran
    if r["status"] != "ok":
        return "OOM" if r["status"] == "oom" else str(r["status"])   # measured: over the budget
    span = f", {int(r['nodes'])} node{'s' if r['nodes'] != 1 else ''}" if r["nodes"] else ""
    fails = r.get("failed", 0)
    fails = f"; {int(fails)} of {int(r['repeats'])} repeats failed" if fails and not pd.isna(fails) else ""
    return f"{r['samples_per_s']:.3g} (SP {int(r['sp'])}{span}{fails})"


def blocks(runs: pd.DataFrame) -> list:
    """The section, only where the records hold sp = "auto" runs: ours per setting, then paper scale."""
    ours = protocol_rows(runs)
    if ours.empty:
        return []
    out = [("h2", "The paper's protocol: each method at its minimum SP")]
    setting = [c for c in ("source", "hardware", "model", "gpus", "mem_budget_mib") if c in ours.columns]
    for i, (key, g) in enumerate(ours.groupby(setting, dropna=False, sort=True)):
        k = dict(zip(setting, key))
        title = (f"{k['source']} on {k['hardware']}: {k['model']}, {int(k['gpus'])} GPUs"
                 + (f", emulated memory {int(k['mem_budget_mib'])} MiB per rank" if k.get("mem_budget_mib") else ""))
        out += [("table", table(g, f"protocol_{i}", title)), ("p", f"Claims, {k['source']} here:"),
                ("list", claims(g))]
    paper = paper_rows()
    if not paper.empty:
        out += [("table", table(paper, "protocol_paper_scale",
                                "Predicted at paper scale (cost model, h100-ib datasheet profile, nodes of 8)")),
                ("p", "Claims, predicted at paper scale:"), ("list", claims(paper))]
    return out
