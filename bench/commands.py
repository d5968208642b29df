"""Sub-commands of `dspbench`: each is (help, add_arguments, handler)."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from . import cost_cli
from .config import A2A_STYLES, BACKENDS, DTYPES, LAUNCHERS, MODES, ZERO_STAGES, RunConfig


# ---------------------------------------------------------------- run
def add_run_args(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    g = p.add_argument_group("configuration (part of the run_id)")
    g.add_argument("--method", default=d.method, help="sequence-parallel method (see `dspbench methods`)")
    g.add_argument("--model", default=d.model, help="model as <layout>-<size> (see `dspbench models`)")
    g.add_argument("--frames", type=int, default=d.frames, help="T: latent frames after patchify")
    g.add_argument("--spatial", type=int, default=d.spatial, help="S: tokens per frame after patchify")
    g.add_argument("--batch", type=int, default=d.batch, help="micro-batch per data-parallel replica")
    g.add_argument("--gpus", type=int, default=d.gpus, help="world size (ranks)")
    g.add_argument("--sp", default=d.sp, help="sequence-parallel degree, divides --gpus (rest is DP)")
    g.add_argument("--mode", choices=MODES, default=d.mode, help="train: fwd+bwd+AdamW; infer: fwd; sample: K fwd")
    g.add_argument("--dtype", choices=DTYPES, default=d.dtype, help="model dtype (low precision keeps fp32 master weights)")
    g.add_argument("--backend", choices=BACKENDS, default=d.backend)
    g.add_argument("--grad-ckpt", action="store_true", help="activation checkpointing per block (train)")
    g.add_argument("--shard", choices=("T", "S", "H", "W"), default=d.shard,
                   help="sequence dim embedded methods shard (T or S; axial3d: T, H or W)")
    g.add_argument("--sample-steps", type=int, default=d.sample_steps, help="model calls per sample (sample mode)")
    g.add_argument("--cfg", action="store_true", help="sample mode: classifier-free guidance (cond + uncond as a batch of 2)")
    g.add_argument("--zero", type=int, choices=ZERO_STAGES, default=d.zero,
                   help="ZeRO stage (train): 0 replicated AdamW (ours), 1 | 2 DeepSpeed's ZeRO over the DP x SP mesh")
    g.add_argument("--a2a", choices=A2A_STYLES, default=d.a2a,
                   help="all-to-all style: single (one all_to_all_single) or list (tensor_split + list + cat, as VideoSys)")
    g.add_argument("--warmup", type=int, default=d.warmup, help="untimed warm-up steps")
    g.add_argument("--iters", type=int, default=d.iters, help="timed steps")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--repeat", type=int, default=d.repeat, help="repeat index (sweeps)")
    h = p.add_argument_group("execution")
    h.add_argument("--launcher", choices=LAUNCHERS, default=d.launcher,
                   help="local: spawn the ranks here; torchrun/env: this process is RANK of WORLD_SIZE; slurm: from SLURM_*")
    h.add_argument("--check", action="store_true", help="check against the single-device oracle before timing")
    h.add_argument("--timeout", type=float, default=d.timeout_s, dest="timeout_s", help="seconds for the whole run")
    h.add_argument("--threads", type=int, default=d.threads, help="torch threads per rank (0: cores / ranks)")
    h.add_argument("--inject-fault", default="", help=argparse.SUPPRESS)
    h.add_argument("--hardware", default=None,
                   help="hardware profile (bench/profiles/*.toml or a calibrated .toml): resolves --sp auto")
    o = p.add_argument_group("output")
    o.add_argument("--out", default="results/runs", help="directory for the records file")
    o.add_argument("--records-file", default=None, help="append to this file instead of one under --out")
    o.add_argument("--json", action="store_true", help="print the record as JSON on stdout (no progress bar)")


def config_from_args(args) -> RunConfig:
    names = {f.name for f in fields(RunConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    values["sp"] = values["sp"] if values["sp"] == "auto" else int(values["sp"])
    return RunConfig(**values)


def cmd_run(args) -> int:
    from .harness import default_records_file, run_config
    from .record import result_line
    cfg = config_from_args(args)
    path = Path(args.records_file) if args.records_file else default_records_file(args.out)
    rec = run_config(cfg, path, progress=not args.json and sys.stderr.isatty(), hardware=args.hardware)
    if not rec:          # a non-zero rank under an external launcher
        return 0
    if args.json:
        print(json.dumps(rec, sort_keys=True, default=str))
    else:
        print(summary_line(rec))
        print(f"record appended to {path}")
    print(result_line(rec))
    return {"ok": 0, "unsupported": 3}.get(rec["status"], 1)


def summary_line(rec: dict) -> str:
    if rec["status"] != "ok":
        return f"{rec['method']} {rec['model']}: {rec['status']}: {rec['error']}"
    return (f"{rec['method']} {rec['model']} T={rec['frames']} S={rec['spatial']} world={rec['world_size']} "
            f"sp={rec['sp']}: step {rec['step_time_median_s'] * 1e3:.1f} ms (p10 {rec['step_time_p10_s'] * 1e3:.1f}, "
            f"p90 {rec['step_time_p90_s'] * 1e3:.1f}), {rec['samples_per_s']:.3g} samples/s, "
            f"comm {rec['comm_wire_bytes'] / 2**20:.2f} MiB/rank/step")


# ---------------------------------------------------------------- models / methods
def cmd_models(args) -> int:
    from .models import MODELS
    from .models.params import param_count
    print(f"{'model':<14} {'layout':<7} {'depth':>5} {'hidden':>6} {'heads':>5} {'params':>10}")
    for name, m in MODELS.items():
        print(f"{name:<14} {m.layout:<7} {m.depth:>5} {m.hidden:>6} {m.heads:>5} {param_count(m) / 1e6:>9.1f}M")
    return 0


def cmd_methods(args) -> int:
    from .methods import BUILTIN, available, get_method
    for name in available():
        try:
            spec = get_method(name)
            origin = "built-in" if name in BUILTIN else "plugin"
            print(f"{name:<18} {origin:<8} {spec.summary}\n{'':<28}constraints: {spec.constraints}")
        except Exception as e:  # noqa: BLE001 - a broken plugin must not hide the others
            print(f"{name:<18} (failed to load: {e})")
    return 0


# ---------------------------------------------------------------- demo
def cmd_demo(args) -> int:
    from .demo import demo
    return demo(args.out, args.world, args.iters)


def add_demo_args(p):
    p.add_argument("--out", default="results/demo", help="records directory")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--iters", type=int, default=5)


def cmd_bench_switch(args) -> int:
    from .switch_bench import main
    return main(args.rest) or 0


# ---------------------------------------------------------------- sweep (slurm/)
def add_sweep_args(p):
    from .slurm.cli import add_sweep_args
    add_sweep_args(p)


def cmd_sweep(args) -> int:
    from .slurm.cli import cmd_sweep
    return cmd_sweep(args)


def _report_args(p) -> None:
    from .reports.cli import add_args
    add_args(p)


def _report_run(args) -> int:
    from .reports.cli import run
    return run(args)


def _ledger_bench(rest) -> int:
    from .ledger_bench import main
    return main(rest) or 0


def _bench_switch(argv) -> int:
    from .switch_bench import main
    main(argv)
    return 0


PASSTHROUGH = {"bench-switch": _bench_switch, "bench-ledger": lambda argv: _ledger_bench(argv)}

COMMANDS = {
    "run": ("measure one configuration end to end and append its record", add_run_args, cmd_run),
    "models": ("list the models with their parameter counts", lambda p: None, cmd_models),
    "methods": ("list the methods (built-in and plugged in) with their constraints", lambda p: None, cmd_methods),
    "demo": ("every method on the tiny model at world size 4 on gloo, as a table", add_demo_args, cmd_demo),
    "predict": ("predict one configuration's step time and memory on a hardware profile (cost model)",
                cost_cli.add_predict_args, cost_cli.cmd_predict),
    "calibrate": ("collective and compute micro-benchmarks; writes a hardware profile (TOML)",
                  cost_cli.add_calibrate_args, cost_cli.cmd_calibrate),
    "emulate": ("emulated cluster (netns + veth + tc): calibrate, predict and measure every method",
                cost_cli.add_emulate_args, cost_cli.cmd_emulate),
    "report": ("turn a sweep's records into tables, figures and a report (index.md, index.html)",
               _report_args, _report_run),
    "bench-ledger": ("benchmark: the ledger's cost on a training step (goal <= 2%%)",
                     lambda p: p.add_argument("rest", nargs=argparse.REMAINDER), lambda a: _ledger_bench(a.rest)),
    "bench-switch": ("micro-benchmark of the DSP switch (all-to-all) against its baselines",
                     lambda p: p.add_argument("rest", nargs=argparse.REMAINDER), cmd_bench_switch),
    "sweep": ("run a sweep spec (TOML grid) here or on SLURM, resumable; `sweep status DIR` summarises one",
              add_sweep_args, cmd_sweep),
}
