"""`dspbench run` end to end on gloo: records, failures, launchers, loss trajectories."""
import json
import os
import subprocess
import sys
import time

import pytest

from dspbench.records.config import RunConfig
from dspbench.run.harness import run_config
from dspbench.records.io import SCHEMA_VERSION, read_records

REQUIRED = ["schema_version", "run_id", "status", "error", "method", "model", "batch", "frames", "spatial",
            "hidden", "depth", "heads", "params", "world_size", "sp", "dp", "mode", "dtype", "backend",
            "step_time_median_s", "step_time_p10_s", "step_time_p90_s", "samples_per_s", "tokens_per_s",
            "peak_mem_bytes", "losses", "comm_wire_bytes", "comm", "oracle_max_abs_err", "environ"]
TINY = dict(model="stdit-tiny", frames=4, spatial=16, warmup=1, iters=2, timeout_s=120)


def run(tmp_path, **kw):
    cfg = RunConfig(**{**TINY, **kw})
    path = tmp_path / "records.jsonl"
    rec = run_config(cfg, path)
    return rec, path


def test_record_has_every_contract_field_and_is_appended(tmp_path):
    rec, path = run(tmp_path, method="dsp", gpus=2, sp=2, check=True)
    assert rec["status"] == "ok", rec["error"]
    assert not [k for k in REQUIRED if k not in rec]
    assert rec["schema_version"] == SCHEMA_VERSION and rec["comm_formula_match"] and rec["comm_symmetric"]
    assert rec["comm"]["all_to_all.fwd"] > 0 and rec["comm_wire_bytes"] == sum(rec["comm"].values())
    assert set(rec["comm_time_s"]) == set(rec["comm"])
    assert rec["oracle_max_abs_err"] < 1e-5 and rec["oracle_errors"]["output"] <= rec["oracle_max_abs_err"]
    assert rec["comm_formula"] == rec["comm_tagged"] and rec["source"] == "measured"
    assert len(rec["losses"]) == 3 and rec["step_time_p10_s"] <= rec["step_time_median_s"] <= rec["step_time_p90_s"]
    assert rec["tokens_per_s"] == pytest.approx(rec["samples_per_s"] * 4 * 16)
    assert {"git_sha", "git_dirty", "torch", "python", "hostnames", "devices"} <= set(rec["environ"])
    records, problems = read_records(path)
    assert problems == [] and [r["run_id"] for r in records] == [rec["run_id"]]
    # where the run's wall time went: every phase measured, and inside the launcher's total
    phases = rec["phases_s"]
    inside = ("rendezvous", "oracle", "build", "warmup", "timed", "ledger_step", "memory_step", "collect")
    assert all(phases[p] >= 0 for p in ("start", *inside)) and phases["oracle"] > 0 and phases["timed"] > 0
    assert phases["start"] + sum(phases[p] for p in inside) <= phases["ranks_total"]
    assert phases["timed"] >= sum(rec["step_times_s"]) * 0.9


def test_run_id_is_stable_and_ignores_where_it_runs():
    a = RunConfig(method="dsp", gpus=4, sp=4)
    assert a.run_id() == RunConfig(method="dsp", gpus=4, sp=4, launcher="slurm", timeout_s=5).run_id()
    assert a.run_id() != RunConfig(method="dsp", gpus=4, sp=4, repeat=1).run_id()


@pytest.mark.parametrize("kw, reason", [
    (dict(method="dsp", gpus=4, sp=3), "sp=3 does not divide gpus=4"),
    (dict(method="ulysses", gpus=4, sp=4, frames=6, pad="never"), "frames T=6 is not divisible by the SP degree 4"),
    # auto pads, but a head count the degree does not divide stays a refusal
    (dict(method="ulysses", gpus=3, sp=3, frames=6), "heads=4 is not divisible by the SP degree 3"),
    # a library's own limits (MethodSpec.check_run): torch 2.13 has no CPU backward for its context parallel
    (dict(method="torch_cp", gpus=2, sp=2, mode="train", backend="gloo"), "no CPU backward"),
])
def test_impossible_configurations_are_unsupported_without_starting_ranks(tmp_path, kw, reason):
    t0 = time.monotonic()
    rec, _ = run(tmp_path, **kw)
    assert rec["status"] == "unsupported" and reason in rec["error"]
    assert time.monotonic() - t0 < 2     # no ranks were started


