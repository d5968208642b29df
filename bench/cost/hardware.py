"""Hardware profiles (TOML): what the cost model knows about a machine, each value with its source.

A profile is a datasheet profile (bench/cost/profiles/*.toml) or one written by `dspbench calibrate`.
Schema (all optional but `name`; see bench/cost/profiles/h100-ib.toml):
- [device] sku: the device's datasheet facts (name, memory_gb, hbm_TBps, peak_flops) from the device
  table bench/cost/devices.toml, stated there once; a profile's own value of one of these wins
  (emulated devices, measured ones); gpus_per_node, usable_memory_fraction, reserved_gb
- [compute] peak_flops {dtype: FLOP/s} (from the sku unless given) x efficiency, or flops_per_s {dtype: FLOP/s} (measured,
  wins); optimizer_Bps (measured bytes/s of the optimizer pass; else HBM bandwidth x 0.8)
- [device] nics_per_node: inter-node links per node (0 or absent: one per GPU)
- [link.intra], [link.inter]: alpha_s and bw_GBps x efficiency for every op, or per op
  alpha_s_op {op: s} and busbw_GBps {op: GB/s} (measured, win); a calibrated level may also hold
  time_s_op {op: [[size, s], ...]} measured with `ranks` ranks, which wins for groups of that size;
  [link.span]: a calibrated node-spanning group's table (`ranks`, `per_node`), bench/cost/tiers.py
- [compute] module_overhead_s: seconds per model module per forward+backward (measured: the
  dispatch cost a FLOP rate does not carry between shapes; 0 on datasheets)
- [compute] method_overhead_s {sp: {method: s}}: each method's training step measured at one calibration
  shape, minus the profile's prediction of it (signed: a method the model over-prices gets a negative
  term), at each SP degree it was measured at (bench/calibrate/methods.py); the older form
  {method: s} with method_overhead_sp is read as that one degree
- [compute] gemm_flops_per_s {'w<C>_tp<n>': FLOP/s} in gemm_dtype: a block's linears at width C
  split n ways (measured; prices tensor-parallel GEMMs, bench/cost/model.py)
- [compute.curve]: GEMM and attention efficiency by size, host time per kernel and per call, the
  compiled share (bench/cost/curve.py); where present it replaces `efficiency` for the model's FLOPs
- [calibration] (calibrated only): load average, each term's measured range [min, max] / median,
  warnings (bench/calibrate/quality.py); bench/cost/interval.py turns it into predicted intervals
- [overlap] ring: the fraction (0..1; true = 1) of ring attention's K/V hops that hides under the
  block's attention (a calibration measures it: bench/calibrate/collectives.py bench_overlap);
  ring_intra, where measured: the same for rings whose group is inside one node (loopback hops are
  CPU work; `ring_overlap_for`); without it every ring hides `ring`
- [engine] zero_host_s_per_param_tensor {"1": s, "2": s}: DeepSpeed ZeRO's host work per step per
  parameter tensor (its hooks, bucket copies and partitioned step, in Python per tensor), measured by
  a calibration that trains methods (bench/calibrate/methods.py); 0 where absent
- [stack] packages: the software the target has beyond torch (methods/stack.py names: deepspeed,
  flash-attn), which decides the methods and ZeRO stages `predict` and `plan` consider; never what
  is installed where they run. Without [stack]: DEFAULT_STACK. `--stack` replaces it (with_stack)
- [sources] {"dotted.key": "where the number comes from"}
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from dspbench.methods import stack as stacks

PROFILE_DIR = Path(__file__).parent / "profiles"
DEVICE_TABLE = Path(__file__).parent / "devices.toml"
HBM_EFFICIENCY = 0.8   # assumption: a streaming elementwise pass reaches ~80% of HBM bandwidth
GB = 1e9
# The stack of a profile without [stack] (calibrated and CPU profiles): what the project's CI venv
# has (`make venv`, dspbench[dev]: DeepSpeed; flash-attn needs CUDA and is not in it), so a plan on
# such a profile considers what the CPU test suite can run. GPU datasheet profiles declare theirs.
DEFAULT_STACK = ("deepspeed",)


@dataclass(frozen=True)
class Link:
    """One level of the interconnect: t(op) = alpha(op) * steps + wire bytes / busbw(op)."""
    alpha_s: float = 10e-6
    bw_GBps: float = 10.0
    efficiency: float = 1.0
    alpha_s_op: dict = field(default_factory=dict)
    busbw_GBps: dict = field(default_factory=dict)
    time_s_op: dict = field(default_factory=dict)    # {op: [[size, seconds], ...]} measured at `ranks`
    ranks: int = 0
    per_node: int = 0       # [link.span]: the measured group's ranks per node (bench/cost/tiers.py)

    def measured_time(self, op: str, size: float, n: int) -> float | None:
        """Seconds of one call from the calibration table (same group size only), else None.

        Piecewise linear in size between measured points, the end segments' slopes outside
        them: a collective's efficiency depends on its size (TCP, protocol switches), which one
        alpha-beta line over all sizes cannot follow."""
        pts = sorted(self.time_s_op.get(op, ()))
        if n != self.ranks or len(pts) < 2:
            return None
        i = next((k for k in range(1, len(pts) - 1) if size <= pts[k][0]), len(pts) - 1)
        (s0, t0), (s1, t1) = pts[i - 1], pts[i]
        return max(t0 + (size - s0) * (t1 - t0) / (s1 - s0), 0.0) if s1 != s0 else t1

    def alpha(self, op: str) -> float:
        return self.alpha_s_op.get(op, self.alpha_s)

    def busbw(self, op: str) -> float:
        """Bytes/s on the wire per rank for `op` (nccl-tests bus bandwidth)."""
        return self.busbw_GBps.get(op, self.bw_GBps * self.efficiency) * GB


@dataclass(frozen=True)
class Profile:
    name: str
    device: str = "unknown"
    memory_bytes: float = 80 * GB
    hbm_Bps: float = 2e12
    gpus_per_node: int = 8
    usable_memory_fraction: float = 0.92
    reserved_bytes: float = 3 * GB
    peak_flops: dict = field(default_factory=dict)
    efficiency: float = 0.45
    flops_per_s: dict = field(default_factory=dict)
    optimizer_Bps: float | None = None
    intra: Link = field(default_factory=Link)
    inter: Link = field(default_factory=Link)
    span: Link = field(default_factory=Link)    # measured node-spanning groups only (no table: unused)
    nics_per_node: int = 0        # inter-node links per node; 0 = one per GPU (bench/cost/tiers.py)
    ring_overlap: float = 0.0     # fraction of the ring's hops hidden under its attention
    ring_overlap_intra: float | None = None   # the same for a ring inside one node, where measured
    module_overhead_s: float = 0.0   # per module per forward+backward (calibrated: profile.compute_terms)
    method_overhead_s: dict = field(default_factory=dict)   # {sp: {method: s per training step}} (calibrate/methods.py)
    gemm_flops_per_s: dict = field(default_factory=dict)   # {'w<C>_tp<n>': FLOP/s} (calibrate/gemm.py)
    gemm_dtype: str = ""
    calibration: dict = field(default_factory=dict)        # measured ranges, load, warnings (calibrate/quality.py)
    curve: dict = field(default_factory=dict)               # [compute.curve]: size-aware rates, host costs (cost/curve.py)
    conv_peak_fraction: float | None = None  # [compute]: the VAE decode's fraction of peak where no curve says (cost/pipeline.py)
    kind: str = "datasheet"
    sku: str = ""                 # [device] sku: the devices.toml key, and the kernel rate table's (cost/rates/)
    compute_scale: float = 1.0    # the interval's compute knob on kernel-priced profiles (cost/interval.py at)
    host: dict = field(default_factory=dict)   # [host]: eager host seconds per kernel and per call, compiled share
    zero_host_s_per_param_tensor: dict = field(default_factory=dict)  # [engine] {stage: s} (calibrate/methods.py)
    kernels: dict = field(default_factory=dict)  # [kernels]: a CPU's per-kernel costs (calibrate/kernels.py, cost/cpu_kernels.py)
    stack: tuple = DEFAULT_STACK  # [stack] packages: what the target can import (methods/stack.py)
    stack_source: str = ""        # who declared it: the profile's [stack], --stack, or the default
    sources: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    def zero_host_s(self, stage: int) -> float:
        """Seconds per parameter tensor of the ZeRO engine's host work at `stage`, or 0 where unmeasured."""
        return float(self.zero_host_s_per_param_tensor.get(stage, 0.0)) if stage else 0.0

    def ring_overlap_for(self, nodes: int) -> float:
        """The share of a ring's hops that hides under attention, for a ring whose group spans
        `nodes` nodes: the intra-node measurement where there is one, else the profile's ring."""
        if nodes == 1 and self.ring_overlap_intra is not None:
            return self.ring_overlap_intra
        return self.ring_overlap

    def flops(self, dtype: str) -> float:
        """Achievable FLOP/s of one device in `dtype`: measured if calibrated, else peak x efficiency."""
        if dtype in self.flops_per_s:
            return float(self.flops_per_s[dtype])
        if dtype not in self.peak_flops:
            raise KeyError(f"profile {self.name!r} has no compute rate for dtype {dtype!r}")
        return float(self.peak_flops[dtype]) * self.efficiency

    def gemm_rate(self, width: int, degree: int, dtype: str) -> float | None:
        """Measured forward+backward GEMM FLOP/s of a block's linears at hidden width `width` split
        `degree` ways, or None where it was not measured (that width, degree or dtype)."""
        if dtype != self.gemm_dtype:
            return None
        v = self.gemm_flops_per_s.get(f"w{width}_tp{degree}")
        return float(v) if v else None

    def optimizer_rate(self) -> float:
        return self.optimizer_Bps or self.hbm_Bps * HBM_EFFICIENCY

    def a2a_list_extra_s_per_byte(self) -> float:
        """Seconds per payload byte that the reference code's all-to-all (`--a2a list`: tensor_split
        with a contiguous copy per chunk, a list all_to_all, torch.cat) adds to all_to_all_single:
        measured by calibrate where it ran both, else two extra copies of the payload (each a read
        and a write) at the streaming HBM rate (stated in docs/cost-model.md)."""
        measured = self.raw.get("compute", {}).get("a2a_list_extra_s_per_byte")
        return float(measured) if measured is not None else 4.0 / (self.hbm_Bps * HBM_EFFICIENCY)

    @property
    def usable_bytes(self) -> float:
        return self.usable_bytes_of(self.memory_bytes)

    def usable_bytes_of(self, memory_bytes: float) -> float:
        """What a model may use of a device with this much memory (an emulated budget, or the device's)."""
        return memory_bytes * self.usable_memory_fraction - self.reserved_bytes


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def _link(d: dict) -> Link:
    return Link(alpha_s=float(d.get("alpha_s", 10e-6)), bw_GBps=float(d.get("bw_GBps", 10.0)),
                efficiency=float(d.get("efficiency", 1.0)), alpha_s_op=dict(d.get("alpha_s_op", {})),
                busbw_GBps=dict(d.get("busbw_GBps", {})),
                time_s_op={op: [list(map(float, pt)) for pt in pts] for op, pts in d.get("time_s_op", {}).items()},
                ranks=int(d.get("ranks", 0)), per_node=int(d.get("per_node", 0)))


