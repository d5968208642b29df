"""One candidate priced by the cost model (bench/cost/model.py `predict`, the rates of
bench/cost/predict.py), legality by the method's `check()` and the profile's declared stack
(bench/cost/predict.py why_unsupported): a ranked row, or a pruned one with its reason. A bucketed
request (`plan --buckets`) prices the candidate at every bucket's shape and ranks the weighted mix."""
from __future__ import annotations

from dataclasses import dataclass, replace

from dspbench.cost.hardware import Profile
from dspbench.cost.interval import shared_corners, with_assumed_spread
from dspbench.cost.mechanism import explain
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
    reason = why_unsupported(cfg, pricer.profile.stack)   # the target's declared stack, not this machine's
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
            "corner_scores": [score(cfg.mode, s, cfg.global_batch) for s in steps], "corner_steps_s": steps,
            "samples_per_s": rates["samples_per_s"], "mfu": rates["mfu"],
            "compute_s": p.compute_s, "optimizer_s": p.optimizer_s, "engine_host_s": p.engine_host_s, "comm_s": comm,
            "exposed_comm_s": p.comm_total_s, "comm_share": comm / p.step_s if p.step_s else 0.0,
            "comm_wire_bytes": sum(p.comm_wire.values()), "mechanism": mechanism(cfg, p),
            # what the step counted, per kernel kind and per collective (plan --explain)
            "mechanism_costs": explain(cfg, pricer.profile, p)}


def price_mix(cfg: RunConfig, pricer: Pricer, buckets: tuple) -> dict:
    """The candidate over a weighted shape mix [(T, S, weight)]: priced at each bucket's shape, its
    step the weights' mean of the buckets' steps (the mix's time per batch, so its score is samples/s
    over the mix, or mean seconds per video), corner by corner the same (its interval, its leads), its
    memory the largest bucket's. A bucket it cannot run or fit prunes it: one mesh serves the mix."""
    shaped = [(replace(cfg, frames=t, spatial=s), w) for t, s, w in buckets]
    head = {"method": cfg.method, "sp": cfg.sp, "dp": cfg.dp, "grad_ckpt": cfg.grad_ckpt, "zero": cfg.zero,
            "config": cfg}
    reasons = [why_unsupported(c, pricer.profile.stack) for c, _ in shaped]   # before any pricing: cheap
    if any(reasons):   # a reason every bucket gives (a method, a stack) is the candidate's; else its bucket's
        (c, _), why = next((b, r) for b, r in zip(shaped, reasons) if r)
        return {**head, "status": "unsupported",
                "reason": why if len(set(reasons)) == 1 else f"bucket {c.frames}x{c.spatial}: {why}"}
    parts = []
    for c, w in shaped:
        r = price(c, pricer)
        if r["status"] != "ranked":   # an OOM keeps its memory fields (the pruned summary's range)
            return {**r, "config": cfg, "reason": f"bucket {c.frames}x{c.spatial}: {r['reason']}"}
        parts.append((w, r))
    total = sum(w for w, _ in parts)
    mean = lambda k: sum(w * r[k] for w, r in parts) / total
    step = mean("step_time_s")
    corners = [sum(w * r["corner_steps_s"][i] for w, r in parts) / total for i in range(len(parts[0][1]["corner_steps_s"]))]
    low, high = min(corners + [step]), max(corners + [step])
    mfus = [r["mfu"] for _, r in parts]
    comm = mean("comm_s")
    b = cfg.global_batch
    return {**parts[0][1], "config": cfg, "peak_mem_bytes": max(r["peak_mem_bytes"] for _, r in parts),
            "step_time_s": step, "step_time_low_s": low, "step_time_high_s": high, "score": score(cfg.mode, step, b),
            "score_low": score(cfg.mode, high, b), "score_high": score(cfg.mode, low, b),
            "corner_scores": [score(cfg.mode, s, b) for s in corners], "corner_steps_s": corners,
            "samples_per_s": b / step,
            # MFU over the mix: the buckets' FLOPs over their seconds (each bucket's mfu x step is its FLOPs)
            "mfu": None if None in mfus else sum(w * r["mfu"] * r["step_time_s"] for w, r in parts) / total / step,
            "compute_s": mean("compute_s"), "optimizer_s": mean("optimizer_s"), "engine_host_s": mean("engine_host_s"),
            "comm_s": comm,
            "exposed_comm_s": mean("exposed_comm_s"), "comm_share": comm / step if step else 0.0,
            "comm_wire_bytes": mean("comm_wire_bytes"), "bucket_steps_s": [r["step_time_s"] for _, r in parts],
            "mechanism": tuple(r["mechanism"] for _, r in parts)}
