"""`dspbench emulate`: validate the cost model on an emulated cluster (bench/calibrate/netns.py).

Per setting (its own link rate): calibrate in the cluster (collectives, the ring-overlap probe,
compute at the setting's shard, same launch conditions as the runs); then rounds: re-measure
compute (a shared machine drifts), predict every method from the link fit and that compute, and
measure every method with `dspbench run --launcher env`, one rank per namespace, in rotated
order. Reports medians of measured vs predicted step time, and of the per-round ratio
baseline / DSP both ways (a round's ratios share its machine state).
Where namespaces cannot be made it says why and exits 0 without touching anything.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from dspbench.records.config import RunConfig
from dspbench.records.io import RESULT_CLOSE, RESULT_OPEN, append_record

# World 4, tiny model, fp32 training, each setting on its own link rate. comm: a long thin sequence on
# a slow link (activation bytes dominate); compute: long frames on a faster link (spatial attention
# FLOPs per token grow with S, bytes per token do not).
SETTINGS = {
    "comm": dict(model="stdit-tiny", frames=16, spatial=256, rate="50mbit", calib_sizes="128K,256K,512K,1M,2M,4M"),
    "compute": dict(model="stdit-tiny", frames=8, spatial=1024, rate="1gbit", calib_sizes="128K,256K,512K,1M,2M,4M"),
    "smoke": dict(model="stdit-tiny", frames=4, spatial=64, rate="1gbit", calib_sizes="64K,256K"),  # tests
}
PORT = [29600]


def run_ranks(cluster, argv: list[str], timeout: float = 600) -> list[subprocess.CompletedProcess]:
    """Start every rank of one launch in its namespace; wait for all (a fresh port per launch)."""
    PORT[0] += 1
    env = {"MASTER_PORT": str(PORT[0]), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(cluster.rank_cmd(r, [sys.executable, "-m", "dspbench.cli", *argv], env),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(cluster.ranks)]
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
    return out


def parsed_result(stdout: str) -> dict | None:
    """The record `dspbench run` printed: its RESULT line, or with --json its one JSON document."""
    for line in stdout.splitlines():
        if line.startswith(RESULT_OPEN):
            return json.loads(line[len(RESULT_OPEN):-len(RESULT_CLOSE)])
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "run_id" in rec:
                return rec
    return None


def _calibrate(cluster, s: dict, *extra: str) -> subprocess.CompletedProcess:
    """`dspbench calibrate` in the cluster at the setting's shard; rank 0's outcome."""
    argv = ["calibrate", "--launcher", "env", "--gpus", str(cluster.ranks), "--gpus-per-node", "1",
            "--sizes", s["calib_sizes"], "--iters", "5", "--model", s["model"], "--frames", str(s["frames"]),
            "--spatial", str(s["spatial"]), "--sp", str(cluster.ranks), "--threads", "1", *extra]
    res = run_ranks(cluster, argv)[0]
    if res.returncode:
        raise RuntimeError(f"calibration failed: {res.stderr[-2000:]}")
    return res


def calibrate(cluster, name: str, s: dict, out: Path, force: bool = False) -> Path:
    """The setting's profile: collectives, the ring-overlap probe, compute."""
    path = out / f"{name}.toml"
    extra = ["--force"] if force else []
    print(_calibrate(cluster, s, "--name", name, "--output", str(path), *extra).stdout, flush=True)
    if not path.is_file():
        raise RuntimeError(f"calibration wrote no profile at {path}")
    return path


def measure_compute(cluster, s: dict) -> dict:
    """This moment's compute (same shard, all ranks at once): the machine drifts between rounds."""
    return json.loads(_calibrate(cluster, s, "--ops", "").stdout.strip().splitlines()[-1])


def measure(cluster, cfg: RunConfig, records: Path) -> dict:
    argv = ["run", "--launcher", "env", "--gpus", str(cfg.gpus), "--sp", str(cfg.sp), "--method", cfg.method,
            "--model", cfg.model, "--frames", str(cfg.frames), "--spatial", str(cfg.spatial),
            "--warmup", str(cfg.warmup), "--iters", str(cfg.iters), "--repeat", str(cfg.repeat),
            "--threads", "1", "--json", "--records-file", str(records)]
    res = run_ranks(cluster, argv)
    rec = parsed_result(res[0].stdout)
    if rec is None:
        raise RuntimeError(f"{cfg.method}: no record from rank 0: {res[0].stderr[-2000:]}")
    return rec


def predict_round(profile, compute: dict, rows: list[dict], out: Path, rep: int) -> None:
    """Predict every method from the setting's link fit and this round's compute measurement."""
    from dspbench.cost.predict import predicted_record
    prof = replace(profile, flops_per_s={compute["dtype"]: compute["flops_per_s"]},
                   optimizer_Bps=compute["optimizer_Bps"])
    for row in rows:
        rec = predicted_record(replace(row["cfg"], method=row["method"], repeat=rep), prof)
        append_record(out / "predicted.jsonl", rec)
        row["predicted"].append(rec["step_time_median_s"])
        row["pred_compute"].append(rec["predicted_compute_time_s"])
        row["pred_comm_s"], row["comm_MiB"] = rec["predicted_comm_time_s"], rec["comm_wire_bytes"] / 2**20


