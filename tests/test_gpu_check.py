"""bench/gpu/check.sh: its CPU rehearsal runs every step the GPU check runs (gloo, tiny shapes), so
the script cannot rot between sessions that have a GPU; without CUDA the GPU mode stops cleanly."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dspbench.cost.hardware import load_profile

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "gpu" / "check.sh"
METHODS = {"single", "dsp", "ulysses", "ring", "megatron_sp", "usp"}


ENTRY = ROOT / "bench" / "gpu_check.sh"     # the name a GPU session runs first: forwards to SCRIPT


def _run(*args, timeout=600, script=SCRIPT):
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("OUT", None)
    return subprocess.run(["bash", str(script), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-CUDA stop needs a machine without CUDA")
@pytest.mark.parametrize("script", [SCRIPT, ENTRY], ids=["gpu/check.sh", "gpu_check.sh"])
def test_gpu_mode_without_cuda_stops_cleanly(tmp_path, script):
    res = _run(tmp_path, script=script)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no CUDA device" in res.stdout
    assert json.loads((tmp_path / "env.json").read_text())["cuda_available"] is False


def test_cpu_rehearsal_runs_every_step_and_summarises(tmp_path):
    res = _run("--cpu", tmp_path)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    steps = [line.split("\t") for line in (tmp_path / "steps.tsv").read_text().splitlines()]
    assert {n for n, _, _ in steps} >= {"pytest", "ring_error", "calibrate", "curve", "xl_step", "xl_predict",
                                         "replay_stdit-tiny_ulysses", "replay_stdit-tiny_ring",
                                         *(f"run_{m}" for m in METHODS)}
    assert all(rc == "0" for _, rc, _ in steps)
    recs = _records(tmp_path / "records.jsonl")
    train = {r["method"]: r for r in recs if r["mode"] == "train"}
    assert set(train) == METHODS and all(r["status"] == "ok" for r in recs)
    assert all(r["oracle_max_abs_err"] < 1e-5 for r in train.values())   # fp32 on CPU: exact
    prof = load_profile(str(tmp_path / "calibrated.toml"))
    assert prof.kind == "calibrated" and prof.flops("fp32") > 0
    curve = load_profile(str(tmp_path / "curve.toml")).curve        # the device curve, fitted, as predict reads it
    assert curve["gemm_peak_fraction"] > 0 and curve["host_s_per_kernel"] > 0 and curve["conv_peak_fraction"] > 0
    assert len(json.loads((tmp_path / "ring_error.json").read_text())) == 6
    replay = _records(tmp_path / "replay.jsonl")
    summaries = [r for r in replay if r["source"] == "measured-replay-summary"]
    assert [(r["method"], r["kernels_replayed"]) for r in summaries] == [("ulysses", 8), ("ring", 8)]
    assert all(r["kernels_failed"] == 0 and r["frames"] == 4 and r["spatial"] == 16 for r in summaries)
    summary = (tmp_path / "summary.md").read_text()
    for needle in ("CPU rehearsal", "| ring size |", "calibration: stdit-tiny x 1 block(s)", "| megatron_sp | train | ok",
                   "big-model step (stdit-tiny", "predicted/measured",
                   "| stdit-tiny | 4 x 16 | ring | 2 | 8 ("):
        assert needle in summary, needle
