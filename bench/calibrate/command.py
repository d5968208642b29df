"""`dspbench calibrate`: measure collectives and compute, fit the alpha-beta model, write a profile.

Launchers: `local` starts the ranks here (bench/run/ranks.py: forkserver, file:// rendezvous; NCCL
ranks take one GPU each); `env` makes this process RANK of WORLD_SIZE (env://), for the emulated cluster or
torchrun; `slurm` the same from srun's SLURM_* variables. `--tiers` (with --gpus-per-node R) measures
each tier of a multi-node world: a node's ranks, one rank per node, the whole node-spanning world.
Rank 0 prints the nccl-tests-style table and writes the profile (TOML) and the raw
measurements (JSON beside it).
Fit per op: t = alpha * steps(op, n) + wire_bytes / busbw, least squares over the sizes.
`--ops ""` measures compute only: rank 0 prints its JSON and writes no profile.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from dspbench.calibrate.profile import profile_dict, table
from dspbench.calibrate import options
from dspbench.calibrate.quality import assess, load, meaningless
from dspbench.cost.profile_toml import dumps

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s: str) -> int:
    s = s.strip().upper().removesuffix("B")
    return int(float(s[:-1]) * _UNITS[s[-1]]) if s and s[-1] in _UNITS else int(s)


def _init_and_run(opts: dict, rank: int, world: int, init_method: str):
    import torch
    from dspbench.calibrate.collectives import calibrate_rank
    from dspbench.methods.comm import layer as comm
    torch.set_num_threads(opts["threads"] or max(1, (os.cpu_count() or 1) // world))
    comm.init(opts["backend"], rank, world, init_method=init_method, timeout_s=opts["timeout_s"])
    try:
        return calibrate_rank(opts)
    finally:
        comm.destroy()


def launch_local(opts: dict) -> dict:
    """Fork --gpus ranks here (bench/run/ranks.py: forkserver, file:// rendezvous); rank 0's result."""
    from dspbench.calibrate.collectives import calibrate_rank
    from dspbench.run.ranks import run_ranks
    world = opts["gpus"]
    threads = opts["threads"] or max(1, (os.cpu_count() or 1) // world)
    return run_ranks(calibrate_rank, world, opts, threads=threads, timeout_s=opts["timeout_s"],
                     backend=opts["backend"])[0]


def _memory_gb(world: int) -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9 / max(world, 1)


def cmd_from_logs(args) -> int:
    """--from-nccl-tests: a profile from logs, no ranks started (bench/calibrate/from_logs.py)."""
    from dspbench.calibrate.from_logs import profile_from_logs
    with options.named("--from-nccl-tests"):
        prof, notes = profile_from_logs(args.from_nccl_tests, args.name, args.base)    # LogError: exit 2, nothing written
    if args.from_records:            # links from the logs, compute from the records
        from dspbench.calibrate.from_records import apply_records
        with options.named("--from-records"):
            notes += apply_records(prof, args.from_records, args.force)
    for n in notes:
        print(f"dspbench calibrate: {n}", file=sys.stderr)
    out = Path(args.output or f"results/profiles/{args.name}.toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(prof, "Written by `dspbench calibrate --from-nccl-tests`: links fitted to the logs in [sources]."))
    print(f"profile written to {out}")
    return 0


def write_nccl_tests(result: dict, folder: str) -> None:
    """--nccl-tests-out: this calibration's collectives in nccl-tests' format, one file per op."""
    from dspbench.calibrate.nccl_logs import BINARIES, format_test
    rows = [r for r in result["collectives"] if "tier" not in r]
    Path(folder).mkdir(parents=True, exist_ok=True)
    for binary, op in BINARIES.items():
        mine = [r for r in rows if r["op"] == op]
        if mine:
            Path(folder, f"{binary}.log").write_text(format_test(op, mine, result["ranks"]))


def method_list(text: str) -> list[str]:
    """--methods: `all` (every registered method but the no-SP baseline) or a comma-separated list."""
    if text.strip() == "all":
        from dspbench.methods import available
        return [m for m in available() if m != "single"]
    return [m.strip() for m in text.split(",") if m.strip()]


def check_args(args) -> None:
    """Every option's value, whichever source the profile comes from (exit 2 naming the option)."""
    from dspbench.calibrate.options import OPS, check_items
    from dspbench.methods import available
    from dspbench.models import get_config
    check_items("--sizes", args.sizes, parse_size, lambda v: v >= 1, "sizes >= 1 byte (K/M/G suffixes)", empty_ok=False)
    check_items("--ops", args.ops, str.strip, lambda v: v in OPS, "ops of " + ", ".join(OPS))   # "": compute only
    check_items("--gemm-widths", args.gemm_widths, int, lambda v: v >= 1, "widths >= 1")
    check_items("--method-sp", args.method_sp, int, lambda v: v >= 1, "SP degrees >= 1")
    if args.methods.strip() != "all":
        check_items("--methods", args.methods, str.strip, lambda v: v in available(), "methods of `dspbench methods`")
    try:
        get_config(args.model)
    except (KeyError, ValueError) as e:
        raise ValueError(f"--model: {e.args[0] if e.args else e}") from None
    if args.base:
        from dspbench.cost.hardware import load_profile
        try:
            load_profile(args.base)
        except (KeyError, ValueError, OSError) as e:
            raise ValueError(f"--base: {e.args[0] if e.args else e}") from None


def cmd_calibrate(args) -> int:
    check_args(args)
    if args.from_nccl_tests:
        return cmd_from_logs(args)
    if args.from_records:
        from dspbench.calibrate.from_records import cmd_from_records
        return cmd_from_records(args)
    opts = {k: getattr(args, k) for k in ("gpus", "backend", "iters", "warmup", "model", "frames", "spatial",
                                         "batch", "sp", "dtype", "compute_iters", "timeout_s", "threads", "depth",
                                         "overlap_repeats", "cpu_ranks_per_host")}
    opts["gemm_widths"] = [int(w) for w in args.gemm_widths.split(",") if w.strip()]
    opts["sizes"] = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    opts["ops"] = [o.strip() for o in args.ops.split(",") if o.strip()]
    opts["method_iters"] = args.method_iters
    if args.method_repeats < 1:
        raise ValueError(f"--method-repeats must be >= 1, got {args.method_repeats}")
    opts["method_repeats"] = args.method_repeats
    opts["method_runs"] = {}
    if methods := method_list(args.methods):
        from dspbench.calibrate.methods import method_runs
        sps = [int(x) for x in args.method_sp.split(",") if x.strip()] or [args.sp or args.gpus]
        first = os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")) == "0"   # srun starts every rank here
        say = None if first else (lambda line: None)
        opts["method_runs"] = method_runs(methods, opts, sps, args.gpus, skip_unsupported=args.methods.strip() == "all",
                                          say=say)
        if args.zero_host:     # the ZeRO engine's host work, beside the methods (calibrate/methods.py add_zero_host)
            from dspbench.calibrate.methods import zero_runs
            opts["zero_runs"] = zero_runs(opts, opts["method_runs"], args.gpus,
                                          say or (lambda line: print(line, file=sys.stderr)))
    opts.update(tiers=args.tiers, gpus_per_node=args.gpus_per_node)
    if args.tiers and args.gpus_per_node < 1:
        raise ValueError("--tiers needs --gpus-per-node R (the ranks of one node; ranks are placed node-major)")
    if args.launcher == "slurm":     # srun: RANK, WORLD_SIZE, MASTER_ADDR from SLURM_* (block = node-major)
        from dspbench.run.launch import slurm_to_env
        slurm_to_env()
    before = load()
    if args.launcher == "local":
        result = launch_local(opts)
        gpn = args.gpus_per_node or args.gpus
    else:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
        if world != args.gpus:
            raise ValueError(f"--gpus {args.gpus} but WORLD_SIZE={world}")
        result = _init_and_run(opts, rank, world, "env://")
        gpn = args.gpus_per_node or 1
        if rank != 0:
            return 0
    if not opts["ops"]:          # compute only (the emulated cluster re-measures it every round)
        print(json.dumps(result["compute"], sort_keys=True))
        return 0
    result["quality"] = q = assess(result, before, load())
    for w in q["warnings"]:
        print(f"dspbench calibrate: warning: {w}", file=sys.stderr)
    refused = meaningless(q)
    if refused and not args.force:
        raw = Path(args.output or f"results/profiles/{args.name}.toml").with_suffix(".refused.json")
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(result, indent=1))     # the measurements, to see what spread
        print(f"dspbench calibrate: refusing to write a profile: {refused}. Calibrate on a quieter machine, "
              "or pass --force to write it anyway (its intervals will say how little it knows).", file=sys.stderr)
        return 2
    from dspbench.records.environ import cpu_name
    device = "cpu: " + cpu_name() if args.backend == "gloo" else "cuda"
    prof = profile_dict(args.name, result, gpn, device, _memory_gb(args.gpus if args.launcher == "local" else 1),
                        base=args.base, nics_per_node=args.nics_per_node)
    if result.get("kernels"):      # how far the kernels' sum is from a whole step of the calibration model
        from dspbench.calibrate.kernels import add_step_ratio
        add_step_ratio(prof, result["compute"])
    if result.get("methods"):
        from dspbench.calibrate.methods import add_method_overheads
        add_method_overheads(prof, result["methods"], opts)
    out = Path(args.output or f"results/profiles/{args.name}.toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(prof, "Written by `dspbench calibrate`; raw measurements in the .json beside it."))
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    if args.nccl_tests_out:
        write_nccl_tests(result, args.nccl_tests_out)
    if args.json:
        print(json.dumps({**result, "profile": str(out)}, sort_keys=True))
    else:
        print(table(result["collectives"]))
        c = result["compute"]
        print(f"compute: {c['model']} shard {c['shape']} {c['dtype']}: fwd+bwd {c['fwd_bwd_s'] * 1e3:.1f} ms, "
              f"{c['flops_per_s'] / 1e9:.2f} GFLOP/s per rank; AdamW {c['optimizer_s'] * 1e3:.1f} ms")
        print(f"quality: load average {q['loadavg_1m']:.1f} on {q['cores']} cores; worst spread "
              f"{q['worst_spread']:.0%} ({q['worst_term']}); compute re-check {q['compute_recheck']:.2f}x"
              + (f"; the model's step {prof['calibration']['kernel_step_ratio']:.2f}x its kernels' sum"
                 if "kernel_step_ratio" in prof.get("calibration", {}) else ""))
        print(f"profile written to {out}")
    return 0
