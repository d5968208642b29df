"""The method contract: a small spec of plain callables (torchtitan's TrainSpec idea).

A method module `methods/<name>.py` (or a plugin module, see docs/adding-a-method.md) exports
`METHOD = MethodSpec(...)`:
- `check(cfg, shape, dims) -> str | None`: why this configuration cannot run, or None;
- `parallelize(model, dims) -> model`: attach to the model's named seams, in place;
- `forward_ops(cfg, shape, dims, dtype_bytes) -> [Op]`: the collectives of one forward pass
  through the blocks, analytically; the backward defaults to their conjugates;
- `sharded_params(cfg) -> int`: parameters the method shards (excluded from the SP gradient sync);
- `check_run(dtype, mode, backend) -> str | None` (optional): why this precision, mode or backend
  cannot run (a library's limits: ring-flash-attn's fp32 backward, torch's CPU context parallel);
- `pads(cfg, extents, dims) -> names` (optional): the sequence dims padded to a multiple of the
  degree when they do not divide (default: the sharded dim, `dims.shard`); `no_key_mask`: why the
  method cannot mask padded keys (a library's attention), which refuses padding (methods/padding.py);
- `requires` (optional): the packages beyond torch it imports (methods/stack.py names them):
  `predict` and `plan` read them against the target's declared stack, `run` against what is
  installed here, so `check` itself says nothing about installed libraries; `trace_as`: the method
  whose code runs the same algorithm without them, which the cost model's rank trace runs in its
  place (bench/cost/rank_trace.py), so a prediction imports nothing of the target's stack;
- `report` (optional): how reports show it (`Look`: label, colour, order, Table 3 formula); records
  carry it (`method_meta`), since reports may not import methods; `splits_heads`: each SP rank
  holds heads/sp of an attention's heads, so the check refuses heads the degree does not divide.
`comm_bytes(...)` is derived from these, on the padded shape, and must equal the ledger exactly.
`apply(model, dims, pad)` is `parallelize` plus the padding (callers use it, not parallelize).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch

from dspbench.models.config import ModelConfig, Shape
from dspbench.models.dtypes import dtype_size
from dspbench.models.params import param_count
from dspbench.methods import padding
from dspbench.methods.common import act_bytes, out_bytes
from dspbench.methods.dims import Dims
from dspbench.methods.comm.ledger import key, wire_bytes

CONJUGATE = {"all_to_all": "all_to_all", "all_gather": "reduce_scatter",
             "reduce_scatter": "all_gather", "send_recv": "send_recv", "all_reduce": "all_reduce"}
MODES = ("infer", "train")


class Op(NamedTuple):
    """`count` calls of collective `op` with nccl-tests size `payload` bytes, in the SP (or DP) group.

    `ranks` > 0: the calls run in sub-groups of that many ranks inside `group` (USP's Ulysses and
    ring sub-groups of the SP group); 0: in the whole group.
    """
    tag: str
    op: str
    payload: int
    count: int
    group: str = "sp"
    ranks: int = 0

    def group_size(self, dims: Dims) -> int:
        return self.ranks or {"sp": dims.sp, "dp": dims.dp, "cfg": dims.cfg}[self.group]


class Table3(NamedTuple):
    """The paper's Table 3 row (forward, per layer, whole tensors moved per device): `formula` as
    printed, and its factor of M, `coeff / N` if `per_n` else `coeff`."""
    formula: str
    coeff: float
    per_n: bool = False


@dataclass(frozen=True)
class Look:
    """How reports show a method; empty fields fall back (reports/meta.py): label to the name, colour
    to a palette colour picked by name, order after the hinted methods, alphabetically."""
    label: str = ""
    colour: str = ""               # "#RRGGBB"; one hue per family, lighter for its variants
    order: float | None = None     # reports list methods by this, ascending
    table3: Table3 | None = None

    def as_record(self) -> dict:
        """The record's `method_meta` (JSON): what a report needs, without importing the method."""
        t = self.table3
        return {"label": self.label or None, "colour": self.colour or None, "order": self.order,
                "table3": None if t is None else {"formula": t.formula, "coeff": t.coeff, "per_n": t.per_n}}


def _none(cfg: ModelConfig) -> int:
    return 0


def _runs_anywhere(dtype: str, mode: str, backend: str) -> None:
    return None


