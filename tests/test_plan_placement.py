"""The place diagnosis (bench/plan/placement.py): how much a configuration's place in its job moves
its score, fitted from rotated repeats. The scores here are synthetic (a fixture, said so): a known
place effect is laid on known configuration scores and must be recovered; a fixed order must say it
cannot tell. Milliseconds."""
import json
import math

import pytest

from dspbench.plan.placement import place_effect, place_line, placed
from dspbench.records.io import SCHEMA_VERSION
from dspbench.slurm.plan import rotated

TRUE = {"a": 8.0, "b": 7.5, "c": 7.0, "d": 6.0, "e": 5.5, "f": 5.0}     # synthetic scores, samples/s
FIRST_SLOW = {0: 0.8}                                                   # the first place 20% slow


def _jobs(order_for, repeats=4, effect=FIRST_SLOW, noise=None):
    keys = list(TRUE)
    out = []
    for r in range(repeats):
        for place, key in enumerate(order_for(keys, r, repeats)):
            wiggle = 1 + (noise[(r, key)] if noise else 0)
            out.append((key, place, TRUE[key] * effect.get(place, 1.0) * wiggle))
    return out


def test_a_first_place_penalty_is_recovered_from_rotated_repeats():
    got = place_effect(_jobs(rotated))
    ratio = got["ratio"]
    geo = math.exp(math.log(0.8) / 6)            # the reference: the places' geometric mean (0.963)
    assert ratio[0] == pytest.approx(0.8 / geo, rel=1e-6)                # -17.0%
    assert all(ratio[p] == pytest.approx(1 / geo, rel=1e-6) for p in range(1, 6))
    assert got == {"ratio": ratio, "configurations": 6, "records": 24}
    line = place_line(got)
    assert "first configuration of a job measured -17.0%" in line and "24 records of 6 configurations" in line


def test_no_place_effect_reads_as_none_through_noise():
    noise = {(r, k): 0.01 * ((hash((r, k)) % 5) - 2) for r in range(4) for k in TRUE}   # +-2%, fixed
    got = place_effect(_jobs(rotated, effect={}, noise=noise))
    assert all(abs(v - 1) < 0.03 for v in got["ratio"].values())


def test_a_fixed_order_cannot_tell_place_from_configuration():
    fixed = _jobs(lambda keys, r, n: keys)
    assert place_effect(fixed) is None
    assert "not separable" in place_line(None)


def test_places_are_line_order_within_each_file_among_measured_records(tmp_path):
    """A job appends its configurations' records to its own file in the order it ran them."""
    job = tmp_path / "records" / "1000_0.jsonl"
    job.parent.mkdir()
    rows = [{"run_id": "x", "status": "ok"}, {"run_id": "y", "status": "timeout"}, {"run_id": "z", "status": "ok"}]
    job.write_text("".join(json.dumps({**r, "schema_version": SCHEMA_VERSION}) + "\n" for r in rows))
    (tmp_path / "records" / "1001_0.jsonl").write_text(
        json.dumps({"run_id": "w", "status": "ok", "schema_version": SCHEMA_VERSION}) + "\n")
    got = placed(tmp_path, lambda r: r["status"] == "ok")
    assert [(r["run_id"], p) for r, p in got] == [("x", 0), ("z", 1), ("w", 0)]


def test_the_check_of_a_fixed_order_validation_says_it_cannot_tell(tmp_path, capsys):
    """The sixth committed validation ran every job's rows in predicted order (before `rotated`):
    its check must say place and configuration cannot be told apart, not print a number."""
    from pathlib import Path

    from dspbench.plan.check import main
    shape = Path(__file__).resolve().parents[1] / "results/plan-validation/mechanism-r6/200mbit-stdit3-tiny-T14-S224-i20-r4"
    assert main([str(shape / "plan.json"), str(shape / "results"), "--json", str(tmp_path / "c.json")]) == 0
    assert "place in the job: not separable" in capsys.readouterr().out
    assert json.loads((tmp_path / "c.json").read_text())["place_effect"] is None
