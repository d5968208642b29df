"""Analytic comm bytes == ledger bytes exactly, for every method, shape and N up to 64 (fake PG);
and the per-layer volumes reproduce the paper's Table 3 ratios."""
import pytest

from dspbench.methods import get_method
from dspbench.methods.volume import paper_per_layer
from dspbench.models import ModelConfig, Shape
from fake_tasks import fake_step

NS = [2, 4, 8, 16, 64]
METHODS = ["dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm", "allgather_kv"]


def cfg_for(layout: str, n: int, ckpt: bool = False) -> ModelConfig:
    # N heads so head-splitting methods run at every N up to 64; as small as possible otherwise.
    return ModelConfig(layout=layout, depth=1, hidden=64, heads=max(n, 4), caption_channels=8, text_len=4,
                       grad_ckpt=ckpt)


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("layout", ["stdit", "stdit3"])
def test_ledger_equals_formula_train(layout, method, n):
    measured, formula, _ = fake_step(method, cfg_for(layout, n), Shape(1, 64, 64), n)
    assert measured == formula


@pytest.mark.parametrize("n", [8, 64])
@pytest.mark.parametrize("method", METHODS)
def test_ledger_equals_formula_batched_unequal_dims(method, n):
    measured, formula, _ = fake_step(method, cfg_for("stdit", n), Shape(2, 128, 64), n)
    assert measured == formula


@pytest.mark.parametrize("n", [4, 64])
@pytest.mark.parametrize("method", METHODS)
def test_ledger_equals_formula_infer_and_checkpointed(method, n):
    measured, formula, _ = fake_step(method, cfg_for("stdit", n), Shape(1, 64, 128), n, mode="infer")
    assert measured == formula
    measured, formula, _ = fake_step(method, cfg_for("stdit3", n, ckpt=True), Shape(1, 64, 64), n)
    assert measured == formula


@pytest.mark.parametrize("n", NS)
def test_table3_ratios_in_paper_convention(n):
    cfg, shape = cfg_for("stdit", n), Shape(1, 64, 64)
    M = shape.batch * shape.tokens * cfg.hidden * 4
    vol = {m: paper_per_layer(fake_step(m, cfg, shape, n, mode="infer")[0], n, cfg.depth) / M for m in METHODS}
    assert vol["dsp"] == pytest.approx(2 / n)
    assert vol["ulysses"] == pytest.approx(4 / n)          # Ulysses in the sharded dim's block only
    assert vol["ulysses_all"] == pytest.approx(8 / n)      # Ulysses in both blocks (paper v1)
    assert vol["ring"] == pytest.approx(2)
    assert vol["megatron_sp"] == pytest.approx(8)
    assert vol["allgather_kv"] == pytest.approx(2)   # the ring's volume, in one collective
    assert vol["dsp"] / vol["ulysses"] == pytest.approx(1 / 2)
    assert 1 - vol["dsp"] / vol["ulysses_all"] == pytest.approx(0.75)   # the paper's "75% less"
    assert vol["dsp"] / vol["ring"] == pytest.approx(1 / n)
    assert vol["dsp"] / vol["megatron_sp"] == pytest.approx(1 / (4 * n))


# the methods above that declare a Table 3 row (MethodSpec.report.table3)
TABLE3_ON_FAKE_GROUP = [m for m in METHODS if get_method(m).report.table3]


@pytest.mark.parametrize("n", [2, 4])
def test_report_table3_rows_match_the_ledger(n):
    # The report's Table 3 column (both Ulysses conventions) is what the ledger measures, per method.
    meta = pytest.importorskip("dspbench.reports.meta")
    cfg, shape = cfg_for("stdit", n), Shape(1, 64, 64)
    M = shape.batch * shape.tokens * cfg.hidden * 4
    for m in TABLE3_ON_FAKE_GROUP:
        meta.learn(m, get_method(m).report.as_record())    # as its records carry it
        name, factor = meta.table3(m)
        got = paper_per_layer(fake_step(m, cfg, shape, n, mode="infer")[0], n, cfg.depth) / M
        assert got == pytest.approx(factor(n)), (m, name)
