"""The spatial-temporal DiT: embed, a stack of blocks over (B, T, S, C), final layer, unpatchify.

Two block layouts share this trunk:
- `stdit`  (OpenSora v1.0 STDiT): every block has spatial attention, temporal attention,
  cross-attention and an MLP;
- `stdit3` (OpenSora 1.2 STDiT3 / Latte): blocks alternate, a spatial block then a temporal block,
  each with its own self-attention, cross-attention and MLP.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from dspbench.models.config import ModelConfig
from dspbench.models.layers import (AxisAttention, CaptionEmbedder, CrossAttention, FinalLayer, Mlp, PatchEmbed3D,
                     SeqSeam, TimestepEmbedder, modulate, per_sample, sincos_1d, sincos_2d)

T_DIM, S_DIM = 1, 2   # activation dims of (B, T, S, C)


class STDiTBlock(nn.Module):
    """OpenSora v1.0: x += g*SA_S(mod(norm x)); x += g*SA_T(x); x += CA(x, y); x += g*MLP(mod(norm x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C = cfg.hidden
        self.norm1 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.spatial_attn = AxisAttention(C, cfg.heads, axis=S_DIM)
        self.temporal_attn = AxisAttention(C, cfg.heads, axis=T_DIM)
        self.cross_attn = CrossAttention(C, cfg.heads)
        self.norm2 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(C, cfg.mlp_hidden)
        self.scale_shift_table = nn.Parameter(torch.randn(6, C) / C ** 0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor, tmod: torch.Tensor) -> torch.Tensor:
        sh_a, sc_a, g_a, sh_m, sc_m, g_m = (self.scale_shift_table[None] + tmod.unflatten(1, (6, -1))).unbind(1)
        g_a, g_m = per_sample(g_a, x), per_sample(g_m, x)
        x = x + g_a * self.spatial_attn(modulate(self.norm1(x), sh_a, sc_a))
        # As in OpenSora v1.0 the temporal branch reads the un-normalised residual stream.
        x = x + g_a * self.temporal_attn(x)
        x = x + self.cross_attn(x, y)
        return x + g_m * self.mlp(modulate(self.norm2(x), sh_m, sc_m))


class STDiT3Block(nn.Module):
    """OpenSora 1.2 STDiT3: one self-attention (spatial or temporal), cross-attention, MLP."""

    def __init__(self, cfg: ModelConfig, axis: int):
        super().__init__()
        C = cfg.hidden
        self.attn_name = "spatial_attn" if axis == S_DIM else "temporal_attn"
        self.norm1 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.add_module(self.attn_name, AxisAttention(C, cfg.heads, axis=axis))
        self.cross_attn = CrossAttention(C, cfg.heads)
        self.norm2 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(C, cfg.mlp_hidden)
        self.scale_shift_table = nn.Parameter(torch.randn(6, C) / C ** 0.5)

    def forward(self, x: torch.Tensor, y: torch.Tensor, tmod: torch.Tensor) -> torch.Tensor:
        sh_a, sc_a, g_a, sh_m, sc_m, g_m = (self.scale_shift_table[None] + tmod.unflatten(1, (6, -1))).unbind(1)
        attn = getattr(self, self.attn_name)
        x = x + per_sample(g_a, x) * attn(modulate(self.norm1(x), sh_a, sc_a))
        x = x + self.cross_attn(x, y)
        return x + per_sample(g_m, x) * self.mlp(modulate(self.norm2(x), sh_m, sc_m))


def build_blocks(cfg: ModelConfig) -> nn.ModuleList:
    if cfg.layout == "stdit":
        return nn.ModuleList(STDiTBlock(cfg) for _ in range(cfg.depth))
    return nn.ModuleList(STDiT3Block(cfg, axis) for _ in range(cfg.depth) for axis in (S_DIM, T_DIM))


class SpatialTemporalDiT(nn.Module):
    """Latents (B, Cin, T, H, W), timesteps (B,), text features (B, Ly, Ccap) -> (B, Cout, T, H, W).

    All weights are randomly initialised (no adaLN-zero), so every path carries signal in tests.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        C = cfg.hidden
        self.x_embedder = self.make_embedder(cfg)
        self.t_embedder = TimestepEmbedder(C, cfg.freq_dim)
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(C, 6 * C))
        self.y_embedder = CaptionEmbedder(cfg.caption_channels, C)
        self.seq_enter = SeqSeam()
        self.blocks = self.make_blocks(cfg)
        self.final_layer = FinalLayer(C, cfg.patch_volume, cfg.out_channels)
        self.seq_exit = SeqSeam()

    # Token-grid hooks: a model family with another grid (models/axial.py) overrides these two and
    # pos_embed; the trunk (embeddings, block loop, seams, final layer) stays shared.
    def make_embedder(self, cfg: ModelConfig) -> nn.Module:
        return PatchEmbed3D(cfg.patch, cfg.in_channels, cfg.hidden)

    def make_blocks(self, cfg: ModelConfig) -> nn.ModuleList:
        return build_blocks(cfg)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        _, _, _, H, W = x.shape
        h = self.x_embedder(x)                                      # (B, T, S, C)
        h = h + self.pos_embed(h.shape[1], H // self.cfg.patch[1], W // self.cfg.patch[2]).to(h)
        temb = self.t_embedder(t)                                   # (B, C)
        tmod = self.t_block(temb)                                   # (B, 6C)
        y = self.y_embedder(y)                                      # (B, Ly, C)
        h = self.seq_enter(h)
        for blk in self.blocks:
            if self.cfg.grad_ckpt and torch.is_grad_enabled():
                h = checkpoint(blk, h, y, tmod, use_reentrant=False)
            else:
                h = blk(h, y, tmod)
        h = self.seq_exit(self.final_layer(h, temb))                # (B, T, S, p*Cout)
        return self.unpatchify(h, H, W)

    def pos_embed(self, T: int, hp: int, wp: int) -> torch.Tensor:
        """(T, S, C): fixed 2-D spatial plus 1-D temporal sine-cosine table, computed from extents.

        Added once at the embedding (OpenSora v1.0 adds the temporal part inside the first block's
        temporal branch), so blocks carry no positional state and any shard is self-describing.
        """
        C = self.cfg.hidden
        return sincos_2d(hp, wp, C)[None] + sincos_1d(T, C)[:, None]

    def unpatchify(self, h: torch.Tensor, H: int, W: int) -> torch.Tensor:
        pt, ph, pw = self.cfg.patch
        B, T = h.shape[:2]
        h = h.reshape(B, T, H // ph, W // pw, pt, ph, pw, self.cfg.out_channels)
        return h.permute(0, 7, 1, 4, 2, 5, 3, 6).reshape(B, self.cfg.out_channels, T * pt, H, W)
