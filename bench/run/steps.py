"""What one timed step is, per mode, and the synthetic data stream every method shares."""
from __future__ import annotations

import torch

from dspbench.methods.common import sync_data_parallel_grads, sync_replicated_grads
from dspbench.models import Shape, make_inputs
from dspbench.run.oracle import mse
from dspbench.run.sampler import sample

DATA_CACHE_BYTES = 256 << 20   # pre-generate at most this much input; cycle beyond


class DataStream:
    """Step i's global batch drawn from seed (seed, i); DP rank r takes micro-batch r of it.

    Identical for every method, SP degree and DP layout at the same global batch, so a method can
    change nothing but speed (the loss-trajectory test relies on this). Generated before timing.
    """

    def __init__(self, mcfg, cfg, dp_rank: int, steps: int, device, dtype):
        shape = Shape(cfg.global_batch, cfg.frames, cfg.spatial)
        lo, hi = dp_rank * cfg.batch, (dp_rank + 1) * cfg.batch
        per_step = 2 * shape.batch * mcfg.in_channels * shape.tokens * mcfg.patch_volume * 4
        distinct = max(1, min(steps, DATA_CACHE_BYTES // max(per_step, 1)))
        self.batches = []
        for i in range(distinct):
            x, t, y, target = make_inputs(mcfg, shape, seed=cfg.seed * 1_000_003 + i, dtype=dtype, device=device)
            self.batches.append(tuple(v[lo:hi] for v in (x, t.float(), y, target)))

    def __getitem__(self, i: int):
        return self.batches[i % len(self.batches)]


class MasterWeights:
    """fp32 master copy for low-precision models: grads are upcast, AdamW steps in fp32, cast back."""

    def __init__(self, model, lr: float):
        self.params = [p for p in model.parameters()]
        self.master = [p.detach().float().clone().requires_grad_() for p in self.params]
        self.opt = torch.optim.AdamW(self.master, lr=lr)

    def step(self):
        for p, m in zip(self.params, self.master):
            m.grad = None if p.grad is None else p.grad.float()
        self.opt.step()
        with torch.no_grad():
            for p, m in zip(self.params, self.master):
                p.copy_(m)

    def zero_grad(self):
        for p in self.params:
            p.grad = None


def make_optimizer(model, dtype: str, lr: float = 1e-4):
    if dtype == "fp32":
        return torch.optim.AdamW(model.parameters(), lr=lr)
    return MasterWeights(model, lr)


def make_step(mode: str, model, dims, optimizer=None, sample_steps: int = 10, in_channels: int = 4,
              engine=None, guidance: str = "none", scheduler: str = "ddim"):
    """A callable batch -> loss tensor (train) or None. `engine`: DeepSpeed's (ZeRO 1/2), which
    reduces the gradients and steps the optimizer itself; `guidance`: classifier-free guidance in
    sample mode (none | batch | parallel, run/sampler.py) with the `scheduler` (ddim | flow)."""
    if mode == "train" and engine is not None:
        def step(batch):
            x, t, y, target = batch
            loss = mse(engine(x, t, y), target)
            engine.backward(loss)
            engine.step()
            return loss.detach()
    elif mode == "train":
        def step(batch):
            x, t, y, target = batch
            optimizer.zero_grad()
            loss = mse(model(x, t, y), target)
            loss.backward()
            sync_replicated_grads(model, dims)
            sync_data_parallel_grads(model, dims)
            optimizer.step()
            return loss.detach()
    elif mode == "infer":
        @torch.no_grad()
        def step(batch):
            x, t, y, _ = batch
            model(x, t, y)
    else:
        def step(batch):
            # K model calls per video with the model's scheduler (run/sampler.py); returns None
            x, _, y, _ = batch
            sample(model, x, y, sample_steps, in_channels, guidance, dims, scheduler)
    return step
