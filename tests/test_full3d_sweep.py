"""The shipped full3d sweeps: the CPU smoke sweep runs end to end (every method oracle-checked,
DSP recorded not applicable with its reason) and the GPU sweep plans what its comments say."""
import pytest

from dspbench.methods import Dims, get_method
from dspbench.methods.dsp import NOT_APPLICABLE
from dspbench.models import Shape, get_config


@pytest.mark.gloo
def test_smoke_sweep_runs_every_method_and_records_dsp_not_applicable(tmp_path):
    from dspbench.cli import main
    from dspbench.records.io import read_dir
    out = tmp_path / "full3d_smoke"
    assert main(["sweep", "full3d_smoke", "--results", str(out)]) == 0
    recs, problems = read_dir(out / "records")
    assert problems == []
    by = {(r["model"], r["method"]): r for r in recs}
    methods = ("ulysses", "ring", "usp", "allgather_kv", "megatron_sp")
    for model in ("full3d-joint-tiny",):
        dsp = by[(model, "dsp")]
        assert dsp["status"] == "unsupported" and dsp["error"].startswith(NOT_APPLICABLE)
        for m in methods:
            r = by[(model, m)]
            assert r["status"] == "ok", r.get("error")
            assert r["oracle_max_abs_err"] < 1e-5
    assert len(recs) == 6


def test_gpu_sweep_plans_wan_shapes_and_every_method():
    from dspbench.slurm.plan import make_plan
    from dspbench.slurm.spec import load_sweep
    plan = make_plan(load_sweep("full3d_wan"), "local", {}, set())
    # models x (480p, 720p) x methods x repeats, and 14B at 480p sharded on T (padded 21 -> 24 frames)
    assert len(plan.points) == 4 * 2 * 9 * 3 + 2 * 4 * 3
    padded = [c for c in plan.points if c.shard == "T"]
    assert {get_method(c.method).check_pad(get_config(c.model), Shape(1, 21, 1560), Dims(sp=8, shard="T"))
            for c in padded} == {None}
    assert {(c.model, c.spatial, c.frames, c.shard) for c in plan.points} >= {
        ("full3d-14b", 1560, 21, "S"), ("full3d-14b", 3600, 21, "S")}
    # The methods' own verdicts (the plan's come after the environment's: no 8 GPUs here); the
    # library-backed methods are left out (their verdict depends on what is installed).
    reasons = {(c.model, c.method): get_method(c.method).check(get_config(c.model), Shape(c.batch, c.frames, c.spatial),
                                                               Dims(sp=c.sp, shard=c.shard))
               for c in plan.points
               if c.method not in ("ring_flash", "ulysses_deepspeed", "torch_cp") and c.shard == "S"}
    assert reasons[("full3d-14b", "dsp")].startswith(NOT_APPLICABLE)
    assert "heads=12 is not divisible" in reasons[("full3d-1.3b", "ulysses")]
    assert reasons[("full3d-1.3b", "usp")] is None and reasons[("full3d-14b", "ulysses")] is None
    # 14B classes: all but DSP; 1.3B (12 heads): ring, usp, allgather_kv (ulysses and megatron_sp split heads)
    assert sum(why is None for why in reasons.values()) == 2 * 5 + 2 * 3


def test_report_tables_show_not_applicable_apart_from_unsupported():
    import pandas as pd
    from dspbench.reports.provenance import normalise
    from dspbench.reports.tables import ROW, _failures
    row = dict(model="full3d-tiny", mode="train", dtype="fp32", batch=1, frames=4, spatial=16, gpus=4, sp=4)
    runs = pd.DataFrame([normalise(r) for r in (
        {**row, "method": "dsp", "status": "unsupported", "error": NOT_APPLICABLE + " (full3d's ...)"},
        {**row, "method": "ulysses", "status": "unsupported", "error": "frames T=6 is not divisible by ..."},
        {**row, "method": "ring", "status": "ok", "error": None})])
    fails = _failures(runs)
    key = tuple(row[c] for c in ROW) + ("measured",)
    assert fails[key + ("dsp",)] == "n/a" and fails[key + ("ulysses",)] == "unsupported"
    assert key + ("ring",) not in fails


def test_predictions_on_full3d_name_dsp_not_applicable_and_price_every_method():
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.memory import block_elems
    from dspbench.cost.paper_full3d import METHODS, _inference_row
    from dspbench.cost.predict import predicted_record
    from dspbench.records.config import RunConfig
    prof, recs = load_profile("h100-ib"), []
    row = _inference_row(lambda r: recs.append(r) or r, prof, "full3d-14b", "720p", 21, 3600, 8)
    by = {r["method"]: r for r in recs}
    assert list(by) == list(METHODS) and row.split(" | ")[4] == "n/a"
    assert by["dsp"]["status"] == "unsupported" and by["dsp"]["error"].startswith(NOT_APPLICABLE)
    assert all(by[m]["status"] == "predicted" and by[m]["source"] == "predicted" for m in METHODS[1:])
    # Megatron-SP moves the most (8M per layer), Ulysses and USP (8 x 1 here) the same.
    wire = {m: by[m]["comm_wire_bytes"] for m in METHODS[1:]}
    assert max(wire, key=wire.get) == "megatron_sp" and wire["ulysses"] == wire["usp"]
    # Memory per block: one self-attention, no cross-attention with joint text, Wan's MLP width.
    assert block_elems(get_config("full3d-joint-14b")) == 8 + 3 + 2 * 13824 / 5120
    cfg = RunConfig(method="usp", model="full3d-14b", frames=21, spatial=3600, gpus=16, sp="auto", dtype="bf16",
                    grad_ckpt=True, backend="nccl", shard="S", zero=2)
    assert predicted_record(cfg, prof)["sp"] == 2                # minimum SP that fits at 720p
    # --sp auto: not applicable at every degree is said once, as the reason (reports show n/a).
    dsp = predicted_record(RunConfig(**{**cfg.to_dict(), "method": "dsp"}), prof)
    assert dsp["status"] == "unsupported" and dsp["error"].startswith(NOT_APPLICABLE) and "sp=" not in dsp["error"]
