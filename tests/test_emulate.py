"""The emulated-cluster command: a clean exit where namespaces cannot be made, the validation table,
and (where namespaces can be made: root with iproute2 and tc) a real smoke run."""
from __future__ import annotations

import json

import pytest

from dspbench.cli import main
from dspbench.cost.hardware import load_profile
from dspbench.calibrate.netns import burst_bytes, netns_unavailable


def test_emulate_without_namespaces_exits_cleanly(capsys):
    assert main(["emulate", "--no-netns"]) == 0
    err = capsys.readouterr().err
    assert "cannot build the emulated cluster" in err and "Nothing was set up" in err


def test_no_netns_env_is_reported(monkeypatch, capsys):
    monkeypatch.setenv("DSPBENCH_NO_NETNS", "1")
    assert "DSPBENCH_NO_NETNS" in netns_unavailable()
    assert main(["emulate", "--check-only"]) == 0
    assert "cannot build" in capsys.readouterr().err


def test_token_bucket_burst():
    assert burst_bytes("10mbit") == 3028               # two frames: no free burst after an idle gap
    assert burst_bytes("200mbit") == 25_000             # 1 ms at the rate
    assert burst_bytes("10gbit") == 1_250_000


# ---------------------------------------------------------------- the validation table (pure)
def _row(method, predicted, measured, setting="comm"):
    return {"setting": setting, "rate": "50mbit", "method": method, "predicted": predicted, "measured": measured,
            "pred_compute": [0.1] * len(predicted), "pred_comm_s": 0.5, "comm_MiB": 1.0}


def test_ratios_pair_rounds_and_the_verdict_counts_the_goal():
    from dspbench.calibrate.emulate import summarise, table, verdict
    # Round 2 is slow for everyone (a loaded machine): per-round ratios stay 2.0 for ulysses.
    rows = summarise([_row("dsp", [1.0, 1.0, 1.0], [1.0, 3.0, 1.0]),
                      _row("ulysses", [2.0, 2.0, 2.0], [2.0, 6.0, None]),
                      _row("ring", [3.0, 3.0, 3.0], [2.0, 6.0, 2.0])])
    uly, ring = rows[1], rows[2]
    assert uly["ratio_meas"] == 2.0 and uly["ratio_err"] == 0.0 and uly["meas_med"] == 4.0
    assert ring["ratio_meas"] == 2.0 and ring["ratio_err"] == 0.5
    text = table(rows)
    assert "| comm (50mbit) | ulysses |" in text and "+50%" in text and "| comm (50mbit) | dsp |" in text
    assert verdict(rows).startswith("Ratios baseline/DSP within 15% of the prediction: 1 of 2.")
    assert "(2 points), DSP is measured ahead at 2." in verdict(rows)


# ---------------------------------------------------------------- a real emulated cluster, where one can be made
@pytest.mark.skipif(netns_unavailable() is not None, reason=f"no network namespaces here: {netns_unavailable()}")
def test_smoke_setting_calibrates_predicts_and_measures_in_namespaces(tmp_path, capsys):
    out = tmp_path / "emu"
    # --force: the calibration's spread is this machine's load; the path is what is tested here.
    assert main(["emulate", "--settings", "smoke", "--methods", "dsp,ulysses", "--repeats", "1",
                 "--out", str(out), "--force", "--ns-prefix", "dspbt-", "--subnet", "10.76.0"]) == 0
    text = (out / "validation.md").read_text()
    assert "| smoke (1gbit) | dsp |" in text and "| smoke (1gbit) | ulysses |" in text
    assert "Ratios baseline/DSP within 15%" in text
    measured = [json.loads(x) for x in (out / "measured.jsonl").read_text().splitlines()]
    assert sorted(r["method"] for r in measured) == ["dsp", "ulysses"] and all(r["status"] == "ok" for r in measured)
    prof = load_profile(str(out / "emu-smoke.toml"))
    assert prof.kind == "calibrated" and prof.inter.ranks == 4 and "all_to_all" in prof.inter.time_s_op
