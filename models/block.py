"""The block-forward shape every layout shares (adaLN-modulated, OpenSora and Wan order):

    x, y = mix(x, y)                 # the layout's self-attention(s) on mod(norm1 x), gated by g_a
    x += CA(x, y)                    # cross-attention to the text (absent with joint text)
    x += g_m * MLP(mod(norm2 x))

Layouts differ only in their self-attention seams and `mix` (dit.py, axial.py, full3d.py); the
text stream y passes through unchanged except in full3d's joint attention, which updates it.
"""
from __future__ import annotations

import torch
from torch import nn

from dspbench.models.config import ModelConfig
from dspbench.models.layers import CrossAttention, Mlp, modulate, per_sample
from dspbench.models.modulation import AdaLN, stream_mods, vectors


class DiTBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        C = cfg.hidden
        self.norm1 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.make_attention(cfg)   # between norm1 and cross_attn: the modules' (and init's) order
        self.cross_attn = CrossAttention(C, cfg.heads) if self.cross_attends(cfg) else None
        self.norm2 = nn.LayerNorm(C, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(C, cfg.mlp_hidden)
        self.shift = cfg.adaln_shift
        if cfg.modulation == "linear":   # its own projection of the timestep embedding (DiT)
            self.adaln = AdaLN(cfg.time_width, vectors(2, cfg.adaln_shift), C)
        else:                            # a table added to the trunk's one projection (PixArt, Wan)
            self.scale_shift_table = nn.Parameter(torch.randn(6, C) / C ** 0.5)

    def cross_attends(self, cfg: ModelConfig) -> bool:
        """Whether this block cross-attends to the text (joint text joins the self-attention instead)."""
        return not cfg.joint

    def make_attention(self, cfg: ModelConfig) -> None:
        """Register the layout's self-attention seam(s)."""
        raise NotImplementedError

    def mix(self, x, y, pre, gate):
        """The self-attention part: `pre(v)` is mod(norm1 v), `gate` the (B, C) attention gate.
        Returns (x, y) after the residual update(s)."""
        raise NotImplementedError

    def mods(self, tmod: torch.Tensor) -> list[torch.Tensor]:
        """(shift, scale, gate) of the attention, then of the MLP; `tmod`: the trunk's t_block output
        (table) or the timestep embedding itself (linear)."""
        if hasattr(self, "adaln"):
            return stream_mods(self.adaln, tmod, self.shift)
        return list((self.scale_shift_table[None] + tmod.unflatten(1, (6, -1))).unbind(1))

    def forward(self, x: torch.Tensor, y: torch.Tensor, tmod: torch.Tensor):
        sh_a, sc_a, g_a, sh_m, sc_m, g_m = self.mods(tmod)
        x, y = self.mix(x, y, lambda v: modulate(self.norm1(v), sh_a, sc_a), g_a)
        if self.cross_attn is not None:
            x = x + self.cross_attn(x, y)
        return x + per_sample(g_m, x) * self.mlp(modulate(self.norm2(x), sh_m, sc_m)), y
