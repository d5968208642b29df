"""Rank-side tasks of the patch-parallel VAE tests: every rank decodes the same latent on one device
(the oracle) and then its slab over the group, under the ledger and a FLOP counter."""
from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from dspbench.methods import build_dims
from dspbench.methods import vae_patch as vp
from dspbench.methods.comm import layer as comm, p2p
from dspbench.methods.comm.ledger import Ledger
from dspbench.models.vae import FrameAttention, VAEConfig, VAEDecoder

# Two upsamplers (one also in time), the middle attention, a residual block with a 1x1 skip: every
# kind of seam, in a decode of a second or less on one core.
SMALL_VAE = VAEConfig(z_channels=4, base=8, mult=(1, 2, 2), res_blocks=1, time_up=(True, False))
_GROUPS: dict = {}


def sp_group(sp: int):
    # new_group is collective: build each mesh once per pool rank and reuse it across tests.
    if sp == comm.world_size():
        return None
    if sp not in _GROUPS:
        _GROUPS[sp] = build_dims(sp).sp_group
    return _GROUPS[sp]


def _no_halo(x, dim, rows, group, tag):
    edge = list(x.shape)
    edge[dim] = rows
    return torch.cat([x.new_zeros(edge), x, x.new_zeros(edge)], dim)


def _break(decoder, skip: str | None):
    """The bug a test must catch: a halo never exchanged ("halo": zeros in its place, the undo
    returned) or keys never gathered ("kv": each rank attends over its own rows)."""
    if skip == "kv":
        for m in decoder.modules():
            if isinstance(m, FrameAttention):
                m.kv_seam = torch.nn.Identity()
    if skip != "halo":
        return lambda: None
    real, p2p.exchange_halo = p2p.exchange_halo, _no_halo
    return lambda: setattr(p2p, "exchange_halo", real)


def patch_case(latent: tuple, sp: int, cfg: VAEConfig = SMALL_VAE, skip: str | None = None) -> dict:
    """Decode a (B, T, H', W') latent whole and over an SP group of `sp` ranks; `skip` see _break."""
    B, T, H, W = latent
    torch.manual_seed(0)
    decoder, z = VAEDecoder(cfg).eval(), torch.randn(B, cfg.z_channels, T, H, W)
    with torch.no_grad():
        whole = decoder(z)
    group = sp_group(sp)
    undo = _break(vp.parallelize(decoder, group), skip)
    try:
        with torch.no_grad(), Ledger() as led, FlopCounterMode(display=False) as flops:
            slab = vp.decode(decoder, z)
        with torch.no_grad(), Ledger() as led_video:
            video = vp.gather_video(decoder, slab)
    finally:
        undo()
    a, b = vp.row_spans(H, sp)[comm.rank(group)]
    s = cfg.spatial_scale
    return {"rank": comm.rank(group), "slab_err": (slab - whole[:, :, :, a * s:b * s]).abs().max().item(),
            "video_err": (video - whole).abs().max().item(), "scale": whole.abs().max().item(),
            "slab_rows": slab.shape[3], "ledger": {**led.totals(), **led_video.totals()},
            "flops": flops.get_total_flops()}
