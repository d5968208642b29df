"""Sweep specs and cluster profiles: TOML files read strictly into dataclasses.

A sweep (`slurm/sweeps/<name>.toml`) has four tables:
- `[sweep]`: name, description, cluster (a profile name or path), repeats, configs_per_job, and
  hardware (a cost-model profile, bench/cost/profiles/, or a calibrated TOML) which resolves `sp = "auto"`
  to the smallest SP degree that fits, as `dspbench run --sp auto --hardware` does;
- `[fixed]`: RunConfig fields shared by every point;
- `[[grid]]` (one or more; the points are their union): RunConfig fields mapped to lists of values
  (a cartesian product) plus an optional `zip` table (or list of tables) of equal-length lists that
  vary together, e.g. `zip = { gpus = [2, 4, 8], sp = [2, 4, 8] }`;
  A grid may hold `buckets = [[T, S, weight], ...]` (or `bucket_file = "file.csv"`, OpenSora's
  `resolution,frames,weight`, beside the sweep file, converted through each model's own VAE and
  patch): a mixed-shape workload, each bucket a point with its frames, spatial and bucket_weight
  (bench/records/buckets.py; reports fold them);
- `[cluster]`: overrides of the profile's keys for this sweep.
The RunConfig dataclass is the schema: any other key, or a value of the wrong type, is an error that
names the file and the key (STYLE.md item 7), raised before anything runs or is submitted.
"""
from __future__ import annotations

import re
import typing
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from dspbench.facts.args import model_and_shape
from dspbench.records.buckets import BucketError, parse_buckets, read_bucket_file
from dspbench.records.config import RunConfig

HERE = Path(__file__).resolve().parent
SWEEPS, CLUSTERS = HERE / "sweeps", HERE / "clusters"
# The executor decides how ranks start; repeats come from `[sweep] repeats`.
NOT_SWEEPABLE = ("launcher", "repeat", "sp_auto", "bucket_weight", "shard_auto", "defaults_from")   # set by sp =
# "auto", by `buckets`, by --shard left unset (facts/shard.py), by the model's defaults (facts/defaults.py)


class SpecError(ValueError):
    """A sweep or cluster file is wrong; the message names the file and the key."""


@dataclass(frozen=True)
class ClusterProfile:
    partition: str = ""            # "" = the cluster's default partition
    account: str = ""
    qos: str = ""
    constraint: str = ""           # e.g. "h100"
    gpus_per_node: int = 8         # ranks per node: G ranks take ceil(G / gpus_per_node) nodes
    request_gpus: bool = True      # false on CPU-only clusters: no --gpus-per-node
    cpus_per_task: int = 8
    mem: str = ""                  # sbatch --mem, e.g. "480G" or "0" (all of it); "" = default
    time_min: int = 60             # time limit of each job, minutes
    signal_delay_s: int = 120      # USR2 this long before the limit: finish, checkpoint, requeue
    max_requeues: int = 3          # requeues after a time limit (submitit max_num_timeout)
    setup: list[str] = field(default_factory=list)       # lines before srun: module load ...
    env: dict[str, str] = field(default_factory=dict)    # exported in every task
    python: str = ""               # interpreter on the nodes ("" = the submitting one)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: str
    description: str
    cluster_name: str
    cluster: ClusterProfile
    repeats: int
    configs_per_job: int
    fixed: dict
    grids: list[dict]              # each {"axes": {key: [values]}, "zips": [{key: [values]}]}
    hardware: str = ""             # cost-model profile for sp = "auto" ("" = none given)

    def to_dict(self) -> dict:
        """The resolved spec (profile included), as written to manifest.json."""
        return asdict(self)


SWEEP_KEYS = {"name": str, "description": str, "cluster": str, "repeats": int, "configs_per_job": int,
              "hardware": str}
TOP_KEYS = ("sweep", "fixed", "grid", "cluster")


# ---------------------------------------------------------------- types
def _type_name(typ) -> str:
    args = typing.get_args(typ)
    if typing.get_origin(typ) in (list, dict):
        return str(typ).replace("typing.", "")
    return " or ".join(_type_name(a) for a in args) if args else typ.__name__


def _type_ok(value, typ) -> bool:
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin is list:
        return isinstance(value, list) and all(_type_ok(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_type_ok(v, args[1]) for v in value.values())
    if args:                                   # a union such as int | str
        return any(_type_ok(value, a) for a in args)
    if typ is float:                           # TOML writes 600 for 600.0
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typ is int:                             # bool is an int in Python, not in a spec
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, typ)


