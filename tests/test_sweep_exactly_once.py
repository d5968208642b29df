"""Exactly once, without SLURM: the results-directory lock (two sweeps at once), duplicate records in
`sweep status`, unknown methods and models as spec errors, the submission journal's reading."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import tiny_sweep
from dspbench.cli import main
from dspbench.records.io import append_record, read_dir
from dspbench.slurm.journal import read_journal, write_intent, write_submitted
from dspbench.slurm.lock import results_lock
from dspbench.slurm.results import record_counts, status_report

HEAD = tiny_sweep("once")
ONE = HEAD + '[[grid]]\nmethod = ["single"]\ngpus = [1]\nseed = [0, 1]\n'


def write_spec(tmp_path, text: str):
    path = tmp_path / "sweep.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_second_sweep_on_a_held_results_directory_exits_2_naming_the_holder(tmp_path, capsys):
    spec, root = write_spec(tmp_path, ONE), tmp_path / "results"
    with results_lock(root):
        assert main(["sweep", str(spec), "--results", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"in use by another sweep: pid {os.getpid()}" in err and "--wait" in err
    assert not list(root.glob("records/*"))                      # it ran nothing


def test_wait_queues_behind_the_holder_and_a_dead_holder_leaves_no_lock(tmp_path):
    root = tmp_path / "results"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from dspbench.slurm.lock import results_lock
        with results_lock({str(root)!r}):
            print("held", flush=True)
            time.sleep(float(sys.argv[1]))
        """), "1.5"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    t0 = time.monotonic()
    with results_lock(root, wait=True):
        assert time.monotonic() - t0 > 0.5                      # it waited for the holder
    killed = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from dspbench.slurm.lock import results_lock
        with results_lock({str(root)!r}):
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    assert killed.stdout.readline() == "held\n"
    killed.kill()
    killed.wait()
    with results_lock(root):                                    # kill -9 released it
        pass
    holder.wait()


def test_status_reports_duplicate_records_per_run_id(tmp_path):
    from dspbench.facts.build import Outcome, build_record
    from dspbench.records.config import RunConfig
    root = tmp_path / "results"
    a, b = RunConfig(method="single", seed=0), RunConfig(method="single", seed=1)
    for cfg, status in ((a, "ok"), (a, "ok"), (b, "error"), (b, "ok")):
        append_record(root / "records" / "x.jsonl", build_record(cfg, Outcome(status, None if status == "ok" else "x")))
    text = status_report(root)
    assert "DUPLICATES: 1 configurations have more than one ok/unsupported record" in text
    assert f"{a.run_id()}: 2 ok" in text and b.run_id() + ":" not in text   # a retry is no duplicate
    assert record_counts(root)[b.run_id()] == {"error": 1, "ok": 1}


@pytest.mark.parametrize("key, value, words", [
    ("method", "dsq", ["unknown method 'dsq'", "entry-point group 'dspbench.methods'", "installed plugins: "]),
    ("model", "stdit-tyni", ["unknown model 'stdit-tyni'", "stdit-tiny"]),
])
def test_unknown_method_or_model_is_a_spec_error_and_nothing_is_written(tmp_path, capsys, key, value, words):
    grid = f'[[grid]]\n{key} = ["{value}"]\n' + ('method = ["single"]\n' if key == "model" else "")
    head = HEAD.replace('model = "stdit-tiny"\n', "") if key == "model" else HEAD
    spec, root = write_spec(tmp_path, head + grid), tmp_path / "results"
    for executor in ("local", "slurm", "debug"):
        assert main(["sweep", str(spec), "--results", str(root), "--executor", executor]) == 2
        err = capsys.readouterr().err
        assert all(w in err for w in words), err
    assert not root.exists()                                    # no manifest, no records, no lock file


def test_the_journal_maps_tokens_to_run_ids_and_skips_a_torn_line(tmp_path):
    write_intent(tmp_path, "t1", "dspbench-x", [["a", "b"], ["c"]])
    write_submitted(tmp_path, "t1", ["7_0", "7_1"])
    write_intent(tmp_path, "t2", "dspbench-x", [["d"]])          # killed before its job ids were written
    with open(tmp_path / "submissions.log", "ab") as f:
        f.write(b'{"kind": "submitted", "tok')                   # and a torn line
    arrays, problems = read_journal(tmp_path)
    assert arrays["t1"] == {"name": "dspbench-x", "elements": [["a", "b"], ["c"]], "job_ids": ["7_0", "7_1"]}
    assert arrays["t2"]["elements"] == [["d"]] and arrays["t2"]["job_ids"] == []
    assert len(problems) == 1 and "submissions.log:4:" in problems[0]


def test_local_sweeps_started_together_run_every_configuration_once(tmp_path):
    """Two `dspbench sweep` processes on one results directory, the second with --wait."""
    spec, root = write_spec(tmp_path, ONE), tmp_path / "results"
    cmd = [sys.executable, "-m", "dspbench.cli", "sweep", str(spec), "--results", str(root)]
    procs = [subprocess.Popen(cmd + ["--wait"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    counts = record_counts(root)
    print(f"\nmatrix counts per run_id: {({rid: dict(c) for rid, c in sorted(counts.items())})}")   # -s shows it
    assert len(counts) == 2 and all(c == {"ok": 1} for c in counts.values()), counts
    assert read_dir(root / "records")[1] == []
