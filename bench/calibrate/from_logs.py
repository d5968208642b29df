"""`dspbench calibrate --from-nccl-tests LOG ...`: a hardware profile from nccl-tests logs.

Each test (bench/calibrate/nccl_tests.py) feeds one tier by its devices block: one host ->
[link.intra]; several hosts, one rank each -> [link.inter]; several hosts, several ranks each ->
[link.span] (with `per_node`). Per tier and op, the out-of-place time by size goes through the
fit `dspbench calibrate` uses (bench/calibrate/profile.py link_dict: t = alpha x steps(op, n) +
size x BUS_FACTOR[op](n) / busbw, least squares on time, so busbw is nccl-tests' bus bandwidth)
and the measured table is kept (`time_s_op`, used for groups of the logged size). Where a tier has
tests at several rank counts, the largest is used (the others are named in [sources]). Ops a tier's
logs lack keep the base profile's values, per op, and [sources] says so; a tier with no log keeps
the base's table whole. The base is `--base`, else the datasheet profile of the GPU the devices
blocks name (its peak FLOP/s, memory, NICs). Logs of different GPU models are different clusters.
"""
from __future__ import annotations

import copy
import re

from dspbench.calibrate.nccl_tests import NCCL_OPS, LogError, Test, parse_files
from dspbench.calibrate.profile import link_dict
from dspbench.cost.hardware import Link, from_dict, load_profile
from dspbench.cost.tiers import steps
from dspbench.methods.ledger import BUS_FACTOR, OPS

# GPU model key (from a devices block's or a record's device name) -> the datasheet profile of it.
DATASHEETS = {"H100": "h100-ib", "H200": "h200-ib", "A100": "a100-ib", "H800": "h800-nvlink"}
_GPU_KEY = re.compile(r"\b([A-Z]\d{2,3})\b")
FACTOR_TEXT = {"all_reduce": "2(n-1)/n", "all_gather": "(n-1)/n", "reduce_scatter": "(n-1)/n",
               "all_to_all": "(n-1)/n", "send_recv": "1"}


def gpu_key(name: str) -> str | None:
    """'NVIDIA H100 80GB HBM3' -> 'H100'; None for a device without a model number (a CPU)."""
    m = _GPU_KEY.search(name.upper())
    return m.group(1) if m else None


def tier_of(t: Test) -> tuple[str, int]:
    """(tier, ranks per node) of a test from its devices block."""
    hosts = t.hosts
    per = set(hosts.values())
    if len(per) > 1:
        raise LogError(f"{t.path}:{t.devices[0].line}: ranks spread unevenly over hosts {hosts}: not one tier")
    per_node = per.pop()
    if len(hosts) == 1:
        return "intra", per_node
    return ("inter", 1) if per_node == 1 else ("span", per_node)


def check_one_cluster(tests: list[Test]) -> str:
    """The one GPU model every devices block names; logs of two models are two clusters (exit 2)."""
    first = None
    for t in tests:
        for d in t.devices:
            if first is None:
                first = (t, d)
            elif d.gpu != first[1].gpu:
                t0, d0 = first
                raise LogError(f"{t.path}:{d.line}: mixed clusters: {d.gpu!r} on {d.host} here, {d0.gpu!r} on "
                               f"{d0.host} at {t0.path}:{d0.line}: make one profile per cluster")
    return first[1].gpu


def choose(tests: list[Test]) -> tuple[dict, list[str]]:
    """{tier: {op: test}} at each tier's largest rank count, and notes on the tests not used."""
    by_tier: dict[str, list[Test]] = {}
    for t in tests:
        if t.op:
            by_tier.setdefault(tier_of(t)[0], []).append(t)
    chosen, notes = {}, []
    for tier, ts in by_tier.items():
        n = max(t.ranks for t in ts)
        chosen[tier] = {}
        for t in ts:
            if t.ranks != n:
                notes.append(f"{t.where}: {t.name}_perf on {t.ranks} ranks: not used ({tier} uses {n} ranks)")
            elif t.op in chosen[tier]:
                notes.append(f"{t.where}: {t.name}_perf again on {n} ranks: not used (the first, "
                             f"{chosen[tier][t.op].where}, is)")
            else:
                chosen[tier][t.op] = t
    return chosen, notes


