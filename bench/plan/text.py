"""The plan as text: the verdict, the ranked table (top K), each method's best, what was pruned."""
from __future__ import annotations

from dspbench.cost.mechanism import text

GIB = 2**30


def num(x: float) -> str:
    """Three significant digits, trailing zeros kept (1.70), no exponent or bare point (183)."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:#.3g}"


def _score(r: dict, doc: dict) -> str:
    if doc["metric"] == "samples/s":
        return f"{num(r['score'])} [{num(r['score_low'])}-{num(r['score_high'])}]"
    return f"{num(r['step_time_s'])} [{num(r['step_time_low_s'])}-{num(r['step_time_high_s'])}]"


def _variants(r: dict) -> str:
    cfgp = " cfg-parallel" if r.get("cfg_parallel") == [True] else ""   # dp counts one CFG group's replicas
    twins = "".join(f" = {t['name']}" for t in r.get("twins", []))   # the same collectives and kernels
    return f"{'|'.join(r['shard'])} {'|'.join(r['a2a'])}{cfgp}{twins}"


def row_line(r: dict, doc: dict) -> str:
    scale = GIB if r["usable_bytes"] >= GIB else 2**20     # emulated budgets are MiB
    mem = f"{r['peak_mem_bytes'] / scale:.1f}/{r['usable_bytes'] / scale:.1f}" + ("" if scale == GIB else " MiB")
    return (f"{r['rank']:>4} {r['method']:<18} {r['sp']:>3} {r['dp']:>3} {'yes' if r['grad_ckpt'] else 'no':>4} "
            f"{r['zero']:>4}  {_score(r, doc):<26} {mem:>12} {r['comm_share']:>6.0%} "
            f"{r['exposed_comm_s'] * 1e3:>10.1f}  {'tie' if r['tie'] else '':<3}  {_variants(r)}")


def header(doc: dict) -> str:
    metric = "samples/s [interval]" if doc["metric"] == "samples/s" else "s/video [interval]"
    return (f"{'rank':>4} {'method':<18} {'sp':>3} {'dp':>3} {'ckpt':>4} {'zero':>4}  {metric:<26} "
            f"{'GiB/rank':>12} {'comm':>6} {'exposed ms':>10}  {'':<3}  shard a2a (= twins)")


def stack_line(doc: dict) -> str:
    """The software priced (methods and ZeRO stages follow from it) and who declared it: its own
    line of the header."""
    st = doc.get("stack")
    if not st:
        return "stack: not recorded"
    return f"stack: {', '.join(st['packages']) or 'none (torch only)'} ({st['declared_by']})"


def warning_lines(doc: dict) -> list[str]:
    """The calibration's own warnings about the profile priced, one line each (none: no line)."""
    return [f"profile warning (from its calibration): {w}" for w in doc.get("profile_warnings", [])]


def render(doc: dict, top: int, explain: bool = False) -> str:
    rows = doc["rows"]
    lines = [f"plan: {doc['workload']} on {doc['request']['gpus']} x {doc['hardware']} "
             f"({doc['gpus_per_node']} per node); every number is predicted (cost model)",
             doc.get("priced", ""),
             f"interval: {doc['interval_source']}",
             f"method terms: {doc.get('method_terms', 'not recorded')}",
             *warning_lines(doc),
             stack_line(doc),
             f"verdict: {doc['verdict']}", "",
             f"ranked {len(rows)} of {doc['candidates']} candidates (top {min(top, len(rows))}; "
             "tie: its interval overlaps the best's; GiB/rank: predicted peak / usable; comm: share of the step):",
             header(doc)]
    def shown(r):
        return [row_line(r, doc)] + (text(r["mechanism_costs"]) if explain and r.get("mechanism_costs") else [])
    lines += [x for r in rows[:top] for x in shown(r)]
    lines += ["", "best per method:", header(doc)]
    lines += [x for i in sorted(set(doc["best_per_method"].values())) for x in shown(rows[i - 1])]
    lines += ["", f"pruned {len(doc['pruned'])} candidates:"]
    for m, reasons in doc["pruned_reasons"].items():
        lines += [f"  {m}: {why}" for why in reasons]
    for extra in doc.get("notes", []):
        lines.append(extra)
    return "\n".join(lines)
