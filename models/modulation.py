"""adaLN modulation projected per block (`modulation = "linear"`: DiT, MMDiT, CogVideoX, Mochi).

PixArt and Wan project the timestep once (the trunk's `t_block`) and give each block a learned
table to add; DiT-style models give each block (and each stream of an MMDiT block) its own
SiLU + linear from the timestep embedding, which is a real share of their parameters (HunyuanVideo:
2.3B of 13B). Without shifts (Mochi) a block modulates with scales and gates only.
"""
from __future__ import annotations

import torch
from torch import nn

from dspbench.models.layers import modulate


class AdaLN(nn.Module):
    """temb (B, time_dim) -> `n` modulation vectors (B, width) of one stream: SiLU, then a linear."""

    def __init__(self, time_dim: int, n: int, width: int):
        super().__init__()
        self.n = n
        self.act = nn.SiLU()
        self.linear = nn.Linear(time_dim, n * width)

    def forward(self, temb: torch.Tensor) -> list[torch.Tensor]:
        return list(self.linear(self.act(temb)).unflatten(1, (self.n, -1)).unbind(1))


def stream_mods(adaln: AdaLN, temb: torch.Tensor, shift: bool, group: int = 3) -> list[torch.Tensor]:
    """The stream's vectors in groups of `group` (shift, scale, gate; a text stream's last block:
    shift, scale); without shifts each group lacks its shift, given here as zeros, so one block
    forward serves both: [sc, g, ...] -> [0, sc, g, ...]."""
    mods = adaln(temb)
    if shift:
        return mods
    out, k = [], group - 1
    for i in range(0, len(mods), k):
        out += [torch.zeros_like(mods[i])] + mods[i:i + k]
    return out


def vectors(groups: int, shift: bool, group: int = 3) -> int:
    """Modulation vectors of `groups` groups of `group` (without shifts one fewer each)."""
    return groups * (group if shift else group - 1)


class LinearFinalLayer(nn.Module):
    """The final layer with its modulation projected from the timestep (DiT's, HunyuanVideo's)."""

    def __init__(self, hidden: int, time_dim: int, patch_volume: int, out_channels: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.adaln = AdaLN(time_dim, 2, hidden)
        self.linear = nn.Linear(hidden, patch_volume * out_channels)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        shift, scale = self.adaln(temb)
        return self.linear(modulate(self.norm(x), shift, scale))
