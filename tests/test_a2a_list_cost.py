"""`--a2a list` (the reference code's all-to-all) is priced by its measured extra copies: calibrate
measures it beside all_to_all_single (bench/calibrate/a2a_style.py), the profile stores the extra
seconds per byte, and predict adds exactly that per all-to-all byte. Whether a fresh measurement falls within the
calibration's band is a timing claim: tests/test_benchmarks.py measures it under `make bench`."""
import dataclasses
import statistics

import pytest

from dspbench.calibrate.a2a_style import bench_a2a_styles
from dspbench.cost.hardware import load_profile
from dspbench.cost.model import predict
from dspbench.records.config import RunConfig
from dspbench.run.ranks import run_ranks

SIZES = (2 << 20, 8 << 20)


def _probe(sizes):
    return bench_a2a_styles(sizes, iters=5, warmup=1, device="cpu")


def test_the_priced_difference_is_the_measured_extra_per_all_to_all_byte():
    prof = load_profile("h800-nvlink")
    cfg = RunConfig(method="dsp", model="stdit-xl", frames=64, spatial=4096, gpus=4, sp=4, mode="train", dtype="bf16")
    single, listed = predict(cfg, prof), predict(dataclasses.replace(cfg, a2a="list"), prof)
    from dspbench.methods import Dims, get_method
    from dspbench.models import Shape, get_config
    plan = get_method("dsp").plan(get_config("stdit-xl"), Shape(1, 64, 4096), Dims(sp=4, dp=1), "bf16", "train")
    a2a_bytes = sum(o.count * o.payload for _, o in plan if o.op == "all_to_all")
    assert listed.step_s - single.step_s == pytest.approx(a2a_bytes * prof.a2a_list_extra_s_per_byte())
    assert prof.a2a_list_extra_s_per_byte() == pytest.approx(4 / (prof.hbm_Bps * 0.8))    # the stated assumption
    measured = dataclasses.replace(prof, raw={**prof.raw, "compute": {**prof.raw["compute"], "a2a_list_extra_s_per_byte": 1e-9}})
    assert predict(dataclasses.replace(cfg, a2a="list"), measured).step_s - single.step_s == pytest.approx(a2a_bytes * 1e-9)


@pytest.mark.gloo
def test_the_probe_reports_every_size_and_prices_the_median_extra_per_byte():
    """The probe's arithmetic, not its timing (that is a benchmark: tests/test_benchmarks.py): one point per
    size, each with the payload it moved and both styles timed, and the stored figure is the median of the
    points' extra seconds per byte, clamped at zero, with their range beside it."""
    res = run_ranks(_probe, 2, SIZES)[0]
    points = res["points"]
    assert len(points) == len(SIZES), res
    for size, p in zip(SIZES, points):
        assert 0 < p["size"] <= size and p["single_s"] > 0 and p["list_s"] > 0, p
        assert p["extra_s_per_byte"] == pytest.approx((p["list_s"] - p["single_s"]) / p["size"])
    per_byte = [p["extra_s_per_byte"] for p in points]
    assert res["extra_s_per_byte"] == pytest.approx(max(0.0, statistics.median(per_byte)))
    assert res["range"] == [min(per_byte), max(per_byte)]