@pytest.mark.parametrize("kw, words", [
    (dict(method="nonexistent"), ["unknown method 'nonexistent'", "entry-point group 'dspbench.methods'"]),
    (dict(model="stdit-huge"), ["unknown model 'stdit-huge'"]),
    # issue 42: sp 0 divided by zero (RunConfig.dp) before it was a static error
    (dict(sp=0), ["argument --sp: must be >= 1, got 0"]), (dict(sp=-2), ["argument --sp: must be >= 1"])])
def test_unknown_method_or_model_exits_2_and_writes_nothing(tmp_path, capsys, kw, words):
    from dspbench.cli import main
    flags = [f"--{k}={v}" for k, v in kw.items()]
    try:
        rc = main(["run", *flags, "--out", str(tmp_path / "out")])
    except SystemExit as e:     # argparse's refusal of a degree below 1 (records/argtypes.py)
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="unknown|sp must be"):
        run(tmp_path, **kw)
    assert not (tmp_path / "records.jsonl").exists()


@pytest.mark.parametrize("launcher, missing", [
    ("slurm", "missing: SLURM_PROCID, SLURM_NTASKS. Run it as a step of an allocation"),
    ("env", "missing: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. torchrun sets them"),
    ("torchrun", "missing: MASTER_PORT. torchrun sets them")])
def test_a_launcher_outside_its_environment_names_every_missing_variable(tmp_path, monkeypatch, capsys,
                                                                         launcher, missing):
    from dspbench.cli import main
    for name in [v for v in os.environ if v.startswith("SLURM_")] + ["RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                                     "MASTER_PORT"]:
        monkeypatch.delenv(name, raising=False)
    if launcher == "torchrun":
        monkeypatch.setenv("RANK", "0"), monkeypatch.setenv("WORLD_SIZE", "1"), monkeypatch.setenv("MASTER_ADDR", "h")
    assert main(["run", "--launcher", launcher, "--method", "single", "--out", str(tmp_path)]) == 2
    assert missing in capsys.readouterr().err
    assert not list(tmp_path.iterdir())                  # no record


@pytest.mark.parametrize("fault, status, rank", [
    ("raise@1", "error", 1), ("oom@0", "oom", 0), ("exit@1", "error", 1), ("hang@1", "timeout", 1)])
def test_injected_faults_end_the_run_with_a_status_naming_the_rank(tmp_path, fault, status, rank):
    rec, path = run(tmp_path, method="dsp", gpus=2, sp=2, inject_fault=fault, timeout_s=20)
    assert rec["status"] == status
    assert f"rank {rank}" in rec["error"]
    if status == "timeout":
        assert f"rank {rank} stalled after starting step 0 while others reached step 1" in rec["error"]
    assert read_records(path)[0][0]["status"] == status
    time.sleep(0.2)
    assert not _children(), "ranks were left running"


def test_a_slow_rank_delays_the_run_between_warm_up_and_timing_and_it_still_succeeds(tmp_path):
    from dspbench.run.worker import SLOW_S
    t0 = time.monotonic()
    rec, _ = run(tmp_path, method="dsp", gpus=2, sp=2, inject_fault="slow@1", timeout_s=60)
    assert rec["status"] == "ok" and time.monotonic() - t0 >= SLOW_S
    assert rec["step_time_median_s"] < SLOW_S            # before the timed steps: timings unaffected


def _children() -> list[str]:
    """Rank processes still alive: the children of our children (ranks come from a forkserver)."""
    def kids(pid):
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        return out.stdout.split()
    return [g for c in kids(os.getpid()) for g in kids(c)]


GLOBAL = dict(mode="train", warmup=2, iters=3, seed=3)


@pytest.fixture(scope="module")
def single_losses(tmp_path_factory):
    rec, _ = run(tmp_path_factory.mktemp("single"), method="single", gpus=1, sp=1, batch=2, **GLOBAL)
    assert rec["status"] == "ok", rec["error"]
    return rec["losses"]


@pytest.mark.parametrize("method, gpus, sp, batch", [
    ("dsp", 4, 4, 2), ("ulysses", 4, 4, 2), ("ring", 2, 2, 2), ("megatron_sp", 4, 4, 2),
    ("dsp", 4, 2, 1),      # sp 2 x dp 2 at the same global batch of 2
    ("single", 2, 1, 1),   # pure data parallelism
])
def test_loss_trajectory_equals_single_at_the_same_global_batch(tmp_path, single_losses, method, gpus, sp, batch):
    rec, _ = run(tmp_path, method=method, gpus=gpus, sp=sp, batch=batch, **GLOBAL)
    assert rec["status"] == "ok", rec["error"]
    assert len(rec["losses"]) == 5
    # fp32 AdamW from identical weights and data: only summation order differs.
    assert rec["losses"] == pytest.approx(single_losses, rel=1e-5, abs=1e-6)
    assert rec["losses"][-1] != rec["losses"][0]    # the optimizer really stepped


@pytest.mark.parametrize("mode", ["infer", "sample"])
def test_inference_modes(tmp_path, mode):
    rec, _ = run(tmp_path, method="ulysses", gpus=2, sp=2, mode=mode, sample_steps=3)
    assert rec["status"] == "ok", rec["error"]
    assert rec["losses"] is None and rec["comm_formula_match"]
    assert "all_to_all.bwd" not in rec["comm"]


def test_cli_json_and_result_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "dspbench.cli", "run", "--method", "ring", "--gpus", "2", "--sp", "2",
                          "--frames", "4", "--spatial", "16", "--iters", "1", "--warmup", "0", "--json",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)          # with --json, stdout is one JSON document
    lines = out.stderr.strip().splitlines()
    assert rec["method"] == "ring" and lines[-1].startswith("<RESULT>") and lines[-1].endswith("</RESULT>")
    assert json.loads(lines[-1][len("<RESULT>"):-len("</RESULT>")]) == rec
    from dspbench.calibrate.emulate import parsed_result     # what the emulation drivers read back
    assert parsed_result(out.stdout) == rec


