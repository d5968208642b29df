"""Sweeps that run on this machine: the local executor (resume, --retry-failed, status) and the debug
executor, which runs the SLURM job code in-process (one subprocess per rank, fallback records)."""
import json
from helpers import tiny_sweep, write_spec

from dspbench.cli import main
from dspbench.records.io import read_dir
from dspbench.slurm import job as sweep_job

HEAD = tiny_sweep()
# Two configurations to run and one unsupported point (3 ranks: heads 4 % 3). The first fails on rank 1
# until the fault is removed (inject_fault is not part of the run_id: the fixed spec reruns that point).
TWO = HEAD + """
[[grid]]
method = ["dsp"]
gpus = [2]
sp = [2]
inject_fault = ["raise@1"]

[[grid]]
method = ["single"]
gpus = [1]

[[grid]]
method = ["ulysses"]
gpus = [3]
sp = [3]
"""


def sweep(tmp_path, text: str, *args: str) -> int:
    path = write_spec(tmp_path, text, "sweep.toml")
    return main(["sweep", str(path), "--results", str(tmp_path / "results"), *args])


def records(tmp_path) -> list[dict]:
    recs, problems = read_dir(tmp_path / "results" / "records")
    assert problems == []
    return recs


def test_local_sweep_resumes_and_retry_failed_reruns_only_the_failures_and_status_shows_them(tmp_path, capsys):
    assert sweep(tmp_path, TWO) == 1                       # one configuration failed
    first = records(tmp_path)
    assert sorted((r["method"], r["status"]) for r in first) == [
        ("dsp", "error"), ("single", "ok"), ("ulysses", "unsupported")]
    out = capsys.readouterr().out
    assert "to run: 2, unsupported (recorded, not run): 1" in out
    assert main(["sweep", "status", str(tmp_path / "results")]) == 0
    status = capsys.readouterr().out
    assert "3 configurations recorded (3 of the 3 planned)" in status
    assert "ok           1\n  unsupported  1\n  error        1\n  not run yet  0" in status
    assert ("dsp stdit-tiny T=4 S=16 gpus=2 sp=2 train repeat=0: rank 1: RuntimeError: injected fault"
            in status.split("failing configurations")[1])

    assert sweep(tmp_path, TWO) == 0                       # resume: nothing left to run
    assert "to run: 0, unsupported (recorded, not run): 0" in capsys.readouterr().out
    assert len(records(tmp_path)) == 3

    fixed = TWO.replace('inject_fault = ["raise@1"]', "")
    assert sweep(tmp_path, fixed) == 0                     # a failed point is kept without the flag
    assert len(records(tmp_path)) == 3
    assert sweep(tmp_path, fixed, "--retry-failed") == 0   # ... and rerun with it
    out = capsys.readouterr().out
    assert "to run: 1" in out and "skipped, already ok: 1" in out and "skipped, already unsupported: 1" in out
    last = sorted((r["method"], r["status"]) for r in records(tmp_path))
    assert last == [("dsp", "error"), ("dsp", "ok"), ("single", "ok"), ("ulysses", "unsupported")]

    manifest = json.loads((tmp_path / "results" / "manifest.json").read_text())
    assert manifest["name"] == "tiny" and manifest["spec"]["fixed"]["frames"] == 4
    assert "git_sha" in manifest and len(manifest["submissions"]) == 4

    assert main(["sweep", "status", str(tmp_path / "results")]) == 0
    status = capsys.readouterr().out
    assert "3 configurations recorded (3 of the 3 planned)" in status and "ok           2" in status
    assert "failing" not in status                          # the ok record wins over the old error


def test_debug_executor_isolates_a_crash_and_a_hang_in_one_job(tmp_path, monkeypatch, capsys):
    """The SLURM job code in-process: rank 0 dies silently, then hangs; the job writes those records
    itself and carries on, one record per configuration."""
    monkeypatch.setattr(sweep_job, "GRACE_S", 1.0)
    text = HEAD.replace("timeout_s = 60\n", "") + """
[[grid]]
method = ["single"]
[grid.zip]
seed = [0, 1, 2]
inject_fault = ["exit@0", "hang@0", ""]
timeout_s = [60.0, 3.0, 60.0]
"""
    assert sweep(tmp_path, text, "--executor", "debug") == 1
    recs = records(tmp_path)
    assert [(r["seed"], r["status"]) for r in recs] == [(0, "error"), (1, "timeout"), (2, "ok")]
    assert "rank 0 exited with code 3 without writing a record" in recs[0]["error"]
    assert "the sweep job killed the ranks" in recs[1]["error"]
    assert len(list((tmp_path / "results" / "records").glob("*.jsonl"))) == 1     # one file per job


def test_debug_executor_names_the_culprit_rank_and_the_kind_as_dspbench_run_does(tmp_path, capsys):
    """Rank 1 exits, then hangs: rank 0 sees only `Connection closed by peer` and a collective timeout;
    the ranks' outcome files and heartbeats make the record name rank 1, as an error and a timeout."""
    text = HEAD.replace("timeout_s = 60\n", "") + """
[[grid]]
method = ["dsp"]
gpus = [2]
sp = [2]
[grid.zip]
seed = [0, 1]
inject_fault = ["exit@1", "hang@1"]
timeout_s = [60.0, 8.0]
"""
    assert sweep(tmp_path, text, "--executor", "debug") == 1
    recs = {r["seed"]: r for r in records(tmp_path)}
    assert recs[0]["status"] == "error" and recs[0]["error"].startswith("rank 1 exited with code"), recs[0]["error"]
    assert "(then rank 0 failed on the lost peer)" in recs[0]["error"]
    assert recs[1]["status"] == "timeout" and recs[1]["error"].startswith("timeout after 8 s: rank 1 stalled"), \
        recs[1]["error"]
    status = capsys.readouterr().out
    assert "r0: error: rank 0:" in status          # sweep status shows what the peer saw, under the record


def test_debug_executor_keeps_rank_0s_budget_oom_and_says_sp_auto(tmp_path):
    """sp = "auto" under an emulated budget: the job's record says which SP the model chose (sp_auto),
    and a run whose ranks all ended well but measured more than the budget stays `oom` with rank 0's
    reason (not an error composed from the ranks' outcomes)."""
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.profile_toml import dumps
    raw = dict(load_profile("emulated-cpu").raw)     # nothing reserved: a 20 MiB budget fits the tiny model
    raw["device"] = {**raw["device"], "reserved_gb": 0.0}
    (tmp_path / "noruntime.toml").write_text(dumps(raw))
    text = tiny_sweep(hardware=f'"{tmp_path / "noruntime.toml"}"') + """
[[grid]]
method = ["dsp"]
gpus = [2]
sp = ["auto"]
mem_budget_mib = [20, 4000]
"""
    assert sweep(tmp_path, text, "--executor", "debug") == 1
    recs = {r["mem_budget_mib"]: r for r in records(tmp_path)}
    assert recs[4000]["status"] == "ok" and recs[4000]["sp_auto"] is True and recs[4000]["sp"] == 1
    # the CPU runtime alone adds more than 20 MiB per rank (about 120 here): measured over the budget
    assert recs[20]["status"] == "oom" and recs[20]["sp_auto"] is True, recs[20]["error"]
    assert recs[20]["error"].startswith("measured ") and "the emulated budget of 20 MiB" in recs[20]["error"]
