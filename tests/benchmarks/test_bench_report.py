"""pytest-benchmark: `dspbench report` on 10,000 records (goal: under 3 s on the 2-core machine).

    pytest tests/benchmarks/test_bench_report.py --benchmark-only

The records (synthetic: a toy cost model, 500 per job file as from a job array) are written once
per session; only build_report is timed, figures drawn by its default two forked workers. Skipped
where pytest-benchmark is not installed (the `bench` extra).
"""
import json

import pytest

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark not installed (pip install -e '.[bench]')")
pytest.importorskip("pandas")

RECORDS = 10_000


def _sweep_records(n):
    from dspbench.micro.synth_records import sweep_records    # marked source = synthetic
    return sweep_records(n)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench") / "bench-sweep"
    (root / "jobs").mkdir(parents=True)
    recs = _sweep_records(RECORDS)
    for i in range(0, len(recs), 500):
        (root / "jobs" / f"job-{i // 500:03d}.jsonl").write_text(
            "".join(json.dumps(r, sort_keys=True) + "\n" for r in recs[i:i + 500]))
    return root


def test_report_on_10000_records(benchmark, sweep, tmp_path):
    import matplotlib.pyplot  # noqa: F401  (imports are not part of building a report)
    import dspbench.reports.figures  # noqa: F401
    from dspbench.reports.report import build_report
    page = benchmark.pedantic(build_report, args=(sweep, tmp_path / "report"), rounds=3, iterations=1,
                              warmup_rounds=1)
    html = page.read_text()
    assert 'id="headline"' in html and html.count("<svg") == 5
    benchmark.extra_info["records"] = RECORDS
