"""Every method equals the single-device model: output, input gradient, parameter gradients (fp32).

Tolerance: fp32 with reordered sums (ring's log-sum-exp merge, tensor-parallel partial sums) is
accurate to a few ulps of the largest value; 2e-6 relative to that scale leaves ~10x headroom
over what we observe (~3e-7) while still failing on any real indexing or scaling error.
"""
import pytest

import oracle_tasks as ot
from oracle_tasks import assert_matches_oracle

pytestmark = pytest.mark.gloo

METHODS = ["dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm", "allgather_kv"]
MODELS = ["stdit-tiny", "stdit3-tiny"]
SHAPES = [(1, 4, 16), (2, 4, 16), (2, 8, 4)]     # B = 1, B > 1, T != S (T > S)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B%dT%dS%d" % s)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("world", [2, 4])
def test_method_equals_oracle(rank_pool, world, method, model, shape):
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, method, model, shape, world), world)


@pytest.mark.parametrize("method", ["dsp", "ring", "ulysses", "ulysses_all", "allgather_kv", "megatron_lm"])
def test_activation_checkpointing_stays_exact(rank_pool, method):
    # Recompute re-runs the blocks' communication in the backward: the formula counts it too.
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, method, "stdit-tiny", (1, 4, 16), 4, ckpt=True), 4)


@pytest.mark.parametrize("method", ["ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm", "allgather_kv"])
def test_embedded_methods_can_shard_space_instead(rank_pool, method):
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, method, "stdit3-tiny", (1, 2, 16), 4, shard="S"), 4)


def test_sp_within_data_parallel_mesh(rank_pool):
    # world 4 as dp 2 x sp 2: each SP group of consecutive ranks reproduces the oracle on its own.
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, "dsp", "stdit-tiny", (2, 4, 16), 2), 2)


@pytest.mark.parametrize("method", ["dsp", "ring", "allgather_kv"])
def test_heads_not_divisible_work_for_dsp_and_ring(rank_pool, method):
    res = rank_pool(4).run(ot.oracle_case, method, "stdit-tiny", (1, 4, 16), 4, hidden=48, heads=6)
    assert_matches_oracle(res, 4)


@pytest.mark.parametrize("method", ["ulysses", "ulysses_all", "megatron_sp"])
def test_heads_not_divisible_rejected_for_head_splitting_methods(rank_pool, method):
    res = rank_pool(4).run(ot.oracle_case, method, "stdit-tiny", (1, 4, 16), 4, hidden=48, heads=6)
    assert "heads=6 is not divisible by the SP degree 4" in res[0]["unsupported"]


@pytest.mark.parametrize("method", METHODS)
def test_frames_not_divisible_rejected_cleanly(rank_pool, method):
    # --pad never keeps the refusal, word for word (auto pads: tests/test_padding.py)
    res = rank_pool(4).run(ot.oracle_case, method, "stdit-tiny", (1, 6, 16), 4, pad="never")
    assert "frames T=6 is not divisible by the SP degree 4" in res[0]["unsupported"]


def test_dsp_rejects_spatial_not_divisible(rank_pool):
    res = rank_pool(4).run(ot.oracle_case, "dsp", "stdit-tiny", (1, 4, 6), 4, pad="never")
    assert "spatial tokens S=6 is not divisible by the SP degree 4" in res[0]["unsupported"]


@pytest.mark.parametrize("method", ["dsp", "ulysses", "ulysses_all", "usp"])
@pytest.mark.parametrize("world", [2, 4])
def test_list_style_all_to_all_stays_exact(rank_pool, world, method):
    # --a2a list: the reference code's transfer; the same bytes, so ledger == formula still holds.
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, method, "stdit-tiny", (2, 4, 16), world,
                                               a2a="list"), world)