def test_cli_unsupported_exit_code(tmp_path):
    out = subprocess.run([sys.executable, "-m", "dspbench.cli", "run", "--method", "ulysses", "--gpus", "4",
                          "--sp", "4", "--frames", "6", "--pad", "never", "--shard", "T", "--out", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 3 and "unsupported" in out.stdout


def test_torchrun_launcher(tmp_path):
    path = tmp_path / "r.jsonl"
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "dspbench.cli", "run", "--launcher", "torchrun", "--method", "dsp", "--gpus", "2",
                          "--sp", "2", "--frames", "4", "--spatial", "16", "--iters", "1", "--warmup", "0",
                          "--records-file", str(path)], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    records, problems = read_records(path)
    assert problems == [] and len(records) == 1 and records[0]["status"] == "ok"
    assert records[0]["launcher"] == "torchrun" and records[0]["comm_formula_match"]


def test_slurm_variables_map_onto_env(monkeypatch):
    from dspbench.run.launch import slurm_to_env
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "3")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "nodeA,nodeB")
    monkeypatch.setenv("PATH", "/nonexistent")   # no scontrol: parse the list
    slurm_to_env()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"]) == ("3", "8", "1")
    assert os.environ["MASTER_ADDR"] == "nodeA" and os.environ["MASTER_PORT"] == str(20000 + 1234)
    monkeypatch.delenv("MASTER_PORT")
    monkeypatch.setenv("SLURM_JOB_ID", "15000")      # never in the ephemeral range (32768-), where srun listens
    slurm_to_env()
    assert os.environ["MASTER_PORT"] == str(20000 + 15000 - 12768)


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "shared.jsonl"
    code = ("import sys; from dspbench.records.io import append_record\n"
            "for i in range(200): append_record(sys.argv[1], {'run_id': sys.argv[2] + str(i), 'status': 'ok', "
            "'schema_version': 1, 'pad': 'x' * 5000})")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), f"w{w}-"]) for w in range(3)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    records, problems = read_records(path)
    assert problems == [] and len(records) == 600
