"""USP (Ulysses x Ring) equals the oracle for every split of the SP group, and its bytes equal the formula.

The split is the method's default (largest Ulysses degree dividing the heads), so the head count
picks it: at sp 4, heads 4 -> 4x1, heads 6 -> 2x2, heads 3 -> 1x4 (ulysses x ring).
"""
import pytest

import oracle_tasks as ot
from dspbench.methods import available, get_method
from dspbench.methods.usp import degrees
from dspbench.models import ModelConfig, Shape
from fake_tasks import fake_step
from oracle_tasks import assert_matches_oracle

# heads (hidden 48: head_dim 16 for 6 and 3 heads) -> split at sp 4
SPLITS_4 = {"4x1": dict(hidden=64, heads=4), "2x2": dict(hidden=48, heads=6), "1x4": dict(hidden=48, heads=3)}


def test_is_builtin_and_degree_rule():
    assert "usp" in available() and get_method("usp").name == "usp"
    assert [degrees(h, 4) for h in (4, 6, 3)] == [(4, 1), (2, 2), (1, 4)]
    assert degrees(16, 64) == (16, 4) and degrees(1, 8) == (1, 8) and degrees(24, 16) == (8, 2)


@pytest.mark.gloo
@pytest.mark.parametrize("split", SPLITS_4)
@pytest.mark.parametrize("shape", [(1, 4, 16), (2, 8, 4)], ids=lambda s: "B%dT%dS%d" % s)
def test_usp_equals_oracle_world4(rank_pool, split, shape):
    res = rank_pool(4).run(ot.oracle_case, "usp", "stdit-tiny", shape, 4, **SPLITS_4[split])
    assert_matches_oracle(res, 4)


@pytest.mark.gloo
@pytest.mark.parametrize("heads", [4, 1], ids=["2x1", "1x2"])
@pytest.mark.parametrize("model", ["stdit-tiny", "stdit3-tiny"])
def test_usp_equals_oracle_world2(rank_pool, model, heads):
    assert_matches_oracle(rank_pool(2).run(ot.oracle_case, "usp", model, (2, 4, 16), 2, heads=heads), 2)


@pytest.mark.gloo
def test_usp_sharding_space_with_checkpointing(rank_pool):
    res = rank_pool(4).run(ot.oracle_case, "usp", "stdit3-tiny", (1, 2, 16), 4, shard="S", ckpt=True,
                           **SPLITS_4["2x2"])
    assert_matches_oracle(res, 4)


@pytest.mark.gloo
def test_usp_within_data_parallel_mesh(rank_pool):
    # world 4 as dp 2 x sp 2 (1x2 split): sub-groups are built inside each SP group.
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, "usp", "stdit-tiny", (1, 4, 16), 2, heads=1), 2)


@pytest.mark.gloo
def test_usp_rejects_non_divisible_sharded_dim(rank_pool):
    res = rank_pool(4).run(ot.oracle_case, "usp", "stdit-tiny", (1, 6, 16), 4, pad="never")
    assert "frames T=6 is not divisible by the SP degree 4" in res[0]["unsupported"]


def _cfg(layout, heads, ckpt=False):
    return ModelConfig(layout=layout, depth=1, hidden=64, heads=heads, caption_channels=8, text_len=4,
                       grad_ckpt=ckpt)


@pytest.mark.parametrize("n,heads", [(4, 4), (4, 2), (4, 1), (8, 8), (8, 2), (16, 4), (16, 1),
                                     (64, 64), (64, 8), (64, 2)])
@pytest.mark.parametrize("layout", ["stdit", "stdit3"])
def test_usp_ledger_equals_formula(layout, n, heads):
    measured, formula, _ = fake_step("usp", _cfg(layout, heads), Shape(1, 64, 64), n)
    assert measured == formula


@pytest.mark.parametrize("n,heads", [(8, 2), (64, 8)])
def test_usp_ledger_equals_formula_infer_and_checkpointed(n, heads):
    measured, formula, _ = fake_step("usp", _cfg("stdit", heads), Shape(2, 64, 128), n, mode="infer")
    assert measured == formula
    measured, formula, _ = fake_step("usp", _cfg("stdit3", heads, ckpt=True), Shape(1, 64, 64), n, shard="S")
    assert measured == formula


@pytest.mark.parametrize("n", [4, 16, 64])
def test_usp_volume_between_ulysses_and_ring(n):
    # Ulysses-only and ring-only ends reproduce those methods' bytes; a mixed split lies between.
    shape = Shape(1, 64, 64)
    total = lambda m, h: sum(fake_step(m, _cfg("stdit", h), shape, n, mode="infer")[0].values())
    assert total("usp", n) == total("ulysses", n)
    assert total("usp", 1) == total("ring", 1)
    assert total("ulysses", n) < total("usp", 2) < total("ring", 1)
