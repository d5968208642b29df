"""Calibration: structure of the table and the written profile (never timing), and the fit."""
from __future__ import annotations

import json
import statistics

import pytest

from dspbench.calibrate.profile import fit, table
from dspbench.calibrate.command import parse_size
from dspbench.cost.tiers import steps
from dspbench.cost.hardware import from_dict, load_profile
from dspbench.cost.profile_toml import dumps

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
    # the kernel classes were solved for, and the model's step is held against their sum (reported)
    assert {"s_per_byte_math", "s_per_byte_norm", "s_per_attn_tile"} <= set(prof.kernels)
    assert prof.calibration["kernel_step_ratio"] > 0 and "not applied" in prof.sources["calibration.kernel_step_ratio"]


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


def test_method_steps_are_calibrated_at_one_shape_and_reported_as_residuals_beside_the_kernels(tmp_path, capsys):
    """`--methods` on a CPU: each method trains at the calibration shape; the kernels are measured in
    the same calibration, so every method is priced from its traced kernels and the signed residual of
    each measured step over that prediction is reported per SP degree and method, never applied
    (the profile predicts the same with or without it)."""
    from dspbench.cli import main
    from dspbench.cost.model import predict
    from dspbench.records.config import RunConfig
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--gpus", "2", "--sizes", "4K,64K", "--iters", "2", "--warmup", "0",
                 "--compute-iters", "2", "--frames", "4", "--spatial", "16", "--threads", "1",
                 "--methods", "dsp,ring", "--method-iters", "3", "--method-repeats", "2", "--output", str(out),
                 "--json", "--force"]) == 0
    res = json.loads(capsys.readouterr().out)
    prof = load_profile(str(out))
    assert prof.kernels and prof.method_overhead_s == {}
    shares = prof.raw["calibration"]["method_residual_share"]
    assert set(shares) == {"2"} and set(shares["2"]) == {"dsp", "ring"}
    # dsp also trained under ZeRO 1 and 2 (DeepSpeed's engine), for its host work per parameter tensor
    assert set(res["methods"]["2"]) == {"dsp", "ring", "dsp@zero1", "dsp@zero2"}
    assert set(prof.zero_host_s_per_param_tensor) == {1, 2}
    assert all(v >= 0 for v in prof.zero_host_s_per_param_tensor.values())
    assert "under DeepSpeed ZeRO-1" in prof.sources["engine.zero_host_s_per_param_tensor.1"]
    assert RunConfig.from_dict(res["methods"]["2"]["dsp@zero2"]["config"]).zero == 2
    for m, got in ((m, g) for m, g in res["methods"]["2"].items() if "@" not in m):
        assert "reported, not applied" in prof.sources[f"calibration.method_residual_share.2.{m}"]
        cfg = RunConfig.from_dict(got["config"])
        assert (cfg.frames, cfg.spatial, cfg.sp, cfg.mode, cfg.iters) == (4, 16, 2, "train", 3)
        assert len(got["step_times_s"]) == 6 and len(got["round_step_s"]) == 2     # 2 rounds of 3 steps
        assert got["step_s"] == pytest.approx(statistics.median(got["round_step_s"]))
        predicted = predict(cfg, prof).step_s
        assert shares["2"][m] == pytest.approx((got["step_s"] - predicted) / got["step_s"], rel=1e-6, abs=1e-9)


def test_method_overheads_are_signed_per_sp_and_floored_at_half_the_compute():
    """A method the model over-prices gets a negative term (the measured step is the truth); each SP
    degree carries its own; a term larger than half the step's compute stops there."""
    from dataclasses import replace
    from dspbench.cost.model import predict
    from dspbench.records.config import RunConfig
    prof = load_profile("h100-ib")
    cfg = RunConfig(method="ring", model="stdit-small", frames=16, spatial=64, gpus=4, sp=2)
    base = predict(cfg, prof).compute_s
    terms = {2: {"ring": -0.1 * base}, 4: {"ring": 5.0}}
    assert predict(cfg, replace(prof, method_overhead_s=terms)).compute_s == pytest.approx(0.9 * base)
    assert predict(cfg, replace(prof, method_overhead_s={2: {"ring": -10 * base}})).compute_s == pytest.approx(base / 2)
    four = replace(cfg, sp=4)
    assert predict(four, replace(prof, method_overhead_s=terms)).compute_s == pytest.approx(
        predict(four, prof).compute_s + 5.0)
    dsp = replace(cfg, method="dsp")
    assert predict(dsp, replace(prof, method_overhead_s=terms)).compute_s == pytest.approx(predict(dsp, prof).compute_s)


