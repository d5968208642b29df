"""One benchmark configuration: the dataclass is the schema (CLI flags and sweep keys map onto it)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields

from dspbench.records.argtypes import at_least_0, count, positive

MODES = ("train", "infer", "sample")
DTYPES = ("fp32", "bf16", "fp16")
BACKENDS = ("gloo", "nccl")
LAUNCHERS = ("local", "torchrun", "env", "slurm")
STATUSES = ("ok", "unsupported", "oom", "timeout", "error")
A2A_STYLES = ("single", "list")   # == methods/comm/layer.py A2A_STYLES (records imports no methods; tested)
PAD_MODES = ("never", "auto")     # == methods/padding.py PAD_MODES (tested)
# == bench/cost/kernel_rates.py ATTN_KERNELS plus auto (tested)
ATTN_KERNELS = ("auto", "fa2", "fa3", "cudnn", "sdpa_flash", "sdpa_efficient", "math")
ZERO_STAGES = (0, 1, 2)

# Fields that define what is measured: they make the run_id. Where and how it is launched do not.
IDENTITY = ("method", "model", "frames", "spatial", "batch", "gpus", "sp", "mode", "dtype", "backend",
            "grad_ckpt", "shard", "sample_steps", "warmup", "iters", "seed", "repeat")
# Later fields: in the run_id only when not at their default, so earlier run_ids stay valid.
IDENTITY_IF_SET = {"a2a": "single", "zero": 0, "cfg": False, "mem_budget_mib": 0, "pad": "auto",
                   "cfg_parallel": False, "ulysses_degree": 0, "attn_impl": "auto"}


@dataclass(frozen=True)
class CliOption:
    """How a RunConfig field reads on the command line: declared once beside the field, so the argparse
    of `run`/`predict`/`plan` and the flags a SLURM task hands its ranks (args.py) both come from it."""
    help: str
    group: str = "config"           # config (part of the run_id) | model | execution
    flag: str = ""                  # default: --field-name
    choices: tuple = ()
    metavar: str | None = None
    hidden: bool = False            # set by sweeps and tests, not by users: not in --help
    unset_default: bool = False     # the CLI default is None, so "given" can be told from the default
    type: object = None             # parses the flag's text; default: the default value's type


def sp_value(text: str) -> int | str:
    """--sp on the command line: a degree >= 1, or auto (resolved before running)."""
    return text if text == "auto" else count(text)


def option(default, help: str, **cli):
    """A RunConfig field with its command-line form: adding a field is this one declaration."""
    return field(default=default, metadata={"cli": CliOption(help=help, **cli)})


@dataclass(frozen=True)
class RunConfig:
    method: str = option("dsp", "sequence-parallel method (see `dspbench methods`; where DSP cannot apply to the "
                         "model's layout: ulysses)", unset_default=True)
    model: str = option("stdit-tiny", "a built-in (<layout>-<size>), a preset (wan2.1-14b, hunyuanvideo, ...) or a "
                        "model .toml file, with [field=value] overrides (see `dspbench models`)", group="model")
    frames: int = option(16, "T: latent frames after patchify", group="model", unset_default=True, type=count)
    spatial: int = option(64, "S: tokens per frame after patchify", group="model", unset_default=True, type=count)
    batch: int = option(1, "micro-batch per data-parallel replica (global batch = batch x dp)", type=count)
    gpus: int = option(1, "world size (ranks)", type=count)
    sp: int | str = option(1, "sequence-parallel degree, divides --gpus (rest is DP); auto: the memory model's "
                           "minimum, resolved before running", type=sp_value)
    mode: str = option("train", "train: fwd+bwd+AdamW; infer: fwd; sample: K fwd", choices=MODES)
    dtype: str = option("fp32", "model dtype (low precision keeps fp32 master weights)", choices=DTYPES)
    backend: str = option("gloo", "torch.distributed backend", choices=BACKENDS)
    launcher: str = option("local", "local: spawn the ranks here; torchrun/env: this process is RANK of WORLD_SIZE; "
                           "slurm: from SLURM_*", group="execution", choices=LAUNCHERS)
    warmup: int = option(2, "untimed warm-up steps", type=at_least_0)
    iters: int = option(5, "timed steps", type=count)
    check: bool = option(False, "check against the single-device oracle before timing", group="execution")
    grad_ckpt: bool = option(False, "activation checkpointing per block (train)")
    shard: str = option("T", "sequence dim embedded methods shard (T or S; axial3d: T, H or W); not given: the one "
                        "this SP degree pads least, T on a tie (facts/shard.py)", choices=("T", "S", "H", "W"),
                        unset_default=True)
    sample_steps: int = option(10, "denoising model calls per sample (sample mode; a preset: its [sampling] steps)",
                               unset_default=True, type=count)
    seed: int = option(0, "seed of weights and inputs", type=at_least_0)
    repeat: int = option(0, "repeat index within a sweep", type=at_least_0)
    a2a: str = option("single", "all-to-all style: single (one all_to_all_single) or list (tensor_split + list + "
                      "cat, as VideoSys)", choices=A2A_STYLES)
    zero: int = option(0, "ZeRO stage (train): 0 replicated AdamW (ours), 1 | 2 DeepSpeed's ZeRO over the DP x SP "
                       "mesh", choices=ZERO_STAGES)
    cfg: bool = option(False, "sample mode: classifier-free guidance (cond + uncond as a batch of 2; a preset: on "
                       "unless its [sampling] guidance is distilled)", unset_default=True)
    mem_budget_mib: int = option(0, "emulated memory per rank, MiB (CPU clusters): --sp auto fits against it, and a "
                                 "run whose measured peak per rank adds more is `oom` (0: the device's own)", type=at_least_0)
    pad: str = option("auto", "a sharded dim the SP degree does not divide: auto pads it to the next multiple and "
                      "masks the padded keys (methods/padding.py); never refuses the shape (unsupported)",
                      choices=PAD_MODES)
    # bucketed sweeps: this shape's share of the workload's samples (0: no mix; set by a sweep's `buckets`,
    # records/buckets.py); not in the run_id
    bucket_weight: float = option(0.0, "bucket weight", group="execution", hidden=True)
    cfg_parallel: bool = option(False, "with --cfg: cond and uncond passes on two halves of the ranks (world = 2 x "
                                "sp x dp), each running the method in its half; the noise prediction is exchanged "
                                "per step")
    # set when a sweep's `sp = "auto"` chose sp (the memory model's minimum): records say each method ran
    # at its own minimum SP; not in the run_id
    sp_auto: bool = option(False, "sp was chosen by sp = auto", group="execution", hidden=True)
    # set when --shard was not given and the choice mattered (facts/shard.py): which dim and why, as the
    # summaries print it; not in the run_id
    shard_auto: str = option("", "why the shard was chosen", group="execution", hidden=True)
    timeout_s: float = option(600.0, "seconds for the whole run (local launcher: then status timeout)",
                              group="execution", flag="--timeout", type=positive)
    threads: int = option(0, "torch threads per rank (0: cores / ranks, at least 1)", group="execution", type=at_least_0)
    # tests only: KIND@RANK with KIND in raise|hang|oom|exit|slow
    inject_fault: str = option("", "fault injection", group="execution", hidden=True)
    video: str = option("", "the video size in frames x pixels (e.g. 129x720x1280): T and S through the model's VAE "
                        "and patch; not in the run_id", group="model", metavar="FxHxW")
    ulysses_degree: int = option(0, "usp: Ulysses degree U over the heads, ring degree SP / U over the sequence (0: "
                                 "the largest U dividing SP and the heads)", metavar="U", type=at_least_0)
    # what a command filled in from the model's own [sampling] (bench/facts/defaults.py), said on the record
    defaults_from: str = option("", "defaults applied", group="execution", hidden=True)
    # the record's `attn_kernel` is what a measured run's kernels were (bench/run/worker.py): this is the request
    attn_impl: str = option("auto", "attention implementation: auto (SDPA's choice on the device: cuDNN on Hopper, "
                              "torch's flash kernel elsewhere), fa2, fa3 (flash-attn), cudnn, sdpa_flash, "
                              "sdpa_efficient, math; predict prices it from the GPU's rate table", choices=ATTN_KERNELS,
                              flag="--attn-kernel")

    @property
    def cfg_degree(self) -> int:
        """2 under CFG parallelism (two rank groups), else 1."""
        return 2 if self.cfg_parallel else 1

    def degree_error(self) -> str | None:
        """Why --sp cannot split --gpus (CFG parallel: within one half), or None. Not a static error:
        a grid's point the degree does not divide is an `unsupported` record (facts/build.py)."""
        sp = int(self.sp)
        if self.cfg_parallel and self.gpus % 2:
            return f"cfg_parallel splits the world into a cond and an uncond half: gpus={self.gpus} is odd"
        if self.gpus % (sp * self.cfg_degree):
            where = f"half of gpus={self.gpus} (one CFG group)" if self.cfg_parallel else f"gpus={self.gpus}"
            return f"sp={sp} does not divide {where}"
        return None

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
        """Static errors in the configuration itself (not method constraints: those are `unsupported`;
        not its names: facts/build.py checks those against the registries)."""
        for name, allowed in (("mode", MODES), ("dtype", DTYPES), ("backend", BACKENDS), ("launcher", LAUNCHERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("frames", "spatial", "batch", "gpus", "iters", "sample_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup", "seed", "repeat", "threads"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {self.timeout_s}")
        if self.sp != "auto" and (not isinstance(self.sp, int) or isinstance(self.sp, bool) or self.sp < 1):
            raise ValueError(f"sp must be a degree >= 1 or auto, got {self.sp!r}")
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
