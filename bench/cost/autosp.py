"""`--sp auto`: the smallest SP degree that a method supports and that fits memory; the rest is DP.

This is the paper's protocol (each method at its minimum SP; the author's advice in the reference
code's issues: keep SP as small as memory allows). Used by `dspbench run/predict --sp auto`
(bench/run/harness.py resolves it before any rank starts) and by sweep specs (slurm/).
"""
from __future__ import annotations

from dataclasses import replace

from dspbench.records.config import RunConfig
from dspbench.cost.model import predict
from dspbench.cost.hardware import Profile, load_profile
from dspbench.methods import Dims, get_method
from dspbench.models import Shape, get_config


def candidates(gpus: int, cfg_degree: int = 1) -> list[int]:
    """SP degrees that divide the ranks of one CFG group (the world without CFG parallelism)."""
    return [d for d in range(1, gpus // cfg_degree + 1) if gpus % (d * cfg_degree) == 0]


def why_not(cfg: RunConfig, sp: int, profile: Profile) -> str | None:
    """Why `cfg` at this SP degree cannot run on the profile (constraint or OOM), or None."""
    spec = get_method(cfg.method)
    mcfg = get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
    reason = spec.check_pad(mcfg, Shape(cfg.batch, cfg.frames, cfg.spatial),
                            Dims(sp=sp, dp=cfg.gpus // (sp * cfg.cfg_degree), shard=cfg.shard, cfg=cfg.cfg_degree,
                                 ulysses=cfg.ulysses_degree), cfg.pad)
    if reason:
        return reason
    pred = predict(replace(cfg, sp=sp), profile, memory_only=True)     # fit alone: no kernel trace
    if not pred.fits:
        return pred.oom_reason(cfg, profile.name)
    return None


def resolve_sp(cfg: RunConfig, hardware: str | Profile) -> int | str:
    """The minimum SP degree (a divisor of cfg.gpus) for cfg.method that fits, or why none does."""
    profile = hardware if isinstance(hardware, Profile) else load_profile(hardware)
    reasons = {}
    for sp in candidates(cfg.gpus, cfg.cfg_degree):
        reason = why_not(cfg, sp, profile)
        if reason is None:
            return sp
        reasons[sp] = reason
    if len(set(reasons.values())) == 1:   # no degree matters (DSP not applicable, a missing library): say it once
        return next(iter(reasons.values()))
    return f"no SP degree fits {cfg.method} on {cfg.gpus} x {profile.name}: " + "; ".join(
        f"sp={sp}: {why}" for sp, why in reasons.items())


def resolved(cfg: RunConfig, hardware: str | Profile | None) -> tuple[RunConfig, str | None]:
    """(cfg with a numeric sp, None) or (cfg unchanged, why sp cannot be resolved)."""
    if cfg.sp != "auto":
        return cfg, None
    if not hardware:
        return cfg, "--sp auto needs --hardware PROFILE (the memory model decides the degree)"
    sp = resolve_sp(cfg, hardware)
    return (replace(cfg, sp=sp, sp_auto=True), None) if isinstance(sp, int) else (cfg, sp)
