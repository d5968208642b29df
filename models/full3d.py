"""full3d: today's video DiTs (Wan 2.x, CogVideoX, HunyuanVideo, Open-Sora 2.0) attend over the
whole T x H' x W' token grid at once.

Blocks keep the grid as (B, T, S, C) (the `stdit` trunk, patch embedding and positions) and their
one self-attention flattens T x S into one sequence of L = T*S tokens. Text enters either by
cross-attention (`text_mode` cross: Wan 2.1) or by joining the self-attention (`joint`: MMDiT,
as in SD3, CogVideoX, HunyuanVideo's dual-stream blocks): the text tokens get their own q, k, v
and output projections, attend and are attended to with the video tokens, and the text stream is
updated by that attention's output (simplified: no text MLP, the block's adaLN table shared).

Positions: Wan applies 3-D RoPE to q and k inside attention; here the fixed 3-D sine-cosine
table (2-D over H' x W' plus 1-D over T) is added at the embedding, as for stdit, so any shard of
the grid stays self-describing (a rotary table inside attention would need each shard's global
offsets). RoPE is element-wise: it changes neither the matmul FLOPs nor any communication.
"""
from __future__ import annotations

import torch
from torch import nn

from .block import DiTBlock
from .config import ModelConfig
from .dit import S_DIM, T_DIM, SpatialTemporalDiT
from .layers import AxisAttention, per_sample


class FullAttention(AxisAttention):
    """Self-attention over all sequence dims of (B, T, S, C) at once (L = T*S); `joint`: with text.

    The seams are AxisAttention's (`qkv`, `inner`, `proj`); `axes` holds every dim it spans, so a
    method sharding T or S finds it. Joint text adds linears `text_qkv` and `text_proj`, and the
    inner attention is called as `inner(q, k, v, joint=(qt, kt, vt)) -> (o, ot)`.
    """

    def __init__(self, hidden: int, heads: int, joint: bool):
        super().__init__(hidden, heads, axis=T_DIM)
        self.axes = (T_DIM, S_DIM)
        if joint:
            self.text_qkv = nn.Linear(hidden, 3 * hidden)
            self.text_proj = nn.Linear(hidden, hidden)

    def _heads(self, qkv: torch.Tensor) -> list[torch.Tensor]:
        """(B, .., 3*H*D) -> q, k, v (B, L, H, D), tokens flattened; H read from the width."""
        D = self.head_dim
        return list(qkv.reshape(qkv.shape[0], -1, 3, qkv.shape[-1] // (3 * D), D).unbind(2))

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None):
        qkv = self.qkv(x)                                   # (B, T, S, 3*H*D)
        B, grid = x.shape[0], qkv.shape[1:-1]
        if y is None:
            return self.proj(self.inner(*self._heads(qkv)).reshape(B, *grid, -1))
        o, ot = self.inner(*self._heads(qkv), joint=self._heads(self.text_qkv(y)))
        return self.proj(o.reshape(B, *grid, -1)), self.text_proj(ot.reshape(B, ot.shape[1], -1))


class Full3DBlock(DiTBlock):
    """Wan 2.1: x += g*SA(mod(norm x)); x += CA(x, y); x += g*MLP(mod(norm x)).
    joint: x, y += g*JointSA(mod(norm x), mod(norm y)); x += g*MLP(mod(norm x))."""

    def make_attention(self, cfg: ModelConfig) -> None:
        self.full_attn = FullAttention(cfg.hidden, cfg.heads, cfg.joint)

    def mix(self, x, y, pre, gate):
        if not hasattr(self.full_attn, "text_qkv"):
            return x + per_sample(gate, x) * self.full_attn(pre(x)), y
        o, ot = self.full_attn(pre(x), pre(y))
        return x + per_sample(gate, x) * o, y + per_sample(gate, y) * ot


class Full3DDiT(SpatialTemporalDiT):
    """Latents (B, Cin, T, H, W) -> (B, Cout, T, H, W); blocks over (B, T, S, C), attention over T*S."""

    def make_blocks(self, cfg: ModelConfig) -> nn.ModuleList:
        return nn.ModuleList(Full3DBlock(cfg) for _ in range(cfg.depth))
