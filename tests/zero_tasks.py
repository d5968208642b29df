"""Rank-side tasks of the ZeRO tests: the same training steps at --zero 0 (our hand-rolled gradient
syncs and AdamW) and under DeepSpeed's ZeRO 1 / 2, from the same weights and data."""
from __future__ import annotations

import torch

from dspbench.methods import get_method
from dspbench.methods.comm import layer as comm
from dspbench.methods.common import sync_data_parallel_grads, sync_replicated_grads
from dspbench.methods.comm.external import engine_ledger
from dspbench.methods.comm.ledger import Ledger
from dspbench.models import Shape, build_model, get_config, make_inputs
from oracle_tasks import dims_for

LR = 1e-3


def _batches(mcfg, shape, dims, steps):
    # Step i's global batch from seed i; DP rank r takes micro-batch r (bench's DataStream).
    r, b = comm.rank(dims.dp_group), shape.batch
    glob = Shape(b * dims.dp, shape.frames, shape.spatial)
    return [tuple(v[r * b:(r + 1) * b] for v in make_inputs(mcfg, glob, seed=i)) for i in range(steps)]


def _loss(out, target):
    return ((out.float() - target.float()) ** 2).mean()


def train_losses(method: str, model: str, shape: tuple, sp: int, zero: int, steps: int = 3) -> dict:
    from dspbench.run.zero import zero_engine
    mcfg, shape, dims = get_config(model), Shape(*shape), dims_for(sp)
    spec = get_method(method)
    torch.manual_seed(0)
    net = spec.parallelize(build_model(mcfg), dims)
    data = _batches(mcfg, shape, dims, steps)
    losses, ledgers, engines = [], [], []
    if zero == 0:
        opt = torch.optim.AdamW(net.parameters(), lr=LR)
    else:
        engine = zero_engine(net, dims, zero, "fp32", shape.batch, lr=LR)
    for x, t, y, target in data:
        with Ledger() as led, engine_ledger() as eng:
            if zero == 0:
                opt.zero_grad()
                loss = _loss(net(x, t, y), target)
                loss.backward()
                sync_replicated_grads(net, dims)
                sync_data_parallel_grads(net, dims)
                opt.step()
            else:
                loss = _loss(engine(x, t, y), target)
                engine.backward(loss)
                engine.step()
        losses.append(loss.item())
        ledgers.append(led.totals())
        engines.append(eng.totals())
    from dspbench.cost.comm import engine_comm
    return {"losses": losses, "ledger": ledgers[-1], "engine_ledger": engines[-1],
            "engine_comm_formula": engine_comm(spec, mcfg, dims, 4, zero),
            "formula": spec.comm_bytes(mcfg, shape, dims, torch.float32, "train"),
            "engine_formula": spec.comm_bytes(mcfg, shape, dims, torch.float32, "train", engine=True)}
