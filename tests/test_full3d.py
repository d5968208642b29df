"""full3d (today's video DiTs: one attention over all T x S tokens, Wan-style cross or MMDiT-style
joint text): the model contract, every applicable method exact against the oracle with ledger ==
formula, and DSP reported not applicable with its reason.
"""
import importlib.util

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import oracle_tasks as ot
from dspbench.methods import Dims, get_method
from dspbench.methods.common import attentions
from dspbench.methods.dsp import NOT_APPLICABLE
from dspbench.models import S_DIM, T_DIM, ModelConfig, Shape, build_model, get_config, make_inputs
from dspbench.models.params import flops_per_sample, param_count
from fake_tasks import fake_step
from oracle_tasks import assert_matches_oracle

METHODS = ["ulysses", "ring", "usp", "megatron_sp", "megatron_lm", "allgather_kv"]
MODELS = ["full3d-tiny", "full3d-joint-tiny"]
HAS_DS = importlib.util.find_spec("deepspeed") is not None


# ---------------------------------------------------------------- the model
@pytest.mark.parametrize("name,billions", [("full3d-1.3b", 1.3), ("full3d-14b", 14.0),
                                           ("full3d-joint-1.3b", 1.3), ("full3d-joint-14b", 14.0)])
def test_wan_classes_parameter_counts_equal_brute_force(name, billions):
    cfg = get_config(name)
    with torch.device("meta"):
        model = build_model(cfg)
    assert param_count(cfg) == sum(p.numel() for p in model.parameters())
    assert billions * 0.95 < param_count(cfg) / 1e9 < billions * 1.15   # "about": Wan 2.1's classes
    assert (cfg.head_dim, cfg.in_channels, cfg.out_channels, cfg.patch) == (128, 16, 16, (1, 2, 2))


def test_wan_published_dimensions():
    small, big = get_config("full3d-1.3b"), get_config("full3d-14b")
    assert (small.hidden, small.heads, small.depth, small.mlp_hidden) == (1536, 12, 30, 8960)
    assert (big.hidden, big.heads, big.depth, big.mlp_hidden) == (5120, 40, 40, 13824)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("shape", [Shape(2, 3, 12)])
def test_analytic_flops_equal_counted_flops(name, shape):
    cfg = get_config(name, depth=3)   # joint: two blocks with text output, the last with text K, V only
    x, t, y, target = make_inputs(cfg, shape)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        out = build_model(cfg)(x, t, y)
    assert out.shape == target.shape
    assert fc.get_total_flops() == shape.batch * flops_per_sample(cfg, shape)
    assert param_count(cfg) == sum(p.numel() for p in build_model(cfg).parameters())


def test_one_attention_spans_every_sequence_dim():
    cfg = get_config("full3d-joint-tiny")
    assert cfg.attn_spans == (("T", "S"),) and cfg.attn_lengths(Shape(1, 4, 16)) == [64]
    model = build_model(cfg)
    assert attentions(model, T_DIM) == attentions(model, S_DIM) == attentions(model)
    assert len(attentions(model)) == cfg.depth == cfg.n_self_attn
    assert [b.full_attn.text for b in model.blocks] == ["qkv"] * (cfg.depth - 1) + ["kv"]
    with pytest.raises(ValueError, match="text_mode joint needs layout full3d"):
        get_config("stdit-tiny", text_mode="joint")


def test_text_joins_the_attention_it_changes_the_output():
    # Joint text reaches the video tokens only through the self-attention: a different caption
    # must change the output (and, depth 2, the first block's text output feeds the second).
    cfg = get_config("full3d-joint-tiny")
    torch.manual_seed(0)
    model = build_model(cfg)
    x, t, y, _ = make_inputs(cfg, Shape(1, 2, 4))
    assert not torch.allclose(model(x, t, y), model(x, t, y + 1))


# ---------------------------------------------------------------- where DSP stops
@pytest.mark.parametrize("name", MODELS + ["full3d-14b"])
def test_dsp_not_applicable_with_its_reason(name):
    reason = get_method("dsp").check(get_config(name), Shape(1, 8, 64), Dims(sp=4))
    assert reason.startswith(NOT_APPLICABLE) and "spans T x S at once" in reason
    assert NOT_APPLICABLE == "not applicable: no sequence dim along which every attention is local"
    # ... and only there: the factorized layouts still take DSP.
    for other in ("stdit-tiny", "stdit3-tiny", "axial3d-tiny"):
        assert get_method("dsp").check(get_config(other), Shape(1, 4, 16), Dims(sp=4)) is None


