"""`dspbench compare`: per-configuration step-time ratio, two-level bootstrap CI, benchstat's '~'."""
import json

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
from dspbench.reports import compare  # noqa: E402
from dspbench.reports.cli import COMMANDS  # noqa: E402
from dspbench.reports.compare_cli import main  # noqa: E402

CFG = {"schema_version": 2, "model": "stdit-tiny", "mode": "train", "dtype": "fp32", "batch": 1, "frames": 4,
       "spatial": 32, "world_size": 2, "sp": 2, "backend": "gloo", "source": "measured",
       "environ": {"device_names": ["cpu: X"]}}


def _runs(method, scale, seed, repeats=3, iters=8, **kw):
    rng = np.random.default_rng(seed)
    out = []
    for r in range(repeats):
        times = list(scale * np.exp(rng.normal(0, 0.05, iters)))
        out.append({**CFG, **kw, "run_id": f"{method}{kw}{r}", "method": method, "repeat": r, "status": "ok",
                    "step_times_s": times, "step_time_median_s": float(np.median(times))})
    return out


def _write(path, recs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_mann_whitney_matches_the_textbook_value():
    # x = 1..5 vs y = 6..10: U = 0; normal approximation with continuity correction, p = 0.0122
    assert compare.mann_whitney_p(np.arange(1, 6.0), np.arange(6, 11.0)) == pytest.approx(0.01219, abs=1e-4)
    assert compare.mann_whitney_p(np.ones(5), np.ones(5)) == 1.0          # all tied: no evidence


def test_clear_difference_is_significant_and_noise_is_tilde(tmp_path):
    _write(tmp_path / "r.jsonl", _runs("dsp", 0.10, 0) + _runs("slow", 0.20, 1) + _runs("same", 0.10, 2))
    from dspbench.reports.collect import load_sweep
    from dspbench.reports.derive import enrich
    runs = enrich(load_sweep(tmp_path).runs)
    slow = compare.by_method(runs, "dsp", "slow").iloc[0]
    assert slow["ratio"] == pytest.approx(2.0, rel=0.1) and slow["ci_lo"] > 1.5 and slow["significant"]
    assert compare.verdict(slow).startswith("+") and slow["n_a"] == slow["n_b"] == 24
    same = compare.by_method(runs, "dsp", "same").iloc[0]
    assert same["ci_lo"] < 1 < same["ci_hi"] and compare.verdict(same) == "~"
    again = compare.by_method(runs, "dsp", "slow").iloc[0]
    assert (again["ci_lo"], again["ci_hi"]) == (slow["ci_lo"], slow["ci_hi"])   # fixed seed: reproducible


def test_pairs_only_on_the_full_key(tmp_path):
    a = _runs("dsp", 0.1, 0) + _runs("dsp", 0.1, 3, frames=8)
    b = _runs("dsp", 0.2, 1) + _runs("dsp", 0.2, 4, source="predicted") + _runs("dsp", 0.2, 5, sp=1)
    _write(tmp_path / "A" / "r.jsonl", a)
    _write(tmp_path / "B" / "r.jsonl", b)
    out = tmp_path / "out"
    assert main([str(tmp_path / "A"), str(tmp_path / "B"), "--out", str(out), "--format", "csv"]) == 0
    got = pd.read_csv(out / "compare.csv")
    assert len(got) == 1 and got.loc[0, "frames"] == 4 and got.loc[0, "source"] == "measured"
    assert (out / "compare.md").read_text().count("| 4 | 32 |") == 1


def test_bad_input_exits_2(tmp_path, capsys):
    _write(tmp_path / "r.jsonl", _runs("dsp", 0.1, 0))
    assert main(["dsp", "nope", "--by", "method", "--results", str(tmp_path)]) == 2
    assert "no runs of nope" in capsys.readouterr().err
    assert main([str(tmp_path), str(tmp_path / "missing")]) == 2
    assert main(["dsp", "ulysses", "--by", "method"]) == 2
    assert "compare" in COMMANDS                                   # `dspbench compare` is registered
