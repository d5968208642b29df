"""GPU evidence: what the cost model predicts against what a GPU measured, point by point.

`python -m dspbench.cost.evidence` writes docs/gpu-evidence.md's generated part (between its
markers) from the measured records committed under results/gpu-h200/ (an H200, 2026-12-04), each
predicted twice: with the datasheet profile (`h200-ib`, priced kernel by kernel on the H200's rate
table, bench/cost/kernel_price.py) and with the device curve measured on that GPU (`h200-ib-curve`,
bench/cost/curve.py). Which measurements built the curve and which only check it is stated per row; the published points (results/published/, tuning
and held-out apart) are bench/cost/evidence_published.py's part; tests/test_gpu_evidence.py keeps
the page equal to what this writes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "gpu-h200"
DOC = ROOT / "docs" / "gpu-evidence.md"
BEGIN, END = "<!-- generated: python -m dspbench.cost.evidence -->", "<!-- end generated -->"
# records measured for the curve's fit (none: it was fit to curve.json's probes) vs to check it
CHECK_FILES = ("sample_xl.jsonl", "sample_wan.jsonl", "heldout.jsonl", "xl_step.jsonl")
PROFILES = ("h200-ib", "h200-ib-curve")


def measured_points() -> list[dict]:
    rows = []
    for name in CHECK_FILES:
        for line in (RESULTS / name).read_text().splitlines():
            rec = json.loads(line)
            if rec["status"] == "ok" and rec["method"] == "single":
                rows.append({**rec, "file": name})
    return rows


def predicted_step(rec: dict, profile: str) -> float:
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.model import predict
    from dspbench.records.config import RunConfig
    cfg = RunConfig(method="single", model=rec["model"], frames=rec["frames"], spatial=rec["spatial"], gpus=1, sp=1,
                    mode=rec["mode"], dtype=rec["dtype"], cfg=rec["cfg"], sample_steps=rec["sample_steps"],
                    grad_ckpt=rec["grad_ckpt"], batch=rec["batch"])
    return predict(cfg, load_profile(profile)).step_s


def table() -> list[dict]:
    out = []
    for rec in measured_points():
        pred = {p: predicted_step(rec, p) for p in PROFILES}
        out.append({"model": rec["model"], "T": rec["frames"], "S": rec["spatial"], "mode": rec["mode"],
                    "cfg": rec["cfg"], "calls": rec["sample_steps"] if rec["mode"] == "sample" else 1,
                    "measured_s": rec["step_time_median_s"], "file": rec["file"],
                    **{f"pred_{p}": v for p, v in pred.items()}})
    return out


def markdown(rows: list[dict]) -> str:
    lines = [BEGIN, "",
             "| model | T x S | mode | measured step (s) | predicted, h200-ib (kernel rate tables) | ratio | "
             "predicted, h200-ib-curve | ratio | records |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mode = r["mode"] + (" + CFG" if r["cfg"] else "") + (f", {r['calls']} calls" if r["mode"] == "sample" else "")
        a, b = r["pred_h200-ib"], r["pred_h200-ib-curve"]
        lines.append(f"| {r['model']} | {r['T']} x {r['S']} | {mode} | {r['measured_s']:.4f} | {a:.4f} | "
                     f"{a / r['measured_s']:.2f} | {b:.4f} | {b / r['measured_s']:.2f} | {r['file']} |")
    within = lambda key, tol: sum(abs(r[key] / r["measured_s"] - 1) <= tol for r in rows)
    lines += ["", f"Within 20% of the measurement: rate tables {within('pred_h200-ib', 0.2)} of {len(rows)}, "
                  f"curve {within('pred_h200-ib-curve', 0.2)} of {len(rows)}. All of these are measured on the GPU "
                  "and predicted without seeing them (the curve was fit to curve.json's GEMM, SDPA, launch and "
                  "call probes and vae.json only).", "", END]
    return "\n".join(lines)


def render() -> str:
    """The page with both generated parts: measured on our GPU, and published (evidence_published.py)."""
    from dspbench.cost import evidence_published
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    return evidence_published.render(head + markdown(table()) + rest.split(END, 1)[1])


def main(argv=None) -> int:
    DOC.write_text(render())
    print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
