"""The single-device oracle: a method's output and gradients against the unsharded model.

Both models start from the same weights and see the same full input. The parallel model's
replicated-parameter gradients are summed over SP (as in training), sharded ones are compared with
the matching slice of the oracle's, and the input gradient (partial per SP rank) is summed over SP.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import torch

from dspbench.methods.comm import layer as comm
from dspbench.methods.common import SHARDED, is_sharded, sync_replicated_grads
from dspbench.methods.comm.ledger import Ledger
from dspbench.methods.shards import take_shard
from dspbench.models import Shape, build_model, make_inputs
from dspbench.models.config import ModelConfig

FULL_CHECK_BUDGET = 1 << 22   # B*T*S*C*depth elements: above this, check a small slice instead


def mse(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((out.float() - target.float()) ** 2).mean()


def check_shape(cfg: ModelConfig, shape: Shape, sp: int) -> tuple[ModelConfig, Shape]:
    """The full problem where it fits, else a small slice that runs the run's padding path: T and S
    keep their remainders mod sp, and the ranks holding pads hold them as the run's do (none, some,
    only pads), so an uneven run is checked padded, not on an even slice."""
    if shape.batch * shape.tokens * cfg.hidden * cfg.stack_depth <= FULL_CHECK_BUDGET:
        return cfg, shape
    frames = slice_extent(shape.frames, sp, 2)
    # S of 4 tokens per rank keeps S sharded N ways; axial3d shards H' or W' (never padded: padding.pad_reason):
    # S = sp^2 gives H' = W' = sp (token_hw)
    spatial = slice_extent(shape.spatial, sp, 4) if "S" in cfg.seq_dims else min(shape.spatial, sp * sp)
    # two blocks of each kind: single-stream blocks after the joint ones keep one of each
    return cfg.with_(depth=min(cfg.depth, 2), single_depth=min(cfg.single_depth, 2)), Shape(1, frames, spatial)


def slice_extent(extent: int, n: int, per_rank: int) -> int:
    """The smallest extent, from `per_rank` tokens a rank up to `extent` itself, with extent's
    remainder mod n and its pad layout: padded to a multiple of n and split in n equal chunks, the pads
    (at the end) leave the same ranks without pads, partly padded and only padded (methods/padding.py)."""
    pad, run_chunk = -extent % n, -(-extent // n)
    for chunk in range(per_rank, run_chunk):
        if _pad_layout(chunk, n, pad) == _pad_layout(run_chunk, n, pad):
            return n * chunk - pad
    return extent


def _pad_layout(chunk: int, n: int, pad: int) -> tuple[str, ...]:
    real = n * chunk - pad
    held = [min(chunk, max(0, (i + 1) * chunk - real)) for i in range(n)]
    return tuple("none" if h == 0 else "only" if h == chunk else "some" for h in held)


def oracle_errors(spec, cfg: ModelConfig, shape: Shape, dims, seed: int = 0,
                  device: torch.device = torch.device("cpu"), dtype=torch.float32, ref_dtype=None,
                  backward: bool = True, pad: str = "auto") -> dict:
    """Max abs errors of the parallel model (in `dtype`) against the single-device model (in
    `ref_dtype`, default the same dtype): same weights (the reference's, cast), same full input.
    `backward=False`: the output alone (gradient errors None), for a method that cannot train here.
    `pad`: padding mode (methods/padding.py); the formula counts the padded shape either way."""
    ref_dtype = ref_dtype or dtype
    torch.manual_seed(seed)
    ref = build_model(cfg).to(device=device, dtype=ref_dtype)
    par = spec.apply(copy.deepcopy(ref).to(dtype), dims, pad)
    x, t, y, target = make_inputs(cfg, shape, seed=seed + 1, dtype=ref_dtype, device=device)
    if not backward:
        return _forward_errors(spec, cfg, shape, dims, ref, par, (x, t, y), dtype)

    xr = x.clone().requires_grad_()
    out_r = ref(xr, t, y)
    mse(out_r, target).backward()
    xp = x.to(dtype, copy=True).requires_grad_()
    t, y = t.to(dtype), y.to(dtype)
    with Ledger() as led:
        out_p = par(xp, t, y)
        mse(out_p, target).backward()
        sync_replicated_grads(par, dims)
    x_grad = comm.all_reduce_(xp.grad.clone(), dims.sp_group, "oracle")  # outside the ledger

    grad_err, worst = _param_grad_error(ref, par)
    return {
        "output": (out_p.float() - out_r.float()).abs().max().item(),
        "grads": grad_err, "worst_param": worst,
        "input_grad": (x_grad.float() - xr.grad.float()).abs().max().item(),
        "output_scale": out_r.abs().max().item(),
        "grad_scale": max(p.grad.abs().max().item() for p in ref.parameters()),
        # The oracle step has no data parallelism: compare with the SP-only formula.
        "ledger": led.totals(), "formula": spec.comm_bytes(cfg, shape, replace(dims, dp=1), dtype, "train"),
    }


@torch.no_grad()
def _forward_errors(spec, cfg, shape, dims, ref, par, inputs, dtype) -> dict:
    x, t, y = inputs
    out_r = ref(x, t, y)
    with Ledger() as led:
        out_p = par(x.to(dtype), t.to(dtype), y.to(dtype))
    return {"output": (out_p.float() - out_r.float()).abs().max().item(), "output_scale": out_r.abs().max().item(),
            "grads": None, "worst_param": None, "input_grad": None, "grad_scale": None,
            "ledger": led.totals(), "formula": spec.comm_bytes(cfg, shape, replace(dims, dp=1), dtype, "infer")}


@torch.no_grad()
def cfg_parallel_errors(spec, cfg: ModelConfig, shape: Shape, dims, steps: int, scheduler: str = "ddim",
                        seed: int = 0, device: torch.device = torch.device("cpu"), dtype=torch.float32,
                        pad: str = "auto") -> dict:
    """CFG parallelism against one device: the whole sampling loop (`steps` model calls, guidance,
    scheduler updates) with cond and uncond as one batch of two on the unsharded model, beside this
    rank's loop with the method inside its CFG group and the exchange with its peer. Same weights,
    same latents and captions on both halves; the ledger beside the formula of the parallel loop.
    The parallel model is padded as the run's is (`spec.apply`): each CFG group pads and cuts its own
    pass, so the predictions the halves swap are of the real, unpadded shape."""
    from dspbench.methods.spec import sample_comm_bytes
    from dspbench.run.sampler import sample
    torch.manual_seed(seed)
    ref = build_model(cfg).to(device=device, dtype=dtype)
    par = spec.apply(copy.deepcopy(ref), dims, pad)
    x, _, y, _ = make_inputs(cfg, shape, seed=seed + 1, dtype=dtype, device=device)
    out_r = sample(ref, x, y, steps, cfg.in_channels, "batch", kind=scheduler)
    with Ledger() as led:
        out_p = sample(par, x, y, steps, cfg.in_channels, "parallel", dims, kind=scheduler)
    return {"output": (out_p.float() - out_r.float()).abs().max().item(), "output_scale": out_r.abs().max().item(),
            "grads": None, "worst_param": None, "input_grad": None, "grad_scale": None,
            "ledger": led.totals(), "formula": sample_comm_bytes(spec, cfg, shape, replace(dims, dp=1), dtype, steps)}


def _param_grad_error(ref, par) -> tuple[float, str | None]:
    ref_params = dict(ref.named_parameters())
    err, worst = 0.0, None
    for name, p in par.named_parameters():
        full = ref_params[name].grad
        if is_sharded(p):
            full = take_shard(full, getattr(p, SHARDED))
        e = (p.grad.float() - full.float()).abs().max().item()
        if e > err:
            err, worst = e, name
    return err, worst


def within_tolerance(errs: dict, dtype: str) -> bool:
    """fp32: a few ulps of the largest value (reordered sums); low precision: a loose relative bound."""
    rtol = {"fp32": 1e-5, "bf16": 5e-2, "fp16": 1e-2}[dtype]
    if errs["grads"] is None:   # forward only (oracle_errors(backward=False))
        return errs["output"] <= rtol * max(1.0, errs["output_scale"])
    return (errs["output"] <= rtol * max(1.0, errs["output_scale"])
            and max(errs["grads"], errs["input_grad"]) <= rtol * max(1.0, errs["grad_scale"]))
