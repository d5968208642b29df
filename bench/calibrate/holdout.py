"""`dspbench emulate --protocol holdout`: calibrate once, then predict and measure a grid the
calibration never touched.

Per link rate, on its own emulated cluster (bench/calibrate/netns.py):
1. calibrate once: collectives at nccl-tests sizes (4 KiB-4 MiB, not the methods' own sizes), the
   ring-overlap probe (repeated), compute and GEMM-by-width on CALIB_MODEL at CALIB_SHAPE (a
   model and shape no grid point uses), every measurement repeated, its spread stored; each
   method's own per-step work trained at that same shape (bench/calibrate/methods.py);
2. predict every grid point once from that profile (predicted.jsonl): nothing is re-measured or
   re-fitted per point or per round;
3. rounds: every (model, shape), every method in rotated order, `dspbench run --launcher env`
   (measured.jsonl). Ratios baseline/DSP are taken per round (both launches of one round).
The table (bench/calibrate/holdout_table.py) lists every point of every round.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from dspbench.records.config import RunConfig
from dspbench.records.io import append_record

METHODS = ("dsp", "ulysses", "ring", "megatron_sp", "usp")
CALIB_MODEL, CALIB_SHAPE = "stdit-tiny", (12, 128)     # stdit: a layout the grid does not use
GRIDS = {
    "full": dict(models=("stdit3-tiny", "axial3d-tiny"), shapes=((8, 64), (16, 64), (8, 128)),
                 rates=("200mbit", "1gbit"), sizes="4K,16K,64K,256K,1M,4M", iters=5, compute_iters=5),
    # CI-sized: one rate, one model, one shape; the same code path.
    "smoke": dict(models=("stdit3-tiny",), shapes=((4, 32),), rates=("1gbit",), sizes="4K,64K", iters=2,
                  compute_iters=2),
}


def calibrate_once(cluster, grid: dict, out: Path, force: bool, methods=METHODS) -> Path:
    """The one calibration of this link rate: its profile path (and the raw .json beside it)."""
    from dspbench.calibrate.emulate import run_ranks
    from dspbench.models import get_config
    path = out / f"profile-{cluster.rate}.toml"
    widths = sorted({get_config(m).hidden for m in grid["models"]})
    argv = ["calibrate", "--launcher", "env", "--gpus", str(cluster.ranks), "--gpus-per-node", "1",
            "--sizes", grid["sizes"], "--iters", str(grid["iters"]), "--compute-iters", str(grid["compute_iters"]),
            "--model", CALIB_MODEL, "--frames", str(CALIB_SHAPE[0]), "--spatial", str(CALIB_SHAPE[1]),
            "--sp", str(cluster.ranks), "--threads", "1", "--gemm-widths", ",".join(map(str, widths)),
            "--methods", ",".join(methods), "--name", f"holdout-{cluster.rate}", "--output", str(path),
            *(["--force"] if force else [])]
    res = run_ranks(cluster, argv)[0]
    print(res.stdout, res.stderr, sep="\n", flush=True)
    if res.returncode or not path.is_file():
        raise RuntimeError(f"calibration at {cluster.rate} wrote no profile (rc {res.returncode}): {res.stderr[-1500:]}")
    return path


def grid_points(grid: dict, ranks: int, methods) -> list[RunConfig]:
    """Every (model, shape, method) of the grid, SP over all ranks, fp32 training, warm-up 2 + 5 steps (a median of 5 resists one slow step)."""
    return [RunConfig(method=m, model=model, frames=T, spatial=S, gpus=ranks, sp=ranks, launcher="env",
                      warmup=2, iters=5)
            for model in grid["models"] for T, S in grid["shapes"] for m in methods]


def predict_points(profile, points: list[RunConfig], rate: str, out: Path) -> dict:
    """One prediction per point (all rounds compare with it): {(model, T, S, method): record}."""
    from dspbench.cost.predict import predicted_record
    preds = {}
    for cfg in points:
        rec = {**predicted_record(cfg, profile), "link_rate": rate}
        append_record(out / "predicted.jsonl", rec)
        preds[(cfg.model, cfg.frames, cfg.spatial, cfg.method)] = rec
    return preds


def run_rate(rate: str, grid: dict, args, out: Path) -> list[dict]:
    """One link rate: calibrate once, predict every point, measure every point `repeats` times."""
    from dspbench.calibrate.netns import Cluster
    from dspbench.cost.hardware import load_profile
    methods = [m for m in args.methods.split(",") if m]
    points = grid_points(grid, args.ranks, methods)
    rows = []
    with Cluster(args.ranks, rate, args.subnet, args.ns_prefix) as cluster:
        profile = load_profile(str(calibrate_once(cluster, grid, out, args.force, methods)))
        preds = predict_points(profile, points, rate, out)
        for rnd in range(args.repeats):
            groups = [(mo, sh) for mo in grid["models"] for sh in grid["shapes"]]
            for g, (model, (T, S)) in enumerate(groups):
                k = (rnd + g) % len(methods)
                for m in methods[k:] + methods[:k]:       # rotated: no method always first
                    cfg = replace(points[0], method=m, model=model, frames=T, spatial=S, repeat=rnd)
                    rows.append(_measure_point(cluster, cfg, preds[(model, T, S, m)], rate, rnd, out))
                    _save(out, rate, rows)     # every point as it comes: a stopped run keeps what it measured
    return rows


def _measure_point(cluster, cfg: RunConfig, pred: dict, rate: str, rnd: int, out: Path) -> dict:
    from dspbench.calibrate.emulate import measure
    from dspbench.calibrate.quality import load
    ld, started = load()["loadavg_1m"], time.strftime("%H:%M:%S", time.gmtime())
    try:
        rec = measure(cluster, cfg, out / "measured.jsonl")
    except RuntimeError as e:      # one failed launch is a missing point, listed, not the end of the protocol
        print(f"  launch failed: {str(e)[-500:]}", file=sys.stderr, flush=True)
        rec = {"status": "failed", "step_time_median_s": None}
    ok = rec["status"] == "ok"
    print(f"  {started} {rate} {cfg.model} T{cfg.frames} S{cfg.spatial} {cfg.method:<12} round {rnd}: {rec['status']} "
          f"{rec['step_time_median_s'] or 0:.3f} s (predicted {pred['step_time_median_s']:.3f} s, load {ld:.1f})",
          flush=True)
    return {"rate": rate, "model": cfg.model, "T": cfg.frames, "S": cfg.spatial, "method": cfg.method, "round": rnd,
            "started_utc": started, "loadavg_1m": ld, "measured": rec["step_time_median_s"] if ok else None, **_pred_fields(pred)}


def _pred_fields(pred: dict) -> dict:
    return {"pred": pred["step_time_median_s"], "pred_low": pred["step_time_low_s"],
            "pred_high": pred["step_time_high_s"], "pred_compute": pred["predicted_compute_time_s"],
            "pred_comm": pred["predicted_comm_time_s"], "ratio_pred": pred["ratio_to_dsp"],
            "ratio_low": pred["ratio_to_dsp_low"], "ratio_high": pred["ratio_to_dsp_high"]}


def cmd_holdout(args) -> int:
    from dspbench.calibrate.netns import says_cannot_emulate
    if says_cannot_emulate(args.no_netns):
        return 0
    args.methods = args.methods or ",".join(METHODS)
    grid = GRIDS[args.grid]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rates = args.rate.split(",") if args.rate else grid["rates"]
    for rate in rates:      # one rate at a time, each written at once: rates may also run in separate invocations
        _save(out, rate, run_rate(rate, grid, args, out))
        text = _write_table(out, grid, args)
    print(text)
    sys.stdout.flush()
    return 0


def _save(out: Path, rate: str, rows: list[dict]) -> None:
    """points.json: this rate's rows so far replace its earlier ones; other rates' stay."""
    kept = [r for r in _points(out) if r["rate"] != rate]
    (out / "points.json").write_text(json.dumps(kept + rows, indent=1))


def _points(out: Path) -> list[dict]:
    p = out / "points.json"
    return json.loads(p.read_text()) if p.is_file() else []


def _write_table(out: Path, grid: dict, args) -> str:
    from dspbench.calibrate.holdout_table import points_table, summary, with_ratios
    rows = with_ratios(_points(out))
    s = summary(rows)
    text = (f"Held-out validation: {args.ranks} ranks, one network namespace each, tbf per link, gloo; calibrated "
            f"once per link rate on {CALIB_MODEL} T={CALIB_SHAPE[0]} S={CALIB_SHAPE[1]} and nccl-tests sizes "
            f"{grid['sizes']}; {args.repeats} rounds; every point.\n\n{s}\n\n{points_table(rows)}\n")
    (out / "holdout.md").write_text(text)
    return text
