"""Executors of a plan: `local` (here, one configuration after the other, with a progress bar),
`debug` (the SLURM job code in this process via submitit's DebugExecutor; ranks are local
subprocesses) and `slurm` (submitit AutoExecutor: one job array per allocation shape)."""
from __future__ import annotations

import shlex
import subprocess
import sys
from collections import Counter
from itertools import groupby
from pathlib import Path

from dspbench.records.config import RunConfig

from dspbench.slurm.capacity import check_plan_fits
from dspbench.slurm.job import SweepJob
from dspbench.slurm.journal import in_flight, new_token, write_intent, write_submitted
from dspbench.slurm.plan import Plan, Shape, make_plan
from dspbench.slurm.results import process_records_file, states, write_manifest
from dspbench.slurm.spec import ClusterProfile, load_sweep


def prepare(sweep: str, executor: str = "local", results: str | None = None,
            retry_failed: bool = False, fit_check: bool = True) -> tuple[Plan, Path]:
    """Read the spec (strictly) and the results so far; nothing runs or is submitted. For the slurm
    executor, SLURM is asked whether its partition holds every job (slurm/capacity.py)."""
    spec = load_sweep(sweep)
    root = results_root(sweep, results, spec.name)
    # SLURM first, records second: a job that leaves the queue in between has written its records.
    queued = {rid for rids in in_flight(root, strict=executor == "slurm").values() for rid in rids}
    plan = make_plan(spec, executor, states(root), queued, retry_failed)
    if executor == "slurm" and fit_check:   # before anything is submitted, under --dry-run too
        check_plan_fits(plan.jobs, spec.cluster, describe)
    return plan, root


def results_root(sweep: str, results: str | None, name: str | None = None) -> Path:
    """--results, else results/<sweep name> (read from the spec when not given)."""
    return Path(results or Path("results") / (name or load_sweep(sweep).name)).resolve()


def run_plan(plan: Plan, root: Path) -> dict:
    """Record the manifest and the unsupported points, then run or submit the rest."""
    counts = {"points": len(plan.points), "to_run": len(plan.todo), "unsupported": len(plan.unsupported),
              "skipped": sum(plan.skipped.values())}
    write_manifest(root, plan.spec.to_dict(), plan.executor, counts, [c.run_id() for c in plan.points])
    record_unsupported(plan, root)
    if plan.executor == "local":
        return run_local(plan.todo, root)
    if plan.executor == "debug":
        return run_debug(plan, root)
    return submit(plan, root)[0]


def record_unsupported(plan: Plan, root: Path) -> None:
    from dspbench.facts.build import build_record
    from dspbench.facts.build import Outcome
    from dspbench.records.io import append_record
    path = process_records_file(root, "plan")
    for cfg, reason in plan.unsupported:
        append_record(path, build_record(cfg, Outcome("unsupported", reason)))


# ---------------------------------------------------------------- local
def run_local(todo: list[RunConfig], root: Path) -> dict:
    from tqdm import tqdm
    path, counts = process_records_file(root, "local"), Counter()
    bar = tqdm(todo, unit="config", file=sys.stderr, dynamic_ncols=True, disable=None)   # None: off without a tty
    for i, cfg in enumerate(bar, 1):
        bar.set_description(f"{cfg.method} gpus={cfg.gpus} sp={cfg.sp}")
        rec = _run_here(cfg, path)
        counts[rec["status"]] += 1
        bar.set_postfix(dict(counts))
        bar.write(f"[{i}/{len(todo)}] {rec['status']:<8} {describe(cfg)}" + _detail(rec), file=sys.stdout)
    return dict(counts)


def _run_here(cfg: RunConfig, path: Path) -> dict:
    from dspbench.facts.build import build_record
    from dspbench.run.harness import run_config
    from dspbench.facts.build import Outcome
    from dspbench.records.io import append_record
    try:
        return run_config(cfg, path)
    except Exception as e:  # noqa: BLE001 - one broken configuration must not end the sweep
        rec = build_record(cfg, Outcome("error", f"harness: {type(e).__name__}: {e}"))
        append_record(path, rec)
        return rec


def describe(cfg: RunConfig) -> str:
    return (f"{cfg.method} {cfg.model} T={cfg.frames} S={cfg.spatial} gpus={cfg.gpus} sp={cfg.sp} {cfg.mode}"
            + (f" repeat={cfg.repeat}" if cfg.repeat else ""))


def _detail(rec: dict) -> str:
    if rec["status"] == "ok":
        return f": {rec['step_time_median_s'] * 1e3:.1f} ms/step"
    return f": {(rec.get('error') or '')[:200]}"


# ---------------------------------------------------------------- debug
def run_debug(plan: Plan, root: Path) -> dict:
    import submitit
    ex = submitit.AutoExecutor(folder=root / "submitit" / "%j", cluster="debug")
    counts = Counter()
    for job in plan.jobs:
        handle = ex.submit(SweepJob(str(root), [c.to_dict() for c in job.configs], all_ranks_here=True))
        for rid, status in handle.result().items():
            counts[status] += 1
            print(f"{status:<8} {rid} (debug job {handle.job_id})")
    return dict(counts)


# ---------------------------------------------------------------- slurm
def executor_params(profile: ClusterProfile, shape: Shape, name: str) -> dict:
    """AutoExecutor parameters of one allocation shape (also what the golden sbatch test renders)."""
    params = dict(name=name, timeout_min=profile.time_min, nodes=shape.nodes, tasks_per_node=shape.tasks_per_node,
                  cpus_per_task=profile.cpus_per_task, slurm_signal_delay_s=profile.signal_delay_s,
                  slurm_setup=profile.setup + [f"export {k}={shlex.quote(v)}" for k, v in profile.env.items()])
    if profile.request_gpus:
        params["gpus_per_node"] = shape.tasks_per_node
    for key in ("partition", "account", "qos", "constraint", "mem"):
        if getattr(profile, key):
            params[f"slurm_{key}"] = getattr(profile, key)
    return params


def make_executor(folder: Path, profile: ClusterProfile, shape: Shape, name: str):
    import submitit
    extra = {"slurm_python": profile.python} if profile.python else {}
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_max_num_timeout=profile.max_requeues, **extra)
    ex.update_parameters(**executor_params(profile, shape, name))
    return ex


def submit(plan: Plan, root: Path) -> tuple[dict, list]:
    """One job array per shape, journalled (journal.py): its run_ids before sbatch, its job ids right
    after, its token as the SLURM comment. On any failure the jobs already submitted are cancelled."""
    profile, name = plan.spec.cluster, f"dspbench-{plan.spec.name}"
    submitted, handles = {}, []
    try:
        for shape, jobs in groupby(plan.jobs, key=lambda j: j.shape):
            jobs, token = list(jobs), new_token()
            write_intent(root, token, name, [[c.run_id() for c in j.configs] for j in jobs])
            ex = make_executor(root / "submitit" / "%j", profile, shape, name)
            ex.update_parameters(slurm_comment=token)
            with ex.batch():
                batch = [ex.submit(SweepJob(str(root), [c.to_dict() for c in j.configs], profile.signal_delay_s))
                         for j in jobs]
            write_submitted(root, token, [h.job_id for h in batch])
            for handle, job in zip(batch, jobs):
                submitted[handle.job_id] = [c.run_id() for c in job.configs]
            handles += batch
    except Exception:
        if submitted:
            subprocess.run(["scancel", *submitted], capture_output=True, timeout=60)
        raise
    for job_id, rids in submitted.items():
        print(f"submitted job {job_id}: {len(rids)} configurations")
    return submitted, handles
