"""A DiT with three sequence dims: blocks attend separately over T, H and W (axial attention).

The token grid stays (B, T, H', W', C) through the blocks, so every attention is over one
activation dim (`AxisAttention` with axis 1, 2 or 3) and the others act as batch. It is the
shape of the paper's general K-dim case (K = 3): DSP can hold the shard on any dim not being
attended over. The trunk (timestep, caption, seams, final layer, unpatchify) is
`SpatialTemporalDiT`'s; only the patch embedding, the positions and the blocks differ.
"""
from __future__ import annotations

import torch
from torch import nn

from dspbench.models.config import ModelConfig
from dspbench.models.dit import T_DIM, SpatialTemporalDiT
from dspbench.models.block import DiTBlock
from dspbench.models.layers import AxisAttention, PatchEmbed3D, per_sample

H_DIM, W_DIM = 2, 3   # activation dims of (B, T, H, W, C); T_DIM = 1 as in dit.py


class PatchEmbedGrid(PatchEmbed3D):
    """Latents (B, Cin, T, H, W) -> tokens (B, T', H', W', C): PatchEmbed3D without flattening space."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).permute(0, 2, 3, 4, 1)          # (B, C, T', H', W') -> (B, T', H', W', C)


class AxialBlock(DiTBlock):
    """x += g*SA_H(mod(norm x)); x += g*SA_W(mod(norm x)); x += g*SA_T(mod(norm x)); x += CA(x, y);
    x += g*MLP(mod(norm x)). One adaLN table per block, as in STDiT (spatial before temporal)."""

    def make_attention(self, cfg: ModelConfig) -> None:
        C = cfg.hidden
        self.height_attn = AxisAttention(C, cfg.heads, axis=H_DIM)
        self.width_attn = AxisAttention(C, cfg.heads, axis=W_DIM)
        self.temporal_attn = AxisAttention(C, cfg.heads, axis=T_DIM)

    def mix(self, x, y, pre, gate):
        g = per_sample(gate, x)
        for attn in (self.height_attn, self.width_attn, self.temporal_attn):
            x = x + g * attn(pre(x))
        return x, y


class AxialDiT(SpatialTemporalDiT):
    """Latents (B, Cin, T, H, W) -> (B, Cout, T, H, W); blocks over the grid (B, T, H', W', C)."""

    def make_embedder(self, cfg: ModelConfig) -> nn.Module:
        return PatchEmbedGrid(cfg.patch, cfg.in_channels, cfg.hidden)

    def make_blocks(self, cfg: ModelConfig) -> nn.ModuleList:
        return nn.ModuleList(AxialBlock(cfg) for _ in range(cfg.depth))

    def pos_embed(self, T: int, hp: int, wp: int) -> torch.Tensor:
        """(T, H', W', C): the 2-D table's rows are row-major over (H', W'), as PatchEmbed3D flattens."""
        return super().pos_embed(T, hp, wp).unflatten(1, (hp, wp))
