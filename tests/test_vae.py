"""The video VAE decoder (models/vae.py): its output size through a causal VAE (1 + 4(T-1) frames,
8x space), causality in time, the analytic FLOPs against a brute-force count, Wan 2.1's decoder size,
and tiled decoding's coverage and extra work."""
import pytest
import torch

from dspbench.models.vae import (SD_VAE, TINY_VAE, WAN21_VAE, VAEDecoder, decode_tiled, decoder_flops, output_shape,
                                 tile_spans, tiled_flops)


def test_output_size_of_a_causal_video_vae():
    assert output_shape(WAN21_VAE, 21, 60, 104) == (81, 480, 832)     # Wan 2.1 at 480p, 81 frames
    assert output_shape(SD_VAE, 16, 64, 64) == (16, 512, 512)          # a 2-D VAE keeps the frames
    torch.manual_seed(0)
    assert VAEDecoder(TINY_VAE)(torch.randn(1, 4, 3, 6, 5)).shape == (1, 3, 5, 12, 10)


def test_a_later_latent_frame_never_changes_earlier_video_frames():
    torch.manual_seed(0)
    d, z = VAEDecoder(TINY_VAE).eval(), torch.randn(1, 4, 3, 4, 4)
    z2 = z.clone()
    z2[:, :, 2] += 1.0
    with torch.no_grad():
        a, b = d(z), d(z2)
    assert torch.equal(a[:, :, :3], b[:, :, :3])        # frames of latents 0 and 1: 1 + 2
    assert not torch.equal(a[:, :, 3:], b[:, :, 3:])


def test_flops_equal_a_count_of_the_real_module():
    from torch.utils.flop_counter import FlopCounterMode
    d, z = VAEDecoder(TINY_VAE), torch.randn(1, 4, 3, 6, 5)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        d(z)
    assert decoder_flops(TINY_VAE, 3, 6, 5) == fc.get_total_flops() > 0


def test_wan_decoder_size_and_work():
    params = sum(p.numel() for p in VAEDecoder(WAN21_VAE).parameters())
    assert 70e6 < params < 76e6            # Wan 2.1's VAE: 127M with its encoder; the decoder ~73M
    f480 = decoder_flops(WAN21_VAE, 21, 60, 104)
    assert decoder_flops(WAN21_VAE, 21, 90, 160) / f480 == pytest.approx(14400 / 6240, rel=0.1)


def test_tiles_cover_the_latent_and_cost_their_overlap():
    spans = tile_spans(10, 4, 1)
    assert spans[0] == (0, 4) and spans[-1][1] == 10 and all(b - a == 4 for a, b in spans)
    assert all(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1))
    assert tiled_flops(TINY_VAE, 2, 8, 8, 4, 1) > decoder_flops(TINY_VAE, 2, 8, 8)
    torch.manual_seed(0)
    d, z = VAEDecoder(TINY_VAE).eval(), torch.randn(1, 4, 2, 8, 8)
    with torch.no_grad():
        whole, tiled = d(z), decode_tiled(d, z, 4, 1)
    assert tiled.shape == whole.shape and torch.isfinite(tiled).all()
    # a tile as large as the latent is the whole decode
    with torch.no_grad():
        assert torch.allclose(decode_tiled(d, z, 8, 0), whole, atol=1e-6)