def validate_setting(name: str, s: dict, args, out: Path) -> list[dict]:
    """One setting on its own cluster: calibrate, then rounds of (compute, every method, rotated)."""
    from dspbench.cost.hardware import load_profile
    from dspbench.calibrate.netns import Cluster
    methods = [m for m in args.methods.split(",") if m]
    base = RunConfig(model=s["model"], frames=s["frames"], spatial=s["spatial"], gpus=args.ranks,
                     sp=args.ranks, launcher="env", warmup=1, iters=3)
    rows = [{"setting": name, "rate": args.rate or s["rate"], "method": m, "cfg": base, "predicted": [],
             "pred_compute": [], "measured": []} for m in methods]
    with Cluster(args.ranks, args.rate or s["rate"], args.subnet, args.ns_prefix) as cluster:
        profile = load_profile(str(calibrate(cluster, f"emu-{name}", s, out, args.force)))
        for rep in range(args.repeats):
            predict_round(profile, measure_compute(cluster, s), rows, out, rep)
            for row in rows[rep % len(rows):] + rows[:rep % len(rows)]:
                rec = measure(cluster, replace(base, method=row["method"], repeat=rep), out / "measured.jsonl")
                row["measured"].append(rec["step_time_median_s"] if rec["status"] == "ok" else None)
                print(f"  {name:<8} {row['method']:<12} round {rep}: {rec['status']} "
                      f"{rec['step_time_median_s'] or 0:.3f} s (predicted {row['predicted'][-1]:.3f} s)", flush=True)
    return rows


def _ratios(row: dict, dsp: dict, key: str) -> list[float]:
    """Per-round baseline/DSP ratios: both from the same round, so slow drift of the machine cancels."""
    return [a / b for a, b in zip(row[key], dsp[key]) if a and b]


def summarise(rows: list[dict]) -> list[dict]:
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    for r in rows:
        dsp = next(x for x in rows if x["setting"] == r["setting"] and x["method"] == "dsp")
        ok = [x for x in r["measured"] if x]
        r.update(pred_med=med(r["predicted"]), meas_med=med(ok), meas_min=min(ok, default=float("nan")),
                 meas_max=max(ok, default=float("nan")), compute_med=med(r["pred_compute"]),
                 ratio_pred=med(_ratios(r, dsp, "predicted")), ratio_meas=med(_ratios(r, dsp, "measured")))
        r["ratio_err"] = r["ratio_pred"] / r["ratio_meas"] - 1
    return rows


def table(rows: list[dict]) -> str:
    """The validation table of summarised rows (summarise)."""
    lines = ["| setting (link) | method | comm MiB/rank/step | predicted step (s) (compute + comm) | "
             "measured step (s) median [min-max] | pred/meas | baseline/DSP predicted | baseline/DSP measured | "
             "ratio error |", "|" + "---|" * 9]
    for r in rows:
        err = "-" if r["method"] == "dsp" else f"{r['ratio_err'] * 100:+.0f}%"
        lines.append(f"| {r['setting']} ({r['rate']}) | {r['method']} | {r['comm_MiB']:.1f} | {r['pred_med']:.3f} "
                     f"({r['compute_med']:.3f} + {r['pred_comm_s']:.3f}) | {r['meas_med']:.3f} "
                     f"[{r['meas_min']:.3f}-{r['meas_max']:.3f}] | {r['pred_med'] / r['meas_med']:.2f} | "
                     f"{r['ratio_pred']:.2f} | {r['ratio_meas']:.2f} | {err} |")
    return "\n".join(lines)


def verdict(rows: list[dict], tol: float = 0.15) -> str:
    base = [r for r in rows if r["method"] != "dsp"]
    within = [r for r in base if abs(r["ratio_err"]) <= tol]
    seen = [r for r in base if r["ratio_pred"] > 1 + tol and r["ratio_meas"] > 1]
    return (f"Ratios baseline/DSP within {tol:.0%} of the prediction: {len(within)} of {len(base)}. "
            f"Where the model predicts DSP ahead by more than {tol:.0%} ({sum(r['ratio_pred'] > 1 + tol for r in base)} "
            f"points), DSP is measured ahead at {len(seen)}.")


def cmd_emulate(args) -> int:
    from dspbench.calibrate.netns import says_cannot_emulate
    if says_cannot_emulate(args.no_netns):
        return 0
    if args.check_only:
        print("dspbench emulate: network namespaces, veth and tc are available")
        return 0
    args.methods = args.methods or "dsp,ulysses,ring,megatron_sp"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = summarise([r for name in args.settings.split(",") if name
                      for r in validate_setting(name, SETTINGS[name], args, out)])
    text = (f"Emulated cluster: {args.ranks} ranks, one network namespace each, tbf per link, gloo; "
            f"{args.repeats} rounds, medians.\n\n{table(rows)}\n\n{verdict(rows)}\n")
    (out / "validation.md").write_text(text)
    print(text)
    return 0
