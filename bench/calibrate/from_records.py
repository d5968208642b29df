"""`dspbench calibrate --from-records DIR [--base PROFILE]`: compute efficiency, dispatch and each
method's own work from the `dspbench run` records a user already has on a cluster (bench/gpu/check.sh's,
a small sweep); with `--from-nccl-tests` too, onto the profile made from the logs (links from the
logs, compute from the records). The base otherwise: --base, else the datasheet of the records' GPU.

Records kept: `source: measured` (older records have none: measured), `status: ok`. Records of
another GPU than the profile's (its model number, e.g. H200, in `environ.devices`), from a dirty
source tree (`environ.git_dirty` true) or with an injected fault refuse the whole command (exit 2,
file:line) unless `--force`, which keeps them and says so. An unknown tree state (git_dirty null:
no git where it ran) is accepted and noted.

Compute, as calibrate's two-shape fit (profile.compute_terms) over every baseline record
(method `single`, the no-SP step) of the most common dtype: what the cost model leaves of the
measured step once its own optimizer and communication are subtracted is
    FLOPs / (peak x efficiency) + modules x module_overhead_s x the model calls of the step,
each term as bench/cost/model.py charges it (its prediction at efficiency 1; the difference a
module_overhead_s of 1 s makes), fitted by least squares on relative error (a 30 ms step and a
2.5 s one weigh alike). A fit that makes no sense (either term <= 0) keeps one term: efficiency
alone, no dispatch. A base with a device curve ([compute.curve], which replaces efficiency) is
refused. Two constants do not carry across shapes far from the records' (on the H200's, held-out
Wan 1.3B and STDiT-XL S 256 samples came out +27% to +96%, docs/cost-model.md): fit on records
at the shapes you will predict.
Methods, as the emulated protocol does (bench/calibrate/methods.py): every other method's training
steps at each SP degree recorded, measured minus this profile's prediction of that step (median
over its records, signed), is `method_overhead_s[sp][method]`.
"""
from __future__ import annotations

import copy
import json
import statistics
import sys
from collections import Counter
from dataclasses import fields
from pathlib import Path

from dspbench.calibrate.from_logs import GPU_BASES
from dspbench.calibrate.nccl_logs import LogError
from dspbench.cost.hardware import from_dict, load_profile
from dspbench.cost.profile_toml import dumps
from dspbench.cost.model import predict
from dspbench.records.config import RunConfig

BASELINE = "single"
_CONFIG_FIELDS = {f.name for f in fields(RunConfig)}


def gpu_key(name: str) -> str | None:
    """'NVIDIA H200' or 'H200 SXM' -> 'H200' (the datasheet models of from_logs.GPU_BASES); None otherwise."""
    return next((key for key, _ in GPU_BASES if key in name.upper()), None)


def read(root: Path) -> list[tuple[str, dict]]:
    """[(file:line, record)] of every JSON line under root (*.jsonl, sorted)."""
    files = sorted(root.rglob("*.jsonl")) if root.is_dir() else []
    if not files:
        raise LogError(f"{root}:0: no *.jsonl records here")
    out = []
    for f in files:
        for no, line in enumerate(f.read_text().splitlines(), 1):
            if line.strip():
                try:
                    out.append((f"{f}:{no}", json.loads(line)))
                except json.JSONDecodeError as e:
                    raise LogError(f"{f}:{no}: not a JSON record: {e.msg}") from None
    return out


