"""A video VAE decoder: latents (B, z, T, H', W') -> video (B, 3, F, H, W), as the DiT's pipeline ends.

The structure of the causal 3-D VAEs of today's video DiTs (Wan 2.1's, and in kind CogVideoX's and
HunyuanVideo's): a causal 3x3x3 convolution in, a middle of two residual blocks around a spatial
self-attention, then stages of residual blocks, each but the last followed by an upsampler
(nearest 2x in H and W with a 3x3 convolution that halves the channels; in the first stages also 2x in
time through a causal (3, 1, 1) convolution to twice the channels, folded into frames), a norm, SiLU
and a causal convolution to RGB. "Causal" in time: a convolution sees only this and earlier frames
(left padding), so the first latent frame decodes to one frame and each later one to `time_scale`:
F = 1 + time_scale x (T - 1). Weights are random (the cost model and benchmarks need the shapes and
the work, not a picture); norms are Wan's RMS norm over channels at each position, which keeps the
decoder causal (a GroupNorm's statistics over time would let later frames change earlier ones).

`decoder_flops(cfg, T, H', W')` counts its multiply-adds analytically (tests hold it against torch's
FlopCounterMode); `decode_tiled` decodes overlapping spatial tiles one by one, as pipelines do to
bound memory, and costs the overlap's extra work (`tiled_flops`).
"""
from __future__ import annotations

import functools
from collections import Counter

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class VAEConfig:
    z_channels: int = 16
    base: int = 96                        # channels of the last stage (full resolution)
    mult: tuple = (1, 2, 4, 4)            # stage channel multipliers, full resolution first (Wan 2.1)
    res_blocks: int = 2                   # per stage, plus one (the decoder's convention)
    time_up: tuple = (True, True, False)  # which upsamplers (deepest first) also double time
    mid_attention: bool = True
    time_kernel: int = 3                  # 1: a per-frame (2-D) VAE, as Stable Diffusion's in OpenSora 1.0
    upsample_halves: bool = True          # Wan 2.1's upsamplers halve the channels; diffusers' decoders
                                          # (HunyuanVideo, CogVideoX) keep them, a stage's first block changes them

    @property
    def spatial_scale(self) -> int:
        return 2 ** (len(self.mult) - 1)

    @property
    def time_scale(self) -> int:
        return 2 ** sum(self.time_up)

    def stage_dims(self) -> list[int]:
        """Channels per stage, deepest first: [384, 384, 384, 192, 96]-like (Wan: the last upsampler halves)."""
        top = self.base * self.mult[-1]
        return [top] + [self.base * m for m in reversed(self.mult)]


WAN21_VAE = VAEConfig()                     # Wan 2.1: 4x8x8 compression, 16 latent channels
SD_VAE = VAEConfig(z_channels=4, base=128, time_up=(False, False, False), time_kernel=1,
                   mid_attention=True)      # Stable Diffusion's 2-D VAE frame by frame (OpenSora 1.0); its
# upsamplers keep their channels where these halve them: 44.9M decoder parameters here, 49.5M there
TINY_VAE = VAEConfig(z_channels=4, base=8, mult=(1, 2), res_blocks=1, time_up=(True,), mid_attention=True)


class ChannelRMSNorm(nn.Module):
    """RMS norm over the channels (dim 1) of each position, with a learned scale (Wan 2.1's RMS_norm)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.scale, self.eps = nn.Parameter(torch.ones(dim, 1, 1, 1)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=1, keepdim=True) + self.eps) * self.scale


class CausalConv3d(nn.Conv3d):
    """A 3-D convolution that pads time on the left only (this and earlier frames), space on both sides."""

    def __init__(self, cin: int, cout: int, kernel=(3, 3, 3)):
        kernel = tuple(kernel)
        super().__init__(cin, cout, kernel)
        kt, kh, kw = self.kernel_size
        self.pad = (kw // 2, kw // 2, kh // 2, kh // 2, kt - 1, 0)

    def forward(self, x):
        return super().forward(F.pad(x, self.pad))


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, kt: int = 3):
        super().__init__()
        self.norm1, self.conv1 = ChannelRMSNorm(cin), CausalConv3d(cin, cout, (kt, 3, 3))
        self.norm2, self.conv2 = ChannelRMSNorm(cout), CausalConv3d(cout, cout, (kt, 3, 3))
        self.skip = nn.Conv3d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        return self.skip(x) + self.conv2(F.silu(self.norm2(h)))


class FrameAttention(nn.Module):
    """Single-head self-attention over each frame's H x W positions (the middle block's)."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm, self.qkv, self.proj = ChannelRMSNorm(dim), nn.Conv3d(dim, 3 * dim, 1), nn.Conv3d(dim, dim, 1)
        self.kv_seam = nn.Identity()   # K and V of the frame: a patch-parallel decode gathers its rows here

    def forward(self, x):
        C = x.shape[1]
        q, kv = self.qkv(self.norm(x)).split([C, 2 * C], dim=1)   # (B, C, T, H, W), (B, 2C, T, H, W)
        k, v = self.kv_seam(kv).chunk(2, dim=1)                     # keys may cover more rows than q
        o = F.scaled_dot_product_attention(_positions(q), _positions(k), _positions(v))
        B, _, T, H, W = q.shape
        return x + self.proj(o.reshape(B, T, H, W, C).permute(0, 4, 1, 2, 3))


