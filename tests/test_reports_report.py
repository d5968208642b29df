"""build_report end to end on the sample sweep, the CLI, and sweeps that hold little or nothing."""
import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pandas")
pytest.importorskip("seaborn")
from dspbench.reports.cli import main  # noqa: E402
from dspbench.reports.report import build_report  # noqa: E402

SAMPLE = Path(__file__).parent / "data" / "sample_results" / "cpu-small"
FIGURES = ("throughput", "speedup", "comm_volume", "scaling", "memory")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("results") / "cpu-small"
    shutil.copytree(SAMPLE, root)
    return root, build_report(root, jobs=2)      # default out dir; figures drawn by 2 workers


def test_report_files(built):
    root, page = built
    out = root / "report"
    assert page == out / "index.html"
    for name in FIGURES:
        assert (out / "figures" / f"{name}.png").stat().st_size > 10_000
        assert (out / "figures" / f"{name}.svg").exists()
    for name in ("throughput", "comm_volume", "memory", "scaling", "paper_fig3", "environment", "status"):
        assert {p.suffix for p in (out / "tables").glob(f"{name}.*")} == {".md", ".csv", ".tex"}


def test_markdown_says_what_where_and_caveats(built):
    md = (built[0] / "report" / "index.md").read_text()
    assert md.startswith("# dspbench report: cpu-small\n")
    assert "- 38 runs from 3 record file(s)" in md
    assert "| CPU: Intel(R) Xeon(R) Platinum 8375C (gloo) | dspbench 0.1.0, torch 2.13.0+cpu" in md
    assert "CPU/gloo timings are not GPU performance" in md and "wire × N/(N-1)" in md
    # the sample sweep is synthetic: a banner says so, and no caveat claims measurements
    assert md.count("> **Synthetic data: 38 of 38 runs are synthetic fixtures") == 1
    assert "Every number here is measured" not in md and "38 run(s) are synthetic fixtures" in md
    assert re.search(r"job-1\.jsonl:17: corrupt record skipped", md)
    assert "run_id c56582645634: 2 records (ok, error); kept the ok record from reruns/rerun-0.jsonl" in md
    for name in FIGURES:
        assert f"](figures/{name}.png)" in md


def test_html_is_self_contained(built):
    page = built[0] / "report" / "index.html"
    html = page.read_text()
    assert html.count("<svg") == len(FIGURES)
    assert "src=" not in html and not re.search(r'href="(https?:|//)', html)   # nothing off the disk
    hrefs = re.findall(r'href="([^"#][^"]*)"', html)
    assert any(h.startswith("../jobs/") for h in hrefs)          # rows link to their raw records
    for href in set(hrefs):                                      # tables, figures, records: all there
        assert (page.parent / href).is_file(), href
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))                            # ids stay unique across the SVGs
    for anchor in re.findall(r'href="#([^"]+)"', html):
        assert anchor in ids, anchor
    assert '<meta name="viewport"' in html and html.index('id="headline"') < html.index('id="contents"')
    assert "<caption>Communication volume per layer (paper Table 3 form)" in html


def test_report_is_reproducible_serial_or_parallel(built, tmp_path):
    build_report(built[0], tmp_path, jobs=1)
    for name in ("index.md", "figures/scaling.svg", "figures/throughput.png", "tables/details.csv"):
        assert (tmp_path / name).read_bytes() == (built[0] / "report" / name).read_bytes(), name


def test_cli_prints_where_it_wrote(tmp_path, capsys):
    assert main([str(SAMPLE), "--out", str(tmp_path / "r"), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'r' / 'index.html'}" in out and (tmp_path / "r" / "index.md").exists()
    assert main([str(tmp_path / "missing")]) == 2


def test_thin_sweeps_skip_what_they_cannot_show(tmp_path):
    one = [json.loads(line) for line in (SAMPLE / "jobs" / "job-1.jsonl").read_text().splitlines()[:16]]
    (tmp_path / "one" / "a.jsonl").parent.mkdir()
    (tmp_path / "one" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in one if r["status"] == "ok"))
    md = build_report(tmp_path / "one", jobs=1).with_name("index.md").read_text()
    assert "_throughput vs GPUs: skipped, the sweep has a single GPU count._" in md
    assert "_scaling curves: skipped, no series with two or more GPU counts._" in md
    assert "](figures/speedup.png)" in md                     # 4 GPUs, two shapes: still comparable
    (tmp_path / "empty").mkdir()
    md = build_report(tmp_path / "empty", jobs=1).with_name("index.md").read_text()
    assert "no records under" in md and "(no data for this table in the sweep)" in md


def test_predicted_numbers_are_labelled(tmp_path):
    recs = [json.loads(l) for l in (SAMPLE / "jobs" / "job-0.jsonl").read_text().splitlines()]
    ok = [r for r in recs if r["status"] == "ok"]
    oom = {**ok[-1], "run_id": "pred-oom", "status": "oom", "method": "megatron_sp", "source": "predicted"}
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({**r, "source": "predicted"}) + "\n" for r in ok)
                                      + json.dumps(oom) + "\n")
    md = build_report(tmp_path, jobs=1).with_name("index.md").read_text()
    assert f"{len(ok) + 1} run(s) are predicted by a cost model" in md and "Synthetic data" not in md
    assert "Every number here is measured" not in md
    throughput = md[md.index("### Throughput per method"):]
    assert "| GPUs | SP | numbers |" in throughput and "| 2 | 2 | predicted |" in throughput
    assert "| predicted oom |" in md and "| oom |" not in md        # never a measured OOM
