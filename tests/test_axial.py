"""axial3d: the model contract (FLOPs, shapes, dims) and every method on it, exact and byte-exact.

The token grid is (B, T, H', W', C) with (H', W') = Shape.token_hw: S = 16 -> 4 x 4, 32 -> 4 x 8,
12 -> 3 x 4, 8 -> 2 x 4. DSP shards T and switches to H, or to W where sp does not divide H.
"""
import pytest
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import oracle_tasks as ot
from dspbench.methods import Dims, get_method
from dspbench.methods.common import attentions
from dspbench.models import H_DIM, T_DIM, W_DIM, ModelConfig, Shape, build_model, get_config, make_inputs
from dspbench.models.params import flops_per_sample
from fake_tasks import fake_step
from oracle_tasks import assert_matches_oracle

METHODS = ["dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm", "usp"]


# ---------------------------------------------------------------- the model
@pytest.mark.parametrize("shape", [Shape(1, 4, 16), Shape(2, 3, 12)])
def test_analytic_flops_equal_counted_flops(shape):
    cfg = get_config("axial3d-tiny")
    x, t, y, _ = make_inputs(cfg, shape)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        build_model(cfg)(x, t, y)
    assert fc.get_total_flops() == shape.batch * flops_per_sample(cfg, shape)


def test_grid_dims_and_attention_axes():
    cfg = get_config("axial3d-tiny")
    assert cfg.seq_dims == {"T": T_DIM, "H": H_DIM, "W": W_DIM}
    assert cfg.seq_extents(Shape(1, 4, 32)) == {"T": 4, "H": 4, "W": 8}
    model = build_model(cfg)
    for axis in (T_DIM, H_DIM, W_DIM):
        assert len(attentions(model, axis)) == cfg.depth
    seen = []
    model.blocks[0].width_attn.register_forward_hook(lambda m, a, o: seen.append(o.shape))
    x, t, y, target = make_inputs(cfg, Shape(2, 3, 12))
    assert model(x, t, y).shape == target.shape
    assert seen == [(2, 3, 3, 4, cfg.hidden)]    # (B, T, H', W', C)


def test_dsp_switch_target_and_rejection():
    cfg, dsp = get_config("axial3d-tiny"), get_method("dsp")
    assert dsp.check(cfg, Shape(1, 4, 8), Dims(sp=4)) is None                    # H=2: switches to W=4
    reason = dsp.check(cfg, Shape(1, 4, 6), Dims(sp=4))                          # H=2, W=3
    assert "token rows H=2" in reason and "token columns W=3" in reason
    reason = get_method("ring").check(cfg, Shape(1, 4, 16), Dims(sp=2, shard="S"))
    assert "shard=S is not a sequence dim of axial3d" in reason


def test_oracle_slice_of_a_large_problem_stays_shardable():
    from dspbench.run.oracle import check_shape
    cfg, shape = check_shape(get_config("axial3d-xl"), Shape(1, 64, 4096), 8)
    assert shape == Shape(1, 16, 64) and cfg.seq_extents(shape) == {"T": 16, "H": 8, "W": 8}
    for shard in ("T", "H", "W"):
        assert get_method("ring").check(cfg, shape, Dims(sp=8, shard=shard)) is None
    assert get_method("dsp").check(cfg, shape, Dims(sp=8)) is None


# ---------------------------------------------------------------- oracle (gloo ranks)
@pytest.mark.gloo
@pytest.mark.parametrize("shape", [(1, 4, 16), (2, 4, 32)], ids=lambda s: "B%dT%dS%d" % s)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("world", [2, 4])
def test_method_equals_oracle_on_axial3d(rank_pool, world, method, shape):
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, method, "axial3d-tiny", shape, world), world)


@pytest.mark.gloo
@pytest.mark.parametrize("world,shape", [(2, (1, 4, 12)), (4, (1, 4, 8))], ids=["w2H3W4", "w4H2W4"])
def test_dsp_switches_to_width_when_height_not_divisible(rank_pool, world, shape):
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, "dsp", "axial3d-tiny", shape, world), world)


@pytest.mark.gloo
@pytest.mark.parametrize("shard", ["H", "W"])
@pytest.mark.parametrize("method", ["ulysses", "ring", "megatron_sp", "usp"])
def test_embedded_methods_shard_height_or_width(rank_pool, method, shard):
    res = rank_pool(4).run(ot.oracle_case, method, "axial3d-tiny", (1, 2, 64), 4, shard=shard)   # H = W = 8
    assert_matches_oracle(res, 4)


@pytest.mark.gloo
def test_dsp_checkpointed_on_axial3d(rank_pool):
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, "dsp", "axial3d-tiny", (1, 4, 16), 4, ckpt=True), 4)


# ---------------------------------------------------------------- ledger == formula (fake PG)
def _cfg(n, hidden=64, ckpt=False):
    # n heads so head-splitting methods run at every n (as tests/test_formulas.py)
    return ModelConfig(layout="axial3d", depth=1, hidden=hidden, heads=max(n, 4), caption_channels=8,
                       text_len=4, grad_ckpt=ckpt)


@pytest.mark.parametrize("n", [4, 8, 16, 64])
@pytest.mark.parametrize("method", [m for m in METHODS if m != "dsp"])
def test_embedded_ledger_equals_formula(method, n):
    # T = n, H' = W' = 4: the embedded methods shard T only (DSP also needs H' or W' % n: below).
    measured, formula, _ = fake_step(method, _cfg(n), Shape(1, n, 16), n)
    assert measured == formula


@pytest.mark.parametrize("n,shape", [(4, Shape(1, 4, 8)), (8, Shape(2, 8, 64)), (16, Shape(1, 16, 256)),
                                     (64, Shape(1, 64, 4096))])
def test_dsp_ledger_equals_formula(n, shape):
    # (1, 4, 8) switches to W; hidden 16 keeps the N = 64 grid (64 x 64 x 64 tokens) quick.
    measured, formula, _ = fake_step("dsp", _cfg(4, hidden=16), shape, n)
    assert measured == formula


@pytest.mark.parametrize("method", METHODS)
def test_ledger_equals_formula_infer_checkpointed_and_shard_w(method):
    measured, formula, _ = fake_step(method, _cfg(8), Shape(2, 8, 64), 8, mode="infer")
    assert measured == formula
    measured, formula, _ = fake_step(method, _cfg(8, ckpt=True), Shape(1, 8, 64), 8, shard="W")
    assert measured == formula
