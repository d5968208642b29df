"""The plugin API, through the worked example examples/dsp_overlap (an installed entry point).

A plugged-in method goes through the same oracle and ledger helpers as the built-in ones; nothing
here is specific to it but the shapes that make its chunking visible. CI installs the example
(Makefile); elsewhere: python -m pip install -e examples/dsp_overlap.
"""
import pytest
import torch

import oracle_tasks as ot
from dspbench.methods import BUILTIN, available, get_method
from dspbench.methods.comm import async_ops as comm_async, layer as comm
from dspbench.methods.comm.ledger import Ledger
from dspbench.models import ModelConfig, Shape, build_model, make_inputs
from fake_tasks import fake_step
from oracle_tasks import assert_matches_oracle

NAME = "dsp_overlap"
needs_plugin = pytest.mark.skipif(
    NAME not in available(), reason="example plugin not installed: python -m pip install -e examples/dsp_overlap")


# ---------------------------------------------------------------- comm_async.all_to_all_async (no plugin needed)
def async_matches_blocking(world_seed: int = 0):
    """all_to_all_async: same values, gradients and ledger events as all_to_all (rank-side task)."""
    g = torch.Generator().manual_seed(world_seed + comm.world_rank())
    n = comm.world_size()
    x = torch.randn(2, 2 * n, 4 * n, 3, generator=g, dtype=torch.float64)
    y = torch.randn(2, 2 * n * n, 4, 3, generator=g, dtype=torch.float64)   # cotangent of the output
    out = {}
    for name in ("blocking", "async"):
        xi = x.clone().requires_grad_()
        with Ledger() as led:
            if name == "blocking":
                o = comm.all_to_all(xi, 2, 1, None, "t")
            else:
                o = comm_async.all_to_all_async(xi, 2, 1, None, "t").wait()
            (o * y).sum().backward()
        out[name] = (o.detach(), xi.grad, [(e.op, e.phase, e.payload_bytes) for e in led.events])
    return all(torch.equal(a, b) if torch.is_tensor(a) else a == b for a, b in zip(out["blocking"], out["async"]))


@pytest.mark.gloo
@pytest.mark.parametrize("world", [2, 4])
def test_async_all_to_all_equals_blocking(rank_pool, world):
    assert all(rank_pool(world).run(async_matches_blocking))


# ---------------------------------------------------------------- discovery
@needs_plugin
def test_listed_as_plugin_with_constraints(capsys):
    from dspbench.run.cli import cmd_methods
    assert NAME not in BUILTIN and get_method(NAME).name == NAME
    cmd_methods(None)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(NAME))
    assert "plugin" in line


# ---------------------------------------------------------------- every installed plugin, automatically
PLUGINS = [m for m in available() if m not in BUILTIN]


@pytest.mark.gloo
@pytest.mark.parametrize("method", PLUGINS)
def test_every_plugin_equals_oracle_and_formula(rank_pool, method):
    res = rank_pool(4).run(ot.oracle_case, method, "stdit-tiny", (1, 4, 16), 4)
    if "unsupported" in res[0]:
        pytest.skip(f"{method} rejects the default tiny case: {res[0]['unsupported']}")
    assert_matches_oracle(res, 4)
    measured, formula, _ = fake_step(method, _cfg("stdit"), Shape(1, 64, 64), 8)
    assert measured == formula


# ---------------------------------------------------------------- oracle: the helpers of test_oracle.py
@pytest.mark.gloo
@needs_plugin
@pytest.mark.parametrize("model,shape", [("stdit-tiny", (1, 4, 16)), ("stdit3-tiny", (2, 4, 16)),
                                         ("stdit-tiny", (2, 8, 4)), ("axial3d-tiny", (1, 4, 64))],
                         ids=["stdit", "stdit3-B2", "stdit-unchunked", "axial3d"])
@pytest.mark.parametrize("world", [2, 4])
def test_plugin_equals_oracle(rank_pool, world, model, shape):
    assert_matches_oracle(rank_pool(world).run(ot.oracle_case, NAME, model, shape, world), world)