def select(recs: list[tuple[str, dict]], gpu: str | None, force: bool) -> tuple[list, list[str]]:
    """Measured, ok records; refusals (other GPU, dirty tree, injected fault) unless force; notes."""
    kept, notes, refused = [], [], []
    for where, r in recs:
        if r.get("source", "measured") != "measured" or r.get("status") != "ok":     # older records: no source
            notes.append(f"{where}: {r.get('source')} / {r.get('status')}: not a measured step, skipped")
            continue
        env = r.get("environ") or {}
        keys = {gpu_key(d) for d in env.get("devices") or ["unknown"]}
        why = [] if keys == {gpu} else [f"ran on {env.get('devices')}, not the profile's {gpu}"]
        why += ["from a dirty source tree (environ.git_dirty)"] if env.get("git_dirty") is True else []
        why += [f"injected fault {r['inject_fault']!r}"] if r.get("inject_fault") else []
        if why:
            refused.append(f"{where}: {'; '.join(why)}")
        kept.append((where, r))
    unknown = [w for w, r in kept if (r.get("environ") or {}).get("git_dirty") is None]
    if unknown:
        notes.append(f"{len(unknown)} records of unknown source tree state (git_dirty null: no git where they ran), "
                     f"used: {', '.join(unknown)}")
    if refused and not force:
        raise LogError(refused[0] + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else "")
                       + ": refusing; pass --force to use them anyway")
    return kept, notes + [f"used with --force: {w}" for w in refused]


def config_of(r: dict) -> RunConfig:
    return RunConfig.from_dict({k: v for k, v in r.items() if k in _CONFIG_FIELDS})


def fit_compute(base: dict, recs: list, dtype: str) -> tuple[float, float, list[str]]:
    """(efficiency, module_overhead_s, per-record lines) from baseline records (see the module doc)."""
    probe = copy.deepcopy(base)
    probe["kind"] = "calibrated"   # priced as the profile it becomes: FLOPs at an efficiency, not the datasheet's kernels
    comp = probe.setdefault("compute", {})
    comp.update(efficiency=1.0, module_overhead_s=0.0, method_overhead_s={})
    comp.get("flops_per_s", {}).pop(dtype, None)
    unit = from_dict(probe)
    if dtype not in unit.peak_flops:
        raise LogError(f"{recs[0][0]}: the profile has no peak FLOP/s for {dtype}: pass --base with one")
    if unit.curve:
        raise LogError(f"{recs[0][0]}: the base profile has a device curve ([compute.curve]), which replaces "
                       "efficiency: pass --base with a profile without one")
    comp["module_overhead_s"] = 1.0
    per_module = from_dict(probe)      # the dispatch the model charges per second of module overhead
    pts = []
    for where, r in recs:
        cfg = config_of(r)
        p = predict(cfg, unit)
        rest = r["step_time_median_s"] - p.optimizer_s - p.comm_total_s
        pts.append((where, cfg, p.compute_s, predict(cfg, per_module).compute_s - p.compute_s, rest))
    inv_e, over = _two_terms([(a / y, b / y) for _, _, a, b, y in pts if y > 0])
    lines = [f"{w} {c.model} {c.mode} T={c.frames} S={c.spatial}: measured step less optimizer and comm "
             f"{y * 1e3:.1f} ms, fitted {(a * inv_e + b * over) * 1e3:.1f} ms" for w, c, a, b, y in pts]
    return 1.0 / inv_e, over, lines