def _sharded_dim(cfg: ModelConfig, extents: dict[str, int], dims: Dims) -> tuple[str, ...]:
    return (dims.shard,)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    summary: str
    constraints: str
    check: Callable[[ModelConfig, Shape, Dims], str | None]
    parallelize: Callable
    forward_ops: Callable[[ModelConfig, Shape, Dims, int], list[Op]]
    backward_ops: Callable[[ModelConfig, Shape, Dims, int], list[Op]] | None = None
    sharded_params: Callable[[ModelConfig], int] = _none
    check_run: Callable[[str, str, str], str | None] = _runs_anywhere
    # Activations, of the whole block stack, that autograd keeps at full sequence length rather than
    # the 1/sp shard (bench/cost/memory.py): Megatron-SP's gathered linear inputs.
    unsharded_saved: Callable[[ModelConfig], int] = _none
    pads: Callable[[ModelConfig, dict, Dims], tuple[str, ...]] = _sharded_dim
    no_key_mask: str = ""
    report: Look = Look()          # label, colour, order, Table 3 row: data every record carries
    splits_heads: bool = False     # heads/sp per rank: tests/test_method_checks.py holds check() to it
    requires: tuple[str, ...] = ()  # packages beyond torch (methods/stack.py PACKAGES): the target must have them
    trace_as: str = ""             # with `requires`: the method of ours the rank trace runs instead

    def apply(self, model, dims: Dims, pad: str = "auto"):
        """`parallelize`, then (pad `auto`, SP > 1) the padding of dims the degree does not divide."""
        model = self.parallelize(model, dims)
        if pad == "auto" and dims.sp > 1:
            padding.install(model, self, dims)
        return model

    def check_pad(self, cfg: ModelConfig, shape: Shape, dims: Dims, pad: str = "auto") -> str | None:
        """`check` under padding mode `pad` (`never`: `check` itself, word for word)."""
        return padding.check(self, cfg, shape, dims, pad)

    def comm_bytes(self, cfg: ModelConfig, shape: Shape, dims: Dims, dtype=torch.float32,
                   mode: str = "train", tagged: bool = True, engine: bool = False) -> dict[str, int]:
        """Analytic wire bytes per rank for one step: {'tag/op.phase': bytes} (or {'op.phase': ...}).
        `engine`: a training engine (ZeRO) reduces the gradients itself (see step_plan)."""
        return comm_bytes(self, cfg, shape, dims, dtype, mode, tagged, engine)

    def plan(self, cfg: ModelConfig, shape: Shape, dims: Dims, dtype=torch.float32, mode: str = "train",
             engine: bool = False):
        """[(phase, Op)] for one step on one SP rank: what the formula counts, in order of kind."""
        return step_plan(self, cfg, shape, dims, dtype, mode, engine)


def step_plan(spec: MethodSpec, cfg, shape, dims, dtype, mode, engine: bool = False) -> list[tuple[str, Op]]:
    """The step's collectives through our comm layer. With a training `engine` (DeepSpeed ZeRO)
    the engine reduces gradients over the DP x SP mesh itself (its traffic is accounted apart), so
    the gradient syncs drop out, except the SP sum of a method's replicated parameters when it
    shards others (Megatron-SP: the engine sees its SP group as model parallel)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    # Padded dims move padded bytes (a no-op where the degree divides the shape).
    plan = _sp_plan(spec, cfg, padding.padded_shape(spec, cfg, shape, dims), dims, dtype, mode) if dims.sp > 1 else []
    if engine:
        keep_sp_sum = spec.sharded_params(cfg) > 0
        return [(ph, o) for ph, o in plan if o.tag not in ("grad_sync", "dp_grad_sync")
                or (o.tag == "grad_sync" and keep_sp_sum)]
    if mode == "train" and dims.dp > 1:   # data-parallel mean of this rank's gradients
        sharded = spec.sharded_params(cfg)
        local = param_count(cfg) - sharded + sharded // dims.sp
        plan.append(("bwd", Op("dp_grad_sync", "all_reduce", local * dtype_size(dtype), 1, "dp")))
    return plan


def conjugates(fwd: list[Op]) -> list[Op]:
    """The backward of forward collectives whose autograd pairs are conjugates (comm.py band 2)."""
    return [o._replace(op=CONJUGATE[o.op]) for o in fwd]


def _sp_plan(spec: MethodSpec, cfg, shape, dims, dtype, mode) -> list[tuple[str, Op]]:
    b = dtype_size(dtype)
    fwd = spec.forward_ops(cfg, shape, dims, b)
    plan = [("fwd", op) for op in fwd]
    plan.append(("fwd", Op("seq_gather", "all_gather", out_bytes(cfg, shape, b), 1)))
    if mode == "train":
        bwd = spec.backward_ops(cfg, shape, dims, b) if spec.backward_ops else conjugates(fwd)
        if cfg.grad_ckpt:   # checkpointed blocks re-run their forward (and its comm) in the backward
            bwd = fwd + bwd
        plan += [("bwd", op) for op in bwd]
        replicated = param_count(cfg) - spec.sharded_params(cfg)
        plan.append(("bwd", Op("grad_sync", "all_reduce", replicated * b, 1)))  # gradients in the model dtype
    return plan


def comm_bytes(spec, cfg, shape, dims, dtype, mode, tagged=True, engine=False) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for phase, o in step_plan(spec, cfg, shape, dims, dtype, mode, engine):
        if o.count:
            n = o.group_size(dims)
            out[key(o.op, phase, o.tag if tagged else None)] += o.count * wire_bytes(o.op, o.payload, n)
    return dict(out)


CFG_EXCHANGE_TAG = "cfg_exchange"


def cfg_exchange_op(cfg: ModelConfig, shape: Shape, dtype_bytes: int) -> Op:
    """CFG parallelism's exchange, once per sampling step: each rank sends its noise prediction
    (the first in_channels of the output, every token: the exit gather left it whole on every SP
    rank) to its peer in the other CFG group and receives the peer's (comm/p2p.exchange_with_peer)."""
    return Op(CFG_EXCHANGE_TAG, "send_recv", act_bytes(cfg, shape, dtype_bytes, cfg.patch_volume * cfg.in_channels),
              1, "cfg")


def sample_comm_bytes(spec: MethodSpec, cfg: ModelConfig, shape: Shape, dims: Dims, dtype, steps: int,
                      tagged: bool = True) -> dict[str, int]:
    """Wire bytes per rank of one sampling loop: `steps` forward passes of `shape` (the batch one
    model call sees), plus the CFG exchange per step when `dims.cfg` = 2."""
    out = {k: v * steps for k, v in comm_bytes(spec, cfg, shape, dims, dtype, "infer", tagged).items()}
    if dims.cfg == 2:
        o = cfg_exchange_op(cfg, shape, dtype_size(dtype))
        k = key(o.op, "fwd", o.tag if tagged else None)
        out[k] = out.get(k, 0) + steps * wire_bytes(o.op, o.payload, 2)
    return out
