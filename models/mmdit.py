"""Joint-text blocks with a text stream of their own (`text_stream` dual or expert; full3d joint).

dual (MMDiT: SD3, Flux's and HunyuanVideo's double blocks, Mochi's AsymmDiT): video and text each
have their own q, k, v and output projections, MLP and adaLN modulation, and meet in one joint
attention. The text stream may be narrower (`text_hidden`, Mochi: 1536 beside 3072): its
projections map it into the shared attention width and back.
expert (CogVideoX's expert transformer): one set of linears for both streams, with a separate
adaLN modulation (shift, scale, gate) for the text tokens and for the video tokens.

    x, y += g * JointSA(mod(norm x), mod_t(norm y))      (each stream its own gate)
    x += g * MLP(mod(norm x));  y += g_t * MLP_t(mod_t(norm y))

The last block's text output would feed nothing (SD3's `context_pre_only`): there the text gives
keys and values only, and has no MLP and only the attention's (shift, scale).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dspbench.models.config import ModelConfig
from dspbench.models.full_attention import FullAttention
from dspbench.models.layers import Mlp, modulate, per_sample
from dspbench.models.modulation import AdaLN, stream_mods, vectors


class TextMlp(Mlp):
    """The text stream's own MLP (dual): the text is whole on every rank, so tensor parallelism
    (methods/megatron_sp.py) leaves it replicated rather than splitting a few hundred tokens."""


def norm(v: torch.Tensor) -> torch.Tensor:
    """LayerNorm without affine parameters (as every block's norms here), at any stream width."""
    return F.layer_norm(v, v.shape[-1:], eps=1e-6)


class DualStreamBlock(nn.Module):
    def __init__(self, cfg: ModelConfig, last: bool = False):
        super().__init__()
        C, Ct, shift = cfg.hidden, cfg.text_width, cfg.adaln_shift
        self.last, self.shift = last, shift
        self.full_attn = self.make_attention(cfg)
        self.mlp = Mlp(C, cfg.mlp_hidden)
        self.adaln = AdaLN(cfg.time_width, vectors(2, shift), C)
        text_vectors = vectors(1, shift, group=2) if last else vectors(2, shift)
        self.text_adaln = AdaLN(cfg.time_width, text_vectors, Ct)
        if not last:
            self.text_mlp = TextMlp(Ct, cfg.text_mlp_hidden) if cfg.text_stream == "dual" else None

    def make_attention(self, cfg: ModelConfig) -> FullAttention:
        return FullAttention(cfg.hidden, cfg.heads, "kv" if self.last else "qkv", cfg.text_hidden)

    def text_mlp_module(self) -> nn.Module:
        return self.text_mlp

    def forward(self, x: torch.Tensor, y: torch.Tensor, temb: torch.Tensor):
        sh, sc, g, sh_m, sc_m, g_m = stream_mods(self.adaln, temb, self.shift)
        tm = stream_mods(self.text_adaln, temb, self.shift, group=2 if self.last else 3)
        o, ot = self.full_attn(modulate(norm(x), sh, sc), modulate(norm(y), tm[0], tm[1]))
        x = x + per_sample(g, x) * o
        x = x + per_sample(g_m, x) * self.mlp(modulate(norm(x), sh_m, sc_m))
        if self.last:
            return x, y
        y = y + per_sample(tm[2], y) * ot
        return x, y + per_sample(tm[5], y) * self.text_mlp_module()(modulate(norm(y), tm[3], tm[4]))


class ExpertBlock(DualStreamBlock):
    """CogVideoX: the text goes through the block's own q, k, v, output and MLP (FullAttention's
    "shared" text); only its modulation is its own."""

    def make_attention(self, cfg: ModelConfig) -> FullAttention:
        return FullAttention(cfg.hidden, cfg.heads, "shared_kv" if self.last else "shared")

    def text_mlp_module(self) -> nn.Module:
        return self.mlp
