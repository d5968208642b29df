"""`plan --emit-sweep FILE.toml`: a sweep spec (slurm/spec.py) that measures the plan's top K and
each method's best, one [[grid]] per configuration with every axis pinned, so the plan is checked on
the cluster with one `dspbench sweep FILE --executor slurm`. The text is read back with the sweep
reader and expanded before it is written (a spec `sweep` would refuse is never written)."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from dspbench.plan.axes import AXES
from dspbench.records.config import RunConfig

# The workload's fields every emitted spec pins; the rest only when not at RunConfig's default.
ALWAYS = ("model", "frames", "spatial", "batch", "gpus", "mode", "dtype", "backend", "warmup", "iters")
OPTIONAL = ("sample_steps", "mem_budget_mib", "seed", "timeout_s")


def chosen(doc: dict, top: int) -> list[dict]:
    """The top K rows, then each method's best not among them (rank order)."""
    ranks = sorted(set(range(1, min(top, len(doc["rows"])) + 1)) | set(doc["best_per_method"].values()))
    return [doc["rows"][i - 1] for i in ranks]


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def sweep_text(doc: dict, top: int, cluster: str, command: str, repeats: int = 1) -> str:
    rows = chosen(doc, top)
    cfg = rows[0]["config"]
    default = RunConfig()
    buckets = doc["request"].get("buckets") or []
    # a mix's shape is its buckets, in each grid (the sweep reader refuses frames/spatial beside them)
    fixed = [k for k in ALWAYS if not (buckets and k in ("frames", "spatial"))]
    fixed += [k for k in OPTIONAL if cfg[k] != getattr(default, k)]
    description = f"plan check: {doc['workload']} on {cfg['gpus']} x {doc['hardware']}"
    shape = f"mix{len(buckets)}" if buckets else f"T{cfg['frames']}-S{cfg['spatial']}"
    name = f"plan-{cfg['model']}-{shape}-{cfg['mode']}-{cfg['gpus']}g-{doc['hardware']}"
    lines = [f"# Emitted by: {command}",
             f"# Measures plan's top {min(top, len(doc['rows']))} and each method's best ({len(rows)} configurations),",
             f"# each pinned as ranked on {doc['hardware']}; the predictions are in the comments (source: predicted).",
             f"# verdict: {doc['verdict']}",
             f"#   dspbench sweep FILE --dry-run; dspbench sweep FILE --executor slurm",
             "[sweep]", f"name = {_toml(_safe(name))}",
             f"description = {_toml(description)}",
             f"cluster = {_toml(cluster)}", f"repeats = {int(repeats)}", f"configs_per_job = {len(rows)}", "", "[fixed]"]
    lines += [f"{k} = {_toml(cfg[k])}" for k in fixed]
    for r in rows:
        lines += ["", f"# rank {r['rank']}: predicted {doc['metric']} {_metric(r, doc)}",
                  "[[grid]]"]
        lines += [f"{a.field} = [{_toml(r['config'][a.field])}]" for a in AXES]
        if buckets:
            lines.append("buckets = [" + ", ".join(f"[{t}, {s}, {_toml(float(w))}]" for t, s, w in buckets) + "]")
    return "\n".join(lines) + "\n"


def _metric(r: dict, doc: dict) -> str:
    if doc["metric"] == "samples/s":
        return f"{r['score']:.4g} [{r['score_low']:.4g}-{r['score_high']:.4g}]"
    return f"{r['step_time_s']:.4g} [{r['step_time_low_s']:.4g}-{r['step_time_high_s']:.4g}]"


def _safe(name: str) -> str:
    """A results-folder name: letters, digits, '-_.', no runs of '-' (a what-if profile's brackets)."""
    return re.sub(r"-+", "-", "".join(c if c.isalnum() or c in "-_." else "-" for c in name)).strip("-")


def write_sweep(path: str, text: str) -> None:
    """Check the spec as `dspbench sweep` reads and expands it, then write it (atomically)."""
    from dspbench.slurm.plan import expand
    from dspbench.slurm.spec import load_sweep
    target = Path(path)
    if target.suffix != ".toml":
        raise ValueError(f"--emit-sweep {path}: a sweep spec is a .toml file")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"--emit-sweep {path}: no directory {target.parent}")
    fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".toml", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        expand(load_sweep(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
