"""Noise flags of the multi-rank micro-benchmarks (bench/micro/noise.py): a competing load is seen and
flagged, a quiet run is not, the verdict reaches the switch's table and pytest-benchmark's saved JSON."""
import json
import multiprocessing as mp
import subprocess
import sys
import time

import pytest

from dspbench.micro import noise


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_the_benchmarks_own_processes_do_not_count_as_competing():
    """A rank is a child in our session: its CPU is the benchmark's, not someone else's."""
    rank = mp.get_context("spawn").Process(target=_spin, args=(3.0,))
    rank.start()
    with noise.LoadMonitor(ranks=1, threads_per_rank=1) as mon:
        time.sleep(1.5)
    rank.join()
    c = mon.conditions()
    assert c["competing_cores"] is not None and c["competing_cores"] < 0.5, c


def test_a_process_in_another_session_competes_and_flags_the_run():
    hog = subprocess.Popen([sys.executable, "-c", "import time\nend=time.monotonic()+3\nwhile time.monotonic()<end: pass"],
                           start_new_session=True)
    try:
        time.sleep(0.3)
        with noise.LoadMonitor(ranks=4, threads_per_rank=1) as mon:
            time.sleep(1.5)
    finally:
        hog.wait()
    c = mon.conditions()
    assert c["competing_cores"] > 0.6, c          # one spinning process: about one core
    assert any("other processes took" in r for r in noise.noisy_reasons(c))
    assert c["ranks"] == 4 and c["threads_per_rank"] == 1 and c["cores"] >= 1


def test_load_and_spread_rules():
    quiet = {"loadavg_1m_before": 0.1, "cores": 2, "competing_cores": 0.05}
    assert noise.noisy_reasons(quiet, {"a/b": 0.1}) == []
    assert "load 3.0 > 2 cores" in noise.noisy_reasons({**quiet, "loadavg_1m_before": 3.0})[0]
    assert "spread of a/b 40%" in noise.noisy_reasons(quiet, {"a/b": 0.4})[0]
    assert noise.relative_spread({"median": 1.0, "p10": 0.9, "p90": 1.2}) == pytest.approx(0.3)


def test_saved_runs_are_read_and_flagged(tmp_path, capsys):
    run = {"benchmarks": [{"name": "switch", "extra_info": {"conditions": {}, "noisy": ["load 3.0 > 2 cores"]}},
                          {"name": "quiet", "extra_info": {"conditions": {}, "noisy": []}},
                          {"name": "kernel", "extra_info": {}}]}
    path = tmp_path / "0001_run.json"
    path.write_text(json.dumps(run))
    assert noise.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "switch: NOISY: load 3.0 > 2 cores" in out and "quiet: quiet" in out
    assert "kernel: no conditions recorded" in out
