"""One candidate priced by the cost model (bench/cost/model.py `predict`, the rates of
bench/cost/predict.py), legality by the method's `check()` (bench/cost/predict.py why_unsupported):
a ranked row, or a pruned one with its reason."""
from __future__ import annotations

from dataclasses import dataclass

from dspbench.cost.hardware import Profile
from dspbench.cost.interval import shared_corners, with_assumed_spread
from dspbench.cost.model import predict
from dspbench.cost.predict import throughput, why_unsupported
from dspbench.plan.twins import mechanism
from dspbench.records.config import RunConfig

LATENCY_MODES = ("infer", "sample")   # ranked by seconds per video (one batch's latency), else samples/s


@dataclass(frozen=True)
class Pricer:
    """The profile, and the corners of its (compute, communication) ranges, measured or assumed:
    a row's interval is its range over the corners; two rows' ratio is taken corner by corner,
    since both would run on the one cluster whose rates the ranges bracket."""
    profile: Profile
    corners: tuple[Profile, ...]
    interval_source: str

    @classmethod
    def of(cls, profile: Profile) -> "Pricer":
        spread, source = with_assumed_spread(profile)
        return cls(profile, tuple(shared_corners(spread)), source)


def score(mode: str, step_s: float, global_batch: int) -> float:
    """Higher is better: samples/s (train), or videos per second of one request's latency (sample)."""
    return 1.0 / step_s if mode in LATENCY_MODES else global_batch / step_s


def price(cfg: RunConfig, pricer: Pricer) -> dict:
    """{'status': 'ranked', ...row} or {'status': 'unsupported' | 'oom', 'reason': ...}."""
    head = {"method": cfg.method, "sp": cfg.sp, "dp": cfg.dp, "grad_ckpt": cfg.grad_ckpt, "zero": cfg.zero,
            "config": cfg}
    reason = why_unsupported(cfg)
    if reason:
        return {**head, "status": "unsupported", "reason": reason}
    p = predict(cfg, pricer.profile)
    mem = {"peak_mem_bytes": p.mem["peak"], "usable_bytes": p.usable_bytes}
    if not p.fits:
        return {**head, **mem, "status": "oom", "reason": p.oom_reason(cfg, pricer.profile.name)}
    steps = [predict(cfg, c).step_s for c in pricer.corners]
    low, high = min(steps + [p.step_s]), max(steps + [p.step_s])   # a range always holds its point
    comm = sum(p.comm_s.values())
    rates = throughput(cfg, p.step_s, pricer.profile)
    return {**head, **mem, "status": "ranked", "step_time_s": p.step_s, "step_time_low_s": low,
            "step_time_high_s": high, "score": score(cfg.mode, p.step_s, cfg.global_batch),
            "score_low": score(cfg.mode, high, cfg.global_batch), "score_high": score(cfg.mode, low, cfg.global_batch),
            "corner_scores": [score(cfg.mode, s, cfg.global_batch) for s in steps],
            "samples_per_s": rates["samples_per_s"], "mfu": rates["mfu"],
            "compute_s": p.compute_s, "optimizer_s": p.optimizer_s, "comm_s": comm,
            "exposed_comm_s": p.comm_total_s, "comm_share": comm / p.step_s if p.step_s else 0.0,
            "comm_wire_bytes": sum(p.comm_wire.values()), "mechanism": mechanism(cfg, p)}
