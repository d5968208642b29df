"""Patch-parallel VAE decode over a process group (as xDiT's DistVAE / PatchVAE): the latent's rows
(H') split in slabs over the group's ranks, each rank decoding its slab of the video.

models/vae.py's decoder stays single-device; `parallelize(decoder, group)` swaps its seams in place:
- every spatial convolution (a CausalConv3d whose kernel spans more than one row) becomes a HaloConv:
  its zero padding along H replaced by the neighbours' edge rows (comm/p2p.exchange_halo), so each rank
  computes exactly its own output rows and nothing twice;
- an upsampler exchanges its halo before the nearest 2x, at half the width and as many rows as
  after it (each low-res row becomes two), so half the bytes of exchanging at the output resolution;
- the FrameAttention's `kv_seam` all-gathers K and V of the whole frame (queries stay local, so the
  attention's work divides too);
- nothing else communicates: the RMS norms are per position, 1x1 convolutions are per position, and
  time (the causal time convolutions) is whole on every rank.

Slabs are torch.tensor_split's (the first H' mod n ranks one row more); uneven slabs are all-gathered
padded to the largest (gloo's all-gather needs equal sizes) and the padding cut. The latent is whole
on every rank, as the DiT's inputs are; `gather_video` assembles the whole video from the slabs. The
bytes this moves are `plan` / `comm_bytes` (methods/vae_patch_plan.py), tested equal to the ledger.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from dspbench.methods.comm import layer as comm, p2p
from dspbench.models.vae import CausalConv3d, FrameAttention, Upsample, VAEDecoder, nearest2x

HALO_TAG, KV_TAG, VIDEO_TAG = "vae_halo", "vae_kv", "vae_video"


@dataclass
class Slabs:
    """The group a parallelized decoder runs over, and the latent rows [start, stop) of each of its
    ranks for the decode under way (set by `decode`: they follow the latent's height)."""
    group: comm.Group
    spans: list = field(default_factory=list)


def row_spans(H: int, n: int) -> list[tuple[int, int]]:
    """[start, stop) of each rank's rows, torch.tensor_split's way: the first H mod n one row more."""
    if H < n:
        raise ValueError(f"{H} latent rows cannot be split over {n} ranks: a patch-parallel decode needs a row each")
    base, extra = divmod(H, n)
    starts = [r * base + min(r, extra) for r in range(n + 1)]
    return list(zip(starts[:-1], starts[1:]))


def gather_rows(x: torch.Tensor, spans: list, group: comm.Group, tag: str) -> torch.Tensor:
    """The group's slabs of dim 3, (B, C, T, h_r, W) with rows `spans` per rank, as the whole
    (B, C, T, H, W): each padded to the largest, all-gathered, the padding cut."""
    most = max(b - a for a, b in spans)
    whole = comm.gather(F.pad(x, (0, 0, 0, most - x.shape[3])), 3, group, tag)   # (B, C, T, n * most, W)
    return torch.cat([whole[:, :, :, j * most: j * most + b - a] for j, (a, b) in enumerate(spans)], dim=3)


def conv_unpadded_rows(conv: CausalConv3d, x: torch.Tensor) -> torch.Tensor:
    """`conv` on rows that already carry their halo: its time and width padding only."""
    pw, _, _, _, pt, _ = conv.pad
    return F.conv3d(F.pad(x, (pw, pw, 0, 0, pt, 0)), conv.weight, conv.bias)


class HaloConv(nn.Module):
    def __init__(self, conv: CausalConv3d, slabs: Slabs):
        super().__init__()
        self.conv, self.slabs, self.rows = conv, slabs, conv.pad[2]   # rows the kernel reads past an edge

    def forward(self, x):
        # (B, C, T, h, W) -halo-> (B, C, T, h + 2 rows, W) -conv-> (B, C', T, h, W)
        return conv_unpadded_rows(self.conv, p2p.exchange_halo(x, 3, self.rows, self.slabs.group, HALO_TAG))


class HaloUpsample(nn.Module):
    def __init__(self, up: Upsample, slabs: Slabs):
        super().__init__()
        self.up, self.slabs = up, slabs
        self.rows = -(-up.conv.pad[2] // 2)                 # low-res rows whose 2x covers the conv's halo
        self.cut = 2 * self.rows - up.conv.pad[2]            # high-res rows of them the conv does not read

    def forward(self, x):
        x = p2p.exchange_halo(self.up.fold_time(x), 3, self.rows, self.slabs.group, HALO_TAG)  # (.., h + 2r, W)
        x = nearest2x(x)                                                                      # (.., 2h + 4r, 2W)
        return conv_unpadded_rows(self.up.conv, x[:, :, :, self.cut: x.shape[3] - self.cut])


class GatherKV(nn.Module):
    """FrameAttention's kv_seam: (B, 2C, T, h_r, W) -all-gather-> (B, 2C, T, H, W), the frame's keys."""

    def __init__(self, slabs: Slabs):
        super().__init__()
        self.slabs = slabs

    def forward(self, kv):
        return gather_rows(kv, scaled_spans(self.slabs, kv.shape[3]), self.slabs.group, KV_TAG)


def scaled_spans(slabs: Slabs, local_rows: int) -> list[tuple[int, int]]:
    """The ranks' row spans at the resolution where this rank's slab has `local_rows` rows."""
    a, b = slabs.spans[comm.rank(slabs.group)]
    s = local_rows // (b - a)
    return [(a * s, b * s) for a, b in slabs.spans]


def parallelize(decoder: VAEDecoder, group: comm.Group) -> VAEDecoder:
    """Swap the decoder's spatial seams in place (module docstring); its parameters stay its own."""
    decoder.slabs = Slabs(group)
    _swap_children(decoder, decoder.slabs)
    return decoder


def _swap_children(module: nn.Module, slabs: Slabs) -> None:
    for name, child in module.named_children():
        if isinstance(child, Upsample):              # its convolution exchanges at the lower resolution
            setattr(module, name, HaloUpsample(child, slabs))
        elif isinstance(child, CausalConv3d) and child.pad[2]:
            setattr(module, name, HaloConv(child, slabs))
        else:
            if isinstance(child, FrameAttention):
                child.kv_seam = GatherKV(slabs)
            _swap_children(child, slabs)


def decode(decoder: VAEDecoder, z: torch.Tensor) -> torch.Tensor:
    """This rank's slab of the video, (B, 3, F, h_r * s, W * s), from the whole latent (B, z, T, H', W')
    on every rank of the group `parallelize` gave the decoder."""
    slabs = decoder.slabs
    slabs.spans = row_spans(z.shape[3], comm.size(slabs.group))
    a, b = slabs.spans[comm.rank(slabs.group)]
    return decoder(z[:, :, :, a:b])


def gather_video(decoder: VAEDecoder, y: torch.Tensor) -> torch.Tensor:
    """The whole video (B, 3, F, H, W) on every rank from their slabs of the last `decode`."""
    return gather_rows(y, scaled_spans(decoder.slabs, y.shape[3]), decoder.slabs.group, VIDEO_TAG)
