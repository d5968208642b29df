"""Padding (methods/padding.py): shapes the SP degree does not divide run padded, exact to the oracle."""
from __future__ import annotations

import importlib.util

import pytest

import oracle_tasks as ot
import padding_tasks as pt
from dspbench.methods import Dims, get_method, padding
from dspbench.methods.comm.ledger import wire_bytes
from dspbench.models import Shape, get_config

HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
# Every method that pads (ring_flash, torch_cp: a library's attention takes no key mask, see below).
PADDED = ["dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm", "usp", "allgather_kv",
          "dsp_hybrid"] + (["ulysses_deepspeed"] if HAS_DEEPSPEED else [])
FULL3D = [m for m in PADDED if m != "dsp"]          # DSP does not apply to full attention
HEADS12 = dict(hidden=48, heads=12)                  # heads every degree 2, 3, 4 divides


def assert_exact(per_rank: list[dict], sp: int) -> None:
    for method in per_rank[0]:
        try:
            ot.assert_matches_oracle([r[method] for r in per_rank], sp)
        except AssertionError as e:
            raise AssertionError(f"{method}: {e}") from e


@pytest.mark.gloo
@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_method_exact_on_odd_stdit(rank_pool, world):
    # T = 5, S = 30: T pads to 6 / 6 / 8 (DSP also S to 32 at 4); ledger == formula on the padded M.
    assert_exact(rank_pool(world).run(pt.oracle_cases, PADDED, "stdit-tiny", (1, 5, 30), world, **HEADS12), world)


@pytest.mark.gloo
@pytest.mark.parametrize("world, shard", [(2, "T"), (3, "T"), (4, "T"), (2, "S"), (4, "S")])
def test_every_method_exact_on_full3d_21x39(rank_pool, world, shard):
    # The flattened T x S sequence with joint text: padded frames or padded tokens per frame.
    assert_exact(rank_pool(world).run(pt.oracle_cases, FULL3D, "full3d-joint-tiny", (1, 21, 39), world,
                                      shard=shard, **HEADS12), world)


@pytest.mark.gloo
def test_usp_ulysses_by_ring_checkpointing_hybrid_and_axial(rank_pool):
    # USP as a 2 x 2 mesh (heads 2): masks gathered in the Ulysses sub-group, then per ring block.
    assert_exact(rank_pool(4).run(pt.oracle_cases, ["usp"], "stdit-tiny", (1, 5, 30), 4, hidden=48, heads=2), 4)
    assert_exact(rank_pool(4).run(pt.oracle_cases, ["ring", "dsp"], "stdit-tiny", (1, 5, 30), 4, ckpt=True), 4)
    assert_exact(rank_pool(4).run(pt.oracle_cases, ["dsp_hybrid", "ring"], "hybrid3d-tiny", (1, 5, 30), 4), 4)
    assert_exact(rank_pool(2).run(pt.oracle_cases, ["dsp", "ring", "ulysses"], "axial3d-tiny", (1, 5, 30), 2), 2)
    # Two SP groups of 2 in a world of 4 (ranks 2, 3 hold SP ranks 0, 1): masks follow SP ranks.
    assert_exact(rank_pool(4).run(pt.oracle_cases, ["ring", "ulysses"], "stdit-tiny", (1, 5, 30), 2), 2)


@pytest.mark.gloo
@pytest.mark.parametrize("method", ["ring", "ulysses", "dsp", "allgather_kv"])
def test_a_padded_key_never_reaches_attention(rank_pool, method):
    # Huge padded tokens change nothing (stdit's temporal attention reads them un-normalised) ...
    res = rank_pool(4).run(pt.with_plan_levers, 1e3, True, method, "stdit-tiny", (1, 5, 30), 4)
    ot.assert_matches_oracle(res, 4)
    # ... and the same run without the key masks is caught by the oracle check.
    leak = rank_pool(4).run(pt.with_plan_levers, 1e3, False, method, "stdit-tiny", (1, 5, 30), 4)
    assert leak[0]["output"] > 1e3 * ot.RTOL * max(1.0, leak[0]["output_scale"]), leak[0]["output"]


