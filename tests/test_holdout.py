"""The held-out protocol: its table (pure) and, where namespaces can be made, a CI-sized real run."""
from __future__ import annotations

import json

import pytest

from dspbench.calibrate.holdout import CALIB_MODEL, CALIB_SHAPE, GRIDS, grid_points
from dspbench.calibrate.holdout_table import points_table, summary, with_ratios
from dspbench.calibrate.netns import netns_unavailable


def _row(method, rnd, measured, pred, low=None, high=None, ratio=None, rlow=None, rhigh=None):
    return {"rate": "1gbit", "model": "stdit3-tiny", "T": 8, "S": 64, "method": method, "round": rnd,
            "loadavg_1m": 2.0, "measured": measured, "pred": pred, "pred_low": low, "pred_high": high,
            "pred_compute": 0.1, "pred_comm": 0.1, "ratio_pred": ratio, "ratio_low": rlow, "ratio_high": rhigh}


def test_ratios_pair_each_round_with_its_own_dsp_launch_and_every_point_is_listed():
    rows = with_ratios([_row("dsp", 0, 1.0, 1.0, 0.9, 1.1), _row("dsp", 1, 2.0, 1.0, 0.9, 1.1),
                        _row("ring", 0, 2.0, 2.2, 2.0, 2.4, 2.2, 2.0, 2.5),   # ratio 2.0 measured: +10%, covered
                        _row("ring", 1, 6.0, 2.2, 2.0, 2.4, 2.2, 2.0, 2.5),   # ratio 3.0: -27%, not covered
                        _row("ring", 2, None, 2.2, 2.0, 2.4, 2.2, 2.0, 2.5)])  # a failed launch
    ring = [r for r in rows if r["method"] == "ring"]
    assert [r["ratio_meas"] for r in ring] == [2.0, 3.0, None]
    assert ring[0]["ratio_within"] and ring[0]["ratio_covered"] and ring[0]["step_covered"]
    assert not ring[1]["ratio_within"] and ring[1]["ratio_covered"] is False and ring[1]["step_err"] < -0.6
    s = summary(rows)
    assert "ratios within 15% of the prediction: 1/2 (50%)" in s and "covers the measured ratio: 1/2 (50%)" in s
    assert "failed launches: 1 of 5" in s and "ring/dsp: within 15% 1/2 (50%)" in s
    table = points_table(rows)
    assert len(table.splitlines()) == 2 + 5 and "| ring | 1 |" in table and "**no**" in table


def test_the_grid_never_touches_the_calibration_model_or_shape():
    for grid in GRIDS.values():
        pts = grid_points(grid, 4, ("dsp", "ring"))
        assert all(p.model != CALIB_MODEL and (p.frames, p.spatial) != CALIB_SHAPE for p in pts)
    full = GRIDS["full"]
    assert len(full["models"]) >= 2 and len(full["shapes"]) >= 3 and len(full["rates"]) >= 2
    assert len({m.split("-")[0] for m in full["models"]} | {CALIB_MODEL.split("-")[0]}) == 3   # three layouts


@pytest.mark.skipif(netns_unavailable() is not None, reason=f"no network namespaces here: {netns_unavailable()}")
def test_holdout_smoke_calibrates_once_then_predicts_and_measures_in_namespaces(tmp_path, capsys):
    from dspbench.cli import main
    from dspbench.cost.hardware import load_profile
    out = tmp_path / "ho"
    # --force: a CI machine's spread is whatever its load is; the protocol's path is what is tested here.
    assert main(["emulate", "--protocol", "holdout", "--grid", "smoke", "--repeats", "1", "--methods", "dsp,ulysses",
                 "--ns-prefix", "dspht-", "--subnet", "10.78.0", "--out", str(out), "--force"]) == 0
    text = (out / "holdout.md").read_text()
    assert "ratios within 15%" in text and "| 1gbit | stdit3-tiny | 4 x 32 | ulysses | 0 |" in text
    prof = load_profile(str(out / "profile-1gbit.toml"))
    assert prof.kind == "calibrated" and prof.calibration["link_range"] and prof.gemm_rate(64, 4, "fp32")
    preds = [json.loads(x) for x in (out / "predicted.jsonl").read_text().splitlines()]
    assert sorted(p["method"] for p in preds) == ["dsp", "ulysses"] and preds[0]["step_time_low_s"] is not None
    measured = [json.loads(x) for x in (out / "measured.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in measured) and len(measured) == 2
    raw = json.loads((out / "profile-1gbit.json").read_text())
    assert raw["compute"]["model"] == CALIB_MODEL and raw["compute"]["shape"][1:] == [CALIB_SHAPE[0] // 4, CALIB_SHAPE[1]]


def test_holdout_without_namespaces_exits_cleanly(capsys):
    from dspbench.cli import main
    assert main(["emulate", "--protocol", "holdout", "--no-netns"]) == 0
    assert "Nothing was set up" in capsys.readouterr().err


def test_round_to_round_spread_of_the_measured_ratio_is_reported():
    rows = with_ratios([_row("dsp", 0, 1.0, 1.0), _row("dsp", 1, 1.0, 1.0),
                        _row("ring", 0, 2.0, 2.0, ratio=2.0), _row("ring", 1, 3.0, 2.0, ratio=2.0)])
    assert "round to round" in summary(rows) and "median 40%, max 40% over 1 points" in summary(rows)
