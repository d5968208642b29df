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
"""
from __future__ import annotations

import copy
from pathlib import Path

from dspbench.calibrate.nccl_logs import LogError, Test, parse_file, rows_for_fit
from dspbench.calibrate.profile import link_dict
from dspbench.cost.hardware import load_profile
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
        chosen = {}
        for t in (t for t in mine if t.world == n):
            chosen.setdefault(t.op, t)            # the first log of each op at that size
        fitted = link_dict(rows_for_fit(list(chosen.values())))
        links[tier] = _merge(links.get(tier, {}), fitted, tier, chosen, mine[0])
        for op, t in chosen.items():
            src[f"link.{tier}.{op}"] = (f"measured: nccl-tests log {t.where()} ({len(t.rows)} sizes, {t.world} ranks on "
                                        f"{len(t.hosts)} host(s), {t.op} {t.op_how}): out-of-place time, alpha-beta fit")
        for op in sorted(set(OPS) - set(chosen)):     # span: only measured tables are read (cost/tiers.py)
            src[f"link.{tier}.{op}"] = (
                f"kept from {base_name}: no nccl-tests log of {op} for this tier" if tier != "span" else
                f"no nccl-tests log of {op} across nodes: priced from link.intra and link.inter "
                "(bench/cost/tiers.py reads span tables only)")
    d.setdefault("device", {})["gpus_per_node"] = max(_per_node(t) for t in tests)
    src["device.gpus_per_node"] = f"the logs' devices blocks ({', '.join(sorted({t.where() for t in tests}))})"
    return d, notes


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
