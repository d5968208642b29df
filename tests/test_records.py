"""The record contract (bench/records/): provenance, the oracle error as one float, version upgrades."""
import json

import pytest

from dspbench.cost.hardware import load_profile
from dspbench.cost.predict import predicted_record
from dspbench.facts.build import Outcome, build_record
from dspbench.records.config import RunConfig
from dspbench.records.io import SCHEMA_VERSION, append_record, read_records, upgrade, write_atomic


def test_build_record_says_where_its_numbers_came_from():
    cfg = RunConfig(method="dsp", model="stdit-tiny", gpus=2, sp=2)
    assert build_record(cfg, Outcome("error", "boom"))["source"] == "measured"
    assert build_record(cfg, Outcome("ok"), "synthetic")["source"] == "synthetic"
    with pytest.raises(ValueError, match="source"):
        build_record(cfg, Outcome("ok"), "guessed")


def test_every_record_carries_its_method_s_look_a_failed_one_too():
    """Reports draw a method from its records alone (`method_meta`): measured, failed or predicted."""
    from dspbench.methods import get_method
    cfg = RunConfig(method="ulysses", model="stdit-tiny", gpus=2, sp=2)
    want = get_method("ulysses").report.as_record()
    assert want["label"] and want["colour"] and want["table3"]
    assert build_record(cfg, Outcome("error", "boom"))["method_meta"] == want
    assert predicted_record(cfg, load_profile("a100-ib"))["method_meta"] == want


def test_a_predicted_oom_is_predicted_not_measured():
    cfg = RunConfig(method="single", model="stdit-xl", frames=256, spatial=4096, gpus=1, sp=1,
                    dtype="bf16", backend="nccl")
    rec = predicted_record(cfg, load_profile("a100-ib"))
    assert rec["status"] == "oom" and rec["source"] == "predicted", rec["error"]
    fits = predicted_record(RunConfig(method="dsp", model="stdit-tiny", gpus=2, sp=2), load_profile("h100-ib"))
    assert fits["status"] == "predicted" and fits["source"] == "predicted"


def test_version_1_records_are_upgraded_on_read(tmp_path):
    v1 = {"schema_version": 1, "run_id": "a", "status": "ok",
          "oracle_max_abs_err": {"output": 1e-7, "grads": 3e-7, "input_grad": 2e-7, "shape": [1, 4, 16], "depth": 2}}
    pred = {"schema_version": 1, "run_id": "b", "status": "predicted", "hardware_profile": "h100-ib",
            "oracle_max_abs_err": None}
    path = tmp_path / "r.jsonl"
    for rec in (v1, pred):
        path.open("a").write(json.dumps(rec) + "\n")
    (a, b), problems = read_records(path)
    assert problems == []
    assert a["schema_version"] == SCHEMA_VERSION and a["source"] == "measured"
    assert a["oracle_max_abs_err"] == 3e-7 and a["oracle_errors"]["shape"] == [1, 4, 16]
    assert b["source"] == "predicted" and b["oracle_max_abs_err"] is None


def test_current_records_pass_through_upgrade_unchanged(tmp_path):
    rec = build_record(RunConfig(method="dsp", model="stdit-tiny", gpus=2, sp=2), Outcome("timeout", "slow"))
    append_record(tmp_path / "r.jsonl", rec)
    (back,), _ = read_records(tmp_path / "r.jsonl")
    assert upgrade(back) == back and back["source"] == "measured" and back["comm_formula"] is None


def test_unknown_schema_versions_are_reported_not_read(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"schema_version": 99, "run_id": "x", "status": "ok"}) + "\n")
    recs, problems = read_records(path)
    assert recs == [] and "schema_version 99" in problems[0] and ":1:" in problems[0]


def test_write_atomic_replaces_whole_and_a_crash_leaves_the_old_file(tmp_path, monkeypatch):
    """Heartbeats, outcomes, the rendezvous port and manifests are read by other nodes while written."""
    target = tmp_path / "r1.r0.outcome"
    write_atomic(target, "old")
    write_atomic(target, "new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == [target.name]

    def crash(*_):
        raise OSError("killed between write and rename")
    monkeypatch.setattr("dspbench.records.io.os.replace", crash)
    with pytest.raises(OSError):
        write_atomic(target, "torn")
    assert target.read_text() == "new"                      # readers still see the whole old file
    leftovers = [p.name for p in tmp_path.iterdir() if p != target]
    assert leftovers and all(n.startswith(".") and n.endswith(".tmp") for n in leftovers)
    assert list(tmp_path.glob("r1.r*.outcome")) == [target]    # the outcome glob of slurm/results.py skips it


def test_the_dtype_names_of_the_schema_are_the_ones_the_model_maps_onto_torch():
    from dspbench.models.dtypes import TORCH_DTYPES, dtype_size
    from dspbench.records.config import DTYPES
    assert set(DTYPES) == set(TORCH_DTYPES)
    assert [dtype_size(d) for d in ("fp32", "bf16", "fp16")] == [4, 2, 2] and dtype_size(TORCH_DTYPES["bf16"]) == 2


def test_the_schema_choices_are_the_ones_the_methods_accept():
    """records states a2a and pad choices torch-free (it imports no methods): they must stay the methods'."""
    from dspbench.methods import padding
    from dspbench.methods.comm import layer
    from dspbench.records.config import A2A_STYLES, PAD_MODES
    assert A2A_STYLES == layer.A2A_STYLES and PAD_MODES == padding.PAD_MODES
