"""The cost model: step time and memory of one RunConfig on a hardware profile, without running it.

    step = compute + optimizer + sum(comm) - hidden

- comm: every collective of the method's analytic plan (methods/spec.py, the formulas the ledger
  is tested against), priced per call by bench/cost/comm.py, SP and DP groups on their link level;
  sample mode repeats the forward plan per denoising step, as the worker's formula does.
- memory (bench/cost/memory.py): the DiT's; in sample mode on a GPU profile, plus the text
  encoder's and VAE's weights every GPU holds (bench/cost/pipeline.py resident_bytes). A CPU run
  loads neither (synthetic caption features and latents), so CPU profiles leave them out.
- compute: analytic FLOPs (models/params.py; train = 3x forward, 4x with checkpointing) of this
  rank's 1/sp of the micro-batch, at the profile's achievable FLOP/s for the dtype.
- compute on a CPU profile with [kernels] (calibrated since issue 41): the rank's traced kernels,
  each at its measured dispatch and FLOP or byte cost (bench/cost/cpu_kernels.py); what a method
  adds (permutes, chunk pairs, merges, padding) is counted, and no fitted per-module or per-method
  term applies. Older calibrated profiles keep the terms below.
- dispatch (calibrated profiles): module_overhead_s x the model's modules per forward+backward,
  per rank whatever its shard (a small model on a CPU spends much of a step dispatching ops).
- optimizer (train): AdamW is a memory-bound pass over this rank's optimizer share
  (OPT_BYTES per parameter at the profile's optimizer rate).
- CFG parallelism (sample mode): each half of the world runs one of the two passes, so a rank
  computes K calls of the batch, not 2K (compute / 2), its SP plan is that of one call's batch, and
  each step adds the exchange of the noise prediction with the peer rank in the other half
  (methods/spec.py cfg_exchange_op), priced on the tier the pair crosses: rank r and r + world/2,
  ranks node-major, share a node only when the world fits in one.
- overlap: none, except ring attention's K/V hops under its own attention, by the profile's
  fraction f (hidden = f x min(ring comm, attention-core compute over the sharded dim)); f is the
  hop-time-weighted fraction of the tiers the rings are on (comm.ring_overlap_share: a profile
  that measured rings inside a node, `ring_intra`, prices those by it). All-to-all,
  all-gather and reduce-scatter sit on the critical path of the next operator, and the gradient
  all-reduces run after the backward (as bench/run/steps.py does; ZeRO/DDP bucketing would hide part).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from dspbench.records.config import RunConfig, flops_factors
from dspbench.cost.comm import engine_ops, plan_times, plan_wire, ring_overlap_share
from dspbench.cost.curve import device_seconds, forward_costs, from_table
from dspbench.cost.memory import memory, opt_state_bytes
from dspbench.cost.hardware import Profile, on_gpu, prices_by_kernel, prices_cpu_kernels
from dspbench.methods import Dims, get_method
from dspbench.methods.spec import cfg_exchange_op
from dspbench.models.dtypes import dtype_size
from dspbench.methods.padding import padded_shape
from dspbench.models import Shape, get_config
from dspbench.models.params import flops_per_sample

OPT_BYTES = {"fp32": 28, "bf16": 36, "fp16": 36}   # read p, g, m, v (+master), write p, m, v (+master)


@dataclass
class Prediction:
    comm_s: dict            # 'tag/op.phase' -> seconds per step
    comm_wire: dict         # 'op.phase' -> wire bytes per rank per step
    compute_s: float
    optimizer_s: float
    hidden_s: float
    mem: dict               # bytes per rank by part, with 'peak'
    usable_bytes: float
    # what was priced, for comparing mechanisms (bench/plan/twins.py): the step's collectives
    # [(phase, Op)] (engine and CFG exchange included) and the grid every rank computes on (padded)
    plan: list = field(default_factory=list)
    grid: Shape | None = None
    engine_host_s: float = 0.0   # DeepSpeed ZeRO's own host work per step (calibrated profiles that measured it)

    @property
    def comm_total_s(self) -> float:
        return sum(self.comm_s.values()) - self.hidden_s

    @property
    def step_s(self) -> float:
        return self.compute_s + self.optimizer_s + self.engine_host_s + self.comm_total_s

    @property
    def fits(self) -> bool:
        return self.mem["peak"] <= self.usable_bytes

    def oom_reason(self, cfg: RunConfig, profile_name: str) -> str:
        """Why it does not fit, against the emulated budget or the device's usable memory."""
        if cfg.mem_budget_mib:
            return (f"predicted OOM: {self.mem['peak'] / 2**20:.1f} MiB per rank > {self.usable_bytes / 2**20:.1f} "
                    f"MiB usable of the emulated budget of {cfg.mem_budget_mib} MiB")
        return (f"predicted OOM: {self.mem['peak'] / 2**30:.1f} GiB per rank > "
                f"{self.usable_bytes / 2**30:.1f} GiB usable on {profile_name}")