def rows_of(t: Test) -> list[dict]:
    """calibrate's row dicts (profile.fit's input) from a test's table."""
    n = t.ranks
    return [{"op": t.op, "size": r.size, "count": r.count, "ranks": n, "time_s": r.time_us * 1e-6,
             "wire_bytes": r.size * BUS_FACTOR[t.op](n)} for r in t.rows]


def tier_link(tier: str, tests: dict, base: Link, base_name: str, base_tier: str) -> tuple[dict, dict]:
    """One [link.<tier>] from its tests: calibrate's fit per op, the base's values for the rest."""
    rows = [row for op in OPS if op in tests for row in rows_of(tests[op])]
    link = link_dict(rows)
    one = next(iter(tests.values()))
    if tier == "span":
        link["per_node"] = tier_of(one)[1]
    src = {}
    for op in OPS:
        if op in tests:
            t = tests[op]
            src[f"link.{tier}.{op}"] = (
                f"{t.where}: {t.name}_perf, {t.ranks} ranks on {len(t.hosts)} host(s) ({', '.join(t.hosts)}), "
                f"{t.devices[0].gpu}; {t.rows[0].column} time at {len(t.rows)} sizes {t.rows[0].size}-"
                f"{t.rows[-1].size} B; least-squares t = alpha x {steps(op, t.ranks)} steps + size x "
                f"{FACTOR_TEXT[op]} / busbw (nccl-tests' busbw)")
        else:
            link["alpha_s_op"][op] = base.alpha(op)
            link["busbw_GBps"][op] = base.busbw(op) / 1e9
            src[f"link.{tier}.{op}"] = (f"not in the logs: base {base_name}'s link.{base_tier} alpha and busbw x "
                                        "efficiency")
    return link, src


def profile_from_logs(paths, name: str, base: str | None = None) -> tuple[dict, list[str]]:
    """(profile dict, notes: rows skipped, tests not used) from nccl-tests logs; LogError on bad input."""
    tests = parse_files(paths)
    usable = [t for t in tests if t.op]
    notes = [n for t in tests for n in t.notes]
    if not usable:
        raise LogError(f"{tests[0].path}:{tests[0].first_line}: no test of an op the cost model prices "
                       f"({', '.join(f'{k}_perf' for k in NCCL_OPS)})")
    gpu = check_one_cluster(usable)
    base_name = base or DATASHEETS.get(gpu_key(gpu) or "")
    if not base_name:
        raise LogError(f"{usable[0].path}:{usable[0].devices[0].line}: no datasheet profile for {gpu!r} "
                       f"(known: {', '.join(DATASHEETS)}): pass --base PROFILE for its memory and peak FLOP/s")
    chosen, more = choose(usable)
    d = copy.deepcopy(load_profile(base_name).raw)
    bp = from_dict(d)
    src = d.setdefault("sources", {})
    links = d.setdefault("link", {})
    for tier in ("intra", "inter", "span"):
        if tier in chosen:
            base_tier = "inter" if tier == "span" else tier      # a datasheet has no span table
            for k in [k for k in src if k.startswith(f"link.{tier}.")]:
                del src[k]                   # the base's reasons for values the logs replace
            links[tier], s = tier_link(tier, chosen[tier], getattr(bp, base_tier), base_name, base_tier)
            src.update(s)
        elif tier != "span":
            src[f"link.{tier}"] = f"not in the logs: base {base_name}'s"
    per_node = max(max(t.hosts.values()) for t in usable)
    first = usable[0]
    d["device"] = {**d.get("device", {}), "name": gpu, "gpus_per_node": per_node}
    src["device.name"] = f"{first.path}:{first.devices[0].line}: the devices block"
    src["device.gpus_per_node"] = "the most ranks on one host in the logs' devices blocks"
    d.update(name=name, kind="calibrated",
             description=f"{base_name} with links measured by nccl-tests ({', '.join(sorted(chosen))}) on {gpu}")
    return d, notes + more