def _check(where: str, key: str, value, typ) -> None:
    if not _type_ok(value, typ):
        raise SpecError(f"{where}: {key} must be {_type_name(typ)}, got {type(value).__name__} {value!r}")


def _check_table(where: str, table, types: dict[str, type]) -> dict:
    if not isinstance(table, dict):
        raise SpecError(f"{where}: must be a table, got {type(table).__name__}")
    unknown = sorted(set(table) - set(types))
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(types))})")
    for key, value in table.items():
        _check(where, key, value, types[key])
    return table


def _hints(cls) -> dict[str, type]:
    return {f.name: typing.get_type_hints(cls)[f.name] for f in fields(cls)}


RUN_TYPES = {k: t for k, t in _hints(RunConfig).items() if k not in NOT_SWEEPABLE}
PROFILE_TYPES = _hints(ClusterProfile)


# ---------------------------------------------------------------- files
def read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: invalid TOML: {e}") from None


def find_sweep(name_or_path: str) -> Path:
    """A path to a sweep file, or the name of a shipped one (slurm/sweeps/<name>.toml)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = SWEEPS / f"{name_or_path}.toml"
    if shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in SWEEPS.glob("*.toml")))
    raise FileNotFoundError(f"no sweep file {name_or_path!r} and no shipped sweep of that name (shipped: {names})")


def load_cluster_profile(name_or_path: str, base: Path, overrides: dict | None = None) -> ClusterProfile:
    """A cluster profile by name (slurm/clusters/<name>.toml) or path, with a sweep's overrides."""
    path = Path(name_or_path)
    if not path.is_absolute() and (base / path).is_file():
        path = base / path
    if not path.is_file():
        path = CLUSTERS / f"{name_or_path}.toml"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in CLUSTERS.glob("*.toml")))
        raise SpecError(f"no cluster profile {name_or_path!r} (shipped: {names})")
    values = _check_table(str(path), read_toml(path), PROFILE_TYPES)
    profile = ClusterProfile(**{**values, **(overrides or {})})
    for key in ("gpus_per_node", "cpus_per_task", "time_min"):
        if getattr(profile, key) < 1:
            raise SpecError(f"{path}: {key} must be >= 1, got {getattr(profile, key)}")
    bad = [k for k in profile.env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
    if bad:   # they become `export KEY=value` lines of the sbatch script
        raise SpecError(f"{path}: env key {bad[0]!r} is not a shell variable name")
    return profile


def load_sweep(name_or_path: str) -> SweepSpec:
    path = find_sweep(name_or_path)
    where = str(path)
    data = read_toml(path)
    if not data:   # an empty file would run RunConfig's defaults as if asked
        raise SpecError(f"{where}: empty: a sweep says what to run in [fixed] and [[grid]] tables")
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown table {unknown[0]!r} (known: {', '.join(TOP_KEYS)})")
    head = _check_table(f"{where}: [sweep]", data.get("sweep", {}), SWEEP_KEYS)
    fixed = _check_table(f"{where}: [fixed]", data.get("fixed", {}), RUN_TYPES)
    overrides = _check_table(f"{where}: [cluster]", data.get("cluster", {}), PROFILE_TYPES)
    grids = data.get("grid", [{}])
    grids = [grids] if isinstance(grids, dict) else grids
    if not isinstance(grids, list):
        raise SpecError(f"{where}: grid must be [[grid]] tables, got {type(grids).__name__}")
    parsed = [_grid(f"{where}: [[grid]] #{i + 1}", g, fixed, path.parent) for i, g in enumerate(grids)]
    for key in ("repeats", "configs_per_job"):
        if head.get(key, 1) < 1:
            raise SpecError(f"{where}: [sweep] {key} must be >= 1, got {head[key]}")
    cluster = head.get("cluster", "local")
    if head.get("hardware"):
        _check_hardware(where, head["hardware"])
    return SweepSpec(name=head.get("name", path.stem), path=where, description=head.get("description", ""),
                     cluster_name=cluster, cluster=load_cluster_profile(cluster, path.parent, overrides),
                     repeats=head.get("repeats", 1), configs_per_job=head.get("configs_per_job", 8),
                     fixed=fixed, grids=parsed, hardware=head.get("hardware", ""))


def _grid(where: str, grid, fixed: dict, base: Path = SWEEPS) -> dict:
    if not isinstance(grid, dict):
        raise SpecError(f"{where}: must be a table, got {type(grid).__name__}")
    grid = dict(grid)
    zips = grid.pop("zip", [])
    zips = [zips] if isinstance(zips, dict) else zips
    if not isinstance(zips, list):
        raise SpecError(f"{where}: zip must be a table or a list of tables, got {type(zips).__name__}")
    mix = _buckets(where, grid, zips, fixed, base)
    axes = _axes(where, grid, fixed)
    checked = [_axes(f"{where} zip", z, fixed) for z in zips] + mix
    seen = set(axes)
    for z in checked:
        if len({len(v) for v in z.values()}) > 1:
            raise SpecError(f"{where}: the lists of a zip must have equal lengths, got "
                            + ", ".join(f"{k}: {len(v)}" for k, v in z.items()))
        if seen & set(z):
            raise SpecError(f"{where}: key {sorted(seen & set(z))[0]!r} appears twice in the grid")
        seen |= set(z)
    return {"axes": axes, "zips": checked}


def _buckets(where: str, grid: dict, zips: list, fixed: dict, base: Path) -> list[dict]:
    """A grid's `buckets` / `bucket_file` (popped) -> one zip of frames, spatial and bucket_weight (or
    none). A file's videos convert through each model's VAE and patch, so a grid of several models
    zips each model with its own buckets (its `model` axis popped into the zip)."""
    inline, file = grid.pop("buckets", None), grid.pop("bucket_file", None)
    if inline is None and file is None:
        return []
    if inline is not None and file is not None:
        raise SpecError(f"{where}: give buckets or bucket_file, not both")
    clash = sorted({"frames", "spatial"} & set(fixed))
    if clash:
        raise SpecError(f"{where}: buckets set the shape: {clash[0]} must not be in [fixed]")
    try:
        if file is None:
            rows = parse_buckets("buckets", inline)
            return [{"frames": [r[0] for r in rows], "spatial": [r[1] for r in rows],
                     "bucket_weight": [r[2] for r in rows]}]
        if not isinstance(file, str):
            raise BucketError(f"bucket_file must be a path string, got {file!r}")
        if any("model" in z for z in zips if isinstance(z, dict)):
            raise BucketError("bucket_file converts videos through the model's VAE: give model in [fixed] "
                              "or as a grid axis, not in a zip")
        models = grid.pop("model") if isinstance(grid.get("model"), list) else [fixed.get("model", RunConfig.model)]
        per_model = [(m, read_bucket_file(base / file, partial(_video_tokens, m))) for m in models]
    except BucketError as e:
        raise SpecError(f"{where}: {e}") from None
    out = {"frames": [r[0] for _, rows in per_model for r in rows],
           "spatial": [r[1] for _, rows in per_model for r in rows],
           "bucket_weight": [r[2] for _, rows in per_model for r in rows]}
    return [out if len(models) == 1 else {"model": [m for m, rows in per_model for _ in rows], **out}]


def _video_tokens(model: str, video: str) -> tuple[int, int]:
    """(T, S) of an "FxHxW" video through `model`'s VAE and patch (facts: the same conversion as --video;
    an unknown model or a size that does not convert is its ValueError)."""
    got = model_and_shape(model, [], None, None, video)
    return got["frames"], got["spatial"]


def _axes(where: str, table, fixed: dict) -> dict:
    """Grid axes: each key a RunConfig field, each value a non-empty list of values of its type."""
    if not isinstance(table, dict):
        raise SpecError(f"{where}: must be a table, got {type(table).__name__}")
    _check_table(where, {k: [] for k in table}, {k: list for k in RUN_TYPES})   # names first
    for key, values in table.items():
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}: {key} must be a non-empty list of values, got {values!r}")
        for v in values:
            _check(where, key, v, RUN_TYPES[key])
        if key in fixed:
            raise SpecError(f"{where}: {key} is set both in [fixed] and in the grid")
    return table


def _check_hardware(where: str, name: str) -> None:
    from dspbench.cost.hardware import load_profile as load_hardware
    try:
        load_hardware(name)
    except (FileNotFoundError, ValueError, KeyError) as e:
        raise SpecError(f"{where}: [sweep] hardware: {e}") from None
