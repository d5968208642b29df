"""Each method's own per-step work, calibrated: what a training step costs beyond its FLOPs and its
collectives.

The compute calibration times the whole model's forward+backward on one shard, and the collectives
are timed on their own; a method's step also holds work neither carries: layout copies around its
all-to-alls, a ring's partial attention and merge per hop, and with more ranks than cores the wait
for the slowest rank at every synchronisation. On the held-out protocol that work was 15-40 ms per
step here (docs/cost-model.md), a method-dependent share the ratios miss.

`--methods` trains each listed method at the calibration shape and SP (bench/run/worker.py run_rank,
the step `dspbench run` times, warm-up 2 + 5 steps) inside the calibration's world; the profile's
prediction of that same step, from the terms just calibrated, is subtracted, and the residual
(never below 0) is `[compute] method_overhead_s`, applied by the model to training steps at the
SP degree it was measured at (`method_overhead_sp`). One shape per method, not per configuration
predicted: a held-out prediction never sees its own measurement.
"""
from __future__ import annotations

from dspbench.records.config import RunConfig


def calibration_config(method: str, opts: dict, sp: int, world: int) -> RunConfig:
    return RunConfig(method=method, model=opts["model"], frames=opts["frames"], spatial=opts["spatial"],
                     batch=opts["batch"], gpus=world, sp=sp, dtype=opts["dtype"], backend=opts["backend"],
                     launcher="env", warmup=2, iters=5)


def bench_methods(methods, opts: dict, sp: int) -> dict:
    """Every rank: train each method at the calibration shape; rank 0 gets {method: step samples}."""
    from dspbench.methods.comm import layer as comm
    from dspbench.run.worker import run_rank
    out = {}
    for m in methods:
        cfg = calibration_config(m, opts, sp, comm.world_size())
        res = run_rank(cfg)
        if res is not None:
            out[m] = {"step_s": res["step_time_median_s"], "step_times_s": res["step_times_s"],
                      "config": cfg.to_dict()}
    return out


def add_method_overheads(prof: dict, measured: dict, opts: dict) -> None:
    """Into the profile dict: [compute] method_overhead_s {method: s} and method_overhead_sp, each
    with its source (measured step, predicted step, the residual)."""
    from dspbench.cost.hardware import from_dict
    from dspbench.cost.model import predict
    profile = from_dict(prof)           # the terms just calibrated, no method overhead yet
    comp, src = prof.setdefault("compute", {}), prof.setdefault("sources", {})
    over, sp = {}, None
    for m, got in measured.items():
        cfg = RunConfig.from_dict(got["config"])
        sp = int(cfg.sp)
        pred = predict(cfg, profile).step_s
        over[m] = max(0.0, got["step_s"] - pred)
        src[f"compute.method_overhead_s.{m}"] = (
            f"measured: {m} trained at {cfg.model} B={cfg.batch} T={cfg.frames} S={cfg.spatial} sp={sp}, median "
            f"step {got['step_s'] * 1e3:.1f} ms of {len(got['step_times_s'])}, minus this profile's prediction "
            f"of that step {pred * 1e3:.1f} ms")
    comp["method_overhead_s"] = over
    comp["method_overhead_sp"] = sp
