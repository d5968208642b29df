"""`dspbench emulate`: validate the cost model on an emulated cluster (bench/netns.py).

Per setting: calibrate in the cluster (collectives + compute at the setting's shard, same launch
conditions as the runs), predict every method from that profile, then measure every method with
`dspbench run --launcher env`, one rank per namespace, launches interleaved over methods and
repeated. Reports measured vs predicted step time and the ratio baseline / DSP both ways.
Where namespaces cannot be made it says why and exits 0 without touching anything.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from .config import RunConfig
from .record import RESULT_CLOSE, RESULT_OPEN, append_record

# World 4, tiny model, fp32 training. comm: a long thin sequence (activation bytes dominate);
# compute: long frames (spatial attention FLOPs per token grow with S, bytes per token do not).
SETTINGS = {
    "comm": dict(model="stdit-tiny", frames=16, spatial=256, calib_sizes="256K,1M,4M"),
    "compute": dict(model="stdit-tiny", frames=8, spatial=1024, calib_sizes="256K,1M,4M"),
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


def _result(stdout: str) -> dict | None:
    for line in stdout.splitlines():
        if line.startswith(RESULT_OPEN):
            return json.loads(line[len(RESULT_OPEN):-len(RESULT_CLOSE)])
    return None


def calibrate(cluster, name: str, s: dict, out: Path) -> Path:
    path = out / f"{name}.toml"
    argv = ["calibrate", "--launcher", "env", "--gpus", str(cluster.ranks), "--gpus-per-node", "1",
            "--sizes", s["calib_sizes"], "--iters", "3", "--model", s["model"], "--frames", str(s["frames"]),
            "--spatial", str(s["spatial"]), "--sp", str(cluster.ranks), "--threads", "1",
            "--name", name, "--output", str(path)]
    res = run_ranks(cluster, argv)
    if res[0].returncode or not path.is_file():
        raise RuntimeError(f"calibration failed: {res[0].stderr[-2000:]}")
    print(res[0].stdout, flush=True)
    return path


def measure(cluster, cfg: RunConfig, records: Path) -> dict:
    argv = ["run", "--launcher", "env", "--gpus", str(cfg.gpus), "--sp", str(cfg.sp), "--method", cfg.method,
            "--model", cfg.model, "--frames", str(cfg.frames), "--spatial", str(cfg.spatial),
            "--warmup", str(cfg.warmup), "--iters", str(cfg.iters), "--repeat", str(cfg.repeat),
            "--threads", "1", "--json", "--records-file", str(records)]
    res = run_ranks(cluster, argv)
    rec = _result(res[0].stdout)
    if rec is None:
        raise RuntimeError(f"{cfg.method}: no record from rank 0: {res[0].stderr[-2000:]}")
    return rec


def validate(cluster, args, out: Path) -> list[dict]:
    from .hardware import load_profile
    from .predict import predicted_record
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    for name in [s for s in args.settings.split(",") if s]:
        s = SETTINGS[name]
        profile = load_profile(str(calibrate(cluster, f"emu-{name}", s, out)))
        base = RunConfig(model=s["model"], frames=s["frames"], spatial=s["spatial"], gpus=cluster.ranks,
                         sp=cluster.ranks, launcher="env", warmup=1, iters=3)
        for m in methods:
            rec = predicted_record(replace(base, method=m), profile)
            append_record(out / "predicted.jsonl", rec)
            rows.append({"setting": name, "method": m, "predicted_s": rec["step_time_median_s"],
                         "pred_comm_s": rec["predicted_comm_time_s"], "pred_compute_s": rec["predicted_compute_time_s"],
                         "comm_MiB": rec["comm_wire_bytes"] / 2**20, "measured": [], "cfg": base})
    for rep in range(args.repeats):   # interleaved: every method once per round, order rotated
        order = rows[rep % len(rows):] + rows[:rep % len(rows)]
        for row in order:
            cfg = replace(row["cfg"], method=row["method"], repeat=rep)
            rec = measure(cluster, cfg, out / "measured.jsonl")
            row["measured"].append(rec["step_time_median_s"] if rec["status"] == "ok" else None)
            print(f"  {row['setting']:<8} {row['method']:<12} rep {rep}: {rec['status']} "
                  f"{rec['step_time_median_s'] or 0:.3f} s (predicted {row['predicted_s']:.3f} s)", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| setting | method | comm MiB/rank/step | predicted step (s) (compute + comm) | measured step (s) mean [min-max] | "
             "pred/meas | baseline/DSP predicted | baseline/DSP measured | ratio error |", "|" + "---|" * 9]
    for r in rows:
        ok = [x for x in r["measured"] if x]
        r["measured_mean"] = statistics.mean(ok) if ok else None
    for r in rows:
        dsp = next(x for x in rows if x["setting"] == r["setting"] and x["method"] == "dsp")
        m = r["measured_mean"]
        rp = r["predicted_s"] / dsp["predicted_s"]
        rm = m / dsp["measured_mean"] if m and dsp["measured_mean"] else None
        spread = f"[{min(x for x in r['measured'] if x):.3f}-{max(x for x in r['measured'] if x):.3f}]" if m else ""
        lines.append(f"| {r['setting']} | {r['method']} | {r['comm_MiB']:.1f} | {r['predicted_s']:.3f} "
                     f"({r['pred_compute_s']:.3f} + {r['pred_comm_s']:.3f}) | {m or float('nan'):.3f} {spread} | "
                     f"{r['predicted_s'] / m if m else float('nan'):.2f} | {rp:.2f} | "
                     f"{rm if rm else float('nan'):.2f} | {(rp / rm - 1) * 100 if rm else float('nan'):+.0f}% |")
    return "\n".join(lines)


def cmd_emulate(args) -> int:
    from .netns import Cluster, netns_unavailable
    reason = "--no-netns given (simulated: no network namespaces)" if args.no_netns else netns_unavailable()
    if reason:
        print(f"dspbench emulate: cannot build the emulated cluster here: {reason}. "
              "Nothing was set up; exiting.", file=sys.stderr)
        return 0
    if args.check_only:
        print("dspbench emulate: network namespaces, veth and tc are available")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with Cluster(args.ranks, args.rate, args.subnet) as cluster:
        rows = validate(cluster, args, out)
    text = f"Emulated cluster: {args.ranks} ranks, tbf {args.rate} per link, gloo.\n\n" + table(rows) + "\n"
    (out / "validation.md").write_text(text)
    print(text)
    return 0