def method_overhead(cfg: RunConfig, sp: int, profile: Profile) -> float:
    """The method's own per-step work beyond what the model prices (calibrated, bench/calibrate/methods.py;
    signed): training steps at an SP degree it was measured at only; 0 elsewhere and on datasheet profiles."""
    if cfg.mode != "train":
        return 0.0
    return profile.method_overhead_s.get(sp, {}).get(cfg.method, 0.0)


def dispatch_calls(cfg: RunConfig) -> float:
    """Forward passes' worth of module calls one rank issues per step: CFG as a batch of 2 runs cond
    and uncond in one call (twice the FLOPs, the same dispatch), CFG parallel one pass per rank."""
    return flops_factor(cfg) / (2 if cfg.mode == "sample" and cfg.cfg else 1)


def flops_factor(cfg: RunConfig) -> float:
    """Forward passes' worth of FLOPs the hardware runs per sample per step (recompute included)."""
    return flops_factors(cfg)[1]


def _attn_core_flops(mcfg, shape: Shape, shard: str) -> float:
    """Forward FLOPs of QK^T and AV in the attentions over the sharded dim (what a ring hop hides):
    each kind whose span holds it (full3d: all T*S tokens, with joint text Ly more keys)."""
    text = mcfg.text_len if mcfg.joint else 0
    lengths = [L + text for L, span in zip(mcfg.attn_lengths(shape), mcfg.attn_spans) if shard in span]
    return mcfg.stack_depth * sum(4 * shape.batch * shape.tokens * L * mcfg.hidden for L in lengths)


@functools.lru_cache(maxsize=None)
def _meta_model(model: str):
    """The unparallelized model built on the meta device (no memory, any size), for counting."""
    import torch
    from dspbench.models import build_model
    with torch.device("meta"):
        return build_model(get_config(model))


@functools.lru_cache(maxsize=None)
def module_count(model: str) -> int:
    """Modules of the unparallelized model."""
    return sum(1 for _ in _meta_model(model).modules())


@functools.lru_cache(maxsize=None)
def param_tensor_count(model: str) -> int:
    """Parameter tensors of the unparallelized model: what the ZeRO engine loops over in Python per
    step (its gradient hooks, bucket copies, partitioned step; cost/hardware.py zero_host_s)."""
    return sum(1 for _ in _meta_model(model).parameters())


def narrow_gemm_s(spec, mcfg, shape: Shape, sp: int, factor: int, profile: Profile, dtype: str) -> float:
    """Extra seconds of the linears whose weights the method shards (MethodSpec.sharded_params):
    their FLOPs run as GEMMs of width C/sp, at the measured rate(C, sp) instead of rate(C, 1)
    (bench/calibrate/gemm.py). Relative, so the model-level FLOP/s keeps pricing the full-width
    share: extra = flops / rate x (rate(C, 1) / rate(C, sp) - 1). No measured rate (datasheet
    profiles, an uncalibrated width or dtype): no term. Every sharded weight is counted at the
    full token count (the cross-attention kv, applied to text tokens, is overstated by that)."""
    sharded = spec.sharded_params(mcfg)
    full, narrow = profile.gemm_rate(mcfg.hidden, 1, dtype), profile.gemm_rate(mcfg.hidden, sp, dtype)
    if not sharded or sp == 1 or not full or not narrow:
        return 0.0
    flops = 2 * shape.batch * shape.tokens * sharded / sp * factor
    return flops / profile.flops(dtype) * (full / narrow - 1)


def compute_seconds(cfg: RunConfig, mcfg, spec, sp: int, profile: Profile, compiled: bool, T: int, S: int) -> float:
    """This rank's compute per step: FLOPs at the profile's rate, or, where the profile has a device
    curve (bench/cost/curve.py), at the rate for this rank's GEMM and attention sizes, and no less
    than the host's time to issue the kernels (eager launches are asynchronous: the larger wins).
    T, S: the grid every rank computes on (padded where the method pads, methods/padding.py)."""
    if prices_cpu_kernels(profile):   # a calibrated CPU: the rank's own kernels at its measured costs
        from dspbench.cost.cpu_kernels import cpu_compute
        return cpu_compute(cfg, profile).seconds    # mechanism only: no fitted module or method term
    if prices_by_kernel(profile):   # a GPU datasheet profile: the rank's own kernels at the GPU's rates
        from dspbench.cost.gpu_compute import gpu_compute
        compute = gpu_compute(cfg, profile, compiled).seconds   # the trace pads as the method does
    else:
        compute = _flops_seconds(cfg, mcfg, spec, sp, profile, compiled, T, S)
    # a fitted term a profile carries applies on either path (datasheet profiles ship none; a user's may)
    if profile.module_overhead_s:   # every rank runs every module, whatever its shard: factor 3 = fwd+bwd
        compute += profile.module_overhead_s * module_count(cfg.model) * dispatch_calls(cfg) / 3
    # seconds measured at the calibration shape: a negative one (a method the model over-prices) must
    # not take a much smaller shape's step below half its compute
    return max(compute + method_overhead(cfg, sp, profile), compute / 2)


