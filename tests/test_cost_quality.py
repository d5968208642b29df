"""Calibration that knows its quality (spread, load, refusal), predicted intervals, and a profile that
no prediction changes (issue 13 items 3 and 4). Timing-free except the one real calibration."""
from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import pytest


from dspbench.calibrate import quality
from dspbench.cost.hardware import load_profile
from dspbench.cost.profile_toml import dumps
from dspbench.cost.predict import predicted_record
from dspbench.records.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("dsp", "ulysses", "ring", "megatron_sp", "usp")


def _result(compute=(1.0, 1.0, 1.0), recheck=1.0, a2a=(1.0, 1.0, 1.0)):
    comp = {"fwd_bwd_s": sorted(compute)[len(compute) // 2], "fwd_bwd_times_s": list(compute), "recheck_s": recheck}
    return {"compute": comp, "overlap": None,
            "collectives": [{"op": "all_to_all", "size": 4096, "times_s": list(a2a)}]}


def test_quality_warns_on_load_spread_and_recheck_and_refuses_when_meaningless():
    idle = {"loadavg_1m": 0.5, "loadavg_5m": 0.5, "cores": 2}
    q = quality.assess(_result(), idle, idle)
    assert q["warnings"] == [] and q["worst_spread"] == 0.0 and quality.meaningless(q) is None
    assert q["compute_range"] == [1.0, 1.0] and q["link_range"] == {"all_to_all": [1.0, 1.0]}
    busy = {"loadavg_1m": 9.0, "loadavg_5m": 9.0, "cores": 2}
    q = quality.assess(_result(compute=(1.0, 1.1, 1.3), recheck=2.0, a2a=(1.0, 2.0, 4.0)), busy, idle)
    text = " | ".join(q["warnings"])
    assert "machine loaded: load average 9.0 on 2 cores" in text
    assert "all_to_all: repeated measurements' interquartile range 75%" in text and "compute re-checked" in text
    assert q["link_range"]["all_to_all"] == [0.5, 2.0] and q["worst_term"] == "all_to_all"
    assert q["link_range_by_size"]["all_to_all"] == [[4096, 0.5, 2.0]]
    assert "all_to_all spread 75%" in quality.meaningless(q)


def test_calibrate_refuses_a_meaningless_profile_unless_forced(tmp_path, capsys, monkeypatch):
    """A real world-2 calibration; the threshold is lowered so that any spread is too much."""
    from dspbench.cli import main
    monkeypatch.setattr(quality, "MAX_SPREAD", -1.0)
    out = tmp_path / "p.toml"
    args = ["calibrate", "--gpus", "2", "--sizes", "4K,16K", "--iters", "3", "--warmup", "0", "--compute-iters", "2",
            "--frames", "4", "--spatial", "16", "--threads", "1", "--gemm-widths", "16", "--overlap-repeats", "2",
            "--output", str(out)]
    assert main(args) == 2 and not out.exists()
    assert "refusing to write a profile" in capsys.readouterr().err
    assert main(args + ["--force"]) == 0
    prof = load_profile(str(out))
    cal = prof.calibration
    # the conditions as this machine reports them (cores >= 1, load >= 0 held whatever was recorded),
    # and the load warning exactly when the load before calibrating exceeded the cores
    import os
    assert cal["cores"] == (os.cpu_count() or 1) and isinstance(cal["loadavg_1m"], float)
    assert any(w.startswith("machine loaded") for w in cal["warnings"]) == (cal["loadavg_1m"] > cal["cores"])
    assert set(cal["link_range"]) == {"all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv"}
    for lo, hi in [cal["compute_range"], *cal["link_range"].values()]:
        assert 0 < lo <= 1.0 <= hi
    assert len(cal["overlap_fractions"]) == 2
    assert prof.gemm_rate(16, 1, "fp32") > 0 and prof.gemm_rate(16, 2, "fp32") > 0 and prof.gemm_rate(32, 1, "fp32") is None
    raw = json.loads(out.with_suffix(".json").read_text())
    assert len(raw["compute"]["fwd_bwd_times_s"]) == 2 and all(len(r["times_s"]) == 3 for r in raw["collectives"])


def _calibrated(tmp_path, ranges=True) -> Path:
    """A calibrated profile (written as calibrate writes it) with a measured table and spread."""
    table = {op: [[4096.0, 1e-3], [1048576.0, 0.05], [4194304.0, 0.2]]
             for op in ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")}
    link = {"alpha_s": 1e-3, "bw_GBps": 0.02, "efficiency": 1.0, "ranks": 4, "time_s_op": table}
    d = {"name": "emu", "kind": "calibrated", "device": {"name": "cpu", "memory_gb": 8.0, "gpus_per_node": 1},
         "compute": {"flops_per_s": {"fp32": 2e10}, "optimizer_Bps": 1e9,
                     "gemm_flops_per_s": {"w64_tp1": 2e10, "w64_tp2": 1.5e10, "w64_tp4": 1e10}, "gemm_dtype": "fp32"},
         "link": {"intra": link, "inter": link}, "overlap": {"ring": 0.3}}
    if ranges:
        d["calibration"] = {"compute_range": [0.9, 1.2], "overlap_fractions": [0.1, 0.3, 0.5],
                            "link_range": {op: [0.8, 1.3] for op in table}, "warnings": [],
                            "link_range_by_size": {op: [[4096.0, 0.8, 1.3], [1048576.0, 0.95, 1.1],
                                                        [4194304.0, 0.95, 1.05]] for op in table}}
    path = tmp_path / "emu.toml"
    path.write_text(dumps(d))
    return path


def test_predicted_intervals_bracket_the_point(tmp_path):
    prof = load_profile(str(_calibrated(tmp_path)))
    for m in METHODS:
        rec = predicted_record(RunConfig(method=m, model="stdit3-tiny", frames=8, spatial=64, gpus=4, sp=4), prof)
        assert rec["step_time_low_s"] < rec["step_time_median_s"] < rec["step_time_high_s"], m
        if m == "dsp":
            assert rec["ratio_to_dsp"] is None
        else:
            assert rec["ratio_to_dsp_low"] <= rec["ratio_to_dsp"] <= rec["ratio_to_dsp_high"], m
            assert rec["ratio_to_dsp_low"] < rec["ratio_to_dsp_high"], m
    bare = load_profile(str(_calibrated(tmp_path, ranges=False)))       # no measured spread: no interval
    rec = predicted_record(RunConfig(method="ulysses", model="stdit3-tiny", frames=8, spatial=64, gpus=4, sp=4), bare)
    assert rec["step_time_low_s"] is None and rec["ratio_to_dsp_low"] is None and rec["ratio_to_dsp"] > 0


def test_narrow_gemms_cost_what_calibration_measured_and_only_where_weights_are_sharded(tmp_path):
    from dataclasses import replace
    prof = load_profile(str(_calibrated(tmp_path)))
    flat = replace(prof, gemm_flops_per_s={})          # the same profile without the GEMM-width term
    for m in METHODS:
        cfg = RunConfig(method=m, model="stdit3-tiny", frames=8, spatial=64, gpus=4, sp=4)
        a, b = predicted_record(cfg, prof), predicted_record(cfg, flat)
        if m == "megatron_sp":   # rate(64, 4) is half rate(64, 1): the sharded linears take twice as long
            assert a["predicted_compute_time_s"] > b["predicted_compute_time_s"] * 1.2
        else:
            assert a["predicted_compute_time_s"] == b["predicted_compute_time_s"], m


def test_predicting_a_grid_never_changes_the_profile(tmp_path):
    """Fit nothing per configuration: the profile object and its file are the same after any prediction."""
    path = _calibrated(tmp_path)
    before = path.read_bytes()
    prof = load_profile(str(path))
    snapshot = copy.deepcopy(prof)
    for model in ("stdit3-tiny", "axial3d-tiny", "stdit-small"):
        for T, S in ((8, 64), (16, 64), (8, 128)):
            for m in METHODS:
                for sp in (2, 4):
                    predicted_record(RunConfig(method=m, model=model, frames=T, spatial=S, gpus=4, sp=sp), prof)
    assert prof == snapshot and prof.raw == snapshot.raw and prof.calibration == snapshot.calibration
    assert path.read_bytes() == before


def test_the_cost_model_has_no_per_method_branch():
    """No per-method fudge factor: the pricing code never compares a method name and names no method;
    what differs between methods comes from their specs (plan, sharded_params)."""
    names = set(METHODS) | {"single", "ulysses_deepspeed"}
    for f in ("model.py", "comm.py", "hardware.py", "interval.py", "memory.py"):
        tree = ast.parse((ROOT / "bench" / "cost" / f).read_text())
        consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        # a profile's schema keys ([overlap] ring: a measured or datasheet value) are read with .get()
        consts -= {a.value for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "attr", "") == "get"
                   for a in c.args if isinstance(a, ast.Constant)}
        assert not consts & names, (f, consts & names)
        for n in ast.walk(tree):
            if isinstance(n, ast.Compare):
                attrs = {a.attr for a in ast.walk(n) if isinstance(a, ast.Attribute)}
                assert "method" not in attrs, f"{f}:{n.lineno} compares a method"


def test_each_table_point_moves_by_its_own_sizes_range(tmp_path):
    from dspbench.cost.interval import at
    prof = load_profile(str(_calibrated(tmp_path)))
    hi = at(prof, {"op:all_to_all": 1})
    pts = dict((s, t) for s, t in hi.inter.time_s_op["all_to_all"])
    assert pts[4096.0] == 1e-3 * 1.3 and pts[1048576.0] == 0.05 * 1.1 and pts[4194304.0] == 0.2 * 1.05
    assert hi.inter.time_s_op["all_gather"] == prof.inter.time_s_op["all_gather"]     # other ops untouched
    assert at(prof, {"compute": 0}).flops("fp32") == prof.flops("fp32") / 0.9


def test_compute_at_two_shapes_separates_the_flop_rate_from_per_module_dispatch():
    from dspbench.calibrate.profile import compute_terms
    main = {"flops": 3e9, "fwd_bwd_s": 0.35, "flops_per_s": 3e9 / 0.35, "modules": 50,
            "small": {"flops": 1e9, "fwd_bwd_s": 0.15}}
    rate, overhead = compute_terms(main)
    assert rate == pytest.approx(1e10) and overhead == pytest.approx(1e-3)
    assert compute_terms({**main, "small": {"flops": 1e9, "fwd_bwd_s": 0.4}}) == (main["flops_per_s"], 0.0)
    assert compute_terms({k: v for k, v in main.items() if k != "small"}) == (main["flops_per_s"], 0.0)


def test_dispatch_overhead_is_per_module_and_the_same_for_every_method(tmp_path):
    from dataclasses import replace
    from dspbench.cost.model import module_count
    prof = load_profile(str(_calibrated(tmp_path)))
    slow = replace(prof, module_overhead_s=1e-3)
    for model in ("stdit3-tiny", "axial3d-tiny"):
        for m in METHODS:
            cfg = RunConfig(method=m, model=model, frames=8, spatial=64, gpus=4, sp=4)
            extra = predicted_record(cfg, slow)["predicted_compute_time_s"] - predicted_record(cfg, prof)["predicted_compute_time_s"]
            assert extra == pytest.approx(1e-3 * module_count(model)), (model, m)
    assert module_count("stdit3-tiny") != module_count("axial3d-tiny")


def test_a_collectives_spread_weighs_each_size_by_its_time():
    """Millisecond jitter of a 4 KiB call (200% of itself) is small against a 1 MiB call's 70 ms;
    the same relative jitter at 1 MiB is not."""
    small = {"op": "all_reduce", "size": 4096, "times_s": [0.001, 0.003, 0.001, 0.003, 0.002]}
    steady = {"op": "all_reduce", "size": 1 << 20, "times_s": [0.070, 0.071, 0.070, 0.069, 0.070]}
    assert quality.spread(small["times_s"]) == pytest.approx(1.0)
    assert quality.ladder_spreads([small, steady])["all_reduce"] < 0.05
    noisy = {**steady, "times_s": [0.035, 0.105, 0.035, 0.105, 0.070]}
    assert quality.ladder_spreads([small, noisy])["all_reduce"] > 0.9
    idle = {"loadavg_1m": 0.5, "loadavg_5m": 0.5, "cores": 2}
    res = {"compute": {"fwd_bwd_s": 1.0, "fwd_bwd_times_s": [1.0, 1.0], "recheck_s": 1.0}, "overlap": None,
           "collectives": [small, steady]}
    q = quality.assess(res, idle, idle)
    assert quality.meaningless(q) is None and q["warnings"] == []
    assert q["link_range_by_size"]["all_reduce"][0] == [4096, 0.5, 1.5]     # the per-size range is kept