def devices() -> dict[str, dict]:
    """The device table: SKU key -> its datasheet facts (bench/cost/devices.toml)."""
    with open(DEVICE_TABLE, "rb") as f:
        return tomllib.load(f)


def device_peak(torch_name: str, dtype: str) -> float | None:
    """The dense peak FLOP/s of the device torch reports as `torch_name`, by exact SKU name; None where
    unknown, and for fp32 (TF32/FP32 peaks differ by kernel choice): no MFU then."""
    if dtype == "fp32":
        return None
    sku = next((s for s in devices().values() if torch_name.strip() in s["torch_names"]), None)
    return None if sku is None else float(sku["peak_flops"][dtype])


def _with_sku(d: dict) -> dict:
    """The profile dict with its SKU's datasheet facts (and their sources) filled in where it is silent."""
    dev = d.get("device", {})
    if "sku" not in dev:
        return d
    table = devices()
    if dev["sku"] not in table:
        raise ValueError(f"unknown device sku {dev['sku']!r}; bench/cost/devices.toml has {', '.join(table)}")
    sku = table[dev["sku"]]
    cited = f"bench/cost/devices.toml [{dev['sku']}]: {sku['source']}"
    facts = {"device.name": sku["name"], "device.memory_gb": sku["memory_gb"], "device.hbm_TBps": sku["hbm_TBps"],
             "compute.peak_flops": sku["peak_flops"]}
    out = {**d, "device": dict(dev), "compute": dict(d.get("compute", {}))}
    for dotted, value in facts.items():
        section, key = dotted.split(".")
        if key not in out[section]:
            out[section][key] = value
            out["sources"] = {**out.get("sources", {}), dotted: cited}
    return out