@pytest.mark.gloo
@needs_plugin
def test_plugin_checkpointed_and_rejects_like_dsp(rank_pool):
    assert_matches_oracle(rank_pool(4).run(ot.oracle_case, NAME, "stdit-tiny", (1, 4, 16), 4, ckpt=True), 4)
    res = rank_pool(4).run(ot.oracle_case, NAME, "stdit-tiny", (1, 4, 6), 4, pad="never")
    assert "spatial tokens S=6 is not divisible by the SP degree 4" in res[0]["unsupported"]


# ---------------------------------------------------------------- ledger == formula: the helper of test_formulas.py
def _cfg(layout, ckpt=False):
    return ModelConfig(layout=layout, depth=1, hidden=64, heads=4, caption_channels=8, text_len=4, grad_ckpt=ckpt)


@needs_plugin
@pytest.mark.parametrize("n", [4, 8, 16, 64])
@pytest.mark.parametrize("layout", ["stdit", "stdit3"])
def test_plugin_ledger_equals_formula(layout, n):
    measured, formula, _ = fake_step(NAME, _cfg(layout), Shape(1, 64, 128), n)
    assert measured == formula


@needs_plugin
@pytest.mark.parametrize("n", [4, 8])
def test_plugin_ledger_equals_formula_axial_infer_checkpointed(n):
    measured, formula, _ = fake_step(NAME, _cfg("axial3d"), Shape(2, 8, 256), n, mode="infer")
    assert measured == formula
    measured, formula, _ = fake_step(NAME, _cfg("stdit3", ckpt=True), Shape(1, 64, 64), n)
    assert measured == formula


@needs_plugin
@pytest.mark.parametrize("spatial,chunks", [(128, 2), (48, 1)])   # S % (2 * 16): chunked or not
def test_each_chunk_is_one_ledger_event(spatial, chunks):
    cfg, shape, n = _cfg("stdit"), Shape(1, 16, spatial), 16
    comm.init_fake(n)
    torch.set_flush_denormal(True)
    try:
        from dspbench.methods import build_dims
        dims = build_dims(n)
        model = get_method(NAME).parallelize(build_model(cfg), dims)
        with Ledger() as led, torch.no_grad():
            model(*make_inputs(cfg, shape)[:3])
    finally:
        comm.destroy()
    assert led.counts()["switch/all_to_all.fwd"] == 2 * chunks * cfg.depth
    plan = get_method(NAME).plan(cfg, shape, dims, mode="infer")
    assert [o.count for _, o in plan if o.tag == "switch"] == [2 * chunks * cfg.depth]


# ---------------------------------------------------------------- a sweep and a report with the plugin next to DSP
@needs_plugin
@pytest.mark.gloo
def test_shipped_sweep_runs_the_plugin_next_to_dsp_and_the_report_shows_it(tmp_path):
    from dspbench.cli import main
    from dspbench.records.io import read_dir
    out = tmp_path / "plugin_vs_dsp"
    assert main(["sweep", "plugin_vs_dsp", "--results", str(out)]) == 0
    recs, problems = read_dir(out / "records")
    assert problems == []
    assert sorted((r["method"], r["gpus"]) for r in recs) == sorted(
        (m, n) for m in ("dsp", NAME, "ulysses") for n in (2, 4) for _ in range(3))   # 3 repeats
    for r in recs:
        assert r["status"] == "ok", r.get("error")
        assert r["oracle_max_abs_err"] < 1e-5        # checked against the single-device oracle
    ours = {r["gpus"]: r for r in recs if r["method"] == NAME and r["repeat"] == 0}
    dsp = {r["gpus"]: r for r in recs if r["method"] == "dsp" and r["repeat"] == 0}
    for n in (2, 4):                                         # chunking moves the same bytes in more calls
        assert ours[n]["comm_wire_bytes"] == dsp[n]["comm_wire_bytes"]
    assert main(["report", str(out)]) == 0
    label = get_method(NAME).report.label            # its own, declared on its MethodSpec
    assert label and label in (out / "report" / "index.md").read_text(), "the report names the plugged-in method"
