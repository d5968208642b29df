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

# Fields that define what is measured: they make the run_id. Where and how it is launched do not.
IDENTITY = ("method", "model", "frames", "spatial", "batch", "gpus", "sp", "mode", "dtype", "backend",
            "grad_ckpt", "shard", "sample_steps", "warmup", "iters", "seed", "repeat")


@dataclass(frozen=True)
class RunConfig:
    method: str = "dsp"
    model: str = "stdit-tiny"
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
    timeout_s: float = 600.0    # whole run, local launcher: then status timeout
    threads: int = 0            # torch threads per rank (0: cores // ranks, at least 1)
    inject_fault: str = ""      # tests only: KIND@RANK with KIND in raise|hang|oom|exit|slow

    @property
    def dp(self) -> int:
        return self.gpus // int(self.sp)

    @property
    def global_batch(self) -> int:
        return self.batch * self.dp

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
    ident["sp"] = str(ident["sp"])
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
