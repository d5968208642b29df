"""Rank-side tasks of the oracle tests: a method against the single-device model, same weights."""
from __future__ import annotations

import copy

import torch

from dspbench.methods import build_dims, get_method
from dspbench.methods.common import is_sharded, sync_replicated_grads, SHARDED
from dspbench.methods.ledger import Ledger
from dspbench.methods.shards import take_shard
from dspbench.models import Shape, build_model, get_config, make_inputs

_DIMS: dict = {}


def dims_for(sp: int, shard: str = "T"):
    # new_group is collective: build each mesh once per rank and reuse it across tests.
    if (sp, shard) not in _DIMS:
        _DIMS[(sp, shard)] = build_dims(sp, shard)
    return _DIMS[(sp, shard)]


def _loss(out, target):
    return ((out.float() - target.float()) ** 2).mean()


def oracle_case(method: str, model: str, shape: tuple, sp: int, shard: str = "T", ckpt: bool = False, **over):
    cfg = get_config(model, grad_ckpt=ckpt, **over)
    shape = Shape(*shape)
    spec, dims = get_method(method), dims_for(sp, shard)
    reason = spec.check(cfg, shape, dims)
    if reason:
        return {"unsupported": reason}
    torch.manual_seed(0)
    ref = build_model(cfg)
    par = spec.parallelize(copy.deepcopy(ref), dims)
    x, t, y, target = make_inputs(cfg, shape, seed=1)

    xr = x.clone().requires_grad_()
    out_r = ref(xr, t, y)
    _loss(out_r, target).backward()

    xp = x.clone().requires_grad_()
    with Ledger() as led:
        out_p = par(xp, t, y)
        _loss(out_p, target).backward()
        sync_replicated_grads(par, dims)

    ref_params = dict(ref.named_parameters())
    grad_err, worst = 0.0, None
    for name, p in par.named_parameters():
        full = ref_params[name].grad
        if is_sharded(p):
            full = take_shard(full, getattr(p, SHARDED))
        err = (p.grad - full).abs().max().item()
        if err > grad_err:
            grad_err, worst = err, name
    return {
        "out_err": (out_p - out_r).abs().max().item(),
        "out_scale": out_r.abs().max().item(),
        "grad_err": grad_err, "worst_param": worst,
        "grad_scale": max(p.grad.abs().max().item() for p in ref.parameters()),
        "x_grad": xp.grad, "x_grad_ref": xr.grad,
        "ledger": led.totals(), "counts": led.counts(),
        "formula": spec.comm_bytes(cfg, shape, dims, torch.float32, "train"),
    }
