"""Published GPU measurements as records: `dspbench evidence add FILE.toml`.

A source file (results/published/sources/*.toml) holds one publication's table: source-wide keys at
the top, one [[point]] per row, each point overriding any of them. Every key is checked before
anything is written (a missing citation or hardware, a profile that does not exist, an unknown key,
a model reference that does not resolve: ValueError, exit 2, nothing written); then the whole table
becomes one records file, results/published/<name>.jsonl (replaced atomically: adding a source again
rewrites its records, never doubles them).

A record is a `dspbench run` record (bench/records/build.py) with `source = "published"`: its
configuration in RunConfig's fields (so reports key it like any other), the published latency as
its step time and time per video, what that time includes in `time_includes` and
`sample_timed_loop`, and `published` (citation, framework, software, the publication's own label
of the configuration, the tune/hold-out split, what was approximated). `model` is the dspbench model
the point is predicted with; `published.model` the publication's; where they differ the record says
`model approximated: <model>` (one line in the source file to change when an exact preset lands).
"""
from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

REQUIRED = {"name": str, "citation": str, "hardware": str, "framework": str, "software": str, "includes": str,
            "model": str, "model_ref": str, "configuration": str, "method": str, "frames": int, "spatial": int,
            "gpus": int, "sp": int, "steps": int, "cfg": bool, "latency_s": float, "split": str}
OPTIONAL = {"includes_note": str, "video": str, "dtype": str, "shard": str, "ulysses_degree": int,
            "memory_gb": float, "ratios_only": bool, "approximations": str, "assumed": str}
CHOICES = {"software": ("eager", "compiled"), "includes": ("end_to_end", "dit_only"), "split": ("tune", "holdout"),
           "shard": ("T", "S"), "dtype": ("bf16", "fp16", "fp32")}
INCLUDES = {"end_to_end": "end to end as the source ran it: text encoding, every denoising step, VAE decode",
            "dit_only": "the DiT's denoising steps only (no text encoder, no VAE)"}