def test_method_overheads_read_the_older_one_degree_form_and_refuse_a_mix():
    from dspbench.cost.hardware import from_dict
    old = from_dict({"name": "x", "compute": {"method_overhead_s": {"dsp": 0.01}, "method_overhead_sp": 4}})
    assert old.method_overhead_s == {4: {"dsp": 0.01}}
    new = from_dict({"name": "x", "compute": {"method_overhead_s": {"2": {"dsp": -0.01}, "4": {"ring": 0.02}}}})
    assert new.method_overhead_s == {2: {"dsp": -0.01}, 4: {"ring": 0.02}}
    for bad in ({"method_overhead_s": {"dsp": 0.01}},                                   # no degree
                {"method_overhead_s": {"dsp": 0.01, "2": {"ring": 0.0}}, "method_overhead_sp": 2}):   # a mix
        with pytest.raises(ValueError, match="method_overhead_s"):
            from_dict({"name": "x", "compute": bad})


def test_written_method_overheads_survive_the_toml_round_trip(tmp_path):
    from dspbench.cost.profile_toml import dumps
    d = {"name": "x", "compute": {"method_overhead_s": {"2": {"dsp": -0.0125}, "4": {"usp": 0.03}}}}
    (tmp_path / "p.toml").write_text(dumps(d))
    assert load_profile(str(tmp_path / "p.toml")).method_overhead_s == {2: {"dsp": -0.0125}, 4: {"usp": 0.03}}


@pytest.mark.parametrize("extra, message", [
    (["--methods", "dsp", "--method-sp", "3"], "--method-sp 3 does not divide --gpus 4"),
    (["--methods", "no_such_method"], "no_such_method"),
    (["--methods", "dsp,ulysses", "--method-sp", "2,4", "--heads-of-a-3-rank-world"], "--methods ulysses at --method-sp 3"),
    (["--methods", "dsp", "--method-iters", "0"], "argument --method-iters: must be >= 1, got 0"),   # argparse's
    (["--methods", "dsp", "--method-repeats", "0"], "argument --method-repeats: must be >= 1, got 0"),
])
def test_impossible_method_calibrations_exit_2_before_any_rank_starts(tmp_path, capsys, extra, message):
    from dspbench.cli import main
    out = tmp_path / "p.toml"
    args = ["calibrate", "--gpus", "4", "--frames", "4", "--spatial", "16", "--output", str(out)]
    if "--heads-of-a-3-rank-world" in extra:     # stdit-tiny's 4 heads do not split 3 ways
        args, extra = args[:2] + ["3"] + args[3:], ["--methods", "dsp,ulysses", "--method-sp", "3"]
    try:
        rc = main(args + extra)
    except SystemExit as e:     # argparse refuses a value out of its type's range
        rc = e.code
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_methods_all_is_every_registered_method_but_the_baseline_and_leaves_out_what_cannot_run(capsys):
    from dspbench.calibrate.command import method_list
    from dspbench.calibrate.methods import method_runs
    from dspbench.methods import available
    assert method_list("all") == [m for m in available() if m != "single"] and "dsp" in method_list("all")
    assert method_list(" dsp, ring ,") == ["dsp", "ring"]
    opts = {"model": "stdit-tiny", "frames": 4, "spatial": 16, "batch": 1, "dtype": "fp32", "backend": "gloo"}
    runs = method_runs(["dsp", "ulysses"], opts, [1, 3], 3, skip_unsupported=True)
    assert runs == {1: ["dsp", "ulysses"], 3: ["dsp"]}
    assert "leaving out ulysses at sp 3: ulysses splits attention heads" in capsys.readouterr().err
