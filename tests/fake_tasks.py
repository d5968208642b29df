"""Runs a parallelized model on the fake process group (rank 0 of N, in this process).

Collectives return at once with uninitialised outputs, so values are meaningless but every
collective is issued with its real shape: exactly what the ledger-vs-formula test needs.
"""
from __future__ import annotations

import torch

from dspbench.methods import build_dims, get_method
from dspbench.methods.comm import layer as comm
from dspbench.methods.common import sync_replicated_grads
from dspbench.methods.comm.ledger import Ledger
from dspbench.models import Shape, build_model, make_inputs


def fake_step(method: str, cfg, shape: Shape, n: int, mode: str = "train", shard: str = "T"):
    comm.init_fake(n)
    torch.set_flush_denormal(True)   # uninitialised buffers hold denormals: slow on CPU otherwise
    try:
        spec, dims = get_method(method), build_dims(n, shard)
        reason = spec.check(cfg, shape, dims)
        assert reason is None, reason
        model = spec.parallelize(build_model(cfg), dims)
        x, t, y, _ = make_inputs(cfg, shape)
        with Ledger() as led, torch.no_grad() if mode == "infer" else torch.enable_grad():
            out = model(x, t, y)
            if mode == "train":
                out.float().sum().backward()
                sync_replicated_grads(model, dims)
        return led.totals(), spec.comm_bytes(cfg, shape, dims, torch.float32, mode), dims
    finally:
        comm.destroy()
