"""DeepSpeed-Ulysses cross-check: DeepSpeed's DistributedAttention equals our Ulysses, and the
`ulysses_deepspeed` method passes the same oracle and ledger == formula checks as our methods.

DeepSpeed is looked up with find_spec, not imported: the pytest process forks the rank pool and
must not pay for (or be changed by) the import; the ranks import it lazily.
"""
import importlib.util

import pytest
import torch

import deepspeed_tasks as dt
import oracle_tasks as ot
from oracle_tasks import assert_matches_oracle

pytestmark = [
    pytest.mark.deepspeed,
    pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                       reason="deepspeed is not installed (pip install 'dspbench[deepspeed]')"),
]

TIGHT = 1e-6   # fp32, the same local attention on the same gathered tensors: equal up to a few ulps


@pytest.mark.gloo
@pytest.mark.parametrize("gather", [1, 0], ids=["sequence", "batch"])   # batch: ulysses_all's other attention
@pytest.mark.parametrize("world", [2, 4])
def test_distributed_attention_equals_our_ulysses(rank_pool, world, gather):
    res = rank_pool(world).run(dt.attention_case, (8, 8, 4, 8), gather=gather)
    for r in res:
        for pair in ("raw_vs_ours", "method_vs_ours", "ours_vs_ref"):
            assert r[pair]["out"] <= TIGHT and r[pair]["grad"] <= TIGHT, (pair, r[pair])
        assert r["bit_exact"]    # DeepSpeed's all-to-alls and ours move the same bytes to the same places
        # Same all-to-alls: 4 forward, 4 backward, each one shard (8 x 8 / N x 4 x 8) of fp32.
        shard = 8 * (8 // world) * 4 * 8 * 4
        expected = sorted([("fwd", "all_to_all", world, shard)] * 4 + [("bwd", "all_to_all", world, shard)] * 4)
        assert r["events"]["ours"] == expected, r["events"]["ours"]
        assert r["events"]["raw"] == expected, r["events"]["raw"]
        assert r["events"]["method"] == expected, r["events"]["method"]
        assert r["raw_tags"] == ["deepspeed"]        # the innermost recorder alone recorded them
        assert r["restored"]
        # The method's wrapper tags DeepSpeed's calls as ours: q, k, v and the output, each direction.
        assert r["counts"]["method"] == r["counts"]["ours"] == {
            "ulysses_qkv/all_to_all.fwd": 3, "ulysses_out/all_to_all.fwd": 1,
            "ulysses_qkv/all_to_all.bwd": 3, "ulysses_out/all_to_all.bwd": 1}
        assert r["totals"]["method"] == r["totals"]["ours"]


@pytest.mark.gloo
@pytest.mark.parametrize("model", ["stdit-tiny", "stdit3-tiny"])
@pytest.mark.parametrize("world", [2, 4])
def test_ulysses_deepspeed_equals_oracle(rank_pool, world, model):
    res = rank_pool(world).run(ot.oracle_case, "ulysses_deepspeed", model, (2, 4, 16), world)
    assert_matches_oracle(res, world)


@pytest.mark.gloo
def test_ulysses_deepspeed_tags_survive_checkpointing_and_spatial_shard(rank_pool):
    # Recompute re-runs DeepSpeed's forward all-to-alls inside the backward: still tagged q, k, v / out.
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, "ulysses_deepspeed", "stdit-tiny", (1, 4, 16), 4,
                                           ckpt=True), 4)
    assert_matches_oracle(rank_pool(2).run(ot.oracle_case, "ulysses_deepspeed", "stdit3-tiny", (1, 2, 16), 2,
                                           shard="S"), 2)


def test_check_gives_clear_reasons():
    from dspbench.facts.build import unsupported_reason
    from dspbench.methods import Dims, get_method
    from dspbench.records.config import RunConfig
    from dspbench.models import Shape, get_config
    spec = get_method("ulysses_deepspeed")
    ok = get_config("stdit-tiny")
    assert spec.check(ok, Shape(1, 4, 16), Dims(sp=4)) is None
    reason = spec.check(get_config("stdit-tiny", hidden=48, heads=6), Shape(1, 4, 16), Dims(sp=4))
    assert "heads=6 is not divisible by the SP degree 4" in reason and "ulysses_deepspeed" in reason
    assert "frames T=6 is not divisible by the SP degree 4" in spec.check(ok, Shape(1, 6, 16), Dims(sp=4))
    # DeepSpeed is the method's `requires`: a target whose declared stack lacks it cannot run it
    assert spec.requires == ("deepspeed",)
    cfg = RunConfig(method="ulysses_deepspeed", model="stdit-tiny", frames=4, spatial=16, gpus=4, sp=4)
    assert "ulysses_deepspeed needs deepspeed" in unsupported_reason(cfg, stack=())
    assert unsupported_reason(cfg, stack=("deepspeed",)) is None
    assert spec.comm_bytes(ok, Shape(2, 4, 16), Dims(sp=4)) == \
        get_method("ulysses").comm_bytes(ok, Shape(2, 4, 16), Dims(sp=4))


@pytest.mark.gloo
def test_heads_not_divisible_rejected_before_deepspeed_runs(rank_pool):
    res = rank_pool(4).run(ot.oracle_case, "ulysses_deepspeed", "stdit-tiny", (1, 4, 16), 4, hidden=48, heads=6)
    assert "heads=6 is not divisible by the SP degree 4" in res[0]["unsupported"]
