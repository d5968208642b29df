"""Single-stream blocks (HunyuanVideo's and Flux's single blocks), after the `depth` joint ones.

Text and video are one sequence: one fused linear gives each token its q, k, v and MLP input, the
attention (joint: video and text) and the MLP run in parallel, and one fused linear maps their
concatenated outputs back, under one adaLN modulation (shift, scale, gate) for both streams:

    h = linear1(mod(norm [x; y]));  [q k v m] = h
    [x; y] += g * linear2([JointSA(q, k, v); GELU(m)])

The streams stay two tensors (video sharded, text whole on every rank), which is the concatenation
computed token-wise. The last block's text output would feed nothing: its text gives keys and
values only (its fused linear still runs on the text, as in the published models).
"""
from __future__ import annotations

import torch
from torch import nn

from dspbench.models.config import ModelConfig
from dspbench.models.dit import S_DIM, T_DIM
from dspbench.models.layers import AxisAttention, LocalAttention, modulate, per_sample
from dspbench.models.mmdit import norm
from dspbench.models.modulation import AdaLN, stream_mods, vectors


class JointAttentionCore(AxisAttention):
    """The attention of a single-stream block: q, k, v come from the block's fused linear, so this
    seam holds only `inner` (methods swap it as any self-attention's) and spans every sequence dim."""

    def __init__(self, hidden: int, heads: int):
        nn.Module.__init__(self)
        self.axis, self.axes = None, (T_DIM, S_DIM)
        self.head_dim = hidden // heads
        self.inner = LocalAttention()

    def forward(self, q, k, v, qt, kt, vt):
        """(B, T, S, H*D) and text (B, Ly, H*D) -> (o, ot) at the same widths (ot None if qt is)."""
        B, grid, D = q.shape[0], q.shape[1:-1], self.head_dim
        heads = lambda t: None if t is None else t.reshape(B, -1, t.shape[-1] // D, D)
        o, ot = self.inner(heads(q), heads(k), heads(v), joint=[heads(qt), heads(kt), heads(vt)])
        return o.reshape(B, *grid, -1), (None if ot is None else ot.reshape(B, ot.shape[1], -1))


class SingleStreamBlock(nn.Module):
    def __init__(self, cfg: ModelConfig, last: bool = False):
        super().__init__()
        C, F = cfg.hidden, cfg.mlp_hidden
        self.last, self.shift, self.widths = last, cfg.adaln_shift, (C, C, C, F)
        self.linear1 = nn.Linear(C, 3 * C + F)
        self.act = nn.GELU(approximate="tanh")
        self.full_attn = JointAttentionCore(C, cfg.heads)
        self.linear2 = nn.Linear(C + F, C)
        self.adaln = AdaLN(cfg.time_width, vectors(1, cfg.adaln_shift), C)

    def split(self, h: torch.Tensor) -> list[torch.Tensor]:
        """q, k, v, MLP input of the fused output; its width read from the tensor (a tensor-parallel
        shard holds 1/N of each part)."""
        n = sum(self.widths) // h.shape[-1]
        return list(h.split([w // n for w in self.widths], dim=-1))

    def forward(self, x: torch.Tensor, y: torch.Tensor, temb: torch.Tensor):
        sh, sc, g = stream_mods(self.adaln, temb, self.shift)
        q, k, v, m = self.split(self.linear1(modulate(norm(x), sh, sc)))
        qt, kt, vt, mt = self.split(self.linear1(modulate(norm(y), sh, sc)))
        o, ot = self.full_attn(q, k, v, None if self.last else qt, kt, vt)
        x = x + per_sample(g, x) * self.linear2(torch.cat([o, self.act(m)], dim=-1))
        if self.last:
            return x, y
        return x, y + per_sample(g, y) * self.linear2(torch.cat([ot, self.act(mt)], dim=-1))
