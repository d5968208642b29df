"""Rank-side tasks of the CFG-parallel tests: the sampling loop with cond and uncond on two rank
groups against one device's loop with both passes as a batch of two."""
from __future__ import annotations

from dspbench.methods import build_dims, get_method
from dspbench.methods.comm import layer as comm, p2p
from dspbench.models import Shape, get_config
from dspbench.run.oracle import cfg_parallel_errors

_DIMS: dict = {}


def cfg_dims(sp: int):
    # new_group is collective: build each CFG mesh once per pool rank and reuse it across tests.
    if sp not in _DIMS:
        _DIMS[sp] = build_dims(sp, "T", cfg=2)
    return _DIMS[sp]


def cfg_parallel_case(method: str, model: str, shape: tuple, sp: int, steps: int = 2, scheduler: str = "ddim",
                      skip_exchange: bool = False) -> dict:
    """`skip_exchange`: each rank uses its own prediction for both passes instead of its peer's
    (the bug the test must catch: no exchange, so no guidance across the groups)."""
    cfg, shape, dims = get_config(model), Shape(*shape), cfg_dims(sp)
    spec = get_method(method)
    if reason := spec.check_pad(cfg, shape, dims):
        return {"unsupported": reason}
    real = p2p.exchange_with_peer
    if skip_exchange:
        p2p.exchange_with_peer = lambda x, group, tag: x.clone()
    try:
        errs = cfg_parallel_errors(spec, cfg, shape, dims, steps, scheduler)
    finally:
        p2p.exchange_with_peer = real
    return {**errs, "cond": comm.rank(dims.cfg_group) == 0, "sp_rank": comm.rank(dims.sp_group),
            "in_channels": cfg.in_channels * cfg.patch_volume}
