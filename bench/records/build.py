"""A record from a configuration and its outcome: the one place every record is assembled.

`dspbench run` (bench/run/harness.py), `dspbench predict` (bench/cost/predict.py) and the sweep jobs
(slurm/) all build records here, so a measured, a predicted and a failed record have the same fields.
"""
from __future__ import annotations

import importlib.util
import socket
from dataclasses import asdict, dataclass

from dspbench.methods import Dims, get_method, padding
from dspbench.models import Shape, get_config
from dspbench.models.params import flops_per_sample, param_count
from dspbench.records.config import SAMPLE_TIMED_LOOP, RunConfig, flops_factors, guidance, sampler_for
from dspbench.records.io import SCHEMA_VERSION

# Dense (no sparsity) bf16/fp16 tensor-core peak FLOP/s per exact SKU, keyed by the name
# torch.cuda.get_device_name reports. Sources: NVIDIA H100 Tensor Core GPU datasheet (table
# "Technical Specifications": H100 SXM 1,979 / H100 NVL 1,671 / H100 PCIe 1,513 TFLOPS BF16 with
# sparsity, halved for dense); NVIDIA H200 datasheet (H200 SXM 1,979, H200 NVL 1,671); NVIDIA A100
# datasheet (table "NVIDIA A100 Tensor Core GPU Specifications": 312 TFLOPS BF16 dense, SXM and
# PCIe). A name not listed (including H800/A800, whose torch names we have not seen) gets no MFU.
PEAK_FLOPS = {
    "NVIDIA H100 80GB HBM3": 989.5e12,      # H100 SXM5
    "NVIDIA H100 NVL": 835.5e12,
    "NVIDIA H100 PCIe": 756.5e12,
    "NVIDIA H200": 989.5e12,                # H200 SXM
    "NVIDIA H200 NVL": 835.5e12,
    "NVIDIA A100-SXM4-80GB": 312e12, "NVIDIA A100-SXM4-40GB": 312e12,
    "NVIDIA A100-PCIE-40GB": 312e12, "NVIDIA A100 80GB PCIe": 312e12,
}


def peak_flops(device_name: str, dtype: str) -> float | None:
    """The device's dense peak for `dtype`, by exact SKU name; None where unknown (no MFU then)."""
    if dtype == "fp32":
        return None   # TF32/FP32 peaks differ by kernel choice; report MFU for bf16/fp16 only
    return PEAK_FLOPS.get(device_name.strip())


@dataclass
class Outcome:
    status: str                  # ok | error | oom | timeout
    error: str | None = None
    metrics: dict | None = None


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
    if cfg.cfg_parallel and cfg.gpus % 2:
        return f"cfg_parallel splits the world into a cond and an uncond half: gpus={cfg.gpus} is odd"
    if sp < 1 or cfg.gpus % (sp * cfg.cfg_degree):
        where = f"half of gpus={cfg.gpus} (one CFG group)" if cfg.cfg_parallel else f"gpus={cfg.gpus}"
        return f"sp={sp} does not divide {where}"
    if cfg.zero and importlib.util.find_spec("deepspeed") is None:
        return f"zero={cfg.zero} runs on DeepSpeed's engine, which is not installed (pip install 'dspbench[deepspeed]')"
    if cfg.backend == "nccl" and cfg.launcher == "local":
        import torch
        if torch.cuda.device_count() < cfg.gpus:
            return f"nccl needs {cfg.gpus} CUDA devices here, found {torch.cuda.device_count()}"
    # under CFG parallelism: the method's constraints inside one group (its sp x dp mesh); padding as --pad says
    reason = spec.check_pad(mcfg, Shape(cfg.batch, cfg.frames, cfg.spatial),
                            Dims(sp=sp, dp=cfg.dp, shard=cfg.shard, cfg=cfg.cfg_degree, ulysses=cfg.ulysses_degree), cfg.pad)
    # a library's precision/mode/backend limits (ring_flash, torch_cp); at sp 1 no library runs
    return reason or (spec.check_run(cfg.dtype, cfg.mode, cfg.backend) if sp > 1 else None)


PAD_FIELDS = ("padded_frames", "padded_spatial", "pad_token_share", "pad_attn_share", "pad_comm_share")


