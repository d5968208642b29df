"""The run stage's commands: `dspbench run`, `models`, `methods`, `demo`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from dspbench.records.args import add_run_args, config_from_args


# ---------------------------------------------------------------- run
def cmd_run(args) -> int:
    from dspbench.records.io import default_records_file
    from dspbench.run.harness import run_config
    from dspbench.records.io import result_line
    cfg = config_from_args(args)
    path = Path(args.records_file) if args.records_file else default_records_file(args.out)
    rec = run_config(cfg, path, progress=not args.json and sys.stderr.isatty(), hardware=args.hardware,
                     outcome_prefix=getattr(args, "outcome_prefix", None))
    if not rec:          # a non-zero rank under an external launcher
        return 0
    if args.json:   # stdout is exactly one JSON document (as `predict --json`); the RESULT line goes to stderr
        print(json.dumps(rec, sort_keys=True, default=str))
        print(result_line(rec), file=sys.stderr)
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
    from dspbench.models import MODELS
    from dspbench.models.params import param_count
    print(f"{'model':<18} {'layout':<8} {'text':<5} {'depth':>5} {'hidden':>6} {'heads':>5} {'mlp':>6} {'params':>10}")
    for name, m in MODELS.items():
        print(f"{name:<18} {m.layout:<8} {m.text_mode:<5} {m.depth:>5} {m.hidden:>6} {m.heads:>5} {m.mlp_hidden:>6} "
              f"{param_count(m) / 1e6:>9.1f}M")
    return 0


def cmd_methods(args) -> int:
    from dspbench.methods import BUILTIN, available, get_method
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
    from dspbench.run.demo import demo
    return demo(args.out, args.world, args.iters)


def add_demo_args(p):
    p.add_argument("--out", default="results/demo", help="records directory")
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--iters", type=int, default=5)


COMMANDS = {
    "run": ("measure one configuration end to end and append its record", add_run_args, cmd_run),
    "models": ("list the models with their parameter counts", lambda p: None, cmd_models),
    "methods": ("list the methods (built-in and plugged in) with their constraints", lambda p: None, cmd_methods),
    "demo": ("every method on the tiny model at world size 4 on gloo, as a table", add_demo_args, cmd_demo),
}
