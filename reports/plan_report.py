"""A plan's report (`dspbench plan --report DIR`, or `dspbench report DIR` on a folder holding a
plan.json): the ranked table, the frontier figure (each method's best vs GPUs) and the crossover
figure (the winning method vs inter-node bandwidth and sequence length), under the banner that
every number is predicted. Reads plan.json only (the plan stage writes it): nothing here runs a model."""
from __future__ import annotations

import json
from pathlib import Path

from dspbench.reports import meta
from dspbench.reports.style import colour, label as method_label, order

BANNER = ("> **Every number here is predicted** (the cost model on the hardware profile `{hw}`, "
          "source `predicted`): nothing was measured. Check the plan on the cluster with the sweep "
          "`dspbench plan ... --emit-sweep FILE.toml` writes.")
TABLE_ROWS = 20


def label(method: str) -> str:
    """In a plan, `single` at SP 1 is the model without SP, data parallel over every GPU."""
    return "no SP (data parallel)" if method == "single" else method_label(method)


def num(x: float) -> str:
    """Three significant digits, trailing zeros kept (1.70), no exponent or bare point (183)."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:#.3g}"


def _score(r: dict, metric: str) -> str:
    if metric == "samples/s":
        return f"{num(r['score'])} [{num(r['score_low'])}-{num(r['score_high'])}]"
    return f"{num(r['step_time_s'])} [{num(r['step_time_low_s'])}-{num(r['step_time_high_s'])}]"


def table(doc: dict, rows: list[dict]) -> list[str]:
    out = [f"| rank | method | SP | DP | ckpt | ZeRO | {doc['metric']} [interval] | GiB per rank (usable) "
           "| comm share | exposed comm (ms) | tie | shard | a2a |", "|" + "---|" * 13]
    for r in rows:
        twins = "".join(f" = {t['name']}" for t in r.get("twins", []))   # the same collectives and kernels
        out.append(f"| {r['rank']} | {r['method']}{twins} | {r['sp']} | {r['dp']} | {'yes' if r['grad_ckpt'] else 'no'} | "
                   f"{r['zero']} | {_score(r, doc['metric'])} | {r['peak_mem_bytes'] / 2**30:.1f} "
                   f"({r['usable_bytes'] / 2**30:.1f}) | {r['comm_share']:.0%} | {r['exposed_comm_s'] * 1e3:.1f} | "
                   f"{'tie' if r['tie'] else ''} | {'/'.join(r['shard'])} | {'/'.join(r['a2a'])} |")
    return out


def _stack(doc: dict) -> str:
    """The software priced and who declared it (a plan from before the stack was recorded: says so)."""
    st = doc.get("stack")
    if not st:
        return "Stack: not recorded."
    return f"Stack: {', '.join(st['packages']) or 'none (torch only)'} ({st['declared_by']})."


def markdown(doc: dict, figures: dict[str, str]) -> str:
    rows, best = doc["rows"], doc["best_per_method"]
    lines = [f"# Plan: {doc['workload']} on {doc['request']['gpus']} x {doc['hardware']}", "",
             BANNER.format(hw=doc["hardware"]), "", f"`{doc.get('command', 'dspbench plan')}`", "",
             _stack(doc), "",
             f"**Verdict:** {doc['verdict']}", "",
             f"Intervals: {doc['interval_source']}. Tie: the row's interval overlaps the best's. "
             f"Ranked {len(rows)} of {doc['candidates']} candidates; {len(doc['pruned'])} pruned.", "",
             f"## Ranked (top {min(TABLE_ROWS, len(rows))})", ""] + table(doc, rows[:TABLE_ROWS])
    lines += ["", "## Best per method", ""] + table(doc, [rows[i - 1] for i in sorted(set(best.values()))])
    lines += ["", "## Pruned", ""] + [f"- {m}: {why}" for m, ws in doc["pruned_reasons"].items() for why in ws]
    for title, key in (("Frontier: each method at its best settings vs GPUs", "frontier"),
                       ("Crossover: the winning method vs inter-node bandwidth and sequence length", "crossover")):
        if key in figures:
            lines += ["", f"## {title}", "", f"![{key}]({figures[key]})"]
    if "crossover" in doc.get("explore", {}):
        lines += ["", "| inter-node GB/s | T | tokens | winner | best configuration | lead over the next method |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {c['inter_GBps']:g} | {c['frames']} | {c['tokens']} | {c['winner'] or '-'} | {c['config']} | "
                  f"{'-' if c['runner_up_ratio'] is None else format(c['runner_up_ratio'], '.2f') + 'x'} |"
                  for c in doc["explore"]["crossover"]]
    return "\n".join(lines) + "\n"


def frontier_figure(doc: dict, folder: Path) -> str | None:
    import matplotlib.pyplot as plt
    pts = doc.get("explore", {}).get("frontier", [])
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for m in order({p["method"] for p in pts}):
        mine = sorted((p["gpus"], p["score"]) for p in pts if p["method"] == m)
        ax.plot([g for g, _ in mine], [s for _, s in mine], marker="o", color=colour(m), label=label(m))
    ax.set_xscale("log", base=2)
    gpus = sorted({p["gpus"] for p in pts})
    ax.set_xticks(gpus, [str(g) for g in gpus])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("predicted samples/s" if doc["metric"] == "samples/s" else "predicted videos/s (1 / latency)")
    ax.set_title(f"{doc['workload']}, {doc['hardware']} (predicted)", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _save(fig, folder, "frontier")


def crossover_figure(doc: dict, folder: Path) -> str | None:
    import matplotlib.pyplot as plt
    cells = doc.get("explore", {}).get("crossover", [])
    if not cells:
        return None
    bws = sorted({c["inter_GBps"] for c in cells})
    frames = sorted({c["frames"] for c in cells})
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for c in cells:
        x, y = bws.index(c["inter_GBps"]), frames.index(c["frames"])
        ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, color=colour(c["winner"]) if c["winner"] else "#FFFFFF",
                                   ec="white"))
        ax.text(x, y, label(c["winner"]) if c["winner"] else "nothing fits", ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.5, len(bws) - 0.5)
    ax.set_ylim(-0.5, len(frames) - 0.5)
    ax.set_xticks(range(len(bws)), [f"{b:g}" for b in bws])
    ax.set_yticks(range(len(frames)), [f"T={t}" for t in frames])
    ax.set_xlabel("inter-node bandwidth, GB/s (link.inter)")
    ax.set_ylabel("sequence length (frames)")
    ax.grid(False)
    ax.set_title(f"winning method (predicted), {doc['workload']}", fontsize=10)
    return _save(fig, folder, "crossover")


def _save(fig, folder: Path, name: str) -> str:
    import matplotlib.pyplot as plt
    fig.tight_layout()
    for ext in ("png", "svg"):   # no timestamps: the same plan gives the same bytes
        fig.savefig(folder / f"{name}.{ext}", metadata={"Date": None} if ext == "svg" else {"Software": None})
    plt.close(fig)
    return f"{name}.png"


def render(folder: str | Path) -> Path:
    """index.md (+ frontier and crossover figures) from folder/plan.json; returns index.md's path."""
    import matplotlib
    matplotlib.use("Agg")
    folder = Path(folder)
    doc = json.loads((folder / "plan.json").read_text())
    for m, look in doc.get("method_meta", {}).items():   # the planned methods' labels and colours
        meta.learn(m, look)
    figures = {k: p for k, p in (("frontier", frontier_figure(doc, folder)),
                                 ("crossover", crossover_figure(doc, folder))) if p}
    page = folder / "index.md"
    page.write_text(markdown(doc, figures))
    return page
