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
from dspbench.models.block import DiTBlock
from dspbench.models.layers import (AxisAttention, CaptionEmbedder, FinalLayer, PatchEmbed3D, SeqSeam, TimestepEmbedder,
                     per_sample, sincos_1d, sincos_2d)
from dspbench.models.modulation import LinearFinalLayer

T_DIM, S_DIM = 1, 2   # activation dims of (B, T, S, C)


class STDiTBlock(DiTBlock):
    """OpenSora v1.0: x += g*SA_S(mod(norm x)); x += g*SA_T(x); x += CA(x, y); x += g*MLP(mod(norm x))."""

    def make_attention(self, cfg: ModelConfig) -> None:
        self.spatial_attn = AxisAttention(cfg.hidden, cfg.heads, axis=S_DIM)
        self.temporal_attn = AxisAttention(cfg.hidden, cfg.heads, axis=T_DIM)

    def mix(self, x, y, pre, gate):
        g = per_sample(gate, x)
        x = x + g * self.spatial_attn(pre(x))
        # As in OpenSora v1.0 the temporal branch reads the un-normalised residual stream.
        return x + g * self.temporal_attn(x), y


class STDiT3Block(DiTBlock):
    """OpenSora 1.2 STDiT3: one self-attention (spatial or temporal), cross-attention, MLP."""

    def __init__(self, cfg: ModelConfig, axis: int):
        self.attn_axis = axis
        super().__init__(cfg)

    def cross_attends(self, cfg: ModelConfig) -> bool:
        # Latte's temporal blocks (temporal_cross false) have no cross-attention.
        return super().cross_attends(cfg) and (self.attn_axis == S_DIM or cfg.temporal_cross)

    def make_attention(self, cfg: ModelConfig) -> None:
        self.attn_name = "spatial_attn" if self.attn_axis == S_DIM else "temporal_attn"
        self.add_module(self.attn_name, AxisAttention(cfg.hidden, cfg.heads, axis=self.attn_axis))

    def mix(self, x, y, pre, gate):
        return x + per_sample(gate, x) * getattr(self, self.attn_name)(pre(x)), y


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
        self.t_embedder = TimestepEmbedder(cfg.time_width, cfg.freq_dim)
        # modulation linear: each block projects the timestep embedding itself (models/modulation.py)
        table = cfg.modulation == "table"
        self.t_block = nn.Sequential(nn.SiLU(), nn.Linear(C, 6 * C)) if table else nn.Identity()
        self.y_embedder = CaptionEmbedder(cfg.caption_channels, cfg.text_width)
        self.seq_enter = SeqSeam()
        self.blocks = self.make_blocks(cfg)
        self.final_layer = (FinalLayer(C, cfg.patch_volume, cfg.out_channels) if table
                            else LinearFinalLayer(C, cfg.time_width, cfg.patch_volume, cfg.out_channels))
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
        temb = self.t_embedder(t)                                   # (B, C) (linear: time_dim)
        tmod = self.t_block(temb)                                   # (B, 6C) (linear: temb itself)
        y = self.y_embedder(y)                                      # (B, Ly, C) (text width)
        h = self.seq_enter(h)
        for blk in self.blocks:
            if self.cfg.grad_ckpt and torch.is_grad_enabled():
                h, y = checkpoint(blk, h, y, tmod, use_reentrant=False)
            else:
                h, y = blk(h, y, tmod)
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