def _stack(d: dict) -> tuple[tuple[str, ...], str, dict]:
    """([stack] packages, who declared them, the dict with that noted): a what-if renames the
    profile, and the stack is still the one its file declared."""
    t = d.get("stack")
    if t is None:
        return DEFAULT_STACK, f"default: no [stack] in {d['name']}, so the CI venv's (dspbench[dev])", d
    if not isinstance(t, dict) or "packages" not in t:
        raise ValueError(f"profile {d['name']!r}: [stack] needs packages = [...] ({', '.join(stacks.PACKAGES)})")
    packages = stacks.checked(t["packages"], f"profile {d['name']!r} [stack] packages")
    by = t.get("declared_by") or f"declared by {d['name']} [stack]"
    return packages, by, {**d, "stack": {**t, "declared_by": by}}


def with_stack(profile: Profile, packages: tuple[str, ...], by: str = "declared by --stack") -> Profile:
    """The profile pricing `packages` as the target's stack instead of its own [stack] (`--stack`)."""
    return from_dict({**profile.raw, "name": profile.name, "stack": {"packages": list(packages), "declared_by": by}})


def from_dict(d: dict) -> Profile:
    d = _with_sku(d)
    stack, stack_source, d = _stack(d)
    dev, comp, links = d.get("device", {}), d.get("compute", {}), d.get("link", {})
    intra = _link(links.get("intra", links.get("inter", {})))
    return Profile(
        name=d["name"], device=dev.get("name", "unknown"),
        memory_bytes=float(dev.get("memory_gb", 80)) * GB, hbm_Bps=float(dev.get("hbm_TBps", 2.0)) * 1e12,
        gpus_per_node=int(dev.get("gpus_per_node", 8)),
        usable_memory_fraction=float(dev.get("usable_memory_fraction", 0.92)),
        reserved_bytes=float(dev.get("reserved_gb", 3.0)) * GB,
        peak_flops=dict(comp.get("peak_flops", {})), efficiency=float(comp.get("efficiency", 0.45)),
        flops_per_s=dict(comp.get("flops_per_s", {})), optimizer_Bps=comp.get("optimizer_Bps"),
        intra=intra, inter=_link(links.get("inter", links.get("intra", {}))), span=_link(links.get("span", {})),
        nics_per_node=int(dev.get("nics_per_node", 0)),
        ring_overlap=_fraction(d.get("overlap", {}).get("ring", False)), kind=d.get("kind", "datasheet"),
        ring_overlap_intra=_overlap_or_none(d.get("overlap", {}).get("ring_intra")),
        module_overhead_s=float(comp.get("module_overhead_s", 0.0)),
        method_overhead_s=method_overheads_by_sp(comp),
        gemm_flops_per_s=dict(comp.get("gemm_flops_per_s", {})), gemm_dtype=comp.get("gemm_dtype", ""),
        calibration=dict(d.get("calibration", {})), curve=dict(comp.get("curve", {})),
        conv_peak_fraction=_fraction_or_none(comp.get("conv_peak_fraction")),
        sku=str(dev.get("sku", "")), host=dict(d.get("host", {})), kernels=_kernels(d),
        zero_host_s_per_param_tensor=_zero_host(d.get("engine", {})), stack=stack, stack_source=stack_source,
        sources=dict(d.get("sources", {})), raw=d)


