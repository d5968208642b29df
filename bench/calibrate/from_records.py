"""`dspbench calibrate --from-records DIR [--base PROFILE] --name NAME`: the compute efficiency a
cluster achieved, from its own `dspbench run` records (the one-GPU check's, a small sweep's).

A profile's compute term is hardware FLOPs / (peak x efficiency) (bench/cost/model.py), so the
efficiency a record shows is its hardware FLOPs utilisation (`hfu`: checkpointing's recompute
counted). Only records that are pure compute say it: measured, ok, on one rank (no collective in
the step). Their median becomes [compute] efficiency on the base profile, the records named in
[sources] with their spread. Records from another device than the base profile's, or of dirty
provenance (records' environ git_dirty), are refused unless --force; unknown provenance (no git
where it ran) is said. Records of several ranks are listed and left out: their step holds
communication, which the efficiency must not absorb.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

from dspbench.cost.hardware import dumps, load_profile
from dspbench.records.io import read_dir


def usable(records: list[dict]) -> tuple[list[dict], list[str]]:
    """(records that measure compute alone, why each other one was left out)."""
    keep, left = [], []
    for r in records:
        why = ("not measured" if r.get("source", "measured") != "measured" else
               f"status {r['status']}" if r["status"] != "ok" else
               f"{r['world_size']} ranks: its step holds communication" if r["world_size"] != 1 else
               "no hardware FLOPs utilisation (no peak for its device and dtype)" if not r.get("hfu") else None)
        (left.append(f"{r['run_id']} {r['method']} {r['model']}: {why}") if why else keep.append(r))
    return keep, left


def check_provenance(records: list[dict], device: str, force: bool) -> list[str]:
    """Refusals (ValueError) for another device or dirty trees unless force; notes otherwise."""
    notes = []
    other = sorted({d for r in records for d in r["environ"].get("devices", []) if device.lower() not in d.lower()})
    dirty = [r["run_id"] for r in records if r["environ"].get("git_dirty")]
    unknown = [r["run_id"] for r in records if r["environ"].get("git_sha") is None]
    problems = ([f"records from another device ({', '.join(other)}) than the profile's {device}"] if other else []) + \
               ([f"{len(dirty)} record(s) of a dirty tree ({', '.join(dirty[:3])})"] if dirty else [])
    if problems and not force:
        raise ValueError("refusing: " + "; ".join(problems) + " (--force to use them anyway)")
    notes += [f"used despite: {p} (--force)" for p in problems]
    if unknown:
        notes.append(f"{len(unknown)} record(s) of unknown provenance (no git where they ran)")
    return notes


def cmd_from_records(args) -> int:
    records, problems = read_dir(args.from_records)
    if problems:
        raise ValueError(f"{args.from_records}: unreadable record lines: {problems[:3]}")
    keep, left = usable(records)
    if not keep:
        raise ValueError(f"{args.from_records}: no record measures compute alone (measured, ok, one rank): "
                         + "; ".join(left[:5]))
    base = load_profile(args.base or "h200-ib")
    notes = check_provenance(keep, base.device.split()[0], args.force)
    effs = [r["hfu"] for r in keep]
    d = base.raw.copy()
    d = {**d, "name": args.name, "kind": "calibrated",
         "compute": {**d.get("compute", {}), "efficiency": round(statistics.median(effs), 4)},
         "sources": {**d.get("sources", {}), "compute.efficiency": (
             f"measured: median hardware FLOPs utilisation of {len(keep)} one-rank record(s) in {args.from_records} "
             f"(range {min(effs):.3f}..{max(effs):.3f}; {', '.join(sorted({r['model'] for r in keep}))})")}}
    out = Path(args.output or f"results/profiles/{args.name}.toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(d, f"Written by `dspbench calibrate --from-records {args.from_records}` on {base.name}."))
    for n in notes + [f"left out: {x}" for x in left]:
        print(f"dspbench calibrate: {n}", file=sys.stderr)
    print(f"efficiency {statistics.median(effs):.3f} from {len(keep)} record(s); profile written to {out}")
    return 0
