"""The GPU check's one page (bench/gpu/check.sh step 8): every figure it measured, from its folder.

    python -m dspbench.gpu.summary DIR [--mode gpu|cpu] [--failed N]

Reads what the script's steps wrote (env.json, steps.tsv, pytest.xml, ring_error.json,
calibrated.toml/.json, records.jsonl, xl_step.jsonl, xl_predicted.jsonl, replay.jsonl); a missing file is a
line saying which step did not produce it, never a crash: the page is most useful when a step failed.
"""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from dspbench.records.io import read_records

GIB = 1024 ** 3


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _line(text: str) -> dict:
    try:
        return json.loads(text)
    except ValueError:      # a torn line of a killed step: the page still renders
        return {}


def _records(path: Path) -> list[dict]:
    return read_records(path)[0] if path.is_file() else []   # corrupt lines skipped


def steps(d: Path) -> list[str]:
    rows = [ln.split("\t") for ln in (d / "steps.tsv").read_text().splitlines()] if (d / "steps.tsv").is_file() else []
    return ["| step | exit | seconds |", "|---|---|---|"] + [f"| {n} | {rc} | {s} |" for n, rc, s in rows]


def pytest_line(d: Path) -> str:
    try:
        suite = ET.parse(d / "pytest.xml").getroot()
    except (OSError, ET.ParseError):
        return "pytest: no pytest.xml (the pytest step did not finish)"
    suite = suite if suite.tag == "testsuite" else suite[0]
    a = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = a["tests"] - a["failures"] - a["errors"] - a["skipped"]
    return (f"pytest (tests/test_gpu.py, tests/test_attn_kernels.py): {passed} passed, {a['failures']} failed, "
            f"{a['errors']} errors, {a['skipped']} skipped")


def ring_error(d: Path) -> list[str]:
    rows = _json(d / "ring_error.json")
    if not rows:
        return ["ring error: no ring_error.json"]
    return (["| ring size | max abs err (bf16 vs fp32) | mean abs err |", "|---|---|---|"]
            + [f"| {r['ring_size']} | {r['max_abs_err']:.3e} | {r['mean_abs_err']:.3e} |" for r in rows])


def calibration(d: Path) -> list[str]:
    raw = _json(d / "calibrated.json")
    if not raw:
        return ["calibration: no calibrated.json"]
    from dspbench.cost.hardware import load_profile
    c = raw["compute"]
    prof = load_profile(str(d / "calibrated.toml"))
    peak = prof.peak_flops.get(c["dtype"])
    mfu = f", {c['flops_per_s'] / peak:.1%} of the datasheet peak {peak / 1e12:.0f} TFLOP/s" if peak else ""
    return [f"calibration: {c['model']} x {c['depth']} block(s), shard {c['shape']} {c['dtype']}: fwd+bwd "
            f"{c['fwd_bwd_s'] * 1e3:.1f} ms = {c['flops_per_s'] / 1e12:.2f} TFLOP/s{mfu}; AdamW "
            f"{c['optimizer_s'] * 1e3:.2f} ms ({c['optimizer_Bps'] / 1e9:.0f} GB/s); profile {prof.name!r} "
            f"written to {d / 'calibrated.toml'}"]


def runs(d: Path) -> list[str]:
    out = ["| method | mode | status | step (ms) | tokens/s | peak mem (GiB) | oracle max abs err (output) | note |",
           "|---|---|---|---|---|---|---|---|"]
    for r in _records(d / "records.jsonl"):
        err = (r.get("oracle_errors") or {}).get("output")
        t = r.get("step_time_median_s")
        out.append(f"| {r['method']} | {r['mode']} | {r['status']} | {t * 1e3 if t else float('nan'):.1f} | "
                   f"{r.get('tokens_per_s') or 0:.3g} | {(r.get('peak_mem_bytes') or 0) / GIB:.2f} | "
                   f"{'' if err is None else f'{err:.2e}'} | {(r.get('error') or '')[:80]} |")
    return out


def xl_step(d: Path) -> list[str]:
    meas, pred = _records(d / "xl_step.jsonl"), _records(d / "xl_predicted.jsonl")
    if not meas or not pred:
        return ["big-model step: missing " + " and ".join(
            n for n, x in (("xl_step.jsonl", meas), ("xl_predicted.jsonl", pred)) if not x)]
    m, p = meas[-1], pred[-1]
    if m["status"] != "ok":
        return [f"big-model step: {m['status']}: {m.get('error')}"]
    t_m, t_p = m["step_time_median_s"], p["step_time_median_s"]
    return [f"big-model step ({m['model']}, T {m['frames']}, S {m['spatial']}, {m['dtype']}, checkpointing "
            f"{m['grad_ckpt']}): measured {t_m * 1e3:.1f} ms, predicted {t_p * 1e3:.1f} ms from the calibrated "
            f"profile (predicted/measured {t_p / t_m:.2f}); MFU {m.get('mfu') or 0:.1%}; peak memory measured "
            f"{m['peak_mem_bytes'] / GIB:.2f} GiB, predicted {p['predicted_peak_mem_bytes'] / GIB:.2f} GiB"]


def replays(d: Path) -> list[str]:
    """One row per replayed rank: its kernels' measured time per model call against the same kernels
    predicted from the profile's rate table; the collectives, which one device cannot run, priced."""
    # replay's records are kernel rows, not run records (no run_id): read as JSON lines
    path = d / "replay.jsonl"
    rows = [_line(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.is_file() else []
    summ = [r for r in rows if r.get("source") == "measured-replay-summary"]
    if not summ:
        return ["replay: no replay.jsonl summary (the replay steps did not finish)"]
    out = ["| model | T x S | method | SP | kernels replayed (left out) | measured-replay s/call | predicted s/call "
           "(profile) | measured / predicted | collectives s/step (predicted, not replayed) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in summ:
        ratio = r.get("measured_over_predicted")
        out.append(f"| {r['model']} | {r['frames']} x {r['spatial']} | {r['method']} | {r['sp']} | "
                   f"{r['kernels_replayed']} ({r['kernels_left_out']}) | {r['measured_s_per_call']:.4g} | "
                   f"{r['predicted_s_per_call']:.4g} ({r['hardware_profile']}) | "
                   f"{'' if ratio is None else f'{ratio:.2f}'} | {r['comm_s_per_step']:.4g} |")
    return out


def page(d: Path, mode: str, failed: int) -> str:
    env = _json(d / "env.json") or {}
    head = [f"# GPU check ({mode}{': CPU rehearsal, no GPU figures' if mode == 'cpu' else ''})", "",
            f"torch {env.get('torch')}, CUDA {env.get('cuda')}, device {env.get('device')}, NCCL {env.get('nccl')}, "
            f"flash-attn {env.get('flash_attn') or 'not installed (ring blocks: torch flash kernel)'}; "
            f"failed steps: {failed}", ""]
    parts = [steps(d), [pytest_line(d)], ring_error(d), calibration(d), runs(d), xl_step(d), replays(d)]
    return "\n".join(head + [line for p in parts for line in p + [""]])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Summarise a bench/gpu/check.sh output folder.")
    p.add_argument("dir", type=Path)
    p.add_argument("--mode", default="gpu", choices=("gpu", "cpu"))
    p.add_argument("--failed", type=int, default=0)
    a = p.parse_args(argv)
    print(page(a.dir, a.mode, a.failed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
