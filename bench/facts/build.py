"""A record from a configuration and its outcome: the one place every record is assembled; and the
configuration's names checked, and what it cannot run and why, before anything runs.

`dspbench run` (bench/run/harness.py), `dspbench predict` (bench/cost/predict.py) and the sweep jobs
(slurm/) all build records here, so a measured, a predicted and a failed record have the same fields.
"""
from __future__ import annotations

import socket
from dataclasses import asdict, dataclass

from dspbench.methods import Dims, get_method, padding, stack as stacks, unknown_method
from dspbench.models import MODELS, Shape, get_config
from dspbench.models.registry import resolve as resolve_model
from dspbench.models.params import flops_per_sample, param_count
from dspbench.records.config import SAMPLE_TIMED_LOOP, RunConfig, flops_factors, guidance, sampler_for
from dspbench.records.io import SCHEMA_VERSION

# ---------------------------------------------------------------- names
# An unknown method or model is an error (a typo, a plugin not installed yet), never an `unsupported`
# record: sweeps keep those forever, so the point would never be retried.
def check_names(cfg: RunConfig) -> None:
    if why := unknown_method(cfg.method):
        raise ValueError(why)
    if cfg.model not in MODELS:
        resolve_model(cfg.model)     # a preset or a model file (with overrides); else a ValueError saying why


def validate(cfg: RunConfig) -> None:
    """The configuration's static errors (RunConfig.validate) and its names."""
    cfg.validate()
    check_names(cfg)


@dataclass
class Outcome:
    status: str                  # ok | error | oom | timeout
    error: str | None = None
    metrics: dict | None = None


def requirements(cfg: RunConfig, spec) -> list[tuple[str, str]]:
    """(package, who needs it) of this configuration: the method's `requires`, DeepSpeed for ZeRO-1/2."""
    return ([(p, cfg.method) for p in spec.requires]
            + [(p, f"zero={cfg.zero}") for p in (stacks.ZERO_REQUIRES if cfg.zero else ())])


def stack_reason(cfg: RunConfig, spec, stack: tuple[str, ...] | None) -> str | None:
    """What this configuration needs that the target lacks: against the declared `stack` (predict,
    plan: analytic, nothing imported), or with `stack` None against what is installed here (run)."""
    for package, who in requirements(cfg, spec):
        if stack is None:
            if why := stacks.not_installed(package):
                return f"{who} needs {package} here: {why}"
        elif package not in stack:
            return f"{who} needs {package} ({stacks.PACKAGES[package].what}), not in the stack ({stacks.label(stack)})"
    return None


def unsupported_reason(cfg: RunConfig, stack: tuple[str, ...] | None = None) -> str | None:
    """Why this configuration cannot run, before any rank starts (method constraints, degrees, the
    packages it needs: in the target's declared `stack`, or with None installed here)."""
    try:
        mcfg = get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
        spec = get_method(cfg.method)
    except (KeyError, TypeError) as e:
        return str(e.args[0] if e.args else e)
    if cfg.sp == "auto":   # run_config resolves it first; reaching here means it could not
        return "--sp auto is resolved only with a hardware profile (--hardware)"
    sp = int(cfg.sp)
    if why := cfg.degree_error():
        return why
    if why := stack_reason(cfg, spec, stack):
        return why
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


def resolve(cfg: RunConfig) -> tuple:
    """The configuration's model and method, looked up once for the whole record (None: unknown)."""
    try:
        mcfg = get_config(cfg.model)
    except KeyError:
        mcfg = None
    try:
        spec = get_method(cfg.method)
    except (KeyError, TypeError):
        spec = None
    return mcfg, spec


def padding_facts(cfg: RunConfig, mcfg, spec) -> dict:
    """What padding makes of this configuration (methods/padding.py; analytic, so on every record):
    the padded T and S the method runs, and the pads' share of tokens, attention work and SP bytes."""
    empty = dict.fromkeys(PAD_FIELDS)
    if cfg.sp == "auto" or mcfg is None or spec is None:
        return empty
    try:
        shape = Shape(cfg.model_batch, cfg.frames, cfg.spatial)
        dims = Dims(sp=int(cfg.sp), shard=cfg.shard, ulysses=cfg.ulysses_degree)
        if cfg.pad == "never" or spec.check_pad(mcfg, shape, dims, cfg.pad):
            return {**empty, "padded_frames": cfg.frames, "padded_spatial": cfg.spatial}
        w = padding.waste(spec, mcfg, shape, dims, cfg.dtype, "train" if cfg.mode == "train" else "infer")
    except (TypeError, ValueError):
        return empty
    return {"padded_frames": w["padded"]["T"], "padded_spatial": w["padded"].get("S", cfg.spatial),
            **{k: w[k] for k in PAD_FIELDS[2:]}}


def method_facts(spec) -> dict:
    """The method's `method_meta` (its label, colour, order, Table 3 row): reports may not import
    methods, and a plugin's look would be lost where the report is drawn without the plugin."""
    return {"method_meta": None if spec is None else spec.report.as_record()}


def model_facts(m) -> dict:
    if m is None:
        return {"hidden": None, "depth": None, "heads": None, "params": None}
    return {"hidden": m.hidden, "depth": m.depth, "heads": m.heads, "params": param_count(m),
            "layout": m.layout}


def derived(cfg: RunConfig, mcfg, metrics: dict) -> dict:
    med = metrics["step_time_median_s"]
    samples = cfg.global_batch / med
    per_sample = flops_per_sample(mcfg, Shape(1, cfg.frames, cfg.spatial))
    model_x, hw_x = flops_factors(cfg)
    peak = metrics.get("device_peak_flops")   # the run stage's lookup in the device table (None: no MFU)
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


def sampling_facts(cfg: RunConfig, mcfg) -> dict:
    """Sample mode: the sampler, how CFG ran and what the timed loop holds; null in other modes."""
    if cfg.mode != "sample":
        return {"sampler": None, "cfg_guidance": None, "sample_timed_loop": None}
    layout = None if mcfg is None else mcfg.layout
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
    mcfg, spec = resolve(cfg)
    rec = {"schema_version": SCHEMA_VERSION, "source": source, "run_id": cfg.run_id(), "status": outcome.status,
           "error": outcome.error, **asdict(cfg), "world_size": cfg.gpus,
           "sp": None if cfg.sp == "auto" else int(cfg.sp), "dp": None if cfg.sp == "auto" else cfg.dp,
           **method_facts(spec), **model_facts(mcfg), **padding_facts(cfg, mcfg, spec)}
    empty = {k: None for k in ("step_time_median_s", "step_time_p10_s", "step_time_p90_s", "samples_per_s",
                               "tokens_per_s", "peak_mem_bytes", "losses", "comm_wire_bytes", "comm",
                               "oracle_max_abs_err", "oracle_errors", "comm_formula", "mfu", "hfu",
                               "engine_comm", "engine_comm_formula", "engine_comm_formula_match",
                               "engine_comm_time_s", "attn_kernel", "mem_model", "mem_run_bytes", "device_peak_flops")}
    rec.update(empty)
    rec.update(sampling_facts(cfg, mcfg))
    m = outcome.metrics or {}
    rec.update({k: v for k, v in m.items() if k != "device_name"})
    if outcome.status == "ok" and m:
        rec.update(derived(cfg, mcfg, m))
    if not rec.get("environ"):
        from dspbench.records.environ import environ
        rec["environ"] = environ([{"hostname": socket.gethostname(), "device": "unknown"}])
    return rec