def padding_facts(cfg: RunConfig) -> dict:
    """What padding makes of this configuration (methods/padding.py; analytic, so on every record):
    the padded T and S the method runs, and the pads' share of tokens, attention work and SP bytes."""
    empty = dict.fromkeys(PAD_FIELDS)
    if cfg.sp == "auto":
        return empty
    try:
        mcfg, spec = get_config(cfg.model), get_method(cfg.method)
        shape = Shape(cfg.model_batch, cfg.frames, cfg.spatial)
        dims = Dims(sp=int(cfg.sp), shard=cfg.shard, ulysses=cfg.ulysses_degree)
        if cfg.pad == "never" or spec.check_pad(mcfg, shape, dims, cfg.pad):
            return {**empty, "padded_frames": cfg.frames, "padded_spatial": cfg.spatial}
        w = padding.waste(spec, mcfg, shape, dims, cfg.dtype, "train" if cfg.mode == "train" else "infer")
    except (KeyError, TypeError, ValueError):
        return empty
    return {"padded_frames": w["padded"]["T"], "padded_spatial": w["padded"].get("S", cfg.spatial),
            **{k: w[k] for k in PAD_FIELDS[2:]}}


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
    peak = peak_flops(metrics.get("device_name", ""), cfg.dtype)
    return {
        "samples_per_s": samples,
        "tokens_per_s": samples * cfg.frames * cfg.spatial,
        "flops_per_step": per_sample * model_x * cfg.global_batch,
        "hardware_flops_per_step": per_sample * hw_x * cfg.global_batch,
        "mfu": None if peak is None else per_sample * model_x * samples / (cfg.gpus * peak),
        "hfu": None if peak is None else per_sample * hw_x * samples / (cfg.gpus * peak),
        "peak_mem_bytes": max(metrics["peak_mem_bytes_per_rank"]),
        **per_video(cfg, med),
    }


def sampling_facts(cfg: RunConfig) -> dict:
    """Sample mode: the sampler, how CFG ran and what the timed loop holds; null in other modes."""
    if cfg.mode != "sample":
        return {"sampler": None, "cfg_guidance": None, "sample_timed_loop": None}
    try:
        layout = get_config(cfg.model).layout
    except KeyError:
        layout = None
    return {"sampler": layout and sampler_for(layout), "cfg_guidance": guidance(cfg),
            "sample_timed_loop": SAMPLE_TIMED_LOOP}


def per_video(cfg: RunConfig, median_s: float) -> dict:
    """Sample mode: one timed step is the whole sampling loop of every replica's videos."""
    sample = cfg.mode == "sample"
    return {"s_per_video": median_s / cfg.global_batch if sample else None,
            "s_per_sample_step": median_s / cfg.sample_steps if sample else None}


SOURCES = ("measured", "predicted", "synthetic", "published")   # published: bench/cost/published.py


def build_record(cfg: RunConfig, outcome: Outcome, source: str = "measured") -> dict:
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is not one of {SOURCES}")
    rec = {"schema_version": SCHEMA_VERSION, "source": source, "run_id": cfg.run_id(), "status": outcome.status,
           "error": outcome.error, **asdict(cfg), "world_size": cfg.gpus,
           "sp": None if cfg.sp == "auto" else int(cfg.sp), "dp": None if cfg.sp == "auto" else cfg.dp,
           **model_facts(cfg), **padding_facts(cfg)}
    empty = {k: None for k in ("step_time_median_s", "step_time_p10_s", "step_time_p90_s", "samples_per_s",
                               "tokens_per_s", "peak_mem_bytes", "losses", "comm_wire_bytes", "comm",
                               "oracle_max_abs_err", "oracle_errors", "comm_formula", "mfu", "hfu",
                               "engine_comm", "attn_kernel", "mem_model", "mem_run_bytes")}
    rec.update(empty)
    rec.update(sampling_facts(cfg))
    m = outcome.metrics or {}
    rec.update({k: v for k, v in m.items() if k != "device_name"})
    if outcome.status == "ok" and m:
        rec.update(derived(cfg, m))
    if not rec.get("environ"):
        from dspbench.records.environ import environ
        rec["environ"] = environ([{"hostname": socket.gethostname(), "device": "unknown"}])
    return rec


