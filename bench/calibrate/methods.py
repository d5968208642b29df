"""Each method's own per-step work, calibrated: what a training step costs beyond its FLOPs and its
collectives.

The compute calibration times the whole model's forward+backward on one shard, and the collectives
are timed on their own; a method's step also holds work neither carries: layout copies around its
all-to-alls, a ring's partial attention and merge per hop, and with more ranks than cores the wait
for the slowest rank at every synchronisation. On the held-out protocol that work was 15-40 ms per
step here (docs/cost-model.md), a method-dependent share the ratios miss.

`--methods` trains each listed method (`all`: every registered one) at the calibration shape and at
each SP degree of `--method-sp` (default the calibration's --sp) (bench/run/worker.py run_rank, the step
`dspbench run` times, 2 warm-up + `--method-iters` steps; `--method-repeats` rounds, the methods'
order rotated each round, the median of the rounds' medians) inside the calibration's world; the profile's
prediction of that same step, from the terms just calibrated, is subtracted, and the residual is
`[compute] method_overhead_s[sp][method]`, applied by the model to training steps at that SP degree.
The residual is signed: where the model over-prices a method (its collectives overlap more than the
model says), the step it measured is the truth and the term is negative (bench/cost/model.py keeps a
step's compute above half). One shape per method and degree, not per configuration predicted: a
held-out prediction never sees its own measurement.
"""
from __future__ import annotations

from dspbench.records.config import RunConfig

WARMUP = 2


ZERO_METHOD = "dsp"          # the method the ZeRO engine's host work is measured under
ZERO_STAGES = (1, 2)
ZERO_KEY = "{method}@zero{stage}"   # its runs' keys beside the methods' (never a method name: '@')


def calibration_config(method: str, opts: dict, sp: int, world: int, zero: int = 0) -> RunConfig:
    return RunConfig(method=method, model=opts["model"], frames=opts["frames"], spatial=opts["spatial"],
                     batch=opts["batch"], gpus=world, sp=sp, dtype=opts["dtype"], backend=opts["backend"],
                     launcher="env", warmup=WARMUP, iters=opts.get("method_iters", 5), zero=zero)


def zero_runs(opts: dict, runs: dict, world: int, say) -> dict[str, int]:
    """{"sp": degree, key: stage, ...} of the ZeRO engine's runs: ZERO_METHOD at ZeRO 1 and 2 at the
    first SP degree it trains at (its ZeRO-0 run there is the baseline), each left out with its
    reason where it cannot run (DeepSpeed not importable here); {} where ZERO_METHOD is not trained."""
    from dspbench.facts.build import unsupported_reason
    sp = next((sp for sp, ms in runs.items() if ZERO_METHOD in ms), None)
    if sp is None:
        return {}
    out = {}
    for stage in ZERO_STAGES:
        if why := unsupported_reason(calibration_config(ZERO_METHOD, opts, sp, world, stage)):
            say(f"dspbench calibrate: ZeRO-{stage}'s engine host work not measured: {why}")
            continue
        out[ZERO_KEY.format(method=ZERO_METHOD, stage=stage)] = stage
    return {"sp": sp, **out} if out else {}


def method_runs(methods, opts: dict, sps, world: int, skip_unsupported: bool = False,
                say=None) -> dict[int, list[str]]:
    """{sp: [method]} to train, checked before any rank starts: an SP degree that does not divide the
    world, an unknown name or a bad field is a ValueError; so is a method that cannot run at a degree
    (ValueError naming both), unless skip_unsupported (`--methods all`), which leaves it out and says why
    through `say` (default stderr; every rank of a launch checks, one says)."""
    import sys
    say = say or (lambda line: print(line, file=sys.stderr))
    from dspbench.facts.build import unsupported_reason, validate
    out = {}
    for sp in sps:
        if sp < 1 or world % sp:
            raise ValueError(f"--method-sp {sp} does not divide --gpus {world}")
        for m in methods:
            cfg = calibration_config(m, opts, sp, world)
            validate(cfg)
            if why := unsupported_reason(cfg):
                if not skip_unsupported:
                    raise ValueError(f"--methods {m} at --method-sp {sp}: {why}")
                say(f"dspbench calibrate: --methods all: leaving out {m} at sp {sp}: {why}")
                continue
            out.setdefault(sp, []).append(m)
    return out


def bench_methods(runs: dict, opts: dict) -> dict:
    """Every rank: train each method at the calibration shape at its SP degrees ({sp: [method]},
    method_runs), `method_repeats` rounds with the methods' order rotated each round (so drift over
    the calibration does not fall on one method); rank 0 gets {"<sp>": {method: step samples}},
    step_s the median of the rounds' medians."""
    import statistics
    from dspbench.methods.comm import layer as comm
    from dspbench.run.worker import run_rank
    rounds = max(1, int(opts.get("method_repeats", 1)))
    zero = dict(opts.get("zero_runs") or {})
    zero_sp = zero.pop("sp", None)
    got: dict = {}
    for r in range(rounds):
        for sp, methods in runs.items():
            keys = list(methods) + (list(zero) if str(sp) == str(zero_sp) else [])
            for m in keys[r % len(keys):] + keys[:r % len(keys)]:
                name, stage = (ZERO_METHOD, zero[m]) if m in zero else (m, 0)
                cfg = calibration_config(name, opts, int(sp), comm.world_size(), stage)
                res = run_rank(cfg)
                if res is not None:
                    got.setdefault((str(sp), m), (cfg, []))[1].append(res)
    out = {}
    for (sp, m), (cfg, results) in got.items():
        medians = [res["step_time_median_s"] for res in results]
        out.setdefault(sp, {})[m] = {"step_s": statistics.median(medians), "round_step_s": medians,
                                     "step_times_s": [t for res in results for t in res["step_times_s"]],
                                     "config": cfg.to_dict()}
    return out


