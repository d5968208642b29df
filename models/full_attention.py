"""full3d's self-attention: one attention over the whole T x S token grid, with joint text or without."""
from __future__ import annotations

import torch
from torch import nn

from dspbench.models.dit import S_DIM, T_DIM
from dspbench.models.layers import AxisAttention


class FullAttention(AxisAttention):
    """Self-attention over all sequence dims of (B, T, S, C) at once (L = T*S); `joint`: with text.

    The seams are AxisAttention's (`qkv`, `inner`, `proj`); `axes` holds every dim it spans, so a
    method sharding T or S finds it. `text` "qkv" adds linears `text_qkv` and `text_proj` (from and
    back to the text width `text_hidden`, Mochi's narrower text stream), "kv" (the last block)
    `text_kv` alone; "shared" (CogVideoX's expert blocks) puts the text through `qkv` and `proj`
    themselves, "shared_kv" (their last block) takes keys and values of `qkv`. The inner attention
    is then called as `inner(q, k, v, joint=(qt, kt, vt)) -> (o, ot)`, with qt and ot None for the
    keys-and-values-only kinds.
    """

    def __init__(self, hidden: int, heads: int, text: str | None = None, text_hidden: int = 0):
        super().__init__(hidden, heads, axis=T_DIM)
        self.axis, self.axes = None, (T_DIM, S_DIM)   # no single axis: it attends over both
        self.text = text
        Ct = text_hidden or hidden
        if text == "qkv":
            self.text_qkv = nn.Linear(Ct, 3 * hidden)
            self.text_proj = nn.Linear(hidden, Ct)
        elif text == "kv":
            self.text_kv = nn.Linear(Ct, 2 * hidden)

    def _heads(self, t: torch.Tensor, n: int) -> list[torch.Tensor]:
        """(B, .., n*H*D) -> n tensors (B, L, H, D), tokens flattened; H read from the width."""
        D = self.head_dim
        return list(t.reshape(t.shape[0], -1, n, t.shape[-1] // (n * D), D).unbind(2))

    def _text_qkv(self, y: torch.Tensor) -> list:
        if self.text == "qkv":
            return self._heads(self.text_qkv(y), 3)
        if self.text == "kv":
            return [None] + self._heads(self.text_kv(y), 2)
        qkv = self._heads(self.qkv(y), 3)
        return qkv if self.text == "shared" else [None] + qkv[1:]

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None):
        qkv = self.qkv(x)                                   # (B, T, S, 3*H*D)
        B, grid = x.shape[0], qkv.shape[1:-1]
        if self.text is None:
            return self.proj(self.inner(*self._heads(qkv, 3)).reshape(B, *grid, -1))
        o, ot = self.inner(*self._heads(qkv, 3), joint=self._text_qkv(y))
        o = self.proj(o.reshape(B, *grid, -1))
        if ot is None:
            return o, None
        ot = ot.reshape(B, ot.shape[1], -1)
        return o, (self.proj(ot) if self.text == "shared" else self.text_proj(ot))