# ---------------------------------------------------------------- oracle (gloo ranks)
@pytest.mark.gloo
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("world", [2, 4])
def test_method_equals_oracle_on_full3d(rank_pool, world, method, model):
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, method, model, (2, 4, 16), world), world)


@pytest.mark.gloo
@pytest.mark.parametrize("method", METHODS)
def test_joint_shard_space_uneven_split_checkpointed(rank_pool, method):
    # Shard S (tokens of every frame), USP at 2x2 (6 heads), recompute under checkpointing.
    res = rank_pool(4).run(ot.oracle_case, method, "full3d-joint-tiny", (1, 2, 16), 4, shard="S", ckpt=True,
                           hidden=48, heads=4 if method in ("ulysses", "megatron_sp", "megatron_lm") else 6, depth=3)
    assert_matches_oracle(res, 4)


@pytest.mark.gloo
@pytest.mark.deepspeed
@pytest.mark.skipif(not HAS_DS, reason="deepspeed is not installed (pip install 'dspbench[deepspeed]')")
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("world", [2, 4])
def test_ulysses_deepspeed_equals_oracle_on_full3d(rank_pool, world, model):
    res = rank_pool(world).run(ot.oracle_case, "ulysses_deepspeed", model, (2, 4, 16), world)
    assert_matches_oracle(res, world)


@pytest.mark.gloo
@pytest.mark.deepspeed
@pytest.mark.skipif(not HAS_DS, reason="deepspeed is not installed (pip install 'dspbench[deepspeed]')")
def test_ulysses_deepspeed_joint_tags_survive_checkpointing(rank_pool):
    # Recompute re-runs DeepSpeed's all-to-alls and our text gather inside the backward.
    res = rank_pool(2).run(ot.oracle_case, "ulysses_deepspeed", "full3d-joint-tiny", (1, 4, 16), 2, ckpt=True, depth=3)
    assert_matches_oracle(res, 2)


@pytest.mark.parametrize("method", ["ring_flash", "torch_cp"])
def test_library_attentions_reject_joint_text_with_a_reason(method):
    reason = get_method(method).check(get_config("full3d-joint-tiny"), Shape(1, 4, 16), Dims(sp=2))
    assert "joint text" in reason and "allgather_kv" in reason


@pytest.mark.gloo
def test_dsp_recorded_not_applicable_no_ranks_used(rank_pool):
    res = rank_pool(2).run(ot.oracle_case, "dsp", "full3d-joint-tiny", (1, 4, 16), 2)
    assert res[0]["unsupported"].startswith(NOT_APPLICABLE)


# ---------------------------------------------------------------- ledger == formula (fake PG)
def _cfg(n, text_mode, heads=None, ckpt=False):
    return ModelConfig(layout="full3d", depth=2, hidden=64, heads=heads or max(n, 4), caption_channels=8,
                       text_len=4, text_mode=text_mode, grad_ckpt=ckpt)


@pytest.mark.parametrize("n", [4, 8])
@pytest.mark.parametrize("text_mode", ["cross", "joint"])
@pytest.mark.parametrize("method", METHODS + ["ulysses_deepspeed"] * HAS_DS)
def test_ledger_equals_formula(method, text_mode, n):
    measured, formula, _ = fake_step(method, _cfg(n, text_mode), Shape(1, n, 16), n)
    assert measured == formula
    if text_mode == "joint" and method not in ("ring", "allgather_kv"):   # the text output is gathered, counted
        assert any("joint_out" in k or "tp_text_gather" in k for k in formula)


@pytest.mark.parametrize("method", METHODS)
def test_ledger_equals_formula_infer_checkpointed_shard_s(method):
    measured, formula, _ = fake_step(method, _cfg(8, "joint", heads=8), Shape(2, 8, 64), 8, mode="infer")
    assert measured == formula
    measured, formula, _ = fake_step(method, _cfg(8, "joint", heads=8, ckpt=True), Shape(1, 2, 64), 8, shard="S")
    assert measured == formula


def test_usp_mixed_split_joint_formula():
    measured, formula, _ = fake_step("usp", _cfg(16, "joint", heads=4), Shape(1, 16, 16), 16)   # 4 x 4
    assert measured == formula and "usp_joint_out/all_gather.fwd" in formula
