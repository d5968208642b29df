"""Step time of one configuration under three CPU placements of the 4 ranks on this 2-core machine
(run.sh): per placement and method, the median step over 4 runs, the runs' spread, each run's step,
and the step-to-step spread inside a run (p10-p90 over the median, the runs' median).
    python results/plan-validation/placement/table.py"""
import collections
import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
PLACEMENT = {"none": "not pinned (the OS places the ranks)", "local": "pinned by local rank (taskset -c $SLURM_LOCALID)",
             "node": "pinned by node (taskset -c $SLURM_NODEID)"}

print("| placement | method | median step (ms) | spread across runs | each run (ms) | p10-p90 within a run |")
print("|---|---|---|---|---|---|")
for bind, words in PLACEMENT.items():
    steps, within = collections.defaultdict(list), collections.defaultdict(list)
    for line in (HERE / f"{bind}.jsonl").read_text().splitlines():
        r = json.loads(line)
        steps[r["method"]].append(r["step_time_median_s"] * 1e3)
        within[r["method"]].append((r["step_time_p90_s"] - r["step_time_p10_s"]) / r["step_time_median_s"])
    for m, v in steps.items():
        med = statistics.median(v)
        print(f"| {words} | {m} | {med:.0f} | {(max(v) - min(v)) / med:.0%} | {', '.join(f'{x:.0f}' for x in v)} | "
              f"{statistics.median(within[m]):.0%} |")
