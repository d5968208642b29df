"""The one term fitted to published points (bench/cost/tune.py): read from the tuning split only, and the
tuned profile holds the fit's optimum (to the grid's 1 us)."""
from __future__ import annotations

from dspbench.cost import tune
from dspbench.cost.hardware import load_profile


def test_the_fit_reads_tuning_points_only():
    points = tune.tuning_points("h100-ib")
    assert len(points) == 6
    assert {r["published"]["split"] for r in points} == {"tune"}
    assert {r["published"]["software"] for r in points} == {"eager"}     # the compiled column is held out


def test_the_tuned_profile_holds_the_fitted_value():
    prof = load_profile("h100-ib-tuned")
    h = prof.curve["host_s_per_kernel"]
    points = tune.tuning_points("h100-ib")
    here = tune.loss(prof, points)
    for step in (-1e-6, 1e-6):            # a local optimum at the fine grid's step: run python -m dspbench.cost.tune
        assert here <= tune.loss(tune.with_host(prof, h + step), points)
    assert prof.kind == "tuned" and "dspbench.cost.tune" in prof.sources["compute.curve"]
    # every other term is h100-ib's datasheet value: the fit moved one term only
    base = load_profile("h100-ib")
    assert (prof.peak_flops, prof.hbm_Bps, prof.intra, prof.inter) == (base.peak_flops, base.hbm_Bps, base.intra, base.inter)
