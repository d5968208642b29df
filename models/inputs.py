"""Synthetic inputs of a requested shape: the same on every rank for the same seed."""
from __future__ import annotations

import torch

from dspbench.models.config import ModelConfig, Shape


def make_inputs(cfg: ModelConfig, shape: Shape, seed: int = 0, dtype=torch.float32, device="cpu"):
    """(latents, timesteps, text features, regression target), drawn from a private generator."""
    g = torch.Generator().manual_seed(seed)
    H, W = shape.latent_hw(cfg.patch)
    T = shape.frames * cfg.patch[0]
    x = torch.randn(shape.batch, cfg.in_channels, T, H, W, generator=g)
    t = torch.randint(0, 1000, (shape.batch,), generator=g).float()
    y = torch.randn(shape.batch, cfg.text_len, cfg.caption_channels, generator=g)
    target = torch.randn(shape.batch, cfg.out_channels, T, H, W, generator=g)
    return tuple(v.to(device=device, dtype=dtype) for v in (x, t, y, target))
