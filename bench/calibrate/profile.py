"""Calibration results into a hardware profile: the alpha-beta fit, the nccl-tests-style table, and
the profile dict (bench/cost/hardware.py's schema) that `dspbench calibrate` writes.

Without a base profile every value is measured (both link levels from these ranks' collectives).
With `--base NAME`, the profile is NAME's datasheet values with the measured parts replacing
theirs: compute (FLOP/s for the dtype, optimizer rate), the intra-node link when collectives were
measured (calibration ranks share a node), the ring overlap when the probe ran. A one-rank
calibration (one GPU) measures compute only and needs a base for its links.
"""
from __future__ import annotations

import copy
import socket
from datetime import datetime, timezone

from dspbench.cost.tiers import steps
from dspbench.cost.hardware import load_profile


def fit(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """{op: (alpha_s per step, busbw bytes/s)} by least squares of time on wire bytes per op."""
    out = {}
    for op in sorted({r["op"] for r in rows}):
        pts = [(r["wire_bytes"], r["time_s"]) for r in rows if r["op"] == op]
        k = steps(op, rows[0]["ranks"])
        n = len(pts)
        mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
        var = sum((x - mx) ** 2 for x, _ in pts)
        slope = sum((x - mx) * (y - my) for x, y in pts) / var if var else my / max(mx, 1)
        icpt = my - slope * mx
        if icpt < 0 or slope <= 0:       # no usable latency term: fit through the origin
            icpt, slope = 0.0, sum(y for _, y in pts) / sum(x for x, _ in pts)
        out[op] = (icpt / k, 1.0 / slope)
    return out


def table(rows: list[dict]) -> str:
    head = f"{'op':<15}{'size(B)':>12}{'count':>11}{'time(us)':>12}{'algbw(GB/s)':>13}{'busbw(GB/s)':>13}"
    lines = [head]
    for r in rows:
        op = f"{r['op']}@{r['tier']}" if "tier" in r else r["op"]
        lines.append(f"{op:<15}{r['size']:>12}{r['count']:>11}{r['time_s'] * 1e6:>12.1f}"
                     f"{r['algbw_GBps']:>13.4f}{r['busbw_GBps']:>13.4f}")
    return "\n".join(lines)


def link_dict(rows: list[dict]) -> dict:
    """[link.*] of a profile from measured collectives: per-op alpha and busbw (any group size),
    and the measured time by size (groups of the calibrated size)."""
    fitted = fit(rows)
    by_size = {op: [[r["size"], r["time_s"]] for r in rows if r["op"] == op] for op in fitted}
    return {"alpha_s": min(a for a, _ in fitted.values()), "bw_GBps": max(b for _, b in fitted.values()) / 1e9,
            "efficiency": 1.0, "alpha_s_op": {op: a for op, (a, _) in fitted.items()},
            "busbw_GBps": {op: b / 1e9 for op, (_, b) in fitted.items()},
            "ranks": rows[0]["ranks"], "time_s_op": by_size}


def _where(result: dict) -> str:
    return (f"measured by dspbench calibrate on {socket.gethostname()}, {result['world']} ranks, "
            f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}")


def _compute_source(where: str, comp: dict) -> str:
    blocks = f", {comp['depth']} blocks" if comp.get("depth") else ""
    two = (f" and {comp['small']['shape']} (t = modules x overhead + FLOPs / rate)" if comp.get("small") else "")
    return (f"{where}: {comp['model']}{blocks} forward+backward at shard {comp['shape']}{two} {comp['dtype']}, "
            "all ranks at once (slowest rank)")


def tier_links(rows: list[dict]) -> tuple[dict, dict]:
    """[link.*] tables from tiered rows (collectives.bench_tiers) and their sources; a tier not
    measured (one rank per node: no intra; one node: no inter) takes the other's values."""
    links = {}
    for tier in ("intra", "inter", "span"):
        mine = [r for r in rows if r.get("tier") == tier]
        if mine:
            links[tier] = {**link_dict(mine), **({"per_node": mine[0]["per_node"]} if tier == "span" else {})}
    what = {"intra": "a node's ranks, every node at once", "inter": "one rank per node",
            "span": "the whole world across the nodes"}
    src = {f"link.{t}": f"{what[t]}, {links[t]['ranks']} ranks: least-squares alpha-beta fit per op + the "
                        "measured times by size" for t in links}
    for t, other in (("intra", "inter"), ("inter", "intra")):
        if t not in links:
            links[t], src[f"link.{t}"] = links[other], f"not measured (no such tier in this world): link.{other}'s"
    return links, src


def profile_dict(name: str, result: dict, gpus_per_node: int, device: str, memory_gb: float,
                 base: str | None = None, nics_per_node: int = 0) -> dict:
    if base:
        return _on_base(name, result, base)
    if not result["collectives"]:
        raise ValueError("no collectives were measured (one rank, or --ops without any): pass --base PROFILE "
                         "to take the links from a datasheet profile")
    comp, where = result["compute"], _where(result)
    tiered = any("tier" in r for r in result["collectives"])
    if tiered:
        links, link_src = tier_links(result["collectives"])
        link_src = {k: f"{where}: {v}" for k, v in link_src.items()}
    else:
        link = link_dict(result["collectives"])
        links, link_src = {"intra": link, "inter": link}, {
            "link": f"{where}: least-squares alpha-beta fit per op over sizes "
                    f"{sorted({r['size'] for r in result['collectives']})}"}
    dev = {"name": device, "memory_gb": memory_gb, "gpus_per_node": gpus_per_node,
           "usable_memory_fraction": 0.9, "reserved_gb": 0.5}
    if nics_per_node:
        dev["nics_per_node"] = nics_per_node
    return {
        "name": name, "description": f"calibrated: {result['world']} ranks" + (", per tier" if tiered else ""),
        "kind": "calibrated", "device": dev,
        "compute": {**_compute(comp), "optimizer_Bps": comp["optimizer_Bps"], **_gemm(result), **_a2a_list(result)},
        "link": links,
        **_kernels(result),
        "overlap": _overlap_table(result),
        **_quality(result),
        "sources": {**link_src,
                    **({"device.nics_per_node": "given (--nics-per-node)"} if nics_per_node else {}),
                    "compute": _compute_source(where, comp),
                    "device.memory_gb": "host memory / ranks (os.sysconf)",
                    "overlap.ring": _overlap_source(where, result.get("overlap")),
                    **_overlap_intra_source(where, result),
                    **_kernels_source(where, result),
                    **_a2a_list_source(where, result)},
    }


def _on_base(name: str, result: dict, base: str) -> dict:
    d = copy.deepcopy(load_profile(base).raw)
    comp, where = result["compute"], _where(result)
    d.update(name=name, kind="calibrated", description=f"{base} with measured {_measured_parts(result)}")
    c = d.setdefault("compute", {})
    terms = _compute(comp)
    c["flops_per_s"] = {**c.get("flops_per_s", {}), **terms["flops_per_s"]}
    c["module_overhead_s"] = terms["module_overhead_s"]
    c["optimizer_Bps"] = comp["optimizer_Bps"]
    c.update(_gemm(result))
    c.update(_a2a_list(result))
    d.update(_quality(result))
    d.update(_kernels(result))
    src = d.setdefault("sources", {})
    src.update(_kernels_source(where, result))
    src.update(_a2a_list_source(where, result))
    src[f"compute.flops_per_s.{comp['dtype']}"] = _compute_source(where, comp)
    src["compute.optimizer_Bps"] = f"{where}: AdamW step of {comp['params']} parameters"
    if result["collectives"]:
        d.setdefault("link", {})["intra"] = link_dict(result["collectives"])
        src["link.intra"] = f"{where}: least-squares alpha-beta fit per op"
    if result.get("overlap"):
        d.setdefault("overlap", {}).update(_overlap_table(result))
        src["overlap.ring"] = _overlap_source(where, result["overlap"])
        src.update(_overlap_intra_source(where, result))
    return d


def compute_terms(comp: dict) -> tuple[float, float]:
    """(FLOP/s, seconds per module per forward+backward) from compute at two shapes of one model:
    t = modules x overhead + FLOPs / rate (a tiny model on a CPU spends much of its step
    dispatching ops, which no FLOP rate measured at one shape carries to another). Without a
    second shape, or a fit that makes no sense (rate or overhead <= 0): the one shape's rate, no
    overhead."""
    s = comp.get("small")
    if not s:
        return comp["flops_per_s"], 0.0
    d_flops, d_t = comp["flops"] - s["flops"], comp["fwd_bwd_s"] - s["fwd_bwd_s"]
    if d_flops <= 0 or d_t <= 0:
        return comp["flops_per_s"], 0.0
    rate = d_flops / d_t
    overhead = (comp["fwd_bwd_s"] - comp["flops"] / rate) / comp["modules"]
    return (rate, overhead) if overhead > 0 else (comp["flops_per_s"], 0.0)


def _compute(comp: dict) -> dict:
    rate, overhead = compute_terms(comp)
    return {"flops_per_s": {comp["dtype"]: rate}, "module_overhead_s": overhead}


def _gemm(result: dict) -> dict:
    """GEMM FLOP/s by width and tensor-parallel degree (bench/calibrate/gemm.py), when measured."""
    g = result.get("gemm")
    return {"gemm_flops_per_s": dict(g), "gemm_dtype": result["compute"]["dtype"]} if g else {}


def _kernels(result: dict) -> dict:
    """[kernels]: a CPU's per-kernel costs (bench/calibrate/kernels.py), when measured."""
    k = result.get("kernels")
    if not k:
        return {}
    from dspbench.calibrate.kernels import UNKNOWNS
    return {"kernels": {t: k[t] for t in UNKNOWNS + ("s_per_kernel_infer",) if t in k}}


def _kernels_source(where: str, result: dict) -> dict:
    k = result.get("kernels")
    if not k:
        return {}
    rows = "; ".join(f"{r['name']}: {r['seconds'] * 1e3:.3g} ms" for r in k["rows"])
    worst = max(abs(e) for e in k["residuals"])
    return {"kernels": f"{where}: one least-squares solve (relative residuals, worst {worst:.0%}) of "
                       f"t = kernels x s_per_kernel + GEMM FLOPs x s_per_gemm_flop + attention FLOPs x "
                       f"s_per_attn_flop + attention tiles x s_per_attn_tile + bytes x s_per_byte (streaming), "
                       f"_math (transcendental), _norm (norms) over {len(k['rows']) - 1} benchmarks, each "
                       f"counted by the cost model's own trace, all ranks at once (slowest rank): {rows}; "
                       "s_per_kernel_infer: the no-grad forward less its work, per kernel"}


def _a2a_list(result: dict) -> dict:
    """The reference all-to-all's extra seconds per payload byte (bench/calibrate/a2a_style.py), when measured."""
    a = result.get("a2a_styles")
    return {"a2a_list_extra_s_per_byte": a["extra_s_per_byte"]} if a else {}


def _a2a_list_source(where: str, result: dict) -> dict:
    a = result.get("a2a_styles")
    if not a:
        return {}
    lo, hi = a["range"]
    return {"compute.a2a_list_extra_s_per_byte": f"{where}: the list all-to-all (tensor_split, list, cat) against "
            f"all_to_all_single through the comm layer, median over sizes {[p['size'] for p in a['points']]} "
            f"of the extra time per byte (range {lo:.3g}..{hi:.3g} s/B)"}


def _quality(result: dict) -> dict:
    """[calibration]: load, each term's measured range and the warnings (bench/calibrate/quality.py)."""
    return {"calibration": result["quality"]} if result.get("quality") else {}


def _measured_parts(result: dict) -> str:
    parts = ["compute"] + (["intra-node collectives"] if result["collectives"] else [])
    return " and ".join(parts + (["ring overlap"] if result.get("overlap") else []))


def _overlap_value(result: dict):
    return round(result["overlap"]["fraction"], 3) if result.get("overlap") else False


def _overlap_table(result: dict) -> dict:
    """[overlap]: ring (the world's ring: hops across nodes where the world spans them) and, where
    measured, ring_intra (rings inside a node: bench/calibrate/collectives.py ring_overlap)."""
    out = {"ring": _overlap_value(result)}
    intra = (result.get("overlap") or {}).get("by_tier", {}).get("intra")
    if intra:
        out["ring_intra"] = round(intra["fraction"], 3)
    return out


def _overlap_intra_source(where: str, result: dict) -> dict:
    intra = (result.get("overlap") or {}).get("by_tier", {}).get("intra")
    if not intra:
        return {}
    return {"overlap.ring_intra": _overlap_source(where, intra).replace(
        "ring hop", "ring hop inside each node (every node's ring at once)", 1)}


def _overlap_source(where: str, o: dict | None) -> str:
    if not o:
        return "not measured (no send_recv in --ops): no overlap assumed"
    return (f"{where}: 1 - the CPU share of a {o['size']} B ring hop (process CPU time / wall time, "
            f"stretched by ranks per core), median of {len(o['fractions'])}: {o['fractions']}; the timing "
            f"probe (hop {o['comm_s'] * 1e3:.1f} ms, matmul chain {o['compute_s'] * 1e3:.1f} ms, hop under the "
            f"chain {o['both_s'] * 1e3:.1f} ms) gave {o['probe_fractions']}: reported, not used")
