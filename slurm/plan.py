"""From a sweep spec to what runs: points (RunConfigs with stable run_ids), then jobs.

- `expand`: every grid point x repeat, in file order, deduplicated by run_id;
- `make_plan`: drops what the results already hold (resume), turns points a method cannot run into
  `unsupported` records (no job), and packs the rest into jobs of one allocation shape each;
- `plan_table`: the dry-run view (jobs, nodes, GPU-hours requested).
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

from dspbench.records.config import RunConfig

from dspbench.slurm.spec import ClusterProfile, SpecError, SweepSpec

EXECUTORS = ("local", "slurm", "debug")
GRACE_S = 30.0          # a job kills a configuration's ranks this long after the configuration's own timeout
DRAIN_MARGIN_S = 15.0   # on USR2 the running configuration must end this long before the kill


@dataclass(frozen=True)
class Shape:
    """A SLURM allocation: every configuration of a job has the same world size."""
    nodes: int
    tasks_per_node: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.tasks_per_node


@dataclass
class Job:
    shape: Shape
    configs: list[RunConfig]


@dataclass
class Plan:
    spec: SweepSpec
    executor: str
    points: list[RunConfig]
    todo: list[RunConfig]
    unsupported: list[tuple[RunConfig, str]]       # new ones: recorded, never run
    skipped: Counter = field(default_factory=Counter)
    jobs: list[Job] = field(default_factory=list)


# ---------------------------------------------------------------- expansion
def expand(spec: SweepSpec, launcher: str = "local") -> list[RunConfig]:
    """Every point of the spec, repeat-major: all configurations at repeat 0, then all at repeat 1, ...
    so a configuration's repeats are spread over the sweep's time and a busy minute on a shared
    machine spoils one repeat of several configurations, not every repeat of one. Within repeat r the
    file order is rotated by r * n // repeats (`rotated`), so a configuration runs at a different place
    in its job each repeat: a job's first configuration (cold caches) or a drift along a job is
    spread over the configurations, not laid on the ones listed first (a plan's emitted sweep lists
    them in predicted order, which a fixed order would confound with position)."""
    seen: dict[str, RunConfig] = {}
    for repeat in range(spec.repeats):
        points = [(i, combo) for i, grid in enumerate(spec.grids) for combo in _combos(grid)]
        for i, combo in rotated(points, repeat, spec.repeats):
            cfg = _config(spec, i, {**spec.fixed, **combo, "launcher": launcher, "repeat": repeat})
            old = seen.setdefault(cfg.run_id(), cfg)
            if old != cfg:   # identical points (overlapping grids) merge; near-identical ones are a mistake
                diff = [f"{f}={getattr(old, f)!r}/{getattr(cfg, f)!r}" for f in RunConfig.__dataclass_fields__
                        if getattr(old, f) != getattr(cfg, f)]
                raise SpecError(f"{spec.path}: two points share run_id {cfg.run_id()} but differ in "
                                f"{', '.join(diff)}, which is not part of the run_id: vary seed or repeat")
    return list(seen.values())


def rotated(items: list, repeat: int, repeats: int) -> list:
    """items started at offset repeat * len // repeats: over the repeats each item leads once per
    len / repeats places (a balanced rotation; the same every time, so resumes keep one order)."""
    k = repeat * len(items) // max(repeats, 1) if items else 0
    return items[k:] + items[:k]


def _combos(grid: dict):
    keys = list(grid["axes"]) + [tuple(z) for z in grid["zips"]]
    values = list(grid["axes"].values()) + [list(zip(*z.values())) for z in grid["zips"]]
    for combo in itertools.product(*values):
        point = {}
        for key, value in zip(keys, combo):
            point.update(zip(key, value) if isinstance(key, tuple) else [(key, value)])
        yield point


def _config(spec: SweepSpec, grid: int, values: dict) -> RunConfig:
    from dspbench.facts.build import validate   # the registries import torch: keep `status` fast
    try:
        cfg = RunConfig(**preset_defaults(values))
        validate(cfg)     # unknown methods and models included: a spec error, not `unsupported`
        if "shard" not in values:   # as on the command line: the dim this SP degree pads least, said
            from dspbench.facts.shard import with_chosen_shard
            cfg = with_chosen_shard(cfg)
        if cfg.sp == "auto" and not spec.hardware:
            raise ValueError('sp="auto" needs [sweep] hardware = "PROFILE" (the memory model picks the degree)')
        cfg = _resolve_auto(cfg, spec.hardware)
    except ValueError as e:
        point = ", ".join(f"{k}={v}" for k, v in values.items()
                          if k not in spec.fixed and k != "launcher" and (k != "repeat" or spec.repeats > 1))
        raise SpecError(f"{spec.path}: [[grid]] #{grid + 1} point ({point}): {e}") from None
    return cfg


def preset_defaults(values: dict) -> dict:
    """A point's keys with what it leaves out taken from its model's [sampling] in sample mode (video,
    steps, guidance: bench/facts/defaults.py), as `run` and `predict` take them; a video becomes T, S."""
    from dspbench.facts.args import model_and_shape
    from dspbench.facts.defaults import fill_defaults
    out = fill_defaults(values)
    if out.get("video"):
        out.update(model_and_shape(out["model"], [], out.get("frames"), out.get("spatial"), out["video"]))
    return out


def _resolve_auto(cfg: RunConfig, hardware: str) -> RunConfig:
    """sp = "auto" -> the smallest SP degree that fits (bench/cost/autosp.py). Deterministic, so the
    resolved point keeps its run_id across resumes. A point that fits no degree keeps "auto" and
    becomes an unsupported record with the cost model's reason (auto_reason)."""
    if cfg.sp != "auto":
        return cfg
    from dspbench.cost.autosp import resolved
    return resolved(cfg, hardware)[0]      # the profile exists: load_sweep checked [sweep] hardware


