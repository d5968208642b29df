"""Noise flags of the multi-rank micro-benchmarks (bench/micro/noise.py): a competing load is seen and
flagged, a quiet run is not, the verdict reaches the switch's table and pytest-benchmark's saved JSON."""
import json
import subprocess
import sys
import time

import pytest

from dspbench.micro import noise


def _spin_in(new_session: bool) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time\nend=time.monotonic()+2.5\nwhile time.monotonic()<end: pass"],
                            start_new_session=new_session)


def _competing_while(new_session: bool) -> dict:
    hog = _spin_in(new_session)
    try:
        time.sleep(0.3)
        with noise.LoadMonitor(ranks=4, threads_per_rank=1) as mon:
            time.sleep(1.5)
    finally:
        hog.wait()
    return mon.conditions()


def test_another_sessions_process_competes_and_the_benchmarks_own_do_not():
    """The same spinning process, once as the benchmark's own (its session: a rank) and once from another
    session: only the second is competing load (paired, so whatever else the machine runs cancels)."""
    own, other = _competing_while(False), _competing_while(True)
    assert other["competing_cores"] - own["competing_cores"] > 0.3, (own, other)
    assert any("other processes took" in r for r in noise.noisy_reasons(other))
    assert other["ranks"] == 4 and other["threads_per_rank"] == 1 and other["cores"] >= 1


def test_load_and_spread_rules():
    quiet = {"loadavg_1m_before": 0.1, "cores": 2, "competing_cores": 0.05}
    assert noise.noisy_reasons(quiet, {"a/b": 0.1}) == []
    # the load average counts our own previous ranks: judged only where /proc cannot say who took the CPU
    assert noise.noisy_reasons({**quiet, "loadavg_1m_before": 3.0}) == []
    assert "load 3.0 > 2 cores" in noise.noisy_reasons({**quiet, "loadavg_1m_before": 3.0, "competing_cores": None})[0]
    assert "spread of a/b 40%" in noise.noisy_reasons(quiet, {"a/b": 0.4})[0]
    assert noise.noisy_reasons({**quiet, "oversubscribed": True}, {"a/b": 0.4}) == []      # 4 ranks on 2 cores
    assert "(> 60%)" in noise.noisy_reasons({**quiet, "oversubscribed": True}, {"a/b": 0.7})[0]
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
