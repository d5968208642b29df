"""`run_config(cfg)`: one configuration end to end, ending in exactly one appended record.

Steps: validate -> method constraints (unsupported: no ranks started) -> launch the ranks ->
derive throughput/MFU -> record (appended atomically, printed as a <RESULT> line by the CLI).
"""
from __future__ import annotations

import importlib.util
import os
import socket
import sys
from dataclasses import asdict
from pathlib import Path

from . import measure
from .config import RunConfig, flops_factors
from .launch import Outcome, launch_env, launch_local
from .methods import Dims, get_method
from .models import Shape, get_config
from .models.params import flops_per_sample, param_count
from .record import SCHEMA_VERSION, append_record


def unsupported_reason(cfg: RunConfig) -> str | None:
    """Why this configuration cannot run, before any rank starts (method constraints, degrees)."""
    try:
        mcfg = get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
        spec = get_method(cfg.method)
    except (KeyError, TypeError) as e:
        return str(e.args[0] if e.args else e)
    if cfg.sp == "auto":   # run_config resolves it first; reaching here means it could not
        return "--sp auto is resolved only with a hardware profile (--hardware)"
    sp = int(cfg.sp)
    if sp < 1 or cfg.gpus % sp:
        return f"sp={sp} does not divide gpus={cfg.gpus}"
    if cfg.zero and importlib.util.find_spec("deepspeed") is None:
        return f"zero={cfg.zero} runs on DeepSpeed's engine, which is not installed (pip install 'dspbench[deepspeed]')"
    if cfg.backend == "nccl" and cfg.launcher == "local":
        import torch
        if torch.cuda.device_count() < cfg.gpus:
            return f"nccl needs {cfg.gpus} CUDA devices here, found {torch.cuda.device_count()}"
    return spec.check(mcfg, Shape(cfg.batch, cfg.frames, cfg.spatial), Dims(sp=sp, dp=cfg.gpus // sp, shard=cfg.shard))


def model_facts(cfg: RunConfig) -> dict:
    try:
        m = get_config(cfg.model)
    except KeyError:
        return {"hidden": None, "depth": None, "heads": None, "params": None}
    return {"hidden": m.hidden, "depth": m.depth, "heads": m.heads, "params": param_count(m),
            "layout": m.layout}


def derived(cfg: RunConfig, metrics: dict) -> dict:
    med = metrics["step_time_median_s"]
    samples = cfg.global_batch / med
    mcfg = get_config(cfg.model)
    per_sample = flops_per_sample(mcfg, Shape(1, cfg.frames, cfg.spatial))
    model_x, hw_x = flops_factors(cfg)
    peak = measure.peak_flops(metrics.get("device_name", ""), cfg.dtype)
    return {
        "samples_per_s": samples,
        "tokens_per_s": samples * cfg.frames * cfg.spatial,
        "flops_per_step": per_sample * model_x * cfg.global_batch,
        "hardware_flops_per_step": per_sample * hw_x * cfg.global_batch,
        "mfu": None if peak is None else per_sample * model_x * samples / (cfg.gpus * peak),
        "hfu": None if peak is None else per_sample * hw_x * samples / (cfg.gpus * peak),
        "peak_mem_bytes": max(metrics["peak_mem_bytes_per_rank"]),
    }


def build_record(cfg: RunConfig, outcome: Outcome) -> dict:
    rec = {"schema_version": SCHEMA_VERSION, "run_id": cfg.run_id(), "status": outcome.status,
           "error": outcome.error, **asdict(cfg), "world_size": cfg.gpus,
           "sp": None if cfg.sp == "auto" else int(cfg.sp), "dp": None if cfg.sp == "auto" else cfg.dp, **model_facts(cfg)}
    empty = {k: None for k in ("step_time_median_s", "step_time_p10_s", "step_time_p90_s", "samples_per_s",
                               "tokens_per_s", "peak_mem_bytes", "losses", "comm_wire_bytes", "comm",
                               "oracle_max_abs_err", "mfu", "hfu", "engine_comm", "attn_kernel")}
    rec.update(empty)
    m = outcome.metrics or {}
    rec.update({k: v for k, v in m.items() if k != "device_name"})
    if outcome.status == "ok" and m:
        rec.update(derived(cfg, m))
    if not rec.get("environ"):
        from .environ import environ
        rec["environ"] = environ([{"hostname": socket.gethostname(), "device": "unknown"}])
    return rec


def run_config(cfg: RunConfig, records_file: str | os.PathLike | None = None, progress: bool = False,
               hardware: str | None = None) -> dict:
    """Run one configuration with its launcher; append the record (rank 0 only) and return it.

    `sp="auto"` is resolved first from the `hardware` profile (bench/autosp.py: the minimum SP
    degree that fits memory); unresolvable, the run is `unsupported` with the reason.
    """
    cfg.validate()
    from .autosp import resolved
    cfg, reason = resolved(cfg, hardware)
    reason = reason or unsupported_reason(cfg)
    if reason:
        outcome = Outcome("unsupported", reason)
    elif cfg.launcher == "local":
        outcome = launch_local(cfg, progress)
    else:
        outcome = launch_env(cfg, progress)
        if os.environ.get("RANK", "0") != "0":   # one record per run: rank 0 writes it
            if outcome.status != "ok":
                print(f"dspbench run: {outcome.status}: {outcome.error}", file=sys.stderr)
            return {}
    rec = build_record(cfg, outcome)
    if records_file is not None:
        append_record(records_file, rec)
    return rec


def default_records_file(out_dir: str | os.PathLike) -> Path:
    """One file per writing process: no two writers ever share a file (NFS-safe)."""
    return Path(out_dir) / f"records-{socket.gethostname()}-{os.getpid()}.jsonl"
