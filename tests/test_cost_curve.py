"""The device curve (bench/cost/curve.py): the meta-device trace accounts for every FLOP of the
analytic count, the fit recovers a known curve through a fixed probe latency, a curve profile
prices small problems by their host time, `--compiled` lowers it, and profiles without a curve keep
the constant efficiency unchanged."""
import dataclasses

import pytest

from dspbench.cost import curve as cv
from dspbench.cost.hardware import load_profile
from dspbench.cost.model import predict
from dspbench.models import Shape, get_config
from dspbench.models.params import flops_per_sample
from dspbench.records.config import RunConfig


@pytest.mark.parametrize("model,shape", [("stdit-xl", (2, 16, 1024)), ("full3d-1.3b", (1, 21, 1560)),
                                         ("stdit3-tiny", (1, 4, 16)), ("full3d-joint-tiny", (1, 4, 16))])
def test_the_trace_accounts_for_every_analytic_flop(model, shape):
    costs = cv.forward_costs(model, *shape)
    traced = sum(f * n for f, n in costs.gemms.items()) + sum(f for _, f in costs.attn) + costs.conv_flops
    assert traced == pytest.approx(shape[0] * flops_per_sample(get_config(model), Shape(1, *shape[1:])), rel=1e-6)
    assert costs.elementwise_bytes > 0 and costs.kernels > 100 * 0 + len(costs.attn)


def test_the_fit_recovers_a_known_curve_through_the_probe_latency():
    peak, frac, half, lat = 1e15, 0.8, 5e9, 4e-4
    rate = lambda x, f: f / (lat + f * (x + half) / (frac * peak * x))
    gemm = {f"t{n}_w{c}": rate(2.0 * n * c * c, 6.0 * n * c * c) for n in (256, 1024, 4096, 16384) for c in (1024, 4096)}
    attn = {f"l{L}_d128": rate(float(L), 3 * 4.0 * (65536 // L) * 16 * L * L * 128) for L in (256, 1024, 4096, 16384)}
    table, latency = cv.fit_curve({"gemm": gemm, "attn": attn, "call_s": 1e-4, "call_kernels": 5}, peak)
    assert table["gemm_peak_fraction"] == pytest.approx(frac, rel=0.05)
    assert table["gemm_half_flops"] == pytest.approx(half, rel=0.6)     # loosely fixed where the latency dominates
    assert latency["gemm_probe_latency_s"] == pytest.approx(lat, rel=0.1)
    assert table["host_s_per_kernel"] == pytest.approx(2e-5)
    # a CPU rehearsal against a GPU peak: fractions of 1e-5 keep their digits (never rounded to zero)
    slow, _ = cv.fit_curve({"gemm": {k: v * 1e-5 for k, v in gemm.items()}, "attn": {k: v * 1e-5 for k, v in attn.items()},
                            "call_s": 1e-4, "call_kernels": 5}, peak)
    assert 0 < slow["gemm_peak_fraction"] < 1e-4 and 0 < slow["attn_peak_fraction"] < 1e-4


def sample(model="full3d-1.3b", frames=21, spatial=1560, **kw):
    return RunConfig(method="single", model=model, frames=frames, spatial=spatial, gpus=1, sp=1, mode="sample",
                     dtype="bf16", sample_steps=2, **kw)


def test_a_curve_profile_prices_small_problems_by_their_host_time_and_compile_lowers_it():
    prof = load_profile("h200-ib-curve")
    tiny = sample("stdit-xl", 1, 16)
    eager, compiled = predict(tiny, prof).compute_s, predict(tiny, prof, compiled=True).compute_s
    host = cv.from_table(prof.curve).host_s(cv.forward_costs("stdit-xl", 1, 1, 16).kernels, 2, False)
    assert eager == pytest.approx(host) and compiled == pytest.approx(host * prof.curve.get("compiled_host_factor", 0.85))
    big = sample()
    assert predict(big, prof).compute_s == predict(big, prof, compiled=True).compute_s    # device-bound


def test_profiles_without_a_curve_keep_the_constant_efficiency():
    # a calibrated profile (no kernel rate table: bench/cost/hardware.prices_by_kernel) without a curve
    prof = dataclasses.replace(load_profile("h200-ib"), kind="calibrated")
    cfg = sample()
    const = flops_per_sample(get_config(cfg.model), Shape(1, 21, 1560)) * 2 / prof.flops("bf16")
    assert predict(cfg, prof).compute_s == pytest.approx(const)
    assert predict(cfg, dataclasses.replace(prof, curve={})).compute_s == pytest.approx(const)
