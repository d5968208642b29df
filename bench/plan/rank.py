"""Priced candidates -> the plan: equivalent rows merged, ranked by score, ties with the best (their
intervals overlap), each method's best, the one-line verdict, and why the rest were pruned."""
from __future__ import annotations

from dataclasses import asdict

from dspbench.plan.axes import CORE, variant_fields
from dspbench.plan.twins import name as twin_name

# Two candidates of one method that differ only in variant axes are one row when these agree exactly.
SAME_PRICE = ("step_time_s", "step_time_low_s", "step_time_high_s", "peak_mem_bytes", "comm_wire_bytes")


def _order(r: dict) -> tuple:
    """Best first: score, then fewer GPUs per SP group, then less memory, then the method's name."""
    return (-r["score"], r["sp"], r["peak_mem_bytes"], r["method"])


def merge(rows: list[dict]) -> list[dict]:
    """A method's variants that price the same as one row, then twins folded into one row."""
    return fold_twins(merge_variants(rows))


def merge_variants(rows: list[dict]) -> list[dict]:
    """One row per (method, core axes, price): the variant axes' values that price the same listed,
    first value first (the one a sweep pins), with each one's mechanism (bench/plan/twins.py)."""
    merged: dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[k] for k in CORE) + tuple(r[k] for k in SAME_PRICE) + tuple(r["corner_scores"])
        if key in merged:
            for f in variant_fields():
                v = getattr(r["config"], f)
                if v not in merged[key][f]:
                    merged[key][f].append(v)
            merged[key]["mechanisms"].append(r["mechanism"])
        else:
            merged[key] = {**r, **{f: [getattr(r["config"], f)] for f in variant_fields()},
                           "mechanisms": [r["mechanism"]], "twins": []}
    return list(merged.values())


def fold_twins(rows: list[dict]) -> list[dict]:
    """Best first, a row whose pinned configuration runs the mechanism of a better (or, at equal
    score, alphabetically earlier) row of another method is that row's twin: named there, not
    ranked apart, so no verdict compares a configuration with itself under another name."""
    out, owner = [], {}
    for r in sorted(rows, key=_order):
        first = owner.get(r["mechanism"])
        if first is not None and first["method"] != r["method"]:
            if r["method"] not in methods_of(first):
                first["twins"].append({"method": r["method"], "name": twin_name(r), "score": r["score"]})
            continue
        out.append(r)
        for m in r["mechanisms"]:
            owner.setdefault(m, r)
    return out


def methods_of(r: dict) -> list[str]:
    """The row's method and its twins' (bench/plan/twins.py)."""
    return [r["method"]] + [t["method"] for t in r.get("twins", [])]


def rank(rows: list[dict]) -> list[dict]:
    """Best first (score, then fewer GPUs per SP group, then less memory); rank numbers and ties."""
    out = sorted(merge(rows), key=_order)
    best = out[0] if out else None
    for i, r in enumerate(out):
        r["rank"] = i + 1
        r["tie"] = i > 0 and r["score_high"] >= best["score_low"]
    return out


def best_per_method(ranked: list[dict]) -> dict[str, dict]:
    """Each method's best row, a twin's included (the row that runs what it runs)."""
    out: dict[str, dict] = {}
    for r in ranked:
        for m in methods_of(r):
            out.setdefault(m, r)
    return out


def describe(r: dict) -> str:
    """'dsp sp 8 dp 8, ckpt, ZeRO-2' (and a non-default variant, e.g. shard S); a row or its JSON."""
    bits = [f"{r['method']} sp {r['sp']} dp {r['dp']}"]
    cfg = r["config"]
    if (cfg["mode"] if isinstance(cfg, dict) else cfg.mode) == "train":
        bits += ["ckpt" if r["grad_ckpt"] else "no ckpt", f"ZeRO-{r['zero']}"]
    if r["sp"] > 1 and len(r["shard"]) == 1 and r["shard"][0] != "T":
        bits.append(f"shard {r['shard'][0]}")
    if r.get("cfg_parallel") == [True]:
        bits.append("CFG parallel")   # cond and uncond on two groups of sp x dp
    u = r.get("ulysses_degree") or [0]
    if len(u) == 1 and u[0]:
        bits.append(f"Ulysses {u[0]} x ring {r['sp'] // u[0]}")    # usp's split (--ulysses-degree)
    twins = " = ".join(t["name"] for t in r.get("twins", []))      # the same collectives and kernels
    return ", ".join(bits) + (f" (= {twins})" if twins else "")


def lead(best: dict, other: dict) -> tuple[float, float, float]:
    """best's score over other's, and that ratio's range over the profile's corners (both rows on
    the same cluster: an assumption or a calibration's spread moves both)."""
    ratios = [b / o for b, o in zip(best["corner_scores"], other["corner_scores"])]
    return best["score"] / other["score"], min(ratios), max(ratios)


def runner_up(ranked: list[dict]) -> dict | None:
    """The best row's lead over the best row that runs another method, {over, ratio, low, high}: not
    one of its twins (they are its own row: the same collectives and kernels under another name),
    and not a row where its method is a twin."""
    best = ranked[0]
    other = next((r for r in ranked[1:] if best["method"] not in methods_of(r)), None)
    if other is None:
        return None
    x, lo, hi = lead(best, other)
    return {"over": describe(other), "method": other["method"], "ratio": x, "low": lo, "high": hi}


def verdict(ranked: list[dict]) -> str:
    best, lead_ = ranked[0], runner_up(ranked)
    head = describe(best)
    if lead_ is None:
        return f"{head}: the only method that fits"
    tied = sorted({r["method"] for r in ranked if r["tie"] and r["method"] != best["method"]})
    tail = f"; within its interval: {', '.join(tied)}" if tied else ""
    return (f"{head}: {lead_['ratio']:.2f}x the best non-{best['method']} option ({lead_['over']}) "
            f"[{lead_['low']:.2f}-{lead_['high']:.2f}]{tail}")


def pruned_summary(pruned: list[dict], methods: tuple[str, ...]) -> dict[str, list[str]]:
    """Per method, each distinct reason once with how many candidates it pruned (OOM: their range)."""
    out: dict[str, list[str]] = {}
    for m in methods:
        mine = [p for p in pruned if p["method"] == m]
        reasons: dict[str, int] = {}
        for p in mine:
            if p["status"] == "unsupported":
                reasons[p["reason"]] = reasons.get(p["reason"], 0) + 1
        ooms = [p for p in mine if p["status"] == "oom"]
        lines = [f"{why} ({n} candidates)" for why, n in reasons.items()]
        if ooms:
            usable = ooms[0]["usable_bytes"]
            unit, scale = ("GiB", 2**30) if usable >= 2**30 else ("MiB", 2**20)   # emulated budgets are MiB
            peaks = [p["peak_mem_bytes"] / scale for p in ooms]
            lines.append(f"predicted OOM: {min(peaks):.1f}-{max(peaks):.1f} {unit} per rank > {usable / scale:.1f} "
                         f"{unit} usable ({len(ooms)} candidates, at sp "
                         f"{', '.join(map(str, sorted({p['sp'] for p in ooms})))})")
        if lines:
            out[m] = lines
    return out


def public(r: dict) -> dict:
    """A row as JSON: its configuration as the RunConfig fields a run takes."""
    out = {k: v for k, v in r.items() if k not in ("config", "mechanism", "mechanisms")}
    out["config"] = {k: v for k, v in asdict(r["config"]).items()
                     if k not in ("launcher", "sp_auto", "check", "threads", "inject_fault")}
    return out
