"""Published GPU measurements as records (bench/cost/published.py, `dspbench evidence add`): the committed
records are what their source files give, and bad input exits 2 with the reason, nothing written."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dspbench.cli import main
from dspbench.cost import published

ROOT = Path(__file__).resolve().parent.parent
PUB = ROOT / "results" / "published"
SOURCES = sorted((PUB / "sources").glob("*.toml"))


def committed(name: str) -> list[dict]:
    return [json.loads(line) for line in (PUB / f"{name}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_committed_records_are_what_the_source_gives(src):
    name, recs = published.records_of(src)
    assert json.loads(json.dumps(recs, default=str)) == committed(name), f"run: dspbench evidence add {src}"


def test_every_published_record_says_where_it_came_from():
    recs = [r for src in SOURCES for r in committed(src.stem)]
    assert len(recs) == 22
    for r in recs:
        pub = r["published"]
        assert r["source"] == "published" and r["run_id"].startswith("pub-") and r["status"] == "ok"
        assert pub["citation"] and r["hardware_profile"]
        assert r["time_includes"] == "end_to_end"
        assert r["environ"]["hostnames"] == ["published"] and r["step_time_median_s"] == pub["latency_s"]
    # software and split are refused unless one of their choices, so check which rows carry which
    kinds = Counter((r["published"]["model"], r["published"]["software"], r["published"]["split"]) for r in recs)
    assert kinds == {("flux.1-dev", "eager", "tune"): 6, ("flux.1-dev", "compiled", "holdout"): 6,
                     ("step-video-t2v", "eager", "tune"): 4, ("step-video-t2v", "eager", "holdout"): 3,
                     ("opensora-1.0", "eager", "holdout"): 3}
    approx = {r["published"]["model"]: r["model_approximated"] for r in recs}
    assert approx == {"opensora-1.0": None, "flux.1-dev": None, "step-video-t2v": None}   # every row on its preset
    assert len({r["run_id"] for r in recs}) == len(recs)      # eager and compiled rows are two records


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (PUB / "sources" / "xdit-flux.toml").read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    return bad


@pytest.mark.parametrize("old,new,reason", [
    ('citation = "xDiT', 'x_citation = "xDiT', "unknown key"),
    ('citation = "xDiT repository (github.com/xdit-project/xDiT), docs/performance/flux.md: Flux.1-dev, 1024x1024, '
     '28 steps, 4x H100 NVLink"', 'citation = ""', "no citation"),
    ('hardware = "h100-ib"\n', "", "no hardware"),
    ('hardware = "h100-ib"', 'hardware = "h100-nvlink-9"', "is not a profile"),
    ('software = "eager"', 'software = "jit"', "one of eager, compiled"),
    ("latency_s = 6.71", "latency_s = -6.71", "must be positive"),
    ('model_ref = "flux.1-dev"', 'model_ref = "no-such-model"', "no-such-model"),
    # issue 42: a blank citation is no citation; a degree that cannot split the GPUs is the file's typo
    # (it divided by zero: dp = gpus // sp), and a degree below 1 too
    ('citation = "xDiT repository (github.com/xdit-project/xDiT), docs/performance/flux.md: Flux.1-dev, 1024x1024, '
     '28 steps, 4x H100 NVLink"', 'citation = "   "', "no citation"),
    ("gpus = 2\nsp = 2", "gpus = 2\nsp = 3", "sp=3 does not divide gpus=2"),
    ("gpus = 2\nsp = 2", "gpus = 2\nsp = 0", "sp must be a degree >= 1"),
])
def test_bad_source_exits_2_and_writes_nothing(tmp_path, capsys, old, new, reason):
    bad, out = _broken(tmp_path, old, new), tmp_path / "out"
    good = PUB / "sources" / "videosys-opensora.toml"
    assert main(["evidence", "add", str(good), str(bad), "--out", str(out)]) == 2
    assert reason in capsys.readouterr().err
    assert not out.exists()                               # not even the good file's records


def test_add_writes_then_rewrites_one_file_per_source(tmp_path):
    src = PUB / "sources" / "videosys-opensora.toml"
    for _ in range(2):          # adding again replaces the source's records, never doubles them
        assert main(["evidence", "add", str(src), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "videosys-opensora.jsonl").read_text() == (PUB / "videosys-opensora.jsonl").read_text()
    assert main(["evidence", "add", str(src), "--check", "--out", str(tmp_path / "none")]) == 0
    assert not (tmp_path / "none").exists()
