"""A results folder that mixes sources: measured stdit-tiny on CPU, predicted stdit-xl on H800 and
synthetic fixtures. No ratio may cross the comparison key (model, mode, dtype, B, T, S, GPUs, SP,
DP, checkpointing, ZeRO, CFG, source, hardware), and the report shows each source apart."""
import json
import shutil
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
from dspbench.reports.derive import COMPARE  # noqa: E402
from dspbench.reports.report import analyse, build_report  # noqa: E402

SAMPLE = Path(__file__).parent / "data" / "sample_results" / "cpu-small"
H800 = {"device_names": ["NVIDIA H800"], "hostnames": ["cluster"], "git_sha": "abcdef0123"}
CPU = {"device_names": ["cpu: AMD EPYC"], "cpu": "AMD EPYC", "hostnames": ["vm"], "git_sha": "0123abcdef"}


def _recs(name):
    return [json.loads(l) for l in (SAMPLE / "jobs" / name).read_text().splitlines() if l.strip()]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    shutil.copytree(SAMPLE / "jobs", root / "synthetic")               # source synthetic, as shipped
    base = [r for r in _recs("job-0.jsonl")]
    measured = [{**r, "run_id": "m" + r["run_id"], "source": "measured", "model": "stdit-tiny",
                 "environ": CPU, "step_time_median_s": r["step_time_median_s"] * 0.5 if r.get("step_time_median_s") else None,
                 "samples_per_s": r["samples_per_s"] * 2 if r.get("samples_per_s") else None}
                for r in base]
    predicted = [{**r, "run_id": "p" + r["run_id"], "source": "predicted", "model": "stdit-xl",
                  "environ": H800, "backend": "nccl", "samples_per_s": r["samples_per_s"] * 100 if r.get("samples_per_s") else None}
                 for r in base]
    predicted[0] = {**predicted[0], "status": "oom", "samples_per_s": None, "step_time_median_s": None}
    for name, recs in (("measured", measured), ("predicted", predicted)):
        (root / name).mkdir()
        (root / name / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return root


def test_no_ratio_crosses_the_key(mixed):
    a = analyse(mixed)
    assert set(a.runs["source"]) == {"measured", "predicted", "synthetic"}
    sp = a.speedups
    assert set(sp["source"]) == {"measured", "predicted", "synthetic"}
    key = [c for c in COMPARE]
    for r in sp.itertuples():
        same = (a.best[key] == pd.Series({c: getattr(r, c) for c in key})).all(axis=1)
        dsp = a.best[same & (a.best["method"] == "dsp")]
        base = a.best[same & (a.best["method"] == r.baseline)]
        assert len(dsp) == len(base) == 1, r                       # both sides on the very same key
        assert r.speedup == pytest.approx(dsp["samples_per_s"].iloc[0] / base["samples_per_s"].iloc[0])
    # every ratio is within one model and one hardware: tiny/CPU, xl/H800, small/synthetic CPU
    assert set(zip(sp["source"], sp["model"])) == {("measured", "stdit-tiny"), ("predicted", "stdit-xl"),
                                                   ("synthetic", "stdit-small")}
    assert not (a.volume.groupby(["method", "sp", "model"])["source"].nunique() > 1).any()


def test_report_shows_each_source_apart(mixed):
    page = build_report(mixed, jobs=1)
    md, html = page.with_name("index.md").read_text(), page.read_text()
    assert "Synthetic data:" in md and "Every number here is measured" not in md
    head = md[md.index("## Headline"):md.index("## What was run")]
    for src, hw in (("measured", "CPU: AMD EPYC"), ("predicted", "NVIDIA H800"), ("synthetic", "CPU: Intel")):
        assert f"| {src} |" in head and hw in head                  # one headline row per source
    thr = md[md.index("### Throughput per method"):].split("\n\n")[1].splitlines()[2:]
    for line in thr:                       # each row is one source; a cell never holds another's
        assert sum(f"| {s} |" in line for s in ("measured", "predicted", "synthetic")) == 1, line
    assert "predicted oom" in md                                   # a prediction's OOM says so
    assert 'id="headline"' in html


def test_paper_vs_ours_takes_both_sides_from_one_key():
    from dspbench.reports import paper
    row = dict(mode="train", gpus=2, sp=2, frames=64, spatial=4096, dtype="bf16", batch=1, zero=0)
    sp = pd.DataFrame([
        {**row, "model": "stdit-xl", "source": "predicted", "hardware": "NVIDIA H800", "baseline": "ulysses",
         "samples_per_s": 3.0, "samples_per_s_base": 2.0},
        {**row, "model": "stdit-tiny", "source": "measured", "hardware": "CPU", "baseline": "ulysses",
         "samples_per_s": 1.1, "samples_per_s_base": 1.0}])
    f3 = paper.fig3_table(pd.DataFrame(), sp).set_index(["gpus", "frames", "spatial"])
    r = f3.loc[(2, 64, 4096)]
    # measured first, and both sides from that one row: never measured DSP over predicted Ulysses
    assert (r["ours_dsp"], r["ours_ulysses"], r["ours_source"]) == (1.1, 1.0, "measured")
    assert r["ours_on"].startswith("measured on CPU (stdit-tiny, bf16, B=1, SP=2") and "both" in r["ours_on"]
    assert (f3.drop(index=(2, 64, 4096))["ours_on"] == "not run").all()
