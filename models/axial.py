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
from dspbench.models.layers import AxisAttention, CrossAttention, Mlp, PatchEmbed3D, modulate, per_sample

H_DIM, W_DIM = 2, 3   # activation dims of (B, T, H, W, C); T_DIM = 1 as in dit.py


class PatchEmbedGrid(PatchEmbed3D):
    """Latents (B, Cin, T, H, W) -> tokens (B, T', H', W', C): PatchEmbed3D without flattening space."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).permute(0, 2, 3, 4, 1)          # (B, C, T', H', W') -> (B, T', H', W', C)


class AxialBlock(nn.Module):
    """x += g*SA_H(mod(norm x)); x += g*SA_W(mod(norm x)); x += g*SA_T(mod(norm x)); x += CA(x, y);
    x += g*MLP(mod(norm x)). One adaLN table per block, as in STDiT (spatial before temporal)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C = cfg.hidden
        self.norm1 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.height_attn = AxisAttention(C, cfg.heads, axis=H_DIM)
        self.width_attn = AxisAttention(C, cfg.heads, axis=W_DIM)
        self.temporal_attn = AxisAttention(C, cfg.heads, axis=T_DIM)
        self.cross_attn = CrossAttention(C, cfg.heads)
        self.norm2 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(C, cfg.mlp_hidden)
        self.scale_shift_table = nn.Parameter(torch.randn(6, C) / C ** 0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor, tmod: torch.Tensor) -> torch.Tensor:
        sh_a, sc_a, g_a, sh_m, sc_m, g_m = (self.scale_shift_table[None] + tmod.unflatten(1, (6, -1))).unbind(1)
        g_a, g_m = per_sample(g_a, x), per_sample(g_m, x)
        for attn in (self.height_attn, self.width_attn, self.temporal_attn):
            x = x + g_a * attn(modulate(self.norm1(x), sh_a, sc_a))
        x = x + self.cross_attn(x, y)
        return x + g_m * self.mlp(modulate(self.norm2(x), sh_m, sc_m))


class AxialDiT(SpatialTemporalDiT):
    """Latents (B, Cin, T, H, W) -> (B, Cout, T, H, W); blocks over the grid (B, T, H', W', C)."""

    def make_embedder(self, cfg: ModelConfig) -> nn.Module:
        return PatchEmbedGrid(cfg.patch, cfg.in_channels, cfg.hidden)

    def make_blocks(self, cfg: ModelConfig) -> nn.ModuleList:
        return nn.ModuleList(AxialBlock(cfg) for _ in range(cfg.depth))

    def pos_embed(self, T: int, hp: int, wp: int) -> torch.Tensor:
        """(T, H', W', C): the 2-D table's rows are row-major over (H', W'), as PatchEmbed3D flattens."""
        return super().pos_embed(T, hp, wp).unflatten(1, (hp, wp))
