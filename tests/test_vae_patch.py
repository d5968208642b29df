"""Patch-parallel VAE decode (methods/vae_patch.py) on real gloo ranks: each rank's slab of the video,
and the whole video gathered, equal one device's decode of the same latent (fp32); the ledger equals
the bytes formula (methods/vae_patch_plan.py) rank by rank; a rank's FLOPs equal `rank_flops`; and
without the halo or the keys' gather the decode is wrong, so the oracle can tell."""
import pytest

import vae_patch_tasks as vt
from dspbench.methods.vae_patch import HALO_TAG, row_spans
from dspbench.methods.vae_patch_plan import comm_bytes, rank_flops, sites

# fp32, outputs of order 1: the same sums as the whole decode's, but a convolution over a slab may
# block them differently from one over the whole frame (observed up to 1.2e-6).
ATOL = 1e-5
# (world, (B, T, H', W')): H' divisible by the world, and not (5 over 2, 6 and 5 over 4), batch 2
CASES = [(2, (1, 3, 6, 4)), (2, (1, 3, 5, 4)), (4, (1, 3, 8, 4)), (4, (1, 3, 6, 5)), (4, (2, 2, 5, 3))]
HALO = f"{HALO_TAG}/send_recv.fwd"


@pytest.mark.gloo
@pytest.mark.parametrize("world, latent", CASES)
def test_patch_parallel_decode_equals_one_device(rank_pool, world, latent):
    res = rank_pool(world).run(vt.patch_case, latent, world)
    s = vt.SMALL_VAE.spatial_scale
    assert [r["slab_rows"] for r in res] == [(b - a) * s for a, b in row_spans(latent[2], world)]
    for r in res:
        assert r["slab_err"] <= ATOL and r["video_err"] <= ATOL, r


@pytest.mark.gloo
@pytest.mark.parametrize("world, latent", CASES)
def test_ledger_equals_the_formula_rank_by_rank(rank_pool, world, latent):
    B, T, H, W = latent
    res = rank_pool(world).run(vt.patch_case, latent, world)
    for r in res:
        assert r["ledger"] == comm_bytes(vt.SMALL_VAE, B, T, H, W, world, r["rank"], 4), r["rank"]
    assert res[-1]["ledger"][HALO] == res[0]["ledger"][HALO] > 0      # the two ends: one neighbour each
    if world > 2:                                                       # inside: two
        assert res[1]["ledger"][HALO] == 2 * res[0]["ledger"][HALO]


@pytest.mark.gloo
@pytest.mark.parametrize("world, latent", CASES[1::2])
def test_a_ranks_flops_are_its_slab_and_its_queries_against_every_key(rank_pool, world, latent):
    B, T, H, W = latent
    res = rank_pool(world).run(vt.patch_case, latent, world)
    assert [r["flops"] for r in res] == [B * rank_flops(vt.SMALL_VAE, T, H, W, world, r["rank"]) for r in res]
    assert res[0]["flops"] > res[-1]["flops"]          # uneven: the first ranks hold one row more


@pytest.mark.gloo
def test_the_decode_runs_over_an_sp_group_of_a_larger_world(rank_pool):
    """World 4 as 2 SP groups of 2: neighbours are group ranks, mapped to their world ranks."""
    res = rank_pool(4).run(vt.patch_case, (1, 3, 5, 4), 2)
    assert [r["rank"] for r in res] == [0, 1, 0, 1]
    for r in res:
        assert r["slab_err"] <= ATOL and r["video_err"] <= ATOL, r
        assert r["ledger"] == comm_bytes(vt.SMALL_VAE, 1, 3, 5, 4, 2, r["rank"], 4)


@pytest.mark.gloo
@pytest.mark.parametrize("skip", ["halo", "kv"])
def test_without_the_halo_or_the_keys_the_decode_is_wrong(rank_pool, skip):
    res = rank_pool(2).run(vt.patch_case, (1, 3, 6, 4), 2, skip=skip)
    assert max(r["slab_err"] for r in res) > 1e-3


def test_slabs_split_rows_as_tensor_split_and_need_a_row_each():
    assert row_spans(6, 4) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    assert row_spans(8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    with pytest.raises(ValueError, match="3 latent rows cannot be split over 4 ranks"):
        row_spans(3, 4)
    assert comm_bytes(vt.SMALL_VAE, 1, 3, 6, 4, 1, 0, 4) == {}


def test_an_upsampler_exchanges_before_its_2x():
    """The halo of the upsampler's convolution travels at the resolution below it: half the width of
    the convolution's input and the same rows (one low-res row becomes the two it reads)."""
    halos, attns = sites(vt.SMALL_VAE, 3, 6, 4)
    C0, C1, C2 = vt.SMALL_VAE.stage_dims()[:3]
    assert attns == ((C0, 3, 4),)
    # conv_in (z, 3 frames, W' 4), 4 middle convs, stage 0's 4 convs, then its upsampler after the
    # time 2x: 5 frames, still width 4 (not the 8 its convolution reads)
    assert halos[:10] == (4 * 3 * 4,) + (C0 * 3 * 4,) * 8 + (C1 * 5 * 4,)
