"""A RunConfig's command-line form: the flags `dspbench run` and `dspbench predict` share."""
from __future__ import annotations

import argparse
from dataclasses import fields

from dspbench.records.config import A2A_STYLES, BACKENDS, DTYPES, LAUNCHERS, MODES, PAD_MODES, ZERO_STAGES, RunConfig


def add_model_args(g) -> None:
    """The model and its token grid: every command that prices or runs a model takes these
    (`run`, `predict`, `plan`), so a new way to name a model or a size is added here once."""
    d = RunConfig()
    g.add_argument("--model", default=d.model,
                   help="a built-in (<layout>-<size>), a preset (wan2.1-14b, hunyuanvideo, ...) or a model .toml "
                        "file (see `dspbench models`)")
    g.add_argument("--model-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of the model (repeatable), e.g. --model-set depth=2 --model-set hidden=128")
    g.add_argument("--frames", type=int, default=None, help=f"T: latent frames after patchify (default {d.frames})")
    g.add_argument("--spatial", type=int, default=None, help=f"S: tokens per frame after patchify (default {d.spatial})")
    g.add_argument("--video", default="", metavar="FxHxW",
                   help="the video size in frames x pixels (e.g. 129x720x1280): T and S through the model's VAE and patch")


def add_run_args(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    g = p.add_argument_group("configuration (part of the run_id)")
    g.add_argument("--method", default=d.method, help="sequence-parallel method (see `dspbench methods`)")
    add_model_args(g)
    g.add_argument("--batch", type=int, default=d.batch, help="micro-batch per data-parallel replica")
    g.add_argument("--gpus", type=int, default=d.gpus, help="world size (ranks)")
    g.add_argument("--sp", default=d.sp, help="sequence-parallel degree, divides --gpus (rest is DP)")
    g.add_argument("--mode", choices=MODES, default=d.mode, help="train: fwd+bwd+AdamW; infer: fwd; sample: K fwd")
    g.add_argument("--dtype", choices=DTYPES, default=d.dtype, help="model dtype (low precision keeps fp32 master weights)")
    g.add_argument("--backend", choices=BACKENDS, default=d.backend)
    g.add_argument("--grad-ckpt", action="store_true", help="activation checkpointing per block (train)")
    g.add_argument("--shard", choices=("T", "S", "H", "W"), default=d.shard,
                   help="sequence dim embedded methods shard (T or S; axial3d: T, H or W)")
    g.add_argument("--pad", choices=PAD_MODES, default=d.pad,
                   help="a sharded dim the SP degree does not divide: auto pads it to the next multiple and masks "
                        "the padded keys; never refuses the shape (unsupported)")
    g.add_argument("--sample-steps", type=int, default=d.sample_steps, help="model calls per sample (sample mode)")
    g.add_argument("--cfg", action="store_true", help="sample mode: classifier-free guidance (cond + uncond as a batch of 2)")
    g.add_argument("--cfg-parallel", action="store_true",
                   help="with --cfg: cond and uncond passes on two halves of the ranks (world = 2 x sp x dp), "
                        "each running the method in its half; the noise prediction is exchanged per step")
    g.add_argument("--zero", type=int, choices=ZERO_STAGES, default=d.zero,
                   help="ZeRO stage (train): 0 replicated AdamW (ours), 1 | 2 DeepSpeed's ZeRO over the DP x SP mesh")
    g.add_argument("--ulysses-degree", type=int, default=d.ulysses_degree, metavar="U",
                   help="usp: Ulysses degree U over the heads, ring degree SP / U over the sequence "
                        "(0: the largest U dividing SP and the heads)")
    g.add_argument("--a2a", choices=A2A_STYLES, default=d.a2a,
                   help="all-to-all style: single (one all_to_all_single) or list (tensor_split + list + cat, as VideoSys)")
    g.add_argument("--mem-budget-mib", type=int, default=d.mem_budget_mib,
                   help="emulated memory per rank, MiB (CPU clusters): --sp auto fits against it, and a run whose "
                        "measured peak per rank adds more is `oom` (0: none)")
    g.add_argument("--warmup", type=int, default=d.warmup, help="untimed warm-up steps")
    g.add_argument("--iters", type=int, default=d.iters, help="timed steps")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--repeat", type=int, default=d.repeat, help="repeat index (sweeps)")
    h = p.add_argument_group("execution")
    h.add_argument("--launcher", choices=LAUNCHERS, default=d.launcher,
                   help="local: spawn the ranks here; torchrun/env: this process is RANK of WORLD_SIZE; slurm: from SLURM_*")
    h.add_argument("--check", action="store_true", help="check against the single-device oracle before timing")
    h.add_argument("--timeout", type=float, default=d.timeout_s, dest="timeout_s", help="seconds for the whole run")
    h.add_argument("--threads", type=int, default=d.threads, help="torch threads per rank (0: cores / ranks)")
    h.add_argument("--inject-fault", default="", help=argparse.SUPPRESS)
    # set by a sweep that resolved sp = "auto" before the job: the record says so (not in the run_id)
    h.add_argument("--sp-auto", action="store_true", help=argparse.SUPPRESS)
    # set by a bucketed sweep: this shape's share of the workload (records/buckets.py; not in the run_id)
    h.add_argument("--bucket-weight", type=float, default=d.bucket_weight, help=argparse.SUPPRESS)
    h.add_argument("--hardware", default=None,
                   help="hardware profile (bench/cost/profiles/*.toml or a calibrated .toml): resolves --sp auto")
    o = p.add_argument_group("output")
    o.add_argument("--out", default="results/runs", help="directory for the records file")
    o.add_argument("--records-file", default=None, help="append to this file instead of one under --out")
    o.add_argument("--json", action="store_true", help="print the record as JSON on stdout (no progress bar)")
    o.add_argument("--outcome-prefix", default=None, metavar="PREFIX",
                   help="env/slurm launchers: each rank writes PREFIX.r<rank>.beat (step) and .outcome (sweep jobs)")


def config_from_args(args) -> RunConfig:
    names = {f.name for f in fields(RunConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    if "sp" in values:   # `plan` has no --sp: it enumerates the degrees
        values["sp"] = values["sp"] if values["sp"] == "auto" else int(values["sp"])
    values.update(model_and_shape(values.get("model", RunConfig.model), getattr(args, "model_set", []),
                                  values.get("frames"), values.get("spatial"), values.get("video", "")))
    return RunConfig(**values)


def model_and_shape(model: str, model_set: list[str], frames, spatial, video: str) -> dict:
    """The model reference with its --model-set overrides, and T, S: given, from --video through the
    model's VAE and patch (models/registry.py), or RunConfig's defaults. Both given must agree."""
    from dspbench.models.registry import video_to_tokens, with_overrides
    model = with_overrides(model, model_set)
    out = {"model": model, "frames": frames or RunConfig.frames, "spatial": spatial or RunConfig.spatial}
    if video:
        T, S = video_to_tokens(model, video)
        if (frames and frames != T) or (spatial and spatial != S):
            raise ValueError(f"--video {video} gives T={T}, S={S} for {model}, but --frames {frames} --spatial {spatial} "
                             "were given too: pass one or the other")
        out.update(frames=T, spatial=S, video=video)
    return out