def _flops_seconds(cfg: RunConfig, mcfg, spec, sp: int, profile: Profile, compiled: bool, T: int, S: int) -> float:
    """A profile without a kernel rate table: FLOPs at its rate, or on its device curve."""
    factor = flops_factor(cfg) / cfg.cfg_degree   # CFG parallel: this rank runs one of the two passes
    step_flops = flops_per_sample(mcfg, Shape(1, T, S)) * cfg.batch * factor
    curve = from_table(profile.curve)
    if curve is None:
        compute = step_flops / sp / profile.flops(cfg.dtype)
        compute += narrow_gemm_s(spec, mcfg, Shape(cfg.batch, T, S), sp, factor, profile, cfg.dtype)
    else:
        peak = float(profile.peak_flops.get(cfg.dtype) or profile.flops(cfg.dtype))
        costs = forward_costs(cfg.model, cfg.model_batch, T, S, cfg.dtype)
        # forward-equivalents of one call's batch (model_batch: 2B for CFG as a batch, B for CFG
        # parallel): train 3 (4 with checkpointing), sample its steps
        calls = cfg.sample_steps if cfg.mode == "sample" else (factor if cfg.mode == "train" else 1)
        device = device_seconds(curve, costs, calls, sp, peak, profile.optimizer_rate())
        compute = max(device, curve.host_s(costs.kernels, calls, compiled))
    return compute


def predict(cfg: RunConfig, profile: Profile, compiled: bool = False, memory_only: bool = False) -> Prediction:
    """memory_only: the memory and communication as always, compute left at 0 (no kernel trace): for
    questions of fit alone (autosp.why_not), where a trace of every degree that does not fit cost most
    of the paper's tables' time."""
    zero = cfg.zero
    sp = int(cfg.sp)
    mcfg = get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
    spec = get_method(cfg.method)
    shape = Shape(cfg.model_batch, cfg.frames, cfg.spatial)   # CFG as a batch: each call sees twice the batch
    halves = cfg.cfg_degree   # CFG parallel: each rank runs one pass of the two
    dims = Dims(sp=sp, dp=cfg.dp, shard=cfg.shard, cfg=halves, ulysses=cfg.ulysses_degree)
    # Padding (methods/padding.py): every rank computes and keeps its shard of the padded grid.
    if cfg.pad == "auto":
        shape = padded_shape(spec, mcfg, shape, dims)
    T, S = shape.frames, shape.spatial
    plan_mode = "train" if cfg.mode == "train" else "infer"
    engine = zero > 0 and cfg.mode == "train"
    plan = spec.plan(mcfg, shape, dims, cfg.dtype, plan_mode, engine=engine)
    if engine:   # the engine's own gradient reduce-scatter and parameter all-gather
        plan = plan + engine_ops(spec, mcfg, dims, dtype_size(cfg.dtype), zero)
    if halves == 2:   # one exchange of the noise prediction per denoising step
        plan = plan + [("fwd", cfg_exchange_op(mcfg, shape, dtype_size(cfg.dtype)))]
    reps = cfg.sample_steps if cfg.mode == "sample" else 1
    comm_s = {k: v * reps for k, v in plan_times(profile, plan, dims, cfg.a2a).items()}
    wire = {k: v * reps for k, v in plan_wire(plan, dims).items()}

    rate = profile.flops(cfg.dtype)
    factor = flops_factor(cfg) / halves   # per rank: CFG parallel runs one of the two passes
    compute = 0.0 if memory_only else compute_seconds(cfg, mcfg, spec, sp, profile, compiled, T, S)
    mem = memory(spec, mcfg, shape, sp, dims.dp, cfg.dtype, cfg.mode, plan, zero)
    if cfg.mode == "sample" and on_gpu(profile):   # the whole pipeline on each GPU (pipeline.resident_bytes)
        from dspbench.cost.pipeline import resident_bytes
        resident = resident_bytes(cfg, mcfg)
        mem = {**mem, **resident, "peak": mem["peak"] + sum(resident.values())}
    state_bytes = opt_state_bytes(cfg.dtype, zero)        # per parameter (cost_memory.static_bytes)
    optimizer = mem["optimizer"] / state_bytes * OPT_BYTES[cfg.dtype] / profile.optimizer_rate()
    # the ZeRO engine's host work, per parameter tensor, where the profile measured it (calibrate --methods)
    engine_host = profile.zero_host_s(zero) * param_tensor_count(cfg.model) if engine else 0.0

    hidden = 0.0
    ring = sum(v for k, v in comm_s.items() if k.startswith("ring_"))
    share = ring_overlap_share(profile, plan, dims) if ring else 0.0   # by the tier each ring is on
    if share and ring:
        # per sample, as `compute`: factor already counts CFG's second call (shape's batch would count it twice)
        per_call = Shape(cfg.batch, T, S)
        hidden = share * min(ring, _attn_core_flops(mcfg, per_call, cfg.shard) * factor / sp / rate)
    # An emulated budget (CPU clusters) replaces the device's memory; the profile's reserved part
    # (the runtime's own working memory) still comes off it.
    usable = profile.usable_bytes_of(cfg.mem_budget_mib * 2**20) if cfg.mem_budget_mib else profile.usable_bytes
    return Prediction(comm_s, wire, compute, optimizer, hidden, mem, usable, plan, shape, engine_host)
