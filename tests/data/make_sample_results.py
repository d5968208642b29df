"""Regenerate tests/data/sample_results/cpu-small/: a small, schema-true CPU (gloo) sweep.

    /tmp/venv/bin/python tests/data/make_sample_results.py

Timings come from bench/micro/synth_records.py's toy cost model (not measurements). The sweep deliberately
holds what a real one meets: two job files and a re-run file in a subfolder, a failed run re-run
later (same run_id: the ok record must win), a repeated ok record (the newer must win), an
out-of-memory run, and a truncated last line (a killed writer). Golden tables in
tests/data/golden/ are built from this data: regenerate them with DSPBENCH_UPDATE_GOLDEN=1.
"""
from __future__ import annotations

import json
import random
import shutil
from datetime import timedelta
from pathlib import Path

from dspbench.records.config import RunConfig
from dspbench.micro.synth_records import CPU_ENV, T0, failed, make_record

ROOT = Path(__file__).parent / "sample_results" / "cpu-small"
RATE = dict(flops_per_s=25e9, bytes_per_s=1.5e9, env=CPU_ENV)   # one CPU core per rank, gloo over shm


def configs():
    base = dict(model="stdit-small", batch=1, mode="train", dtype="fp32", backend="gloo", iters=5)
    for frames in (8, 16, 32):
        for repeat in (0, 1):
            yield RunConfig(method="single", gpus=1, sp=1, frames=frames, spatial=64, repeat=repeat, **base)
    for method in ("dsp", "ulysses", "ring", "megatron_sp"):
        for gpus in (2, 4):
            for frames in (16, 32):
                for repeat in (0, 1):
                    yield RunConfig(method=method, gpus=gpus, sp=gpus, frames=frames, spatial=64,
                                    repeat=repeat, **base)


def line(rec: dict) -> str:
    return json.dumps(rec, sort_keys=True) + "\n"     # as record.append_record writes it


def main() -> None:
    rng = random.Random(7)
    recs = [make_record(c, rng, when=T0 + timedelta(minutes=i), **RATE) for i, c in enumerate(configs())]
    by = {(r["method"], r["world_size"], r["frames"], r["repeat"]): r for r in recs}
    # megatron_sp at 2 ranks and T=32 ran out of memory (both repeats).
    for rep in (0, 1):
        k = ("megatron_sp", 2, 32, rep)
        by[k] = failed(by[k], "oom", "rank 1: RuntimeError: [enforce fail] out of memory (limit 2 GiB)")
    job0 = [r for k, r in by.items() if k[1] <= 2]
    job1 = [r for k, r in by.items() if k[1] == 4]
    # dsp 4 ranks T=32 repeat 0 first died (error), then was re-run: the ok record is in reruns/.
    bad = ("dsp", 4, 32, 0)
    job1 = [failed(by[bad], "error", "rank 2: ConnectionResetError: gloo peer closed")
            if (r["method"], r["world_size"], r["frames"], r["repeat"]) == bad else r for r in job1]
    rerun_ok = {**by[bad], "recorded_at": (T0 + timedelta(hours=2)).isoformat(timespec="seconds")}
    # ring 2 ranks T=16 repeat 1 ran twice ok; the later one (timestamped) must win.
    dup = ("ring", 2, 16, 1)
    newer = dict(by[dup], recorded_at=(T0 + timedelta(hours=3)).isoformat(timespec="seconds"))
    slow = 1.25   # the second run was slower: its numbers, not the first's, must reach the report
    newer.update({k: newer[k] * slow for k in ("step_time_median_s", "step_time_p10_s", "step_time_p90_s")},
                 step_times_s=[t * slow for t in newer["step_times_s"]],
                 samples_per_s=newer["samples_per_s"] / slow, tokens_per_s=newer["tokens_per_s"] / slow)
    if ROOT.exists():
        shutil.rmtree(ROOT)
    (ROOT / "jobs").mkdir(parents=True)
    (ROOT / "reruns").mkdir()
    (ROOT / "manifest.json").write_text(json.dumps({
        "name": "cpu-small", "spec": {"model": "stdit-small", "methods": ["single", "dsp", "ulysses",
        "ring", "megatron_sp"], "gpus": [1, 2, 4], "frames": [8, 16, 32], "spatial": [64],
        "mode": "train", "dtype": "fp32", "backend": "gloo", "repeats": 2}}, indent=2) + "\n")
    (ROOT / "jobs" / "job-0.jsonl").write_text("".join(map(line, job0)))
    # job-1 was killed while writing its last record: a truncated line ends the file.
    (ROOT / "jobs" / "job-1.jsonl").write_text("".join(map(line, job1)) + line(job1[0])[:120])
    (ROOT / "reruns" / "rerun-0.jsonl").write_text(line(rerun_ok) + line(newer))


if __name__ == "__main__":
    main()
