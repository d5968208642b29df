"""The ZeRO engine's host work (bench/calibrate/methods.py add_zero_host, [engine] of a profile):
counted per parameter tensor, priced only where a calibration measured it, on ZeRO steps only."""
from __future__ import annotations

from dataclasses import replace

import pytest

from dspbench.calibrate.methods import ZERO_METHOD, add_zero_host, calibration_config, zero_runs
from dspbench.cost.hardware import PROFILE_DIR, from_dict, load_profile
from dspbench.cost.model import param_tensor_count, predict
from dspbench.records.config import RunConfig

CPU_PROFILE = "results/plan-validation/mechanism-r4/profile-200mbit/tiers-profile.toml"   # calibrated, [kernels]
OPTS = {"model": "stdit-tiny", "frames": 16, "spatial": 256, "batch": 1, "dtype": "fp32", "backend": "gloo",
        "method_iters": 5}


def _cfg(zero: int) -> RunConfig:
    return RunConfig(method="dsp", model="stdit3-tiny", frames=20, spatial=160, gpus=4, sp=2, zero=zero,
                     backend="gloo", launcher="env")


def test_param_tensors_are_the_built_models():
    import torch
    from dspbench.models import build_model, get_config
    torch.manual_seed(0)
    assert param_tensor_count("stdit3-tiny") == len(list(build_model(get_config("stdit3-tiny")).parameters())) > 10


def test_a_zero_step_pays_the_engine_term_per_parameter_tensor_and_zero0_does_not():
    prof = load_profile(CPU_PROFILE)
    assert prof.zero_host_s_per_param_tensor == {}          # profiles before the term: nothing priced
    with_term = replace(prof, zero_host_s_per_param_tensor={1: 1e-4, 2: 3e-4})
    n = param_tensor_count("stdit3-tiny")
    for stage, per in ((1, 1e-4), (2, 3e-4)):
        before, after = predict(_cfg(stage), prof), predict(_cfg(stage), with_term)
        assert before.engine_host_s == 0.0 and after.engine_host_s == pytest.approx(per * n)
        assert after.step_s - before.step_s == pytest.approx(per * n)
    assert predict(_cfg(0), with_term).step_s == predict(_cfg(0), prof).step_s


@pytest.mark.parametrize("bad", ['"3" = 1e-4', '"1" = -1e-4'])
def test_an_engine_term_out_of_range_is_refused(tmp_path, bad):
    text = (PROFILE_DIR / "emulated-cpu.toml").read_text() + f"\n[engine]\nzero_host_s_per_param_tensor = {{ {bad} }}\n"
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match="zero_host_s_per_param_tensor"):
        load_profile(str(path))


def _measured(profile, extra_s: dict[int, float], shared_s: float = 0.05) -> dict:
    """A fixture, not a measurement: steps 'measured' as the profile's own prediction plus a shared
    misprice (both sides) plus each stage's extra host work."""
    out = {}
    for stage in (0, 1, 2):
        cfg = calibration_config(ZERO_METHOD, OPTS, 2, 4, stage)
        step = predict(cfg, profile).step_s + shared_s + extra_s.get(stage, 0.0)
        out[ZERO_METHOD if not stage else f"{ZERO_METHOD}@zero{stage}"] = {"step_s": step, "config": cfg.to_dict()}
    return {"2": out}


def test_the_engine_term_is_the_zero_residual_beyond_zero0s_per_parameter_tensor():
    prof = load_profile(CPU_PROFILE)
    d = {"sources": {}}
    add_zero_host(d, _measured(prof, {1: 0.020, 2: -0.004}), prof)
    n = param_tensor_count("stdit-tiny")
    got = d["engine"]["zero_host_s_per_param_tensor"]
    assert got["1"] == pytest.approx(0.020 / n) and got["2"] == 0.0    # the shared 50 ms cancels; negative -> 0
    assert "20.0 ms of host work" in d["sources"]["engine.zero_host_s_per_param_tensor.1"]
    assert "negative: measured as 0" in d["sources"]["engine.zero_host_s_per_param_tensor.2"]
    # and it reads back into a profile that prices it
    assert from_dict({**prof.raw, "engine": d["engine"]}).zero_host_s(1) == pytest.approx(0.020 / n)


def test_zero_runs_measure_stages_1_and_2_beside_dsps_zero0_run():
    said = []
    assert zero_runs(OPTS, {2: ["ring"]}, 4, said.append) == {}          # no dsp run: no baseline
    assert zero_runs(OPTS, {2: ["ring", "dsp"], 4: ["dsp"]}, 4, said.append) == {
        "sp": 2, "dsp@zero1": 1, "dsp@zero2": 2}
    assert said == []


def test_plan_explain_shows_the_engine_term_where_it_is_priced():
    from dspbench.cost.mechanism import explain, text
    prof = replace(load_profile(CPU_PROFILE), zero_host_s_per_param_tensor={1: 1e-4})
    lines = lambda cfg: "\n".join(text(explain(cfg, prof, predict(cfg, prof))))
    assert "ZeRO engine host work" in lines(_cfg(1))
    assert "ZeRO engine host work" not in lines(_cfg(0))