def _positions(t: torch.Tensor) -> torch.Tensor:
    """(B, C, T, H, W) -> (B*T, 1, H*W, C): one single-head sequence per frame."""
    B, C, T, H, W = t.shape
    return t.permute(0, 2, 3, 4, 1).reshape(B * T, 1, H * W, C)


class Upsample(nn.Module):
    """2x nearest in H, W then a 3x3 convolution to `cout` channels (per frame); optionally 2x in time first
    (a causal (3, 1, 1) convolution to twice the channels folded into frames, the first frame kept single)."""

    def __init__(self, dim: int, cout: int, time: bool):
        super().__init__()
        self.time_conv = CausalConv3d(dim, 2 * dim, (3, 1, 1)) if time else None
        self.conv = CausalConv3d(dim, cout, (1, 3, 3))   # a time kernel of 1: per frame, padded in space only

    def forward(self, x):
        return self.conv(nearest2x(self.fold_time(x)))

    def fold_time(self, x):
        if self.time_conv is None:
            return x
        B, C, T, H, W = x.shape
        x = self.time_conv(x).reshape(B, 2, C, T, H, W).permute(0, 2, 3, 1, 4, 5).reshape(B, C, 2 * T, H, W)
        return x[:, :, 1:]                       # causal: the first latent frame decodes to one frame


def nearest2x(x: torch.Tensor) -> torch.Tensor:
    """(B, C, T, H, W) -> (B, C, T, 2H, 2W), each position repeated (per frame)."""
    B, C, T, H, W = x.shape
    return F.interpolate(x.reshape(B, C * T, H, W), scale_factor=2, mode="nearest").reshape(B, C, T, 2 * H, 2 * W)


class VAEDecoder(nn.Module):
    def __init__(self, cfg: VAEConfig = WAN21_VAE):
        super().__init__()
        dims = cfg.stage_dims()
        self.cfg = cfg
        kt = cfg.time_kernel
        self.conv_in = CausalConv3d(cfg.z_channels, dims[0], (kt, 3, 3))
        mid = ([ResBlock(dims[0], dims[0], kt)] + ([FrameAttention(dims[0])] if cfg.mid_attention else [])
               + [ResBlock(dims[0], dims[0], kt)])
        self.mid = nn.Sequential(*mid)
        stages, cin = [], dims[0]
        for i, cout in enumerate(dims[1:]):
            blocks = [ResBlock(cin if j == 0 else cout, cout, kt) for j in range(cfg.res_blocks + 1)]
            if i < len(dims) - 2:                 # an upsampler after every stage but the last
                cin = cout // 2 if cfg.upsample_halves else cout
                blocks.append(Upsample(cout, cin, cfg.time_up[i] if i < len(cfg.time_up) else False))
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.norm_out, self.conv_out = ChannelRMSNorm(dims[-1]), CausalConv3d(dims[-1], 3, (kt, 3, 3))

    def forward(self, z):
        return self.conv_out(F.silu(self.norm_out(self.stages(self.mid(self.conv_in(z))))))


def output_shape(cfg: VAEConfig, T: int, H: int, W: int) -> tuple[int, int, int]:
    """(frames, height, width) decoded from T x H' x W' latents."""
    return 1 + cfg.time_scale * (T - 1), H * cfg.spatial_scale, W * cfg.spatial_scale


@functools.lru_cache(maxsize=32)
def decoder_params(cfg: VAEConfig) -> int:
    """Parameters of the decoder (counted on the meta device: nothing is allocated)."""
    with torch.device("meta"):
        return sum(p.numel() for p in VAEDecoder(cfg).parameters())


@functools.lru_cache(maxsize=256)
def decoder_flops(cfg: VAEConfig, T: int, H: int, W: int) -> int:
    """Forward FLOPs (multiply-add = 2) of decoding one T x H' x W' latent, by walking the layers'
    output sizes with torch's shape rules on the meta device (exact for every convolution, linear and
    attention; norms and activations are not counted, as in MFU conventions)."""
    from torch.utils.flop_counter import FlopCounterMode
    with torch.device("meta"):
        model = VAEDecoder(cfg)
        z = torch.empty(1, cfg.z_channels, T, H, W)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(z)
    return int(counter.get_total_flops())