KERNEL_TERMS = ("s_per_kernel", "s_per_gemm_flop", "s_per_attn_flop", "s_per_byte")


def _kernels(d: dict) -> dict:
    """[kernels] with every term a number > 0 (a missing or zero term would price kernels free)."""
    k = d.get("kernels", {})
    if not k:
        return {}
    bad = [t for t in KERNEL_TERMS if not isinstance(k.get(t), (int, float)) or not k[t] > 0]
    if bad:
        raise ValueError(f"[kernels] needs {', '.join(KERNEL_TERMS)} each > 0; bad or missing: {', '.join(bad)}")
    return {t: float(v) for t, v in k.items() if isinstance(v, (int, float))}


def prices_cpu_kernels(profile: "Profile") -> bool:
    """A profile with [kernels] (a calibrated CPU) prices compute kernel by kernel (cost/cpu_kernels.py)."""
    return bool(profile.kernels)


def method_overheads_by_sp(comp: dict) -> dict[int, dict[str, float]]:
    """[compute] method_overhead_s as {sp: {method: s}}: keyed by SP degree, or the older flat
    {method: s} measured at the one degree method_overhead_sp."""
    raw = comp.get("method_overhead_s", {})
    if raw and not all(isinstance(v, dict) for v in raw.values()):
        if any(isinstance(v, dict) for v in raw.values()) or not comp.get("method_overhead_sp"):
            raise ValueError("[compute] method_overhead_s: either {sp: {method: s}} or {method: s} with "
                             "method_overhead_sp, not a mix")
        return {int(comp["method_overhead_sp"]): {k: float(v) for k, v in raw.items()}}
    return {int(sp): {k: float(v) for k, v in per.items()} for sp, per in raw.items()}


