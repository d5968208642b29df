"""`dspbench replay` on CPU: the same code path a GPU runs (bench/gpu/check.sh), tiny model."""
import json
from collections import Counter

import pytest

from dspbench.cli import main
from dspbench.cost.rank_trace import rank_kernels
from dspbench.records.config import RunConfig

ARGS = ["--model", "stdit-tiny", "--frames", "4", "--spatial", "16", "--gpus", "2", "--sp", "2", "--mode", "train",
        "--hardware", "h100-ib", "--dtype", "fp32", "--device", "cpu", "--reps", "1"]


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("method", ["ring", "ulysses", "dsp"])
def test_every_kernel_of_the_rank_is_replayed_and_paired_with_its_prediction(tmp_path, method):
    out = tmp_path / "r.jsonl"
    assert main(["replay", "--method", method, *ARGS, "--records-file", str(out)]) == 0
    recs = _records(out)
    kernels = [r for r in recs if r["source"] in ("predicted", "measured-replay")]
    pairs = Counter((r["kernel_key"], r["source"]) for r in kernels)
    keys = {k for k, _ in pairs}
    assert all(pairs[(k, "predicted")] == 1 and pairs[(k, "measured-replay")] == 1 for k in keys)
    cfg = RunConfig(method=method, model="stdit-tiny", frames=4, spatial=16, gpus=2, sp=2, mode="train", dtype="fp32")
    assert len(keys) == len(rank_kernels(cfg).kernels)               # one pair per traced kernel, none lost
    measured = [r for r in kernels if r["source"] == "measured-replay"]
    assert all(r["error"] is None and r["seconds_per_call"] > 0 for r in measured)
    (summary,) = [r for r in recs if r["source"] == "measured-replay-summary"]
    assert summary["kernels_replayed"] == len(keys) and summary["kernels_failed"] == 0
    assert "not replayed" in summary["comm_source"]


def test_limit_keeps_the_costliest_kernels_and_counts_the_rest(tmp_path):
    out = tmp_path / "r.jsonl"
    assert main(["replay", "--method", "ring", *ARGS, "--limit", "5", "--records-file", str(out)]) == 0
    (summary,) = [r for r in _records(out) if r["source"] == "measured-replay-summary"]
    assert summary["kernels_replayed"] == 5 and summary["kernels_left_out"] > 0


@pytest.mark.parametrize("bad, reason", [
    (["--hardware", "emulated-cpu"], "not a GPU datasheet profile"),
    (["--reps", "0"], "argument --reps: must be >= 1, got 0"),   # argparse's (records/argtypes.py)
    (["--sp", "auto"], "--sp auto"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, bad, reason):
    out = tmp_path / "r.jsonl"
    args = [*ARGS]
    for flag, value in zip(bad[::2], bad[1::2]):
        args[args.index(flag) + 1] = value
    try:
        rc = main(["replay", "--method", "ring", *args, "--records-file", str(out)])
    except SystemExit as e:     # a value out of its argparse type's range
        rc = e.code
    assert rc == 2
    assert reason in capsys.readouterr().err and not out.exists()


def test_predict_explain_names_every_class_and_its_source(tmp_path, capsys):
    out = tmp_path / "p.jsonl"
    assert main(["predict", "--method", "ulysses", "--model", "full3d-1.3b", "--frames", "21", "--spatial", "1560",
                 "--gpus", "2", "--sp", "2", "--mode", "sample", "--hardware", "h100-ib", "--explain",
                 "--records-file", str(out)]) == 0
    text = capsys.readouterr().out
    for row in ("attention", "GEMM", "memory-bound", "collectives", "launch / host", "VAE decode", "text encoder"):
        assert row in text, row
    rec = _records(out)[0]
    b = rec["predicted_breakdown"]
    assert b["attn_kernel"] == "cudnn" and all(b[k]["sources"] for k in ("attention", "gemm", "memory"))
    classes = sum(b[k]["seconds"] for k in ("attention", "gemm", "memory", "conv") if k in b)
    assert classes == pytest.approx(rec["predicted_compute_time_s"], rel=1e-6)   # device-bound: the classes sum up