def add_method_overheads(prof: dict, measured: dict, opts: dict) -> None:
    """Into the profile dict: [compute] method_overhead_s {sp: {method: s}}, each with its source
    (measured step, predicted step, the residual)."""
    from dspbench.cost.hardware import from_dict
    from dspbench.cost.model import predict
    profile = from_dict(prof)           # the terms just calibrated, no method overhead yet
    comp, src = prof.setdefault("compute", {}), prof.setdefault("sources", {})
    add_zero_host(prof, measured, profile)
    measured = {sp: {m: v for m, v in per.items() if "@" not in m} for sp, per in measured.items()}
    over = {}
    for sp, per in measured.items():
        for m, got in per.items():
            cfg = RunConfig.from_dict(got["config"])
            pred = predict(cfg, profile).step_s
            over.setdefault(str(sp), {})[m] = got["step_s"] - pred
            src[f"compute.method_overhead_s.{sp}.{m}"] = (
                f"measured: {m} trained at {cfg.model} B={cfg.batch} T={cfg.frames} S={cfg.spatial} sp={sp}, "
                f"median step {got['step_s'] * 1e3:.1f} ms of {len(got['step_times_s'])} over "
                f"{len(got.get('round_step_s', [0]))} round(s), minus this "
                f"profile's prediction of that step {pred * 1e3:.1f} ms")
    if profile.kernels:   # mechanism prices the methods (cost/cpu_kernels.py): the residual is reported, not applied
        cal = prof.setdefault("calibration", {})
        cal["method_residual_share"] = {sp: {m: v / measured[sp][m]["step_s"] for m, v in per.items()}
                                        for sp, per in over.items()}
        for key in [k for k in src if k.startswith("compute.method_overhead_s.")]:
            src[key.replace("compute.method_overhead_s.", "calibration.method_residual_share.")] = (
                src.pop(key).replace("minus this profile's prediction", "against this profile's prediction")
                + ": (measured - predicted) / measured, reported, not applied")
        return
    comp["method_overhead_s"] = over


def add_zero_host(prof: dict, measured: dict, profile) -> None:
    """[engine] zero_host_s_per_param_tensor from the ZeRO runs (zero_runs): what a ZeRO-k step costs
    beyond the same step at ZeRO 0 once the engine's collectives and partitioned optimizer are priced,
    per parameter tensor of the calibration model. DeepSpeed's stage 1/2 loops over the parameters in
    Python every step (a gradient hook each, copies into and out of its flat buckets, the partitioned
    step and the copy back): host work no kernel trace or collective holds. Each side is a residual
    against this profile's own prediction, so what the model misprices in the shared step (its
    compute) cancels: host = (measured_k - predicted_k) - (measured_0 - predicted_0), clamped at 0."""
    from dspbench.cost.model import param_tensor_count, predict
    for sp, per in measured.items():
        base = per.get(ZERO_METHOD)
        stages = {RunConfig.from_dict(got["config"]).zero: got for m, got in per.items() if "@" in m}
        if base is None or not stages:
            continue
        cfg0 = RunConfig.from_dict(base["config"])
        res0 = base["step_s"] - predict(cfg0, profile).step_s
        n = param_tensor_count(cfg0.model)
        eng, src = prof.setdefault("engine", {}).setdefault("zero_host_s_per_param_tensor", {}), prof["sources"]
        for stage, got in sorted(stages.items()):
            cfg = RunConfig.from_dict(got["config"])
            pred = predict(cfg, profile).step_s
            host = (got["step_s"] - pred) - res0
            eng[str(stage)] = max(0.0, host) / n
            src[f"engine.zero_host_s_per_param_tensor.{stage}"] = (
                f"measured: {ZERO_METHOD} trained at {cfg.model} B={cfg.batch} T={cfg.frames} S={cfg.spatial} sp={sp} "
                f"dp={cfg.dp} under DeepSpeed ZeRO-{stage} (median step {got['step_s'] * 1e3:.1f} ms, predicted without "
                f"this term {pred * 1e3:.1f} ms) against ZeRO 0 (median {base['step_s'] * 1e3:.1f} ms, predicted "
                f"{(base['step_s'] - res0) * 1e3:.1f} ms): {host * 1e3:.1f} ms of host work"
                + (" (negative: measured as 0)" if host < 0 else "") + f" over its {n} parameter tensors")
        return          # one SP degree measures it (zero_runs)
