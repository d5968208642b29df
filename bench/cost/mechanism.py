"""What a prediction counted, per step of one rank: the explanation `plan --explain` prints per row.

    kernels      per kind (gemm, attention, conv, memory): calls and seconds, dispatch included
                 (priced kernel by kernel: bench/cost/cpu_kernels.py on a calibrated CPU,
                 bench/cost/kernel_price.py on a GPU's rate table)
    collectives  per op and phase: calls, payload bytes per call, seconds (bench/cost/comm.py:
                 each call at its tier's measured latency + bytes / bandwidth)
    other        the optimizer, and any fitted term the profile still carries

A misordering between two methods can be traced to the line that differs (a ring's extra memory
kernels, the all-to-alls' permutes, Megatron's per-block gathers).
"""
from __future__ import annotations

from collections import defaultdict

from dspbench.cost.hardware import prices_by_kernel, prices_cpu_kernels


def kernel_lines(cfg, profile) -> dict:
    """{kind: {calls, seconds}} per step, or {} where compute is not priced kernel by kernel."""
    if prices_cpu_kernels(profile):
        from dspbench.cost.cpu_kernels import cpu_compute
        c = cpu_compute(cfg, profile)
        out = {k: {"calls": v["calls"], "seconds": v["seconds"]} for k, v in c.classes.items() if v["calls"]}
        if c.collective_calls:
            from dspbench.cost.cpu_kernels import per_kernel_s
            out["collective dispatch"] = {"calls": c.collective_calls,
                                          "seconds": c.collective_calls * per_kernel_s(profile, cfg.mode)}
        return out
    if prices_by_kernel(profile):
        from dspbench.cost.gpu_compute import gpu_compute
        g = gpu_compute(cfg, profile)
        return {k: {"calls": v["calls"], "seconds": v["seconds"]} for k, v in g.explain.items() if k != "host"}
    return {}


def collective_lines(p, dims, reps: int) -> dict:
    """{'op.phase': {calls, payload_bytes (per call, the largest), seconds}} per step."""
    out: dict = defaultdict(lambda: {"calls": 0, "payload_bytes": 0, "seconds": 0.0})
    for phase, o in p.plan:
        if o.count and o.group_size(dims) > 1:
            d = out[f"{o.op}.{phase}"]
            d["calls"] += o.count * reps
            d["payload_bytes"] = max(d["payload_bytes"], o.payload)
    for k, s in p.comm_s.items():
        out[k.split("/", 1)[-1]]["seconds"] += s
    return dict(out)


def explain(cfg, profile, p) -> dict:
    """The row's `mechanism_costs` (JSON-ready)."""
    from dspbench.methods import Dims
    dims = Dims(sp=int(cfg.sp), dp=cfg.dp, shard=cfg.shard, cfg=cfg.cfg_degree, ulysses=cfg.ulysses_degree)
    reps = cfg.sample_steps if cfg.mode == "sample" else 1
    return {"kernels": kernel_lines(cfg, profile), "collectives": collective_lines(p, dims, reps),
            "hidden_s": p.hidden_s, "optimizer_s": p.optimizer_s, "engine_host_s": p.engine_host_s,
            "fitted_s": 0.0 if profile.kernels else _fitted(cfg, profile)}


def _fitted(cfg, profile) -> float:
    from dspbench.cost.model import method_overhead
    return method_overhead(cfg, int(cfg.sp), profile)


def text(m: dict) -> list[str]:
    """Indented lines of one row's mechanism_costs."""
    out = []
    for kind, d in m["kernels"].items():
        out.append(f"      kernels {kind:<20} {d['calls']:8.0f} calls {d['seconds'] * 1e3:10.2f} ms")
    for op, d in sorted(m["collectives"].items()):
        out.append(f"      {op:<28} {d['calls']:8.0f} calls {d['seconds'] * 1e3:10.2f} ms  "
                   f"({d['payload_bytes'] / 2**10:.0f} KiB per call, the largest)")
    if m["hidden_s"]:
        out.append(f"      {'hidden under attention':<28} {'':14} {-m['hidden_s'] * 1e3:10.2f} ms")
    if m["optimizer_s"]:
        out.append(f"      {'optimizer':<28} {'':14} {m['optimizer_s'] * 1e3:10.2f} ms")
    if m.get("engine_host_s"):
        out.append(f"      {'ZeRO engine host work':<28} {'':14} {m['engine_host_s'] * 1e3:10.2f} ms  "
                   "(per parameter tensor, [engine] of the profile)")
    if m["fitted_s"]:
        out.append(f"      {'fitted method term':<28} {'':14} {m['fitted_s'] * 1e3:10.2f} ms  (the profile's; no [kernels])")
    return out
