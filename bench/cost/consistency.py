"""What the paper's own numbers imply under our model: the MFU they need, the all-to-all bandwidth
their DSP/Ulysses ratio needs, and a plain verdict. Nothing here is fit to the paper.

Implied MFU: the paper's throughput times our analytic FLOPs per sample (models/params.py) over
the GPUs' dense peak. Model FLOPs count 3x the forward for training (forward + backward);
hardware FLOPs add the recompute of activation checkpointing (4x), which the paper's runs did.

Implied all-to-all bandwidth: under the cost model (docs/cost-model.md) a method's step is
t(B) = F + A / B, A its all-to-all wire bytes per step and B the all-to-all bus bandwidth; F is
everything else on the profile (compute, optimizer, other collectives, all-to-all latencies).
The paper's ratio r = t_base / t_dsp then needs B = (A_base - r A_dsp) / (r F_dsp - F_base).
As B -> 0 the ratio tends to A_base / A_dsp (2 for `ulysses`, 4 for `ulysses_all`, less the
exit gather and gradient sync both share): a paper ratio at or above that bound cannot come
from all-to-all bandwidth at all.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspbench.cost.comm import group_link
from dspbench.cost.hardware import Profile
from dspbench.cost.model import predict
from dspbench.methods import Dims
from dspbench.models import Shape, get_config
from dspbench.models.params import flops_per_sample
from dspbench.records.config import RunConfig

# Verdict thresholds, stated as judgements with their basis (not fit to anything):
# published large-scale training model-FLOPs utilisation: PaLM 540B 46.2% (Chowdhery et al. 2022,
# Table 3), Megatron-LM 1T 52% of peak (Narayanan et al., SC'21, Sec. 5.1), MegaScale 175B 55.2%
# (Jiang et al., NSDI'24, Table 2).
MFU_PUBLISHED_MAX = 0.60


@dataclass(frozen=True)
class Implied:
    model_mfu: float          # the paper's throughput x model FLOPs (3x forward) / peak
    hardware_util: float      # with checkpointing's recompute (4x forward) / peak
    a2a_busbw_GBps: dict      # baseline -> GB/s the paper's ratio needs (None: no bandwidth can)
    bound: dict               # baseline -> the ratio as B -> 0 (what all-to-all bytes can reach at most)
    profile_busbw_GBps: float


def implied_mfu(model: str, frames: int, spatial: int, samples_per_s: float, gpus: int, peak: float,
                mode: str = "train", grad_ckpt: bool = True, passes: int = 1) -> tuple[float, float]:
    """(model-FLOPs MFU, hardware-FLOPs utilisation) the paper's throughput needs on `gpus` at `peak`."""
    fwd = flops_per_sample(get_config(model), Shape(1, frames, spatial)) * passes
    model_x, hw_x = (3, 4 if grad_ckpt else 3) if mode == "train" else (1, 1)
    per_gpu = samples_per_s / gpus / peak
    return fwd * model_x * per_gpu, fwd * hw_x * per_gpu


def _split(cfg: RunConfig, profile: Profile, busbw: float) -> tuple[float, float]:
    """(F, A): a step's time without its all-to-all wire time, and its all-to-all wire bytes."""
    p = predict(cfg, profile)
    a2a = sum(v for k, v in p.comm_wire.items() if k.startswith("all_to_all."))
    return p.step_s - a2a / busbw, a2a


def implied_busbw(dsp: RunConfig, base: RunConfig, profile: Profile, ratio: float) -> tuple[float | None, float]:
    """(GB/s, bound): the all-to-all bus bandwidth that gives DSP/base = `ratio` under the model
    (None when no positive bandwidth does), and the ratio's limit as bandwidth goes to 0."""
    dims = Dims(sp=int(dsp.sp), dp=dsp.gpus // int(dsp.sp))
    busbw = group_link(profile, dims, "sp").busbw("all_to_all")
    f_d, a_d = _split(dsp, profile, busbw)
    f_b, a_b = _split(base, profile, busbw)
    bound = a_b / a_d if a_d else float("inf")
    num, den = a_b - ratio * a_d, ratio * f_d - f_b
    return (num / den / 1e9 if num > 0 and den > 0 else None), bound


def verdict(model_mfu: float, hw_util: float, bw: dict, bound: dict, ratio: float, link_GBps: float) -> str:
    """One plain sentence per concern (empty: consistent with the model and published practice)."""
    out = []
    if hw_util > 1:
        out.append(f"impossible as stated: needs {hw_util:.0%} of dense peak in hardware FLOPs")
    elif model_mfu > MFU_PUBLISHED_MAX:
        out.append(f"implausible: {model_mfu:.0%} model-FLOPs MFU ({hw_util:.0%} with recompute) is above "
                   f"any published large-scale training ({MFU_PUBLISHED_MAX:.0%})")
    for m, b in bw.items():
        if b is None:
            out.append(f"no all-to-all bandwidth gives DSP/{m} = {ratio:.2f} (bytes alone reach at most {bound[m]:.2f})")
        elif b < 0.1 * link_GBps:
            out.append(f"DSP/{m} needs all-to-alls at {b:.1f} GB/s, under 10% of the link's {link_GBps:.0f} GB/s")
    return "; ".join(out)


def predicted_ratio(dsp: RunConfig, base: RunConfig, profile: Profile) -> tuple[float, bool]:
    """(the model's DSP/base throughput ratio, whether both fit in memory): the ratio of step
    times is computed even where the memory model predicts OOM, and flagged."""
    p_d, p_b = predict(dsp, profile), predict(base, profile)
    return p_b.step_s / p_d.step_s, p_d.fits and p_b.fits
