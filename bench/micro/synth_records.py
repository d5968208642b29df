"""Synthetic but schema-true records (bench/records/io.py), for the report benchmark and test data.

Timings come from a toy cost model (analytic FLOPs at a fixed rate, the method's analytic wire
bytes at a fixed bandwidth, lognormal noise), so trends look plausible; they are NOT measurements
and no report of real results ever uses this module.
"""
from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from dspbench.cost.hardware import device_peak
from dspbench.records.config import RunConfig
from dspbench.records.io import SCHEMA_VERSION

# The environment says "synthetic" wherever a reader looks for provenance (issue: a fixture that
# looked like an H100 run could be mistaken for a measurement).
CPU_ENV = {"synthetic": True, "git_sha": "synthetic", "git_dirty": False, "dspbench": "0.1.0",
           "torch": "2.13.0+cpu", "cuda": None, "nccl": None, "device_names": ["cpu"],
           "hostnames": ["node0"], "python": "3.12.3", "cpu": "Intel(R) Xeon(R) Platinum 8375C",
           "threads": 1}
GPU_ENV = {**CPU_ENV, "torch": "2.13.0+cu128", "cuda": "12.8", "nccl": "2.27.3",
           "device_names": ["NVIDIA H100 80GB HBM3"], "cpu": "AMD EPYC 9454"}
