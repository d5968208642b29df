"""Published measurements in reports: beside measured and predicted numbers, labelled 'published',
never tabled or drawn as a measurement, never in a ratio with another source; `compare --by source`
pairs like with like (an end-to-end time with an end-to-end time) and labels each side."""
import json
import shutil
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
from dspbench.cli import main  # noqa: E402
from dspbench.reports.derive import COMPARE  # noqa: E402
from dspbench.reports.report import analyse, build_report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "data" / "sample_results" / "cpu-small" / "jobs" / "job-0.jsonl"
PUB = ROOT / "results" / "published"
CPU = {"device_names": ["cpu: AMD EPYC"], "cpu": "AMD EPYC", "hostnames": ["vm"], "git_sha": "0123abcdef"}


def _predicted(source: str, n: int) -> list[dict]:
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.predict import predicted_record
    from dspbench.cost.published import read_source, run_config
    return [predicted_record(run_config(p), load_profile(p["hardware"]), p["software"] == "compiled")
            for p in read_source(PUB / "sources" / f"{source}.toml")[:n]]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("pub")
    for name in ("videosys-opensora", "xdit-flux"):
        shutil.copy(PUB / f"{name}.jsonl", root / f"{name}.jsonl")
    measured = [{**json.loads(l), "source": "measured", "environ": CPU} for l in SAMPLE.read_text().splitlines() if l]
    (root / "measured.jsonl").write_text("".join(json.dumps(r) + "\n" for r in measured))
    pred = _predicted("videosys-opensora", 3) + _predicted("xdit-flux", 2)
    (root / "predicted.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in pred))
    return root


def test_published_rows_keep_their_source_and_pair_only_among_themselves(folder):
    a = analyse(folder)
    pub = a.runs[a.runs["source"] == "published"]
    assert len(pub) == 15 and set(pub["outcome"]) == {"ok"} and a.sweep.predicted.empty
    assert set(pub["software"]) == {"eager", "compiled"}
    # eager and compiled rows of one configuration are two configurations, not two repeats
    assert (a.agg[a.agg["source"] == "published"]["n_repeats"] == 1).all()
    sp = a.speedups[a.speedups["source"] == "published"]
    assert len(sp) >= 1                                          # DSP over Ulysses, both published
    for r in a.speedups.itertuples():
        same = (a.best[list(COMPARE)] == pd.Series({c: getattr(r, c) for c in COMPARE})).all(axis=1)
        assert set(a.best[same]["source"]) == {r.source}


def test_report_labels_published_numbers_and_never_calls_them_measured(folder):
    page = build_report(folder, folder / "report", jobs=1)
    md = (page.parent / "index.md").read_text()
    assert "Published data: 15 of" in md and "VideoSys README" in md     # the banner names the citations
    status = next(l for l in md.splitlines() if l.startswith("| method |") and "ok |" in l)
    cols = [c.strip() for c in status.split("|")[2:-1]]
    assert {"ok", "predicted ok", "published ok"} <= set(cols) and not any("published" in c and c != "published ok" for c in cols)
    assert "Every number here is measured" not in md
    assert "15 published" in md                                            # the headline's count
    a = analyse(folder)
    for t in a.tables:                                # every table row of a published record says so
        d = t.data
        if "source" in d and "frames" in d and not d.empty:
            rows = d[d["frames"] == 80]                # OpenSora 80 x 1024: published and predicted only
            assert set(rows["source"]) <= {"published", "predicted"}, t.name
    thr = next(t for t in a.tables if t.name == "throughput")
    shown = thr.display[thr.display["T"].astype(str) == "80"]
    assert set(shown["numbers"]) == {"published", "predicted"}


def test_published_lines_are_dotted_and_in_their_own_panels(folder):
    from dspbench.reports.figures import line_style, plot_throughput
    assert line_style(pd.Series(["published"] * 2)) == ":" and line_style(pd.Series(["measured"])) == "-"
    assert line_style(pd.Series(["predicted"])) == "--" and line_style(pd.Series(["published", "measured"])) == "-"
    a = analyse(folder, with_tables=False)
    fig, _ = plot_throughput(a.best)
    styles = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_marker() == "o":
                styles.setdefault(ax.get_title(), set()).add(line.get_linestyle())
    pub = {t: s for t, s in styles.items() if "published" in t}
    assert pub and all(s == {":"} for s in pub.values())
    assert all(":" not in s for t, s in styles.items() if "published" not in t)


def test_compare_by_source_pairs_like_with_like(folder, capsys):
    assert main(["compare", "published", "predicted", "--by", "source", "--results", str(folder), "--format", "csv"]) == 0
    df = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert len(df) == 5 and set(df["includes"]) == {"end_to_end"} and set(df["a"]) == {"published"}
    pub = {(r["model"], r["method"], int(r["gpus"]), r["software"]): r["published"]["latency_s"]
           for r in analyse(folder, with_tables=False).runs.to_dict("records") if r["source"] == "published"}
    preds = [json.loads(l) for l in (folder / "predicted.jsonl").read_text().splitlines()]
    for r in preds:                       # B/A is the whole pipeline's prediction over the published time
        row = df[(df["model"] == r["model"]) & (df["method"] == r["method"]) & (df["gpus"] == r["gpus"])]
        want = r["predicted_end_to_end_s"] / pub[(r["model"], r["method"], r["gpus"], "eager")]
        assert row["ratio"].iloc[0] == pytest.approx(want, abs=1e-6)     # the CSV keeps 6 decimals
    # the table says what its ratio is of: a published time is a whole pipeline, not a step
    assert main(["compare", "published", "predicted", "--by", "source", "--results", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert "B/A time" in shown and "B/A step time" not in shown
    # measured rows time the denoising loop on a CPU: nothing of theirs pairs with a published time
    assert main(["compare", "measured", "published", "--by", "source", "--results", str(folder)]) == 1
    assert main(["compare", "published", "published", "--by", "source", "--results", str(folder)]) == 2
