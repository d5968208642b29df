"""`dspbench plan` (arguments: bench/plan/cli.py): request -> plan -> what-if comparison and
crossover table -> sweep spec, report, JSON or text. Everything is computed before anything is
written, so a request that fails writes nothing."""
from __future__ import annotations

import itertools
import json
import shlex

from pathlib import Path

from dspbench.cost.hardware import Profile, fill_device_defaults, load_profile, with_stack
from dspbench.cost.predict import stack_error
from dspbench.methods import stack as stacks
from dspbench.plan import whatif
from dspbench.plan.axes import Request, all_methods
from dspbench.plan.build import plan
from dspbench.plan.rank import describe
from dspbench.plan.text import render
from dspbench.facts.args import config_from_args, flag_of
from dspbench.plan.measuring import sweep_fields


def request_of(args, profile: Profile) -> Request:
    fill_device_defaults(args, profile)
    if args.top < 1:
        raise ValueError(f"--top must be >= 1, got {args.top}")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if getattr(args, "cluster", None):   # plan's own flag (other callers build a request without it)
        check_cluster(args.cluster)
    methods = all_methods() if args.methods == "all" else tuple(m.strip() for m in args.methods.split(",") if m.strip())
    if not methods:
        raise ValueError("--methods: give all or a comma-separated list of methods")
    request = Request(config_from_args(args), methods, buckets=buckets_of(args))
    # methods asked for by name must be runnable on the declared stack; `all` prunes those that are not
    if args.methods != "all" and (why := stack_error(request.base, profile, methods)):
        raise ValueError(why)
    return request


def check_cluster(name: str) -> None:
    """--cluster names the emitted sweep's cluster profile: known before anything is priced."""
    from dspbench.slurm.spec import SpecError, load_cluster_profile
    try:
        load_cluster_profile(name, Path.cwd())
    except (SpecError, OSError) as e:
        raise ValueError(f"--cluster {name!r}: {e}") from None


def buckets_of(args) -> tuple:
    """`--buckets FILE`: the CSV sweeps read (resolution,frames,weight; records/buckets.py), or none."""
    if not getattr(args, "buckets", None):   # plan's own flag (other callers build a request without it)
        return ()
    from functools import partial
    from dspbench.facts.args import with_model_set
    from dspbench.models.registry import video_to_tokens
    from dspbench.records.buckets import read_bucket_file
    model = with_model_set(args.model, args.model_set)   # its own VAE and patch convert the videos
    try:
        return tuple(read_bucket_file(Path(args.buckets), partial(video_to_tokens, model)))
    except OSError as e:
        raise ValueError(f"--buckets: {e.strerror}: {args.buckets}") from None
    except ValueError as e:
        raise ValueError(f"--buckets: {e}") from None


def stacked(profile: Profile, args) -> Profile:
    """`--stack` replaces the profile's [stack]: the target's software, declared, never looked up here."""
    stack = getattr(args, "stack", None)
    return profile if stack is None else with_stack(profile, stacks.parse(stack))


def grid_points(specs: list[str]) -> list[list[tuple[str, float]]]:
    """--what-if-grid KEY=V1,V2 (repeatable) -> every combination as a list of edits."""
    axes = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        if not sep or not values:
            raise ValueError(f"--what-if-grid {spec!r}: expected KEY=V1,V2,...")
        try:
            axes.append([whatif.parse(f"{key}={v}") for v in values.split(",")])
        except ValueError as e:   # whatif's reason, said of the flag that carried it
            raise ValueError(f"--what-if-grid {spec!r}: {str(e).split(': ', 1)[-1]}") from None
    return [list(p) for p in itertools.product(*axes)] if axes else []


