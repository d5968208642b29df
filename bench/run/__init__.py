"""The run stage: one configuration measured end to end (`dspbench run`, `models`, `methods`, `demo`).

harness (the steps of one run) -> launch (rank processes: local fork/spawn with heartbeats, or
env/torchrun/slurm) -> worker (per rank: build, parallelize, oracle check, warm up, time, ledger)
using steps (train/infer/sample), oracle, measure and progress; spawn runs any per-rank function
(calibration, micro-benchmarks) on the same forkserver.

May import: records, cost (autosp only: `--sp auto`), methods, models. Never slurm or reports.
"""
