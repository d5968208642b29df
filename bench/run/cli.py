"""The run stage's commands: `dspbench run`, `models`, `methods`, `demo`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from dspbench.facts.args import add_run_args, config_from_args


# ---------------------------------------------------------------- run
def cmd_run(args) -> int:
    from dspbench.records.io import default_records_file
    from dspbench.run.harness import run_config
    from dspbench.records.io import result_line
    cfg = config_from_args(args)
    if args.hardware:   # a profile named is a profile that exists, before any rank starts
        from dspbench.cost.hardware import load_profile
        load_profile(args.hardware)
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
        if rec["status"] == "ok" and rec.get("mode") == "sample":   # what a per-video number is per
            from dspbench.facts.defaults import priced_line
            print(priced_line(rec).replace("priced", "ran", 1))
        print(f"record appended to {path}")
        print(result_line(rec))
    return {"ok": 0, "unsupported": 3}.get(rec["status"], 1)


def summary_line(rec: dict) -> str:
    from dspbench.facts.shard import shard_note
    if rec["status"] != "ok":
        return f"{rec['method']} {rec['model']}: {rec['status']}: {rec['error']}{shard_note(rec)}"
    return (f"{rec['method']} {rec['model']} T={rec['frames']} S={rec['spatial']} world={rec['world_size']} "
            f"sp={rec['sp']}: step {rec['step_time_median_s'] * 1e3:.1f} ms (p10 {rec['step_time_p10_s'] * 1e3:.1f}, "
            f"p90 {rec['step_time_p90_s'] * 1e3:.1f}), {rec['samples_per_s']:.3g} samples/s, "
            f"comm {rec['comm_wire_bytes'] / 2**20:.2f} MiB/rank/step{shard_note(rec)}")


# ---------------------------------------------------------------- models / methods
def cmd_models(args) -> int:
    rows = model_rows()
    if getattr(args, "json", False):
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'model':<18} {'layout':<7} {'text':<5} {'depth':>5} {'hidden':>6} {'heads':>5} {'params':>9} "
          f"{'published':>9} {'native video':>13} {'T x S':>11} {'TFLOP/step':>10}")
    for r in rows:
        pub = f"{r['published_params'] / 1e9:.2f}B" if r["published_params"] else "-"
        ts = f"{r['T']} x {r['S']}" if r["T"] else "-"
        tf = f"{r['flops_per_step'] / 1e12:.0f}" if r["flops_per_step"] else "-"
        depth = f"{r['depth']}+{r['single_depth']}" if r["single_depth"] else r["depth"]   # joint + single-stream
        print(f"{r['model']:<18} {r['layout']:<7} {r['text_mode']:<5} {depth:>5} {r['hidden']:>6} {r['heads']:>5} "
              f"{r['params'] / 1e9:>8.2f}B {pub:>9} {r['video'] or '-':>13} {ts:>11} {tf:>10}")
    print("presets: models/presets/*.toml (their sources and what the model class simplifies: --json); "
          "a path to such a file works wherever a model name does")
    return 0


def model_rows() -> list[dict]:
    """Every built-in and preset: parameters (ours, published), native video size, T and S there,
    forward FLOPs per denoising step there (both CFG passes where the model samples with CFG)."""
    from dspbench.models import MODELS, Shape
    from dspbench.models.params import flops_per_sample, param_count
    from dspbench.models.registry import presets, resolve, video_to_tokens
    rows = []
    for name in [*MODELS, *presets()]:
        e = resolve(name)
        m, video = e.config, e.sampling.get("video", "")
        T, S = video_to_tokens(name, video) if video else (None, None)
        calls = 2 if e.sampling.get("guidance") == "cfg" else 1
        rows.append({"model": name, "layout": m.layout, "text_mode": m.text_mode, "depth": m.depth,
                     "single_depth": m.single_depth, "text_stream": m.text_stream, "hidden": m.hidden, "heads": m.heads, "params": param_count(m),
                     "published_params": e.published.get("params"), "published_source": e.published.get("source"),
                     "video": video, "T": T, "S": S,
                     "flops_per_step": flops_per_sample(m, Shape(1, T, S)) * calls if T else None,
                     "simplifies": e.notes.get("simplifies"), "file": e.path or None})
    return rows


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
    from dspbench.records.argtypes import count
    p.add_argument("--world", type=count, default=4)
    p.add_argument("--iters", type=count, default=5)


COMMANDS = {
    "run": ("measure one configuration end to end and append its record", add_run_args, cmd_run),
    "models": ("list the models and presets: parameters (ours, published), native video size, T and S, FLOPs",
               lambda p: p.add_argument("--json", action="store_true", help="one JSON document on stdout"), cmd_models),
    "methods": ("list the methods (built-in and plugged in) with their constraints", lambda p: None, cmd_methods),
    "demo": ("every method on the tiny model at world size 4 on gloo, as a table", add_demo_args, cmd_demo),
}
