"""The sampling loop of `sample` mode: K model calls per video, a real scheduler's step arithmetic,
and classifier-free guidance run one of three ways.

Schedulers (no library, no download; the arithmetic of the models' own samplers):
- `ddim`: DDIM (eta 0) over the linear beta schedule of 1000 training steps (1e-4 .. 0.02) that
  OpenSora v1.0's IDDPM uses, eps prediction; K timesteps evenly spaced from 999 down;
- `flow`: flow-matching Euler (rectified flow, as OpenSora v1.2 and Wan sample): sigma from 1 to 0
  in K equal steps, the model predicts the velocity, x += (sigma_next - sigma) * v.
Each step is x <- a * x + b * eps with (a, b) precomputed in float64, so the loop is the model
call, the guidance and one fused update.

Guidance: `none`; `batch` (cond and uncond in one call of twice the batch, the null caption zeros);
`parallel` (CFG parallelism: this rank's half of the world runs the cond or the uncond pass and
swaps its prediction with its peer in the other half, methods/comm/p2p.exchange_with_peer).
The text encoder and the VAE are outside this loop: captions and latents are synthetic inputs.
Which sampler a model uses: records.config.sampler_for (the record's `sampler` field).
"""
from __future__ import annotations

import math

import torch

from dspbench.methods.comm import layer as comm, p2p
from dspbench.methods.spec import CFG_EXCHANGE_TAG

# OpenSora v1.0's guidance scale (its configs/opensora/inference/*.py: scheduler cfg_scale=7.0).
CFG_SCALE = 7.0
TRAIN_STEPS = 1000
GUIDANCE = ("none", "batch", "parallel")



def schedule(kind: str, steps: int) -> list[tuple[float, float, float]]:
    """[(model timestep, a, b)] for each of `steps` updates x <- a * x + b * eps."""
    if kind == "flow":
        sig = [1 - i / steps for i in range(steps + 1)]
        return [(TRAIN_STEPS * sig[i], 1.0, sig[i + 1] - sig[i]) for i in range(steps)]
    if kind != "ddim":
        raise ValueError(f"scheduler must be ddim or flow, got {kind!r}")
    betas = [1e-4 + (0.02 - 1e-4) * i / (TRAIN_STEPS - 1) for i in range(TRAIN_STEPS)]
    abar, prod = [], 1.0
    for beta in betas:
        prod *= 1 - beta
        abar.append(prod)
    ts = [TRAIN_STEPS - 1 - (i * TRAIN_STEPS) // steps for i in range(steps)]
    out = []
    for i, t in enumerate(ts):
        ab, ab_prev = abar[t], (abar[ts[i + 1]] if i + 1 < steps else 1.0)
        # x0 = (x - sqrt(1 - ab) eps) / sqrt(ab); x_prev = sqrt(ab_prev) x0 + sqrt(1 - ab_prev) eps
        a = math.sqrt(ab_prev / ab)
        out.append((float(t), a, math.sqrt(1 - ab_prev) - a * math.sqrt(1 - ab)))
    return out


def is_cond_rank(dims) -> bool:
    """CFG parallelism: the first half of the world runs the conditional pass."""
    return comm.rank(dims.cfg_group) == 0


@torch.no_grad()
def sample(model, x, y, steps: int, in_channels: int, guidance: str = "none", dims=None,
           kind: str = "ddim", scale: float = CFG_SCALE):
    """Denoise latents `x` (B, C, T, H, W) under captions `y` in `steps` model calls; returns x."""
    if guidance not in GUIDANCE:
        raise ValueError(f"guidance must be one of {GUIDANCE}, got {guidance!r}")
    if guidance == "batch":   # cond and uncond in one call of twice the batch; the null caption is zeros
        y = torch.cat([y, torch.zeros_like(y)])
    elif guidance == "parallel" and not is_cond_rank(dims):
        y = torch.zeros_like(y)
    for t_model, a, b in schedule(kind, steps):
        xin = torch.cat([x, x]) if guidance == "batch" else x
        t = torch.full((xin.shape[0],), t_model, device=x.device)
        eps = model(xin, t, y)[:, :in_channels]
        if guidance == "batch":
            cond, uncond = eps.chunk(2)
        elif guidance == "parallel":
            other = p2p.exchange_with_peer(eps, dims.cfg_group, CFG_EXCHANGE_TAG)
            cond, uncond = (eps, other) if is_cond_rank(dims) else (other, eps)
        if guidance != "none":
            eps = uncond + scale * (cond - uncond)
        x = a * x + b * eps
    return x
