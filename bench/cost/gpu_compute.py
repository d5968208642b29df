"""A GPU datasheet profile's compute per step: one rank's traced kernels, each at its own rate.

    compute = calls x max(device, host)
    device  = sum over the rank's kernels of kernel seconds (bench/cost/kernel_price.py)
    host    = (kernels + collective calls) x host s_per_kernel + call_s
              (eager; x compiled_factor under --compiled)

A collective the rank issues is a launch too: c10d enqueues one NCCL kernel on the host's thread
like any other kernel, so each traced collective call costs at least one kernel's host time (a
method that issues 33 collectives a step is charged for 33 launches, not only for their bytes).

`calls` are the model calls of a step: 1 in training (the trace holds forward and backward, a
checkpoint's recompute included) and inference, the denoising steps in sample mode (each call at
the batch the rank runs: 2B for CFG as a batch, B for CFG parallel). The host terms are the
profile's [host] (each with its source); a profile without them prices no host time and says so
in the breakdown.
"""
from __future__ import annotations

from dataclasses import dataclass

from dspbench.cost.kernel_price import by_class, price_rank, resolve_attn_kernel, sources
from dspbench.cost.kernel_rates import load_rate_table
from dspbench.cost.rank_trace import rank_kernels


@dataclass(frozen=True)
class GpuCompute:
    seconds: float               # per step, this rank
    calls: float
    device_s: float              # one call's kernels on the device
    host_s: float                # one call's host time
    classes: dict                # kernel class -> seconds per step
    explain: dict                # kernel class -> {seconds, calls, flops, sources} per step
    attn_kernel: str
    kernels: int                 # per call


def trace_key(cfg):
    """The fields a rank's kernels depend on (everything else cleared, so the trace is cached across
    configurations that run the same kernels per rank: DP degree, steps, repeats, timing)."""
    from dspbench.records.config import RunConfig
    keep = {f: getattr(cfg, f) for f in ("method", "model", "frames", "spatial", "batch", "sp", "mode", "dtype",
                                         "grad_ckpt", "shard", "cfg", "cfg_parallel", "pad", "ulysses_degree", "attn_impl")}
    halves = cfg.cfg_degree
    return RunConfig(**keep, gpus=int(cfg.sp) * halves)


def model_calls(cfg) -> float:
    return cfg.sample_steps if cfg.mode == "sample" else 1.0


def host_seconds(profile, kernels: float, compiled: bool) -> float:
    h = profile.host
    eager = kernels * float(h.get("s_per_kernel", 0.0)) + float(h.get("call_s", 0.0))
    return eager * (float(h.get("compiled_factor", 1.0)) if compiled else 1.0)


def gpu_compute(cfg, profile, compiled: bool = False) -> GpuCompute:
    table = load_rate_table(profile.sku)
    impl = resolve_attn_kernel(cfg.attn_impl, table, cfg.method)
    rk = rank_kernels(trace_key(cfg))
    costs = price_rank(rk, table, profile.hbm_Bps, impl)
    device = sum(c.total_s for c in costs) * profile.compute_scale
    launches = rk.count + sum(n for _, n in rk.collectives)
    host = host_seconds(profile, launches, compiled)
    calls = model_calls(cfg)
    classes = {k: v * calls for k, v in by_class(costs).items()}
    explain = {k: {**v, "seconds": v["seconds"] * calls, "calls": v["calls"] * calls, "flops": v["flops"] * calls,
                   "sources": {src: s * calls for src, s in v["sources"].items()}}
               for k, v in sources(costs).items()}
    explain["host"] = {"seconds": host * calls, "calls": launches * calls, "bound": host > device,
                       "sources": {f"{k}: {profile.sources.get(f'host.{k}', 'no source')}": 0.0 for k in profile.host}}
    return GpuCompute(calls * max(device, host), calls, device, host, classes, explain, impl, int(rk.count))
