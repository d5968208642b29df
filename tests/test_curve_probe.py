"""The compute-curve probe (bench/calibrate/curve.py) on CPU at its small grid: every shape measured,
rates positive and finite, the fixed costs measured, the file written."""
import json
import math

from dspbench.calibrate import curve


def test_curve_probe_writes_every_shape(tmp_path):
    out = tmp_path / "curve.json"
    assert curve.main(["--device", "cpu", "--dtype", "fp32", "--small", "--iters", "1", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    grid = curve.SMALL_GRID
    assert set(d["gemm"]) == {f"t{n}_w{c}" for n in grid["tokens"] for c in grid["widths"]}
    assert set(d["attn"]) == {f"l{n}_d{h}" for n in grid["lens"] for h in curve.ATTN_HEAD_DIMS}
    for rate in [*d["gemm"].values(), *d["attn"].values()]:
        assert rate > 0 and math.isfinite(rate)
    assert 0 < d["launch_s"] < 1e-2 and 0 < d["call_s"] < 1e-1
    assert d["source"] == "measured" and d["device"] == "cpu"
