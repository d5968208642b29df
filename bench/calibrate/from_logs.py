"""`dspbench calibrate --from-nccl-tests LOG [LOG ...] --name NAME [--base PROFILE]`: a hardware
profile from the nccl-tests logs a cluster's bring-up already has (bench/calibrate/nccl_logs.py
reads them), fitted exactly as `calibrate` fits its own measurements (profile.link_dict: per op an
alpha-beta line of out-of-place time on wire bytes, and the measured times by size for groups of
the logged size).

Which tier a log feeds, from its devices block: one host -> [link.intra]; several hosts with one
rank each -> [link.inter]; several hosts with several ranks each -> [link.span] (ranks, per_node:
bench/cost/tiers.py) and, when no single-host log is given, nothing else. Per tier the largest
logged group is used. Ops with no log keep the base profile's values and say so in [sources];
each fitted value names its file and lines. The base is --base, else the datasheet profile of the
logs' GPU model (its peak FLOPs, memory and HBM). Nothing is written unless every log parses.

A log of one size (`-b 1G -e 1G`) gives its op's bandwidth only: busbw = wire bytes / (time - steps x
alpha), with alpha from a log of the same op, tier and group size with several sizes (whose times
by size join the table), or, with none, the base profile's alpha, said to be assumed in [sources].
Where a log's in-place results were wrong but its out-of-place ones right, [sources] says the
out-of-place column was fitted.
"""
from __future__ import annotations

import copy
from pathlib import Path

from dspbench.calibrate.nccl_logs import LogError, Test, parse_file, rows_for_fit
from dspbench.calibrate.profile import link_dict
from dspbench.cost.hardware import load_profile
from dspbench.cost.tiers import steps
from dspbench.methods.comm.ledger import OPS

GPU_BASES = (("H200", "h200-ib"), ("H100", "h100-ib"), ("H800", "h800-nvlink"), ("A100", "a100-ib"))


def tier_of(t: Test) -> str:
    hosts = t.hosts
    if len(hosts) == 1:
        return "intra"
    return "inter" if t.world == len(hosts) else "span"


def base_for(gpu: str, base: str | None) -> str:
    if base:
        return base
    for key, name in GPU_BASES:
        if key in gpu.upper():
            return name
    raise LogError(f"no datasheet profile for GPU {gpu!r}: pass --base PROFILE (its peak, memory and HBM are kept)")


def read_logs(paths: list[str]) -> tuple[list[Test], list[str]]:
    """Every test of every file, and the notes on skipped rows; one cluster only."""
    tests, notes = [], []
    for p in paths:
        if not Path(p).is_file():
            raise LogError(f"{p}:0: no such file")
        for t in parse_file(p):
            tests.append(t)
            notes += t.skipped
    gpus = {}
    for t in tests:
        gpus.setdefault(t.gpu, t.where())
    if len(gpus) > 1:
        raise LogError("logs of different clusters mixed: " + "; ".join(f"{g} ({w})" for g, w in gpus.items()))
    return tests, notes


def profile_from_logs(paths: list[str], name: str, base: str | None = None) -> tuple[dict, list[str]]:
    """(profile dict, notes) from nccl-tests logs: see the module docstring."""
    tests, notes = read_logs(paths)
    gpu = tests[0].gpu
    base_name = base_for(gpu, base)
    d = copy.deepcopy(load_profile(base_name).raw)
    d.update(name=name, kind="calibrated", description=f"{base_name} with links fitted to nccl-tests logs of {gpu}")
    src = d.setdefault("sources", {})
    links = d.setdefault("link", {})
    for tier in ("intra", "inter", "span"):
        mine = [t for t in tests if tier_of(t) == tier]
        if not mine:
            continue
        n = max(t.world for t in mine)
        chosen, single = {}, {}
        for t in (t for t in mine if t.world == n):
            (single if t.one_size else chosen).setdefault(t.op, t)    # the first log of each op at that size
        fitted = link_dict(rows_for_fit(list(chosen.values()))) if chosen else _empty(n)
        for op, t in chosen.items():
            src[f"link.{tier}.{op}"] = (f"measured: nccl-tests log {t.where()} ({len(t.rows)} sizes, {t.world} ranks on "
                                        f"{len(t.hosts)} host(s), {t.op} {t.op_how}): out-of-place time, alpha-beta "
                                        f"fit{_inplace_note(t)}")
        for op, t in single.items():
            src[f"link.{tier}.{op}"] = _bandwidth_only(fitted, t, chosen.get(op), _base_alpha(d, tier, op), base_name)
        notes += [f"{t.where()}: in-place results wrong at line(s) {', '.join(map(str, t.inplace_wrong))}; "
                  "the out-of-place column is fitted" for t in [*chosen.values(), *single.values()] if t.inplace_wrong]
        links[tier] = _merge(links.get(tier, {}), fitted, tier, {**single, **chosen}, mine[0])
        for op in sorted(set(OPS) - set(chosen) - set(single)):     # span: only measured tables are read (cost/tiers.py)
            src[f"link.{tier}.{op}"] = (
                f"kept from {base_name}: no nccl-tests log of {op} for this tier" if tier != "span" else
                f"no nccl-tests log of {op} across nodes: priced from link.intra and link.inter "
                "(bench/cost/tiers.py reads span tables only)")
    d.setdefault("device", {})["gpus_per_node"] = max(_per_node(t) for t in tests)
    src["device.gpus_per_node"] = f"the logs' devices blocks ({', '.join(sorted({t.where() for t in tests}))})"
    return d, notes