def _zero_host(engine: dict) -> dict:
    """[engine] zero_host_s_per_param_tensor {"1": s, "2": s}: stages 1 and 2, seconds >= 0."""
    out = {}
    for k, v in engine.get("zero_host_s_per_param_tensor", {}).items():
        if str(k) not in ("1", "2") or float(v) < 0:
            raise ValueError(f"[engine] zero_host_s_per_param_tensor: stage 1 or 2 with seconds >= 0, got {k} = {v!r}")
        out[int(k)] = float(v)
    return out


def _overlap_or_none(v) -> float | None:
    return None if v is None else _fraction(v)


def _fraction_or_none(v) -> float | None:
    if v is None:
        return None
    if not 0 < float(v) <= 1:
        raise ValueError(f"[compute] conv_peak_fraction must be in (0, 1], got {v!r}")
    return float(v)


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (bench/cost/profiles/<name>.toml) or by path to a TOML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise FileNotFoundError(f"no hardware profile {name_or_path!r}; known: {', '.join(available_profiles())} "
                                "(or a path to a .toml written by `dspbench calibrate`)")
    with open(path, "rb") as f:
        return from_dict(tomllib.load(f))


def on_gpu(profile: Profile) -> bool:
    return not profile.device.lower().startswith("cpu")


def prices_by_kernel(profile: Profile) -> bool:
    """A GPU datasheet profile prices compute kernel by kernel on its device's rate table
    (bench/cost/kernel_price.py); calibrated, tuned and CPU profiles keep their measured rates."""
    return on_gpu(profile) and profile.kind == "datasheet" and bool(profile.sku)


def device_defaults(profile: Profile) -> dict:
    """The dtype and backend a run on this profile's device has unless told: bf16 and NCCL on a GPU
    (nobody serves or trains a video DiT in fp32 there), fp32 and gloo on a CPU (the oracle's
    precision). `predict` and `plan` both fill an unset --dtype/--backend from here."""
    return {"dtype": "bf16", "backend": "nccl"} if on_gpu(profile) else {"dtype": "fp32", "backend": "gloo"}


def fill_device_defaults(args, profile: Profile) -> list[str]:
    """Set args.dtype/args.backend where the command line left them None; the names it filled."""
    filled = []
    for key, value in device_defaults(profile).items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
            filled.append(f"{key} {value}")
    return filled


def _fraction(v) -> float:
    """An overlap setting: true/false (all or nothing) or a measured fraction in [0, 1]."""
    f = float(v)
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"overlap fraction must be in [0, 1], got {v!r}")
    return f
