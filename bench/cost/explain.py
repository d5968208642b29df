"""`predict --explain`: where a GPU prediction's seconds go, per kernel class, with each rate's source.

The rows (per step of one rank, then the pipeline's stages per video): attention, GEMM, memory-bound,
convolution, collectives, launch / host, VAE decode, text encoder. Each names the rate that priced
it (or the share of its seconds each source priced) and the source's kind (published, measured,
derived, datasheet), so a reader can trace a number to the line of the rate table behind it.
"""
from __future__ import annotations

from dspbench.cost.gpu_compute import gpu_compute
from dspbench.cost.hardware import prices_by_kernel

ROWS = (("attention", "attention"), ("gemm", "GEMM"), ("memory", "memory-bound"), ("conv", "convolution"))


def breakdown(cfg, profile, compiled: bool, rec: dict) -> dict:
    """The record's `predicted_breakdown`: {class: {seconds, calls, tflops, sources {label: seconds}}}."""
    if not prices_by_kernel(profile):
        return {}
    g = gpu_compute(cfg, profile, compiled)
    out = {}
    for key, _ in ROWS:
        d = g.explain.get(key)
        if d:
            out[key] = {"seconds": d["seconds"], "calls": d["calls"],
                        "tflops": d["flops"] / d["seconds"] / 1e12 if d["seconds"] and d["flops"] else None,
                        "sources": d["sources"]}
    host = g.explain["host"]
    out["host"] = {"seconds": host["seconds"], "calls": host["calls"], "bound": host["bound"],
                   "sources": host["sources"] or {"no [host] terms in the profile: host time not priced": 0.0}}
    out["collectives"] = {"seconds": rec.get("predicted_comm_time_s") or 0.0,
                          "sources": {f"{profile.name} [link] (bench/cost/comm.py, the ledger's formulas)": 0.0}}
    out["attn_kernel"] = g.attn_kernel
    out["model_calls"] = g.calls
    out["kernels_per_call"] = g.kernels
    stages = (rec.get("pipeline") or {})
    if rec.get("predicted_stages_s"):
        vae = stages.get("vae_kernels") or {}
        out["vae_decode"] = {"seconds": rec["predicted_stages_s"]["vae_decode"], "tiles": vae.get("tiles"),
                             "sources": vae.get("sources", {})}
        out["text_encode"] = {"seconds": rec["predicted_stages_s"]["text_encode"], "sources": {}}
    return out


def lines(b: dict) -> list[str]:
    """The human form of a breakdown, one row per class, its sources indented under it."""
    if not b:
        return ["explain: this profile is not priced kernel by kernel (a CPU, calibrated or tuned profile): "
                "compute is FLOPs at its measured rate (docs/cost-model.md)"]
    out = [f"explain (predicted, per step of one rank; attention as {b['attn_kernel']}, {b['model_calls']:g} model "
           f"call(s) of {b['kernels_per_call']} kernels):"]
    for key, name in (*ROWS, ("collectives", "collectives"), ("host", "launch / host"),
                      ("vae_decode", "VAE decode (per video)"), ("text_encode", "text encoder (per video)")):
        d = b.get(key)
        if not d:
            continue
        rate = f", {d['tflops']:.0f} TFLOP/s achieved" if d.get("tflops") else ""
        extra = " (the host issues slower than the device runs: host-bound)" if d.get("bound") else ""
        out.append(f"  {name:<26} {d['seconds']:10.3f} s{rate}{extra}")
        for label, s in sorted(d.get("sources", {}).items(), key=lambda kv: -kv[1]):
            out.append(f"      {label[:160]}" + (f"  [{s:.3f} s]" if s else ""))
    return out
