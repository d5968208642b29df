"""Calibration: structure of the table and the written profile (never timing), and the fit."""
from __future__ import annotations

import json

import pytest

from dspbench.calibrate.profile import fit, table
from dspbench.calibrate.command import parse_size
from dspbench.cost.tiers import steps
from dspbench.cost.hardware import dumps, from_dict, load_profile

OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")


def test_parse_size():
    assert parse_size("4K") == 4096 and parse_size("1M") == 1 << 20 and parse_size("512") == 512


def test_fit_recovers_alpha_and_bandwidth():
    rows = [{"op": "all_gather", "ranks": 4, "wire_bytes": w, "time_s": 3 * 2e-4 + w / 5e8,
             "size": w} for w in (1e4, 1e5, 1e6, 1e7)]
    (alpha, bw), = fit(rows).values()
    assert alpha == pytest.approx(2e-4) and bw == pytest.approx(5e8)
    assert steps("all_gather", 4) == 3


def test_dumps_round_trips():
    d = {"name": "x", "device": {"name": "cpu: y", "memory_gb": 1.5}, "compute": {"flops_per_s": {"fp32": 2e9}},
         "link": {"intra": {"alpha_s": 1e-3, "busbw_GBps": {"all_to_all": 0.1}}}, "sources": {"a.b": 'say "so"'}}
    import tomllib
    assert tomllib.loads(dumps(d, "c")) == d


def test_calibrate_world2_loopback(tmp_path, capsys):
    from dspbench.cli import main
    out = tmp_path / "p.toml"
    rc = main(["calibrate", "--gpus", "2", "--sizes", "4K,16K", "--iters", "1", "--warmup", "0",
               "--compute-iters", "1", "--frames", "4", "--spatial", "16", "--threads", "1",
               "--output", str(out), "--json", "--force"])   # one sample each: its spread is this machine's load
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    rows = res["collectives"]
    assert [(r["op"], r["size"]) for r in rows] == [(op, s) for op in OPS for s in (4096, 16384)]
    for r in rows:
        assert r["time_s"] > 0 and r["ranks"] == 2
        assert {"count", "algbw_GBps", "busbw_GBps", "wire_bytes"} <= set(r)
    assert table(rows).splitlines()[0].split()[:4] == ["op", "size(B)", "count", "time(us)"]
    prof = load_profile(str(out))
    assert prof.kind == "calibrated" and prof.flops("fp32") > 0 and prof.gpus_per_node == 2
    assert set(prof.inter.busbw_GBps) == set(OPS) == set(prof.inter.time_s_op) and prof.inter.ranks == 2
    a2a = {r["size"]: r["time_s"] for r in rows if r["op"] == "all_to_all"}
    assert prof.inter.measured_time("all_to_all", 4096, 2) == pytest.approx(a2a[4096])   # the table wins at n=2
    assert json.loads(out.with_suffix(".json").read_text())["compute"]["flops_per_s"] > 0
    assert from_dict(prof.raw).name == "calibrated"
    assert 0.0 <= prof.ring_overlap <= 1.0 and "CPU share of a" in prof.sources["overlap.ring"]


def test_one_rank_calibrates_compute_of_one_block_onto_a_base_profile(tmp_path, capsys):
    """The GPU check's path (one device): no collectives, a depth-1 model, the links from a datasheet."""
    from dspbench.cli import main
    from dspbench.cost.predict import predicted_record
    from dspbench.records.config import RunConfig
    out = tmp_path / "one.toml"
    args = ["calibrate", "--gpus", "1", "--compute-iters", "1", "--frames", "4", "--spatial", "16", "--threads", "1",
            "--model", "stdit-small", "--depth", "1", "--output", str(out), "--force"]
    assert main(args) == 2                                             # one rank measures no links
    assert "pass --base PROFILE" in capsys.readouterr().err
    assert main(args + ["--base", "h200-ib", "--name", "h200-measured"]) == 0
    base, prof = load_profile("h200-ib"), load_profile(str(out))
    raw = json.loads(out.with_suffix(".json").read_text())
    assert raw["collectives"] == [] and raw["overlap"] is None and raw["compute"]["depth"] == 1
    assert prof.name == "h200-measured" and prof.kind == "calibrated"
    from dspbench.calibrate.profile import compute_terms
    rate, overhead = compute_terms(raw["compute"])          # the two-shape fit (rate, per-module dispatch)
    assert prof.flops("fp32") == pytest.approx(rate) and prof.module_overhead_s == pytest.approx(overhead)
    assert raw["compute"]["small"]["shape"] == [1, 1, 16] and raw["compute"]["shape"] == [1, 4, 16]
    assert prof.flops("bf16") == base.flops("bf16")                   # untouched datasheet values
    assert (prof.intra, prof.inter, prof.memory_bytes) == (base.intra, base.inter, base.memory_bytes)
    assert "1 blocks" in prof.sources["compute.flops_per_s.fp32"]
    rec = predicted_record(RunConfig(method="dsp", model="stdit-small", frames=16, spatial=64, gpus=8, sp=8), prof)
    assert rec["status"] == "predicted"


def test_method_overheads_are_calibrated_at_one_shape_and_applied_at_that_sp_only(tmp_path, capsys):
    """`--methods`: each method trains at the calibration shape; the residual over the profile's own
    prediction is stored per method, so the calibration shape predicts its measured step again."""
    from dataclasses import replace
    from dspbench.cli import main
    from dspbench.cost.model import predict
    from dspbench.records.config import RunConfig
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--gpus", "2", "--sizes", "4K,64K", "--iters", "2", "--warmup", "0",
                 "--compute-iters", "2", "--frames", "4", "--spatial", "16", "--threads", "1",
                 "--methods", "dsp,ring", "--output", str(out), "--json", "--force"]) == 0
    res = json.loads(capsys.readouterr().out)
    prof = load_profile(str(out))
    assert set(prof.method_overhead_s) == {"dsp", "ring"} and prof.method_overhead_sp == 2
    for m, got in res["methods"].items():
        assert prof.method_overhead_s[m] >= 0 and f"minus this profile's prediction" in prof.sources[f"compute.method_overhead_s.{m}"]
        cfg = RunConfig.from_dict(got["config"])
        assert (cfg.frames, cfg.spatial, cfg.sp, cfg.mode) == (4, 16, 2, "train")
        step = predict(cfg, prof).step_s
        assert step == pytest.approx(max(got["step_s"], step - prof.method_overhead_s[m]))   # reproduces itself
        without = predict(cfg, replace(prof, method_overhead_s={})).compute_s
        assert predict(cfg, prof).compute_s == pytest.approx(without + prof.method_overhead_s[m])
        for other in (replace(cfg, mode="infer"), replace(cfg, gpus=4, sp=4)):      # not where it was not measured
            assert predict(other, prof).compute_s == pytest.approx(predict(other, replace(prof, method_overhead_s={})).compute_s)
