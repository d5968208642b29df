"""Building blocks of the spatial-temporal DiTs.

Seams that parallel methods attach to (never called by name from the model's own logic):
- `AxisAttention.inner`: core attention, q, k, v `(B, L, H, D)` -> `(B, L, H, D)`;
- `AxisAttention` itself (`spatial_attn` / `temporal_attn` in the blocks): attention over one
  activation dim, the others acting as batch;
- linears `qkv`, `proj`, `q`, `kv`, `fc1`, `fc2`: tensor-parallel plan keys;
- `SeqSeam`: identity modules where the token grid enters and leaves the block stack.
Every extent (frames, tokens, heads) is read from tensor shapes, so a shard is just a smaller tensor.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LocalAttention(nn.Module):
    """Softmax attention on q, k, v `(B, L, H, D)`; the swap point for Ulysses and Ring.

    `joint=(qt, kt, vt)` `(B, Ly, H, D)`: text tokens join the sequence (MMDiT joint attention);
    returns the token and the text outputs `(o, ot)`; qt None: text keys and values only, ot None.
    `kmask`: which of the L keys are real (padding, methods/padding.py): a bool (L,) tensor, or an
    object whose `keys(device)` gives it (None: all real); padded keys are left out.
    """

    def forward(self, q, k, v, joint=None, kmask=None):
        if kmask is not None:
            m = kmask if isinstance(kmask, torch.Tensor) else kmask.keys(k.device)
            if m is not None:
                k, v = k[:, m], v[:, m]
        if joint is not None:
            return joint_attend(sdpa, q, k, v, joint)
        return sdpa(q, k, v)


def sdpa(q, k, v):
    """Softmax attention on (B, L, H, D): SDPA wants (B, H, L, D); transposes are views, the kernel handles strides."""
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)


def joint_attend(attend, q, k, v, joint):
    """`attend` over the tokens and the text tokens concatenated on L; -> (tokens' out, text's out)."""
    L, (qt, kt, vt) = q.shape[1], joint
    q = q if qt is None else torch.cat([q, qt], dim=1)
    o = attend(q, torch.cat([k, kt], dim=1), torch.cat([v, vt], dim=1))
    return o[:, :L], (None if qt is None else o[:, L:])


class AxisAttention(nn.Module):
    """Self-attention over activation dim `axis` of `(B, d1, ..., dk, C)`; other dims are batch."""

    def __init__(self, hidden: int, heads: int, axis: int):
        super().__init__()
        self.axis = axis
        self.axes = (axis,)   # every activation dim it attends over (methods select seams by these)
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.inner = LocalAttention()
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x)                                   # (B, ..., L, ..., 3*H*D)
        qkv = qkv.movedim(self.axis, -2)                    # (B, ..., L, 3*H*D)
        lead = qkv.shape[:-2]
        L, D = qkv.shape[-2], self.head_dim
        qkv = qkv.reshape(-1, L, 3, qkv.shape[-1] // (3 * D), D)   # (B', L, 3, H, D)
        o = self.inner(*qkv.unbind(2))                      # (B', L, H, D)
        o = o.reshape(*lead, L, -1).movedim(-2, self.axis)  # back to (B, ..., L, ..., H*D)
        return self.proj(o)


class CrossAttention(nn.Module):
    """Tokens (any grid) attend to text tokens y `(B, Ly, C)`; token-wise in x, so local under any sharding."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.kv = nn.Linear(hidden, 2 * hidden)
        self.inner = LocalAttention()
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        B, D = x.shape[0], self.head_dim
        q = self.q(x)
        grid = q.shape[1:-1]
        q = q.reshape(B, -1, q.shape[-1] // D, D)           # (B, N_tok, H, D)
        kv = self.kv(y)
        kv = kv.reshape(B, kv.shape[1], 2, kv.shape[-1] // (2 * D), D)
        o = self.inner(q, *kv.unbind(2))                    # (B, N_tok, H, D)
        return self.proj(o.reshape(B, *grid, -1))


class Mlp(nn.Module):
    def __init__(self, hidden: int, mlp_hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden, mlp_hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(mlp_hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SeqSeam(nn.Identity):
    """Named point where the token grid enters/leaves the blocks: methods shard and gather here."""


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """adaLN: x * (1 + scale) + shift, with per-sample (B, C) parameters broadcast over the grid."""
    view = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
    return x * (1 + scale.view(view)) + shift.view(view)


def per_sample(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(B, C) -> (B, 1, ..., 1, C) to broadcast over `like`'s token grid."""
    return v.view((v.shape[0],) + (1,) * (like.dim() - 2) + (v.shape[-1],))


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden: int, freq_dim: int):
        super().__init__()
        self.freq_dim = freq_dim
        self.mlp = nn.Sequential(nn.Linear(freq_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.freq_dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
        args = t.float()[:, None] * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return self.mlp(emb.to(self.mlp[0].weight.dtype))


class CaptionEmbedder(nn.Module):
    """T5 features (B, Ly, caption_channels) -> (B, Ly, C)."""

    def __init__(self, caption_channels: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(caption_channels, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(hidden, hidden)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(y)))


class PatchEmbed3D(nn.Module):
    """Latents (B, Cin, T, H, W) -> tokens (B, T', S, C) with S = H' * W'."""

    def __init__(self, patch: tuple[int, int, int], in_channels: int, hidden: int):
        super().__init__()
        self.proj = nn.Conv3d(in_channels, hidden, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x)                                    # (B, C, T', H', W')
        return x.flatten(3).permute(0, 2, 3, 1)             # (B, T', S, C)


class FinalLayer(nn.Module):
    """adaLN-modulated projection of each token to its patch of output channels (token-wise)."""

    def __init__(self, hidden: int, patch_volume: int, out_channels: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.scale_shift_table = nn.Parameter(torch.randn(2, hidden) / hidden ** 0.5)
        self.linear = nn.Linear(hidden, patch_volume * out_channels)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        shift, scale = (self.scale_shift_table[None] + t[:, None]).unbind(1)
        return self.linear(modulate(self.norm(x), shift, scale))


def sincos_1d(n: int, dim: int) -> torch.Tensor:
    """(n, dim) fixed sine-cosine positional table."""
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim / 2))
    out = torch.arange(n, dtype=torch.float64)[:, None] * omega[None]
    return torch.cat([torch.sin(out), torch.cos(out)], dim=1).float()


def sincos_2d(h: int, w: int, dim: int) -> torch.Tensor:
    """(h*w, dim) table: half the channels encode the row, half the column."""
    rows = sincos_1d(h, dim // 2)[:, None].expand(h, w, dim // 2)
    cols = sincos_1d(w, dim // 2)[None].expand(h, w, dim // 2)
    return torch.cat([rows, cols], dim=-1).reshape(h * w, dim)
