"""What a patch-parallel VAE decode (methods/vae_patch.py) moves and computes per rank, analytically.

Read off the single-device decoder's layers on the meta device (as models/vae.py's decoder_flops):
- halo: before every spatial convolution a rank sends `pad` rows of its input to each neighbour it
  has (one at the group's ends, two inside), one `send_recv` event; an upsampler's convolution
  exchanges ceil(pad / 2) rows of its input before the 2x (half the width);
- keys and values: one all-gather of the middle attention's K and V (2C channels) per decode, each
  slab padded to the largest (ceil(H' / n) rows);
- the video: one all-gather of the decoded slabs, padded likewise (`gather_video`).
The halo adds no work: every rank computes exactly its own output rows. Its queries attend to the
whole frame's keys, which a decode of its slab alone would not count (`rank_flops`).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from functools import lru_cache

import torch

from dspbench.methods.comm.ledger import key, wire_bytes
from dspbench.methods.spec import Op
from dspbench.methods.vae_patch import HALO_TAG, KV_TAG, VIDEO_TAG, row_spans
from dspbench.models.vae import CausalConv3d, FrameAttention, Upsample, VAEConfig, VAEDecoder, decoder_flops, output_shape


@lru_cache(maxsize=64)
def sites(cfg: VAEConfig, T: int, H: int, W: int) -> tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]:
    """(elements of one side's halo per exchange, (C, T, W) of each attention's input), batch 1,
    in decode order."""
    halos, attns, hooks = [], [], []
    with torch.device("meta"):
        model, z = VAEDecoder(cfg), torch.empty(1, cfg.z_channels, T, H, W)
    up_convs = {id(m.conv) for m in model.modules() if isinstance(m, Upsample)}
    for m in model.modules():
        if isinstance(m, CausalConv3d) and m.pad[2]:
            hooks.append(m.register_forward_pre_hook(_halo_counter(halos, m.pad[2], id(m) in up_convs)))
        elif isinstance(m, FrameAttention):
            hooks.append(m.register_forward_pre_hook(lambda _, a: attns.append(tuple(a[0].shape[i] for i in (1, 2, 4)))))
    with torch.no_grad():
        model(z)
    for h in hooks:
        h.remove()
    return tuple(halos), tuple(attns)


def _halo_counter(halos: list, pad: int, upsampler: bool):
    """A pre-hook noting one side's halo of a convolution reading `pad` rows past its slab's edges:
    `pad` rows of its input (B, C, T, h, W); an upsampler's, ceil(pad / 2) rows of its input before
    the 2x, (B, C, T, h / 2, W / 2)."""
    rows, narrow = (-(-pad // 2), 2) if upsampler else (pad, 1)

    def hook(_, args):
        _, C, T, _, W = args[0].shape
        halos.append(rows * C * T * (W // narrow))
    return hook


def plan(cfg: VAEConfig, B: int, T: int, H: int, W: int, n: int, rank: int, dtype_bytes: int,
         video: bool = True) -> list[tuple[str, Op]]:
    """[(phase, Op)] of group rank `rank` decoding a (B, z, T, H', W') latent over n ranks (SP group
    ops, nccl-tests sizes), the video's gather included with `video`."""
    if n == 1:
        return []
    halos, attns = sites(cfg, T, H, W)
    neighbours = (rank > 0) + (rank < n - 1)
    ops = [Op(HALO_TAG, "send_recv", neighbours * e * B * dtype_bytes, c) for e, c in Counter(halos).items()]
    most = max(b - a for a, b in row_spans(H, n))
    ops += [Op(KV_TAG, "all_gather", n * most * w * 2 * c * t * B * dtype_bytes, 1) for c, t, w in attns]
    if video:
        frames, _, wide = output_shape(cfg, T, H, W)
        ops.append(Op(VIDEO_TAG, "all_gather", n * most * cfg.spatial_scale * wide * 3 * frames * B * dtype_bytes, 1))
    return [("fwd", o) for o in ops]


def comm_bytes(cfg: VAEConfig, B: int, T: int, H: int, W: int, n: int, rank: int, dtype_bytes: int,
               video: bool = True) -> dict[str, int]:
    """{'tag/op.fwd': wire bytes} group rank `rank` sends: what the ledger records of the decode."""
    out: dict[str, int] = defaultdict(int)
    for phase, o in plan(cfg, B, T, H, W, n, rank, dtype_bytes, video):
        out[key(o.op, phase, o.tag)] += o.count * wire_bytes(o.op, o.payload, n)
    return dict(out)


def rank_flops(cfg: VAEConfig, T: int, H: int, W: int, n: int, rank: int) -> int:
    """Forward FLOPs of group rank `rank`'s share (batch 1): its slab's decode, plus its queries
    against the other ranks' keys in each attention (4 C flops per query-key pair: QK^T and AV)."""
    a, b = row_spans(H, n)[rank]
    _, attns = sites(cfg, T, H, W)      # at the latent's resolution: the decoder's middle
    return decoder_flops(cfg, T, b - a, W) + sum(4 * c * t * (b - a) * w * (H - b + a) * w for c, t, w in attns)