def read_source(path: Path) -> list[dict]:
    """The points of one source file, each with the source-wide keys merged in and checked."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e})") from None
    points = data.pop("point", None)
    if not isinstance(points, list) or not points:
        raise ValueError(f"{path}: no [[point]] rows (each row of the published table is one [[point]])")
    return [check_point({**data, **p}, f"{path}: point {i + 1}") for i, p in enumerate(points)]


def check_point(p: dict, where: str) -> dict:
    """The point itself, or a ValueError naming what is wrong with it (the first problem)."""
    from dspbench.cost.hardware import available_profiles, load_profile
    unknown = sorted(set(p) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join([*REQUIRED, *OPTIONAL])})")
    for key, kind in REQUIRED.items():
        if key not in p or p[key] is None or (isinstance(p[key], str) and not p[key].strip()):
            raise ValueError(f"{where}: no {key} (a published record needs its {key})")
    for key, kind in {**REQUIRED, **OPTIONAL}.items():
        if key in p and not _is(p[key], kind):
            raise ValueError(f"{where}: {key} = {p[key]!r} is not a {kind.__name__}")
    for key, allowed in CHOICES.items():
        if key in p and p[key] not in allowed:
            raise ValueError(f"{where}: {key} = {p[key]!r}: one of {', '.join(allowed)}")
    if p["latency_s"] <= 0 or p.get("memory_gb", 1) <= 0:
        raise ValueError(f"{where}: latency_s and memory_gb must be positive")
    if p["hardware"] not in available_profiles():
        raise ValueError(f"{where}: hardware {p['hardware']!r} is not a profile "
                         f"(known: {', '.join(available_profiles())}; bench/cost/profiles/)")
    load_profile(p["hardware"])
    return p


def _is(value, kind) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def run_config(p: dict):
    """The RunConfig a point describes (sample mode, the publication's GPUs, SP, steps and CFG)."""
    from dspbench.facts.build import validate
    from dspbench.records.config import RunConfig
    cfg = RunConfig(method=p["method"], model=p["model_ref"], frames=p["frames"], spatial=p["spatial"],
                    gpus=p["gpus"], sp=p["sp"], mode="sample", dtype=p.get("dtype", "bf16"), backend="nccl",
                    launcher="env", shard=p.get("shard", "S"), sample_steps=p["steps"], cfg=p["cfg"],
                    ulysses_degree=p.get("ulysses_degree", 0))
    validate(cfg)     # the names too: a model reference that does not resolve is the file's error
    if why := cfg.degree_error():   # a published point ran: degrees that cannot split its GPUs are a typo
        raise ValueError(f"sp {p['sp']} on gpus {p['gpus']}: {why}")
    return cfg


def approximated(p: dict) -> str | None:
    """'model approximated: <ref>' where the dspbench model is not the publication's, else None."""
    from dspbench.models.registry import split_overrides
    base, overrides = split_overrides(p["model_ref"])
    return None if base == p["model"] and not overrides else f"model approximated: {p['model_ref']}"


def record(p: dict) -> dict:
    """One point as a published record (see the module docstring)."""
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.predict import device_label
    from dspbench.facts.build import Outcome, build_record
    cfg = run_config(p)
    rec = build_record(cfg, Outcome("ok"), "published")
    lat, profile = float(p["latency_s"]), load_profile(p["hardware"])
    ident = json.dumps([p["citation"], p["configuration"], p["software"], p["gpus"]], sort_keys=True)
    pub = {k: p.get(k) for k in ("citation", "framework", "software", "includes", "includes_note", "model",
                                 "configuration", "split", "ratios_only", "approximations", "assumed", "video",
                                 "latency_s", "memory_gb")}
    rec.update({"run_id": "pub-" + hashlib.sha256(ident.encode()).hexdigest()[:12],
                "step_time_median_s": lat, "step_time_p10_s": lat, "step_time_p90_s": lat, "step_times_s": [lat],
                "s_per_video": lat / cfg.global_batch, "s_per_sample_step": None, "samples_per_s": cfg.global_batch / lat,
                "peak_mem_bytes": p["memory_gb"] * 1e9 if "memory_gb" in p else None,
                "hardware_profile": p["hardware"], "compiled": p["software"] == "compiled",
                "time_includes": p["includes"], "sample_timed_loop": p.get("includes_note") or INCLUDES[p["includes"]],
                "model_approximated": approximated(p), "published": {**pub, "ratios_only": bool(p.get("ratios_only"))},
                "environ": {"devices": [device_label(profile)], "hostnames": ["published"],
                            "software": f"{p['framework']}, {p['software']}"}})
    return rec


def records_of(path: Path) -> tuple[str, list[dict]]:
    """(the source's name, its records): every point checked and built before any is returned."""
    points = read_source(path)
    names = {p["name"] for p in points}
    if len(names) != 1:
        raise ValueError(f"{path}: one name per source file, got {', '.join(sorted(names))}")
    return names.pop(), [record(p) for p in points]


def add(paths: list[Path], out: Path, check_only: bool = False) -> list[Path]:
    """Check every file, then (unless check_only) write each source's records file; all or nothing."""
    from dspbench.records.io import write_atomic
    built = [records_of(Path(p)) for p in paths]       # raises before anything is written
    if check_only:
        return []
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, recs in built:
        target = out / f"{name}.jsonl"
        write_atomic(target, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in recs))
        written.append(target)
    return written


def cmd_evidence(args) -> int:
    paths = [Path(f) for f in args.files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"no such source file: {', '.join(missing)}")
    written = add(paths, Path(args.out), args.check)
    for path in written:
        print(f"published records written: {path}")
    if args.check:
        print(f"{len(paths)} source file(s) valid; nothing written (--check)")
    return 0

