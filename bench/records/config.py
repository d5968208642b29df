"""One benchmark configuration: the dataclass is the schema (CLI flags and sweep keys map onto it)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields

MODES = ("train", "infer", "sample")
DTYPES = ("fp32", "bf16", "fp16")
BACKENDS = ("gloo", "nccl")
LAUNCHERS = ("local", "torchrun", "env", "slurm")
STATUSES = ("ok", "unsupported", "oom", "timeout", "error")
A2A_STYLES = ("single", "list")   # == methods.comm.A2A_STYLES (torch-free here)
PAD_MODES = ("never", "auto")     # == methods.padding.PAD_MODES
ZERO_STAGES = (0, 1, 2)

# Fields that define what is measured: they make the run_id. Where and how it is launched do not.
IDENTITY = ("method", "model", "frames", "spatial", "batch", "gpus", "sp", "mode", "dtype", "backend",
            "grad_ckpt", "shard", "sample_steps", "warmup", "iters", "seed", "repeat")
# Later fields: in the run_id only when not at their default, so earlier run_ids stay valid.
IDENTITY_IF_SET = {"a2a": "single", "zero": 0, "cfg": False, "mem_budget_mib": 0, "pad": "auto",
                   "cfg_parallel": False, "ulysses_degree": 0}


@dataclass(frozen=True)
class RunConfig:
    method: str = "dsp"
    model: str = "stdit-tiny"  # a built-in, a preset or a model file, with [field=value] overrides (models/registry.py)
    frames: int = 16            # T, latent frames after patchify
    spatial: int = 64           # S, tokens per frame after patchify
    batch: int = 1              # micro-batch per data-parallel replica (global batch = batch * dp)
    gpus: int = 1               # world size
    sp: int | str = 1           # sequence-parallel degree (divides gpus); "auto" resolved before running
    mode: str = "train"
    dtype: str = "fp32"
    backend: str = "gloo"
    launcher: str = "local"
    warmup: int = 2
    iters: int = 5
    check: bool = False         # oracle check before timing
    grad_ckpt: bool = False     # activation checkpointing (train)
    shard: str = "T"            # sequence dim embedded methods shard
    sample_steps: int = 10      # denoising forward passes per sample in `sample` mode
    seed: int = 0
    repeat: int = 0             # repeat index within a sweep
    a2a: str = "single"         # all-to-all style: single (all_to_all_single) | list (the reference code's)
    zero: int = 0               # ZeRO stage (train): 0 ours (replicated AdamW), 1 | 2 DeepSpeed's engine
    cfg: bool = False           # sample mode: classifier-free guidance, cond + uncond as a batch of 2
    mem_budget_mib: int = 0     # emulated device memory per rank (CPU clusters): 0 = the device's own;
                                # > 0: sp = auto fits against it, and a run that adds more is `oom`
    pad: str = "auto"           # sharded dims the degree does not divide: auto pads them (keys masked),
                                # never refuses the shape (methods/padding.py)
    bucket_weight: float = 0.0  # bucketed sweeps: this shape's share of the workload's samples (0: no
                                # mix; set by a sweep's `buckets`, records/buckets.py); not in the run_id
    cfg_parallel: bool = False  # sample mode with cfg: cond and uncond passes on two halves of the world
                                # (each sp x dp), exchanging the noise prediction per step
    sp_auto: bool = False       # set when `sp = "auto"` chose sp (the memory model's minimum): records say
                                # each method ran at its own minimum SP; not in the run_id
    timeout_s: float = 600.0    # whole run, local launcher: then status timeout
    threads: int = 0            # torch threads per rank (0: cores // ranks, at least 1)
    inject_fault: str = ""      # tests only: KIND@RANK with KIND in raise|hang|oom|exit|slow
    video: str = ""             # FRAMESxHEIGHTxWIDTH that frames, spatial came from (--video); not in the run_id
    ulysses_degree: int = 0     # usp: the Ulysses degree u (ring degree sp / u); 0: the largest dividing the heads

    @property
    def cfg_degree(self) -> int:
        """2 under CFG parallelism (two rank groups), else 1."""
        return 2 if self.cfg_parallel else 1

    @property
    def dp(self) -> int:
        return self.gpus // (int(self.sp) * self.cfg_degree)

    @property
    def global_batch(self) -> int:
        return self.batch * self.dp

    @property
    def model_batch(self) -> int:
        """What one model call sees per replica: the batch, doubled by classifier-free guidance run as
        a batch of two (CFG parallelism gives each half of the world one of the two passes)."""
        return self.batch * (2 if self.cfg and not self.cfg_parallel else 1)

    def validate(self) -> None:
        """Static errors in the configuration itself (not method constraints: those are `unsupported`)."""
        for name, allowed in (("mode", MODES), ("dtype", DTYPES), ("backend", BACKENDS), ("launcher", LAUNCHERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("frames", "spatial", "batch", "gpus", "iters", "sample_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.a2a not in A2A_STYLES:
            raise ValueError(f"a2a must be one of {A2A_STYLES}, got {self.a2a!r}")
        if self.pad not in PAD_MODES:
            raise ValueError(f"pad must be one of {PAD_MODES}, got {self.pad!r}")
        if self.zero not in ZERO_STAGES:
            raise ValueError(f"zero must be one of {ZERO_STAGES}, got {self.zero!r}")
        if self.zero and self.mode != "train":
            raise ValueError(f"zero={self.zero} shards training state: it needs mode train, got {self.mode!r}")
        if self.bucket_weight < 0:
            raise ValueError(f"bucket_weight must be >= 0 (0: not a bucket), got {self.bucket_weight}")
        if self.ulysses_degree < 0 or (self.ulysses_degree and self.method != "usp"):
            raise ValueError(f"ulysses_degree={self.ulysses_degree} is USP's split of its SP degree (Ulysses x ring): "
                             f"it needs method usp and a value >= 1, got method {self.method!r}")
        if self.mem_budget_mib < 0:
            raise ValueError(f"mem_budget_mib must be >= 0 (0: no emulated budget), got {self.mem_budget_mib}")
        if self.cfg and self.mode != "sample":
            raise ValueError(f"cfg (classifier-free guidance) is a sampling option: it needs mode sample, got {self.mode!r}")
        if self.cfg_parallel and not (self.cfg and self.mode == "sample"):
            raise ValueError("cfg_parallel splits classifier-free guidance's two passes over two rank groups: it "
                             f"needs mode sample with cfg, got mode {self.mode!r}, cfg {self.cfg}")
        self.validate_names()

    def validate_names(self) -> None:
        """An unknown method or model is an error (a typo, a plugin not installed yet), never an
        `unsupported` record: sweeps keep those forever, so the point would never be retried."""
        from dspbench.methods import unknown_method
        from dspbench.models import MODELS
        if why := unknown_method(self.method):
            raise ValueError(why)
        if self.model not in MODELS:
            from dspbench.models.registry import resolve
            resolve(self.model)     # a preset or a model file (with overrides); else a ValueError saying why

    def run_id(self) -> str:
        return run_id(self)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise KeyError(f"unknown run config keys: {', '.join(unknown)}")
        return cls(**d)


def run_id(cfg: RunConfig) -> str:
    """Stable 12-hex hash of the fields that define the measurement."""
    ident = {k: getattr(cfg, k) for k in IDENTITY}
    ident.update({k: getattr(cfg, k) for k, default in IDENTITY_IF_SET.items() if getattr(cfg, k) != default})
    ident["sp"] = str(ident["sp"])
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def flops_factors(cfg: RunConfig) -> tuple[float, float]:
    """(model, hardware) FLOPs per sample per step in units of one forward. Model FLOPs: 3 for
    training (forward + backward), 1 per forward otherwise; hardware FLOPs add checkpointing's
    recompute (4). CFG doubles every sampling call (cond + uncond)."""
    if cfg.mode == "train":
        return 3.0, 4.0 if cfg.grad_ckpt else 3.0
    calls = cfg.sample_steps * (2 if cfg.cfg else 1) if cfg.mode == "sample" else 1
    return float(calls), float(calls)


# What sample mode's timed loop holds (bench/run/sampler.py), in the record's words.
SAMPLE_TIMED_LOOP = ("the K denoising steps only (model calls, guidance, scheduler update); text encoder and "
                     "VAE not run (synthetic caption features and latents)")


def sampler_for(layout: str) -> str:
    """The sampler a model family ships with: rectified flow for OpenSora v1.2 (stdit3) and the Wan
    class (full3d*), DDIM over DDPM's betas for OpenSora v1.0 (stdit) and the rest."""
    return "flow" if layout == "stdit3" or layout.startswith("full3d") else "ddim"


def guidance(cfg: RunConfig) -> str:
    """How sample mode runs classifier-free guidance: none, batch (cond + uncond as a batch of 2) or
    parallel (on two rank groups)."""
    return "parallel" if cfg.cfg_parallel else "batch" if cfg.cfg else "none"