def _two_terms(rows: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares of 1 = u x a + v x b over rows (a, b); (u, v) with v = 0 where both cannot be > 0."""
    saa = sum(a * a for a, _ in rows)
    sbb = sum(b * b for _, b in rows)
    sab = sum(a * b for a, b in rows)
    sa, sb = sum(a for a, _ in rows), sum(b for _, b in rows)
    det = saa * sbb - sab * sab
    if det > 0:
        u, v = (sa * sbb - sb * sab) / det, (saa * sb - sab * sa) / det
        if u > 0 and v > 0:
            return u, v
    return sa / saa, 0.0


def method_overheads(prof: dict, recs: list) -> tuple[dict, dict]:
    """({"<sp>": {method: s}}, sources) from every non-baseline method's training records, per SP degree."""
    train = [(w, r) for w, r in recs if r.get("mode") == "train" and r["method"] != BASELINE]
    profile = from_dict(prof)
    over, src = {}, {}
    for m, sp in sorted({(r["method"], int(r["sp"])) for _, r in train}):
        mine = [(w, r) for w, r in train if r["method"] == m and int(r["sp"]) == sp]
        res = statistics.median(r["step_time_median_s"] - predict(config_of(r), profile).step_s for _, r in mine)
        over.setdefault(str(sp), {})[m] = res
        src[f"compute.method_overhead_s.{sp}.{m}"] = (
            f"measured steps of {m} at sp={sp} ({', '.join(w for w, _ in mine)}) minus this profile's prediction "
            f"of each, median {res * 1e3:.1f} ms")
    return over, src


def apply_records(d: dict, root: str, force: bool = False) -> list[str]:
    """Efficiency, dispatch and method overheads from root's records into profile dict d; notes."""
    gpu = gpu_key(from_dict(d).device)     # the sku's name where the profile names its device by sku
    recs, notes = select(read(Path(root)), gpu, force)
    base = [(w, r) for w, r in recs if r["method"] == BASELINE]
    if not base:
        raise LogError(f"{root}:0: no measured step of method {BASELINE!r} (the no-SP reference the compute fit "
                       "needs; bench/gpu/check.sh records one)")
    dtype = Counter(r["dtype"] for _, r in base).most_common(1)[0][0]
    base = [(w, r) for w, r in base if r["dtype"] == dtype]
    eff, over, lines = fit_compute(d, base, dtype)
    d["kind"] = "calibrated"   # before the method terms: they are residuals of the calibrated profile's prediction
    comp, src = d.setdefault("compute", {}), d.setdefault("sources", {})
    comp.get("flops_per_s", {}).pop(dtype, None)
    comp.update(efficiency=eff, module_overhead_s=over)
    how = (f"{len(base)} measured {BASELINE} steps in {dtype} under {root}: step - the model's optimizer and comm = "
           "FLOPs / (peak x efficiency) + modules x module_overhead_s, least squares on relative error: ")
    src["compute.efficiency"] = how + "; ".join(lines)
    src["compute.module_overhead_s"] = how + f"{over * 1e6:.1f} us per module per forward+backward"
    mo, msrc = method_overheads(d, [(w, r) for w, r in recs if r["dtype"] == dtype])
    if mo:
        comp["method_overhead_s"] = mo
        src.update(msrc)
    d["description"] = d.get("description", d["name"]) + f"; compute from the records under {root}"
    return notes


def base_profile(args) -> dict:
    """--base, else the datasheet profile of the one GPU model the records ran on."""
    name = args.base
    if not name:
        recs = read(Path(args.from_records))
        devices = sorted({d for _, r in recs for d in (r.get("environ") or {}).get("devices") or []})
        keys = {gpu_key(d) for d in devices}
        if len(keys) != 1 or None in keys:
            raise LogError(f"{args.from_records}:0: records ran on {devices}: pass --base PROFILE")
        name = dict(GPU_BASES)[keys.pop()]
    d = copy.deepcopy(load_profile(name).raw)
    d.update(name=args.name, description=name)
    return d


def cmd_from_records(args) -> int:
    """--from-records alone: the base profile with the records' compute terms (exit 2 on bad input,
    nothing written)."""
    from dspbench.calibrate.options import named
    with named("--from-records"):
        d = base_profile(args)         # the records' GPU picks it where --base is not given
        notes = apply_records(d, args.from_records, args.force)    # LogError (a ValueError): exit 2
    from_dict(d)                                                # what predict and plan will load
    for n in notes:
        print(f"dspbench calibrate: {n}", file=sys.stderr)
    out = Path(args.output or f"results/profiles/{args.name}.toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(d, f"Written by `dspbench calibrate --from-records {args.from_records}`; every value's "
                            "origin is in [sources]."))
    print(f"efficiency {d['compute']['efficiency']:.3f}, dispatch {d['compute']['module_overhead_s'] * 1e6:.1f} us "
          f"per module; profile written to {out}")
    return 0