def auto_reason(cfg: RunConfig, hardware: str) -> str | None:
    from dspbench.cost.autosp import resolved
    return resolved(cfg, hardware)[1] if cfg.sp == "auto" else None


def launcher_for(executor: str) -> str:
    """local: the local launcher forks the ranks; slurm and debug: each rank is its own process."""
    return "local" if executor == "local" else "env"


# ---------------------------------------------------------------- planning
def make_plan(spec: SweepSpec, executor: str, states: dict[str, str], in_flight: set[str],
              retry_failed: bool = False) -> Plan:
    """states: run_id -> best recorded status; in_flight: run_ids of jobs still queued or running."""
    from dspbench.facts.build import unsupported_reason   # imports torch: keep `status` fast
    points = expand(spec, launcher_for(executor))
    plan = Plan(spec, executor, points, [], [])
    for cfg in points:
        state = states.get(cfg.run_id())
        if cfg.run_id() in in_flight:
            plan.skipped["queued or running"] += 1
        elif state in ("ok", "unsupported"):
            plan.skipped[f"already {state}"] += 1
        elif state is not None and not retry_failed:
            plan.skipped[f"already failed ({state}; --retry-failed reruns)"] += 1
        elif reason := auto_reason(cfg, spec.hardware) or unsupported_reason(cfg):
            plan.unsupported.append((cfg, reason))
        else:
            plan.todo.append(cfg)
    # Only a SLURM submission must fit the profile; other executors pack just for the table.
    plan.jobs = pack(plan.todo, spec.cluster, spec.configs_per_job, spec.path, strict=executor == "slurm")
    return plan


def shape_of(cfg: RunConfig, profile: ClusterProfile, where: str, strict: bool = True) -> Shape:
    per_node = profile.gpus_per_node
    if strict and cfg.gpus > per_node and cfg.gpus % per_node:
        raise SpecError(f"{where}: gpus={cfg.gpus} does not fill whole nodes of gpus_per_node={per_node}")
    return Shape(nodes=math.ceil(cfg.gpus / per_node), tasks_per_node=min(cfg.gpus, per_node))


def pack(todo: list[RunConfig], profile: ClusterProfile, per_job: int, where: str,
         strict: bool = True) -> list[Job]:
    """Configurations of one shape share jobs (one queue wait for several data points)."""
    # A job that gets USR2 lets its running configuration go on until DRAIN_MARGIN_S before the kill.
    limit_s = profile.time_min * 60 - min(profile.signal_delay_s, DRAIN_MARGIN_S)
    by_shape: dict[Shape, list[RunConfig]] = {}
    for cfg in todo:
        # A configuration that cannot finish within one run of its job would requeue forever.
        if strict and cfg.timeout_s + GRACE_S > limit_s:
            raise SpecError(f"{where}: timeout_s={cfg.timeout_s:g} + {GRACE_S:g} s grace does not fit in a job "
                            f"of time_min={profile.time_min} (it must end {DRAIN_MARGIN_S:g} s before the kill)")
        by_shape.setdefault(shape_of(cfg, profile, where, strict), []).append(cfg)
    return [Job(shape, cfgs[i:i + per_job]) for shape, cfgs in by_shape.items()
            for i in range(0, len(cfgs), per_job)]


# ---------------------------------------------------------------- the dry-run view
def plan_table(plan: Plan) -> str:
    spec, prof = plan.spec, plan.spec.cluster
    gpus_node = prof.gpus_per_node if prof.request_gpus else 0
    out = [f"sweep {spec.name} ({spec.path}): {len(plan.points)} points, executor {plan.executor}, "
           f"cluster {spec.cluster_name} (partition {prof.partition or 'default'}, "
           f"{prof.gpus_per_node} ranks/node, {prof.time_min} min per job)"]
    out += [f"  to run: {len(plan.todo)}, unsupported (recorded, not run): {len(plan.unsupported)}"]
    out += [f"  skipped, {why}: {n}" for why, n in sorted(plan.skipped.items())]
    if plan.executor == "local":     # no allocation: one configuration after the other, here
        ranks = Counter(c.gpus for c in plan.todo)
        out += ["", "| ranks | configs |", "|------:|--------:|"]
        out += [f"| {r} | {n} |" for r, n in sorted(ranks.items())] + [f"| total | {len(plan.todo)} |"]
        return "\n".join(out + _unsupported_lines(plan))
    out += ["", "| ranks | nodes x tasks/node | configs | jobs | GPU-hours requested |",
            "|------:|-------------------:|--------:|-----:|--------------------:|"]
    rows: dict[Shape, list] = {}
    for job in plan.jobs:
        row = rows.setdefault(job.shape, [0, 0])
        row[0] += len(job.configs)
        row[1] += 1
    total_h = 0.0
    for shape, (n, jobs) in sorted(rows.items(), key=lambda kv: kv[0].ranks):
        hours = jobs * shape.nodes * min(shape.tasks_per_node, gpus_node) * prof.time_min / 60
        total_h += hours
        out.append(f"| {shape.ranks} | {shape.nodes} x {shape.tasks_per_node} | {n} | {jobs} | {hours:.1f} |")
    nodes = sum(j.shape.nodes for j in plan.jobs)
    out.append(f"| total | {nodes} nodes | {len(plan.todo)} | {len(plan.jobs)} | {total_h:.1f} |")
    return "\n".join(out + _unsupported_lines(plan))


def _unsupported_lines(plan: Plan) -> list[str]:
    reasons = Counter(f"{c.method}: {r}" for c, r in plan.unsupported)
    return ["", "unsupported points:"] + [f"  {n} x {r}" for r, n in reasons.most_common()] if reasons else []