def crossover(request: Request, profile: Profile, fixed: list, points: list) -> list[dict]:
    """Per grid point: the winner and its lead over the best other method, each method's best score."""
    out = []
    for edits in points:
        row = {"what_if": {k: v for k, v in edits}}
        try:
            doc = plan(request, whatif.apply(profile, fixed + edits))
        except ValueError as e:
            out.append({**row, "winner": None, "verdict": str(e).splitlines()[0]})
            continue
        rows = doc["rows"]
        out.append({**row, "winner": rows[0]["method"], "winner_config": describe(rows[0]),
                    "score": rows[0]["score"], "verdict": doc["verdict"],
                    "best": {m: rows[i - 1]["score"] for m, i in doc["best_per_method"].items()}})
    return out


def compare(doc: dict, base: dict | None, edits: list) -> dict:
    """What the what-if edits changed: the top choice before and after."""
    now = describe(doc["rows"][0])
    was = describe(base["rows"][0]) if base else None
    return {"edits": {k: v for k, v in edits}, "top": now, "top_as_profiled": was,
            "verdict_as_profiled": base["verdict"] if base else "nothing fits as profiled",
            "flipped": now != was}


def command_line(args) -> str:
    cfg = config_from_args(args)    # the model with its --model-set overrides, T and S resolved (--video too)
    parts = ["dspbench", "plan", "--model", cfg.model, "--frames", str(cfg.frames), "--spatial", str(cfg.spatial),
             "--mode", args.mode, "--gpus", str(args.gpus), "--hardware", args.hardware, "--methods", args.methods,
             "--top", str(args.top)]
    for w in args.what_if:
        parts += ["--what-if", w]
    for flag, value in (("--stack", args.stack), ("--buckets", args.buckets)):
        if value is not None:
            parts += [flag, value]
    if args.emit_sweep and args.repeats != 1:
        parts += ["--repeats", str(args.repeats)]
    for f in sweep_fields():
        if args.emit_sweep and getattr(cfg, f.name) != f.default:
            parts += [flag_of(f), str(getattr(cfg, f.name))]
    return shlex.join(parts)


def run(args) -> int:
    base_profile = stacked(load_profile(args.hardware), args)
    edits = [whatif.parse(w) for w in args.what_if]
    profile = whatif.apply(base_profile, edits)
    request = request_of(args, profile)
    points = grid_points(args.what_if_grid)
    doc = plan(request, profile)
    if edits:
        try:
            base = plan(request, base_profile)
        except ValueError:
            base = None
        doc["what_if"] = compare(doc, base, edits)
    if points:
        doc["crossover"] = crossover(request, base_profile, edits, points)
    if args.report:
        from dspbench.plan.explore import explore
        doc["explore"] = explore(request, profile)
    doc["command"] = command_line(args)
    if args.emit_sweep:
        from dspbench.plan.emit import sweep_text, write_sweep
        write_sweep(args.emit_sweep, sweep_text(doc, args.top, args.cluster, doc["command"], args.repeats))
    if args.report:
        from dspbench.plan.report import write_report
        write_report(doc, args.report)
    if args.json:
        print(json.dumps(doc, sort_keys=True, default=str))
        return 0
    print(render(doc, args.top, getattr(args, "explain", False)))
    for line in extra_lines(doc, args):
        print(line)
    return 0


def extra_lines(doc: dict, args) -> list[str]:
    out = []
    if "what_if" in doc:
        w = doc["what_if"]
        out += ["", f"what-if {whatif.label(list(w['edits'].items()))}: top choice {w['top']}"
                + (f" (as profiled: {w['top_as_profiled']})" if w["flipped"] else " (unchanged)"),
                f"  as profiled: {w['verdict_as_profiled']}"]
    if "crossover" in doc:
        keys = " | ".join(doc["crossover"][0]["what_if"])
        out += ["", "crossover (--what-if-grid):", f"  {keys} | winner | verdict"]
        out += ["  " + " | ".join(f"{v:g}" for v in r["what_if"].values()) + f" | {r['winner'] or '-'} | {r['verdict']}"
                for r in doc["crossover"]]
    if args.emit_sweep:
        out.append(f"\nsweep written: {args.emit_sweep} (dspbench sweep {args.emit_sweep} --dry-run)")
    if args.report:
        out.append(f"report written: {args.report}/index.md")
    return out
