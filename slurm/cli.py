"""`dspbench sweep FILE [--executor slurm|local|debug] [--results DIR] [--dry-run] [--retry-failed]`
and `dspbench sweep status DIR`."""
from __future__ import annotations

import argparse

from dspbench.slurm.plan import EXECUTORS

DEFAULT_SWEEP = "cpu_smoke"   # the embedded default: every method on the tiny model, a minute on a laptop


def add_sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep", nargs="?", default=DEFAULT_SWEEP, metavar="FILE",
                   help="a sweep TOML file or the name of a shipped one (slurm/sweeps/<name>.toml); "
                        "`status DIR` summarises a results directory instead")
    p.add_argument("dir", nargs="?", help=argparse.SUPPRESS)   # the DIR of `sweep status DIR`
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: run here, one configuration after the other; slurm: submit job arrays "
                        "with submitit; debug: the SLURM job code in this process, ranks as local processes")
    p.add_argument("--results", default=None, metavar="DIR", help="results directory (None: results/<sweep name>)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (jobs, nodes, GPU-hours); run nothing")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun configurations whose record is error/oom/timeout (ok and unsupported are kept)")
    p.add_argument("--no-fit-check", dest="fit_check", action="store_false",
                   help="--executor slurm: do not ask SLURM (sinfo, scontrol) whether its partition holds every "
                        "job; for a --dry-run away from the target cluster")
    p.add_argument("--wait", action="store_true",
                   help="if another sweep holds the results directory, wait for it (default: exit 2)")


def cmd_sweep(args) -> int:
    from dspbench.slurm.results import status_report
    if args.sweep == "status":
        if not args.dir:
            raise ValueError("usage: dspbench sweep status DIR")
        print(status_report(args.dir))
        return 0
    if args.dir:
        raise ValueError(f"unexpected argument {args.dir!r} (only `dspbench sweep status DIR` takes two)")
    from dspbench.slurm.execute import prepare, results_root, run_plan
    from dspbench.slurm.lock import results_lock
    from dspbench.slurm.plan import plan_table
    if args.dry_run:     # reads only: no lock
        print(plan_table(prepare(args.sweep, args.executor, args.results, args.retry_failed, args.fit_check)[0]))
        return 0
    # One sweep at a time per results directory, from planning to the end of running (or submitting).
    with results_lock(results_root(args.sweep, args.results), wait=args.wait):
        plan, root = prepare(args.sweep, args.executor, args.results, args.retry_failed, args.fit_check)
        print(plan_table(plan))
        print(f"\nresults: {root}")
        counts = run_plan(plan, root)
    if plan.executor == "slurm":
        print(f"follow with: dspbench sweep status {root}")
        return 0
    print()
    print(status_report(root))
    return 1 if any(counts.get(s) for s in ("error", "oom", "timeout")) else 0


COMMANDS = {
    "sweep": ("run a sweep spec (TOML grid) here or on SLURM, resumable; `sweep status DIR` summarises one",
              add_sweep_args, cmd_sweep),
}