def _inplace_note(t: Test) -> str:
    if not t.inplace_wrong:
        return ""
    return (f"; in-place #wrong not 0 at line(s) {', '.join(map(str, t.inplace_wrong))} (older nccl-tests report "
            "that for in-place alltoall): the out-of-place column, whose results were right, is fitted")


def _empty(n: int) -> dict:
    return {"alpha_s_op": {}, "busbw_GBps": {}, "time_s_op": {}, "ranks": n}


def _base_alpha(d: dict, tier: str, op: str) -> float:
    """The base profile's latency per step for op on tier (span has none of its own: inter's)."""
    link = d.get("link", {}).get(tier) or d.get("link", {}).get("inter", {})
    return float(link.get("alpha_s_op", {}).get(op, link.get("alpha_s", 0.0)))


def _bandwidth_only(fitted: dict, t: Test, small: Test | None, base_alpha: float, base_name: str) -> str:
    """A one-size log into fitted: its busbw past the latency of `small` (the same op's log of several
    sizes, already fitted) or of the base profile (assumed); returns its [sources] line."""
    op, (size, time_s, line, *_) = t.op, t.rows[0]
    row = rows_for_fit([t])[0]
    alpha = fitted["alpha_s_op"][op] if small else base_alpha
    k = steps(op, t.world)
    if time_s <= k * alpha:
        raise LogError(f"{t.file}:{line}: size {size} B took {time_s * 1e6:.2f} us, no more than the latency "
                       f"{k} x {alpha * 1e6:.2f} us it is priced with: a bandwidth cannot follow")
    fitted["alpha_s_op"][op] = alpha
    fitted["busbw_GBps"][op] = row["wire_bytes"] / (time_s - k * alpha) / 1e9
    table = {s: tm for s, tm in fitted["time_s_op"].get(op, [])} | {size: time_s}
    fitted["time_s_op"][op] = [[s, table[s]] for s in sorted(table)]
    fitted["alpha_s"] = min(fitted["alpha_s_op"].values())
    fitted["bw_GBps"] = max(fitted["busbw_GBps"].values())
    where = (f"measured: latency from nccl-tests log {small.where()} ({len(small.rows)} sizes, alpha-beta fit)"
             if small else f"assumed: latency {alpha * 1e6:.3f} us per step, {base_name}'s (no log of {op} at "
                           "several sizes)")
    return (f"measured: bandwidth from nccl-tests log {t.where()} (one size, {size} B, {t.world} ranks on "
            f"{len(t.hosts)} host(s), {op} {t.op_how}): busbw = wire bytes / (time - {k} x alpha); {where}"
            f"{_inplace_note(t)}")


def _per_node(t: Test) -> int:
    return max(sum(1 for h, _ in t.ranks.values() if h == host) for host in t.hosts)


def _merge(old: dict, fitted: dict, tier: str, chosen: dict, sample: Test) -> dict:
    """The base tier with the fitted ops replacing theirs (per-op maps merged, the rest kept)."""
    out = dict(old)
    for key in ("alpha_s_op", "busbw_GBps", "time_s_op"):
        out[key] = {**old.get(key, {}), **fitted[key]}
    out["ranks"] = fitted["ranks"]
    if tier == "span":
        out["per_node"] = _per_node(sample)
    out.setdefault("alpha_s", fitted["alpha_s"])
    out.setdefault("bw_GBps", fitted["bw_GBps"])
    return out
