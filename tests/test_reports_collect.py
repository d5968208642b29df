"""Loading a sweep: corrupt lines reported with file:line and skipped, duplicates resolved."""
import json
import shutil
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
from dspbench.reports.collect import load_sweep  # noqa: E402

SAMPLE = Path(__file__).parent / "data" / "sample_results" / "cpu-small"


@pytest.fixture(scope="module")
def sweep():
    return load_sweep(SAMPLE)


def test_corrupt_line_reported_with_file_and_line_and_skipped(sweep):
    corrupt = [p for p in sweep.problems if "corrupt record skipped" in p]
    assert len(corrupt) == 1
    assert corrupt[0].startswith(f"{SAMPLE / 'jobs' / 'job-1.jsonl'}:17: ")
    # 38 runs survive: 6 single + 4 methods x 2 GPU counts x 2 shapes x 2 repeats.
    assert len(sweep.runs) == 38
    assert sweep.runs["run_id"].is_unique


def test_failed_run_loses_to_its_ok_rerun(sweep):
    r = sweep.runs.set_index("run_id").loc["c56582645634"]
    assert (r["status"], r["file"], r["method"], r["gpus"], r["frames"]) == ("ok", "reruns/rerun-0.jsonl", "dsp", 4, 32)
    assert any(d.startswith("run_id c56582645634: 2 records (ok, error)") for d in sweep.duplicates)


def test_newest_ok_record_wins_by_timestamp(sweep):
    r = sweep.runs.set_index("run_id").loc["e7ed241caa26"]
    assert r["file"] == "reruns/rerun-0.jsonl"
    assert r["recorded_at"] == pd.Timestamp("2025-06-01T15:00:00Z")
    first = [json.loads(line) for line in (SAMPLE / "jobs" / "job-0.jsonl").open()
             if '"e7ed241caa26"' in line][0]
    assert r["samples_per_s"] == pytest.approx(first["samples_per_s"] / 1.25)


def test_manifest_and_tidy_columns(sweep):
    assert sweep.name == "cpu-small" and sweep.manifest["spec"]["repeats"] == 2
    runs = sweep.runs
    assert runs["gpus"].dtype == "int64" and (runs["gpus"] == runs["world_size"]).all()
    assert set(runs["status"]) == {"ok", "oom"}
    assert {"comm_tagged", "environ", "step_times_s", "source", "file", "order"} <= set(runs.columns)


def _write(path: Path, recs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_file_order_breaks_ties_without_timestamps_and_bad_schema_skipped(tmp_path):
    base = {"schema_version": 1, "run_id": "abc", "status": "ok", "method": "dsp", "world_size": 2, "sp": 2}
    _write(tmp_path / "a.jsonl", [{**base, "samples_per_s": 1.0}])
    _write(tmp_path / "b" / "c.jsonl", [{**base, "samples_per_s": 2.0}, {**base, "status": "error"},
                                       {**base, "run_id": "old", "schema_version": 0}])
    s = load_sweep(tmp_path)
    assert s.name == tmp_path.name and s.manifest == {}
    assert list(s.runs["samples_per_s"]) == [2.0]         # later file, and ok beats the later error
    assert s.runs.loc[0, "dp"] == 1
    assert any(":3: schema_version 0 not in (1, 2)" in p for p in s.problems)


def test_unreadable_manifest_is_a_problem_not_a_crash(tmp_path):
    shutil.copytree(SAMPLE / "jobs", tmp_path / "jobs")
    (tmp_path / "manifest.json").write_text("{not json")
    s = load_sweep(tmp_path)
    assert s.name == tmp_path.name
    assert any("unreadable manifest" in p for p in s.problems)


def test_missing_directory():
    with pytest.raises(FileNotFoundError):
        load_sweep("/nonexistent/sweep")


def test_predictions_of_measured_runs_are_paired_not_duplicates(tmp_path):
    from dspbench.reports.tables_cost import predicted_vs_measured
    cfg = {"schema_version": 1, "model": "stdit-tiny", "mode": "train", "dtype": "fp32", "batch": 1, "frames": 8,
           "spatial": 64, "world_size": 4, "sp": 4}
    measured = [{**cfg, "run_id": f"{m}{r}", "method": m, "repeat": r, "status": "ok", "step_time_median_s": t}
                for m, ts in (("dsp", (1.0, 1.2)), ("ulysses", (2.0, 2.4))) for r, t in enumerate(ts)]
    predicted = [{**rec, "status": "predicted", "step_time_median_s": rec["step_time_median_s"] * k}
                 for rec, k in zip(measured, (0.9, 0.9, 1.2, 1.2))]
    alone = {**cfg, "run_id": "ring0", "method": "ring", "repeat": 0, "status": "predicted", "step_time_median_s": 5.0}
    _write(tmp_path / "measured.jsonl", measured)
    _write(tmp_path / "predicted.jsonl", predicted + [alone])
    s = load_sweep(tmp_path)
    assert s.duplicates == [] and sorted(s.predicted["run_id"]) == ["dsp0", "dsp1", "ulysses0", "ulysses1"]
    assert sorted(s.runs["status"]) == ["ok"] * 4 + ["predicted"]    # an unmeasured prediction stays a run
    t = predicted_vs_measured(s.runs, s.predicted)
    rows = t.data.set_index("method")
    assert rows.loc["dsp", "measured_s"] == pytest.approx(1.1) and rows.loc["dsp", "predicted_s"] == pytest.approx(0.99)
    assert rows.loc["ulysses", "ratio_measured"] == pytest.approx(2.0)
    assert rows.loc["ulysses", "ratio_predicted"] == pytest.approx(2.2 * 1.2 / 0.99)
    assert list(t.display["ratio error"]) == ["—", f"{(2.2 * 1.2 / 0.99 / 2.0 - 1) * 100:+.0f}%"]
