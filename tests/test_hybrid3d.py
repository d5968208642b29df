"""hybrid3d (spatial, temporal and full-attention blocks) and dsp_hybrid, the DSP variant that still
applies there: DSP's switches around temporal attention, Ulysses' head all-to-alls inside full
attention. Exact against the oracle, ledger == formula, and between DSP and Ulysses in bytes."""
import pytest
import torch

import oracle_tasks as ot
from dspbench.methods import Dims, available, get_method
from dspbench.methods.dsp import NOT_APPLICABLE
from dspbench.models import ModelConfig, Shape, build_model, get_config
from dspbench.models.params import param_count
from fake_tasks import fake_step
from oracle_tasks import assert_matches_oracle


def test_layout_and_applicability():
    cfg = get_config("hybrid3d-tiny")
    assert cfg.n_blocks == 3 * cfg.depth and cfg.attn_spans == (("S",), ("T",), ("T", "S"))
    with torch.device("meta"):
        assert param_count(cfg) == sum(p.numel() for p in build_model(cfg).parameters())
    assert "dsp_hybrid" in available()
    assert get_method("dsp").check(cfg, Shape(1, 4, 16), Dims(sp=4)).startswith(NOT_APPLICABLE)
    assert get_method("dsp_hybrid").check(cfg, Shape(1, 4, 16), Dims(sp=4)) is None
    why = get_method("dsp_hybrid").check(get_config("hybrid3d-tiny", hidden=48, heads=6), Shape(1, 4, 16), Dims(sp=4))
    assert "heads=6 is not divisible by the SP degree 4" in why and "full attention" in why
    # Without full attention (stdit) heads do not matter, as for DSP.
    assert get_method("dsp_hybrid").check(get_config("stdit-tiny", hidden=48, heads=6), Shape(1, 4, 16), Dims(sp=4)) is None


@pytest.mark.gloo
@pytest.mark.parametrize("model", ["hybrid3d-tiny", "stdit3-tiny", "full3d-joint-tiny"])
@pytest.mark.parametrize("world", [2, 4])
def test_dsp_hybrid_equals_oracle(rank_pool, world, model):
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, "dsp_hybrid", model, (2, 4, 16), world), world)


@pytest.mark.gloo
@pytest.mark.parametrize("method", ["ulysses", "ring", "usp", "megatron_sp"])
def test_embedded_methods_equal_oracle_on_hybrid3d(rank_pool, method):
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, method, "hybrid3d-tiny", (1, 4, 16), 4), 4)


def _cfg(layout, n):
    return ModelConfig(layout=layout, depth=1, hidden=64, heads=max(n, 4), caption_channels=8, text_len=4)


@pytest.mark.parametrize("n", [4, 16])
def test_ledger_equals_formula_and_saves_ulysses_two_all_to_alls_per_temporal_attention(n):
    shape, cfg = Shape(1, n, n), _cfg("hybrid3d", n)
    total = {}
    for m in ("dsp_hybrid", "ulysses"):
        measured, formula, _ = fake_step(m, cfg, shape, n, mode="infer")
        assert measured == formula
        total[m] = sum(measured.values())
    measured, formula, _ = fake_step("dsp_hybrid", cfg, shape, n)
    assert measured == formula
    # Per depth step: DSP's 2 switches (temporal) + Ulysses' 4 (full) vs Ulysses' 4 + 4; each moves
    # (n-1)/n of this rank's shard M/N (fp32).
    shard = shape.tokens * cfg.hidden * 4 // n
    assert total["ulysses"] - total["dsp_hybrid"] == cfg.depth * 2 * shard * (n - 1) // n
    # On stdit the variant is DSP, on full3d it is Ulysses, byte for byte.
    for layout, twin in (("stdit", "dsp"), ("full3d", "ulysses")):
        assert fake_step("dsp_hybrid", _cfg(layout, n), shape, n)[0] == fake_step(twin, _cfg(layout, n), shape, n)[0]
