"""Validate the two-tier cost model on the emulated multi-node SLURM (slurm/multinode.sh).

Run as a SLURM client inside the cluster (node 0's namespace), e.g.:
    bash slurm/local_cluster.sh up --nodes 2 --ranks-per-node 2 --inter 200mbit
    bash slurm/local_cluster.sh exec .venv/bin/python -m dspbench.calibrate.multinode --out results/tiers
Once, beforehand: `dspbench calibrate --tiers --launcher slurm` under srun (a node's ranks, one
rank per node, the whole world; the ring-overlap probe; compute at the SP-across shard) into one
profile, never re-measured. Then rounds: every method at sp = ranks per node (SP inside a node, DP
across nodes) and sp = world (SP across nodes), each measured by `dspbench run --launcher slurm`
under srun (ranks node-major), in an order rotated per round, and predicted from that profile.
The table (bench/emulate.py's) gives per-round baseline/DSP ratios, measured and predicted.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from dspbench.records.config import RunConfig
from dspbench.calibrate.emulate import parsed_result, summarise, table, verdict
from dspbench.records.io import append_record


def srun(nodes: int, per_node: int, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    cmd = ["srun", "-N", str(nodes), "--ntasks-per-node", str(per_node), "--kill-on-bad-exit=1",
           "-t", str(max(1, int(timeout // 60) + 1)), sys.executable, "-m", "dspbench.cli", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)


def calibrate(a, out: Path) -> Path:
    path = out / "tiers-profile.toml"
    argv = ["calibrate", "--launcher", "slurm", "--tiers", "--gpus", str(a.nodes * a.per_node),
            "--gpus-per-node", str(a.per_node), "--nics-per-node", "1", "--sizes", a.sizes, "--iters", "5",
            "--model", a.model, "--frames", str(a.frames), "--spatial", str(a.spatial), "--sp",
            str(a.nodes * a.per_node), "--threads", "1", "--name", "emulated-tiers", "--output", str(path)]
    res = srun(a.nodes, a.per_node, argv, 1200)
    print(res.stdout, flush=True)
    if res.returncode or not path.is_file():
        raise RuntimeError(f"tiered calibration failed ({res.returncode}): {res.stderr[-2000:]}")
    return path


def measure(a, cfg: RunConfig, records: Path) -> dict:
    argv = ["run", "--launcher", "slurm", "--gpus", str(cfg.gpus), "--sp", str(cfg.sp), "--method", cfg.method,
            "--model", cfg.model, "--frames", str(cfg.frames), "--spatial", str(cfg.spatial), "--warmup",
            str(cfg.warmup), "--iters", str(cfg.iters), "--repeat", str(cfg.repeat), "--threads", "1",
            "--json", "--records-file", str(records)]
    res = srun(a.nodes, a.per_node, argv, cfg.timeout_s)
    rec = parsed_result(res.stdout)
    if rec is None:
        raise RuntimeError(f"{cfg.method} sp={cfg.sp}: no record: {res.stderr[-2000:]}")
    return rec


def run(a) -> list[dict]:
    from dataclasses import replace

    from dspbench.cost.hardware import load_profile
    from dspbench.cost.predict import predicted_record
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    profile = load_profile(str(a.profile) if a.profile else str(calibrate(a, out)))
    world = a.nodes * a.per_node
    rows = []
    for sp, name in ((a.per_node, f"sp{a.per_node} in a node"), (world, f"sp{world} across nodes")):
        base = RunConfig(model=a.model, frames=a.frames, spatial=a.spatial, gpus=world, sp=sp, launcher="slurm",
                         warmup=1, iters=a.iters, timeout_s=a.timeout)
        for m in a.methods.split(","):
            pred = predicted_record(replace(base, method=m), profile)
            append_record(out / "predicted.jsonl", pred)
            rows.append({"setting": name, "rate": a.inter, "method": m, "cfg": replace(base, method=m),
                         "predicted": [pred["step_time_median_s"]] * a.rounds,
                         "pred_compute": [pred["predicted_compute_time_s"]] * a.rounds,
                         "pred_comm_s": pred["predicted_comm_time_s"], "comm_MiB": pred["comm_wire_bytes"] / 2**20,
                         "measured": []})
    for rep in range(a.rounds):
        for row in rows[rep % len(rows):] + rows[:rep % len(rows)]:
            rec = measure(a, replace(row["cfg"], repeat=rep), out / "measured.jsonl")
            row["measured"].append(rec["step_time_median_s"] if rec["status"] == "ok" else None)
            print(f"  {row['setting']:<18} {row['method']:<12} round {rep}: {rec['status']} "
                  f"{rec['step_time_median_s'] or 0:.3f} s (predicted {row['predicted'][0]:.3f} s) "
                  f"{(rec.get('error') or '')[:200]}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dspbench.calibrate.multinode", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="results/tiers")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--per-node", type=int, default=2)
    p.add_argument("--inter", default="200mbit", help="the cluster's inter-node rate (a label for the table)")
    p.add_argument("--methods", default="dsp,ulysses,ring,megatron_sp,usp")
    p.add_argument("--model", default="stdit-tiny")
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--spatial", type=int, default=256)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--sizes", default="128K,512K,2M,4M")
    p.add_argument("--profile", default=None, help="a tiered profile calibrated before (skips calibration)")
    a = p.parse_args(argv)
    if "dsp" not in a.methods.split(","):
        p.error("--methods must include dsp (the ratios are baseline / DSP)")
    rows = summarise(run(a))
    text = (f"Emulated {a.nodes} nodes x {a.per_node} ranks (slurm/multinode.sh: loopback inside a node, "
            f"{a.inter} between nodes), gloo, {a.model} T={a.frames} S={a.spatial}; profile calibrated once "
            f"per tier; {a.rounds} rounds, medians.\n\n{table(rows)}\n\n{verdict(rows)}\n")
    (Path(a.out) / "validation.md").write_text(text)
    (Path(a.out) / "rows.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "cfg"} for r in rows],
                                                      indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