T0 = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def make_record(cfg: RunConfig, rng: random.Random, *, flops_per_s: float, bytes_per_s: float,
                env: dict, when: datetime = T0, noise: float = 0.03) -> dict:
    """One record for `cfg`: ok with cost-model timings, or unsupported when the method says so."""
    from dspbench.models import Shape, get_config
    from dspbench.models.params import flops_per_sample, param_count
    from dspbench.facts.build import method_facts
    from dspbench.methods import get_method
    mcfg = get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
    shape = Shape(cfg.batch, cfg.frames, cfg.spatial)
    rec = {"schema_version": SCHEMA_VERSION, "source": "synthetic", "run_id": cfg.run_id(), "status": "ok", "error": None,
           **{k: v for k, v in cfg.to_dict().items()
              if k not in ("gpus", "check", "timeout_s", "threads", "inject_fault")},
           **method_facts(get_method(cfg.method)),
           "hidden": mcfg.hidden, "depth": mcfg.depth, "heads": mcfg.heads, "params": param_count(mcfg),
           "world_size": cfg.gpus, "dp": cfg.dp, "environ": env,
           "recorded_at": when.isoformat(timespec="seconds")}
    tagged, why = analytic(cfg.method, cfg.model, cfg.frames, cfg.spatial, cfg.batch, int(cfg.sp),
                           cfg.dp, "infer" if cfg.mode != "train" else "train", cfg.dtype,
                           cfg.grad_ckpt, cfg.shard, cfg.pad)
    if tagged is None:
        return {**rec, "status": "unsupported", "error": why}
    passes = cfg.sample_steps if cfg.mode == "sample" else 1
    tagged = {k: v * passes for k, v in tagged.items()}
    comm = {}
    for k, v in tagged.items():
        comm[k.split("/", 1)[-1]] = comm.get(k.split("/", 1)[-1], 0) + v
    work = flops_per_sample(mcfg, shape) * {"train": 3, "infer": 1, "sample": passes}[cfg.mode]
    compute_s = work * cfg.batch / int(cfg.sp) / flops_per_s
    comm_time = {k: v / bytes_per_s + 2e-4 for k, v in comm.items()}
    steps = [(compute_s + sum(comm_time.values())) * math.exp(rng.gauss(0, noise)) for _ in range(cfg.iters)]
    med = sorted(steps)[len(steps) // 2]
    mem = [int(param_count(mcfg) * (16 if cfg.mode == "train" else 4)
               + shape.tokens * cfg.batch * mcfg.hidden * 4 * mcfg.depth * (6 if cfg.mode == "train" else 1)
               / int(cfg.sp) * (1 + 0.02 * r)) for r in range(cfg.gpus)]
    rec.update(step_time_median_s=med, step_time_p10_s=min(steps), step_time_p90_s=max(steps),
               step_times_s=steps, samples_per_s=cfg.global_batch / med,
               tokens_per_s=cfg.global_batch * shape.tokens / med,
               mfu=mfu(env, cfg.dtype, work * cfg.global_batch / med / cfg.gpus),
               peak_mem_bytes=max(mem), peak_mem_bytes_per_rank=mem,
               comm_wire_bytes=sum(comm.values()), comm=comm, comm_tagged=tagged,
               comm_formula=tagged, comm_formula_match=None, comm_time_s=comm_time,
               losses=[round(1.0 - 0.01 * i, 4) for i in range(cfg.warmup + cfg.iters)]
               if cfg.mode == "train" else None, oracle_max_abs_err=None, oracle_errors=None)
    return rec


def mfu(env: dict, dtype: str, flops_per_s_per_gpu: float) -> float | None:
    """MFU against the peak of the device the environment names, looked up in bench/cost/devices.toml
    as a measured record's is (harness.with_peak): the datasheet is stated there once. None where the
    table has no peak (the CPU environment, fp32)."""
    peak = device_peak(env["device_names"][0], dtype)
    return None if peak is None else flops_per_s_per_gpu / peak


@lru_cache(maxsize=4096)
def analytic(method, model, frames, spatial, batch, sp, dp, mode, dtype, grad_ckpt, shard, pad="auto"):
    """The method's formula {'tag/op.phase': wire bytes} for one step, or a reason it has none."""
    try:
        from dspbench.methods import Dims, get_method
        from dspbench.models import Shape, get_config
        cfg = get_config(model, grad_ckpt=bool(grad_ckpt))
        shape, dims = Shape(int(batch), int(frames), int(spatial)), Dims(sp=int(sp), dp=int(dp), shard=shard)
        spec = get_method(method)
        why = spec.check_pad(cfg, shape, dims, pad)
        if why:
            return None, why
        fmode = "infer" if mode == "sample" else mode      # sample: one formula per forward pass
        return spec.comm_bytes(cfg, shape, dims, dtype, fmode), None
    except (KeyError, ValueError, TypeError) as e:
        return None, f"{type(e).__name__}: {e}"


def failed(rec: dict, status: str, error: str) -> dict:
    """The record of the same run when it failed: config and environ kept, metrics dropped."""
    keep = ("schema_version", "source", "run_id", "environ", "recorded_at", "hidden", "depth", "heads",
            "params", "world_size", "dp") + tuple(RunConfig().to_dict())
    return {**{k: v for k, v in rec.items() if k in keep}, "status": status, "error": error}


def sweep_records(n: int, seed: int = 0) -> list[dict]:
    """n records of a large GPU-like sweep (for the report benchmark)."""
    import itertools
    rng = random.Random(seed)
    grid = list(itertools.product(
        ("dsp", "ulysses", "ulysses_deepspeed", "ring", "megatron_sp", "single"),
        ("stdit-xl", "stdit3-xl"), (1, 2, 4, 8, 16), (16, 32, 64, 128), (256, 1024, 4096),
        ("train", "infer")))
    out = []
    for i in range(n):
        method, model, gpus, frames, spatial, mode = grid[i % len(grid)]
        sp = 1 if method == "single" else gpus
        cfg = RunConfig(method=method, model=model, gpus=gpus, sp=sp, frames=frames, spatial=spatial,
                        mode=mode, dtype="bf16", backend="nccl", launcher="slurm",
                        repeat=i // len(grid), iters=5)
        out.append(make_record(cfg, rng, flops_per_s=400e12, bytes_per_s=150e9, env=GPU_ENV,
                               when=T0 + timedelta(seconds=i)))
    return out