@pytest.mark.parametrize("method", PADDED + ["ring_flash", "torch_cp"])
def test_pad_never_is_the_methods_own_check_word_for_word(method):
    cfg, spec = get_config("stdit-tiny"), get_method(method)
    for shape in (Shape(1, 6, 16), Shape(1, 4, 6), Shape(1, 5, 30)):
        assert spec.check_pad(cfg, shape, Dims(sp=4), "never") == spec.check(cfg, shape, Dims(sp=4))


def test_libraries_without_a_key_mask_say_so_and_heads_still_must_divide():
    cfg, shape, dims = get_config("stdit-tiny"), Shape(1, 5, 32), Dims(sp=4)
    why = get_method("torch_cp").check_pad(cfg, shape, dims)
    assert why.startswith("torch_cp cannot pad T: torch's context-parallel SDPA takes no key mask"), why
    # the library's import error (CPU) or its missing key mask: either way a reason, never a wrong run
    assert get_method("ring_flash").check_pad(cfg, shape, dims)
    assert "heads=4 is not divisible by the SP degree 3" in get_method("ulysses").check_pad(cfg, shape, Dims(sp=3))
    assert get_method("ring").check_pad(cfg, shape, Dims(sp=3)) is None


def test_axial3d_pads_t_but_not_its_derived_h_and_w():
    cfg, dims = get_config("axial3d-tiny"), Dims(sp=4, shard="H")
    assert "padding axial3d's token H is not supported" in get_method("ring").check_pad(cfg, Shape(1, 4, 30), dims)
    assert get_method("ring").check_pad(cfg, Shape(1, 5, 32), Dims(sp=4)) is None


@pytest.mark.parametrize("method", PADDED)
def test_formula_counts_the_padded_shape(method):
    cfg, spec, dims = get_config("stdit-tiny"), get_method(method), Dims(sp=4)
    want = Shape(1, 8, 32) if method in ("dsp", "dsp_hybrid") else Shape(1, 8, 30)
    assert padding.padded_shape(spec, cfg, Shape(1, 5, 30), dims) == want
    assert spec.comm_bytes(cfg, Shape(1, 5, 30), dims) == spec.comm_bytes(cfg, want, dims)


def test_waste_is_the_padded_share():
    cfg, spec = get_config("full3d-14b"), get_method("ulysses")
    w = padding.waste(spec, cfg, Shape(1, 21, 1560), Dims(sp=8), "bf16")
    assert w["padded"] == {"T": 24, "S": 1560}
    assert w["pad_token_share"] == pytest.approx(3 / 24)
    assert w["pad_attn_share"] == pytest.approx(1 - (21 / 24) ** 2)   # queries x keys of one full attention
    assert 0 < w["pad_comm_share"] < w["pad_token_share"]             # the gradient sync does not grow
    assert padding.waste(spec, cfg, Shape(1, 24, 1560), Dims(sp=8))["pad_token_share"] == 0


def test_uneven_all_reduce_rounds_down_on_both_sides():
    # world 3: a gradient buffer 3 does not divide (the ledger and the formula share wire_bytes)
    assert wire_bytes("all_reduce", 1830784, 3) == 2 * 1830784 * 2 // 3
    with pytest.raises(AssertionError):
        wire_bytes("all_gather", 1000, 3)


def test_records_carry_padded_lengths():
    from dspbench.facts.build import padding_facts as facts, resolve

    def padding_facts(cfg):
        return facts(cfg, *resolve(cfg))
    from dspbench.records.config import RunConfig
    f = padding_facts(RunConfig(method="ring", model="stdit-tiny", frames=5, spatial=30, gpus=4, sp=4))
    assert (f["padded_frames"], f["padded_spatial"], f["pad_token_share"]) == (8, 30, 3 / 8)
    never = padding_facts(RunConfig(method="ring", model="stdit-tiny", frames=5, spatial=30, gpus=4, sp=4, pad="never"))
    assert (never["padded_frames"], never["pad_token_share"]) == (5, None)