def tile_spans(n: int, tile: int, overlap: int) -> list[tuple[int, int]]:
    """[start, stop) of tiles of `tile` latent rows with `overlap` rows shared, covering n."""
    if tile >= n:
        return [(0, n)]
    step, spans, start = tile - overlap, [], 0
    while True:
        stop = min(start + tile, n)
        spans.append((stop - tile, stop))
        if stop == n:
            return spans
        start += step


def decode_tiled(decoder: VAEDecoder, z: torch.Tensor, tile: int, overlap: int) -> torch.Tensor:
    """Decode overlapping H' x W' tiles one at a time (peak memory of one tile) and blend the overlaps
    linearly, as video pipelines' tiled VAE decoding does."""
    cfg, (B, _, T, H, W) = decoder.cfg, z.shape
    s = cfg.spatial_scale
    frames = 1 + cfg.time_scale * (T - 1)
    out = torch.zeros(B, 3, frames, H * s, W * s, dtype=z.dtype, device=z.device)
    weight = torch.zeros(1, 1, 1, H * s, W * s, dtype=z.dtype, device=z.device)
    for h0, h1 in tile_spans(H, tile, overlap):
        for w0, w1 in tile_spans(W, tile, overlap):
            piece = decoder(z[:, :, :, h0:h1, w0:w1])
            ramp = _ramp(h1 - h0, overlap, s, z).view(1, 1, 1, -1, 1) * _ramp(w1 - w0, overlap, s, z).view(1, 1, 1, 1, -1)
            out[:, :, :, h0 * s:h1 * s, w0 * s:w1 * s] += piece * ramp
            weight[:, :, :, h0 * s:h1 * s, w0 * s:w1 * s] += ramp
    return out / weight


def _ramp(n: int, overlap: int, s: int, like: torch.Tensor) -> torch.Tensor:
    """Blend weights along one tile side: rising over the overlap at both ends, 1 inside."""
    r = torch.ones(n * s, dtype=like.dtype, device=like.device)
    k = overlap * s
    if k:
        edge = torch.arange(1, k + 1, dtype=like.dtype, device=like.device) / (k + 1)
        r[:k], r[-k:] = torch.minimum(r[:k], edge), torch.minimum(r[-k:], edge.flip(0))
    return r


def tiled_flops(cfg: VAEConfig, T: int, H: int, W: int, tile: int, overlap: int) -> int:
    """FLOPs of decode_tiled: every tile decoded whole (the overlaps twice)."""
    return sum(decoder_flops(cfg, T, h1 - h0, w1 - w0)
               for h0, h1 in tile_spans(H, tile, overlap) for w0, w1 in tile_spans(W, tile, overlap))


@dataclass(frozen=True)
class Tiling:
    """A pipeline's tiled decode in latent units, as diffusers' tiled decoders walk it: along each dim
    (frames, rows, columns) windows start every `stride` and span `tile` (the last ones cut at the
    edge); a dim is tiled only when the latents exceed its tile (0: never tiled). Each window is
    decoded on its own, so the overlaps are decoded twice. `extra_frames`: each temporal window is
    that many latent frames longer (HunyuanVideo's causal decoder re-decodes one frame of the window
    before it and drops its output). A decoder that carries a causal cache from one frame batch to the
    next (CogVideoX, Wan) recomputes nothing along time: its frames are not tiled here."""
    tile: tuple = (0, 32, 32)
    stride: tuple = (0, 24, 24)
    extra_frames: int = 0
    source: str = ("dspbench's default tiling: spatial tiles of 32 latent rows and columns at stride 24 "
                   "(diffusers' 256-pixel tiles at 192 through an 8x VAE), frames not tiled")


def _windows(n: int, tile: int, stride: int, extra: int = 0) -> list[tuple[int, int]]:
    return [(i, min(i + tile + extra, n)) for i in range(0, n, stride)]


def tile_shapes(T: int, H: int, W: int, tiling: Tiling) -> list[tuple[int, int, int]]:
    """(frames, rows, columns) of every decoder call of a tiled decode of T x H' x W' latents."""
    (tt, th, tw), (st, sh, sw) = tiling.tile, tiling.stride
    times = _windows(T, tt, st, tiling.extra_frames) if tt and T > tt else [(0, T)]
    spatial = (th and H > th) or (tw and W > tw)      # diffusers tiles both spatial dims or neither
    rows = _windows(H, th or H, sh or H) if spatial else [(0, H)]
    cols = _windows(W, tw or W, sw or W) if spatial else [(0, W)]
    return [(t1 - t0, h1 - h0, w1 - w0) for t0, t1 in times for h0, h1 in rows for w0, w1 in cols]


def tiling_flops(cfg: VAEConfig, T: int, H: int, W: int, tiling: Tiling) -> int:
    """FLOPs of a tiled decode: every window decoded whole."""
    return sum(n * decoder_flops(cfg, *shape) for shape, n in Counter(tile_shapes(T, H, W, tiling)).items())

