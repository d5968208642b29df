"""The joint-text block kinds (models/mmdit.py, models/single_stream.py, models/modulation.py): the
analytic parameter and FLOP counts the cost model uses equal the real modules' (parameters at full
size on the meta device, FLOPs counted by torch and by the cost model's meta-device trace); the
defaults build the class as it was; contradictory fields are refused. Every method against the
oracle on these blocks: tests/test_model_presets.py."""
import oracle_tasks as ot
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from dspbench.cost import curve as cv
from dspbench.cost.memory import activation_bytes, unsharded_bytes
from dspbench.methods import get_method
from dspbench.models import Shape, build_model, get_config, make_inputs
from dspbench.models.full3d import Full3DBlock
from dspbench.models.mmdit import DualStreamBlock, ExpertBlock
from dspbench.models.params import flops_per_sample, param_breakdown, param_count
from dspbench.models.registry import with_overrides
from dspbench.models.single_stream import SingleStreamBlock

JOINT_PRESETS = ["hunyuanvideo", "flux.1-dev", "mochi-1", "cogvideox-5b", "cogvideox-2b"]
SHRINK = ["hidden=64", "heads=4", "mlp_dim=128", "caption_channels=32", "text_len=8"]
SHRUNK = [with_overrides("hunyuanvideo", SHRINK + ["depth=2", "single_depth=2"]),
          with_overrides("mochi-1", SHRINK + ["depth=3", "text_hidden=32", "text_mlp_dim=48"]),
          with_overrides("cogvideox-5b", SHRINK + ["depth=3", "time_dim=16", "freq_dim=32"]),
          "stdit-tiny[modulation=linear,adaln_shift=false]", "stdit3-tiny[temporal_cross=false]"]


@pytest.mark.parametrize("name", JOINT_PRESETS)
def test_full_size_parameter_counts_equal_the_real_module(name):
    cfg = get_config(name)
    with torch.device("meta"):
        model = build_model(cfg)
    assert param_count(cfg) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("ref", SHRUNK)
def test_analytic_flops_equal_counted_flops_and_the_trace(ref):
    cfg, shape = get_config(ref), Shape(2, 3, 12)
    x, t, y, target = make_inputs(cfg, shape)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        assert build_model(cfg)(x, t, y).shape == target.shape
    assert fc.get_total_flops() == shape.batch * flops_per_sample(cfg, shape)
    costs = cv.forward_costs(ref, shape.batch, shape.frames, shape.spatial)
    traced = sum(f * n for f, n in costs.gemms.items()) + sum(f for _, f in costs.attn) + costs.conv_flops
    assert traced == pytest.approx(shape.batch * flops_per_sample(cfg, shape), rel=1e-6)


def test_the_stack_holds_each_block_kind_where_the_fields_say():
    blocks = build_model(get_config(SHRUNK[0])).blocks
    assert [type(b) for b in blocks] == [DualStreamBlock] * 2 + [SingleStreamBlock] * 2
    assert [b.last for b in blocks] == [False, False, False, True]
    assert all(isinstance(b, ExpertBlock) for b in build_model(get_config(SHRUNK[2])).blocks)
    mochi = build_model(get_config(SHRUNK[1]))
    assert mochi.blocks[0].full_attn.text_qkv.in_features == 32 and mochi.blocks[0].text_mlp.fc1.out_features == 48
    assert not hasattr(mochi.blocks[-1], "text_mlp")   # the last block's text: keys and values only


def test_the_defaults_build_the_class_as_before():
    cfg = get_config("full3d-joint-tiny")
    model = build_model(cfg)
    assert all(type(b) is Full3DBlock and hasattr(b, "scale_shift_table") for b in model.blocks)
    assert isinstance(model.t_block, torch.nn.Sequential)
    assert "single" not in param_breakdown(get_config("stdit-tiny")) and cfg.stack_depth == cfg.depth


def test_the_text_stream_s_share_of_a_preset_is_counted():
    """HunyuanVideo's text MLPs, dual-block modulation and single-stream blocks: most of its 12.8B,
    what the class before these blocks could not express (9.1B)."""
    parts = param_breakdown(get_config("hunyuanvideo"))
    assert parts["text_mlp"] > 1.5e9 and parts["modulation"] > 2e9 and parts["single"] > 5e9


@pytest.mark.parametrize("fields,why", [
    (dict(text_stream="dual"), "need modulation linear"),
    (dict(text_stream="dual", modulation="linear", single_depth=1, text_hidden=32), "single_depth needs text_hidden"),
    (dict(text_stream="expert", modulation="linear", text_hidden=32), "text_hidden and text_mlp_dim need text_stream dual"),
    (dict(text_stream="mixed"), "text_stream must be one of"),
    (dict(adaln_shift=False), "need modulation linear"),
])
def test_contradictory_fields_are_refused(fields, why):
    with pytest.raises(ValueError, match=why):
        get_config("full3d-joint-tiny", **fields)
    with pytest.raises(ValueError, match="need text_mode joint"):
        get_config("full3d-tiny", single_depth=1, modulation="linear")


MEMORY = [with_overrides("hunyuanvideo", ["depth=2", "single_depth=2", "hidden=64", "heads=4", "mlp_dim=256",
                                          "caption_channels=32", "text_len=8"]),
          with_overrides("cogvideox-5b", ["depth=4", "hidden=64", "heads=4", "mlp_dim=256", "caption_channels=32",
                                          "text_len=8", "time_dim=16", "freq_dim=32"])]


@pytest.mark.gloo
@pytest.mark.parametrize("ref", MEMORY)
def test_the_activation_term_counts_the_new_blocks(rank_pool, ref):
    """bench/cost/memory.py's activation term against what autograd saves on one rank (within 10%,
    as for the class before: a single-stream block priced as one attention and one MLP), and
    Megatron-SP's unsharded term an upper bound on what it saves beyond Ulysses on two ranks (a
    block's q that is a view of its fused output is saved once there: the term counts it apart)."""
    cfg, shape = get_config(ref), (1, 4, 64)
    saved = rank_pool(1).run(ot.saved_activation_bytes, "single", ref, shape, 1)[0]
    assert 0.9 * saved <= activation_bytes(cfg, Shape(*shape), 1, "fp32", "train") <= 1.1 * saved
    uly = rank_pool(2).run(ot.saved_activation_bytes, "ulysses", ref, shape, 2)[0]
    meg = rank_pool(2).run(ot.saved_activation_bytes, "megatron_sp", ref, shape, 2)[0]
    assert 0 < meg - uly <= unsharded_bytes(get_method("megatron_sp"), cfg, Shape(*shape), 2, "fp32", "train")
