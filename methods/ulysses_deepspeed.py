"""DeepSpeed-Ulysses itself: DeepSpeed's `DistributedAttention` around our local attention.

The algorithm, layout and traffic of `ulysses` (4 all-to-alls per attention over the sharded dim,
each moving one shard of q, k, v or the output), but DeepSpeed's code does the head/sequence
switch and issues the collectives through `deepspeed.comm`. `comm_external.record_external_all_to_all`,
entered once per process, puts them in the ledger with the tags of `ulysses`, so the formula
check holds exactly as for our own methods. DeepSpeed is imported, and its comm set up on top of
our process group, lazily in `parallelize` (importing it costs seconds; on the CPU accelerator
its init would JIT-build a shared-memory op for minutes, which we switch off).

DeepSpeed returns silently wrong output when the sequence does not divide the degree (DeepSpeed
issues #7384, #7842), and uneven heads need its `groups.mpu`: `check` rejects both up front.

Joint text (full3d): DistributedAttention hands extra keyword arguments to the local attention,
so the replicated text q, k, v ride along as `joint`; the local attention takes this rank's heads
of them and joins them as `ulysses` does, and the text output is all-gathered over heads by our
comm layer (tag `ulysses_joint_out`), outside DeepSpeed.
"""
from __future__ import annotations

import os

from torch import nn

from dspbench.methods.comm import external as comm_external, layer as comm
from dspbench.methods.common import embed_attention, heads_divisible, shard_divisible
from dspbench.methods.spec import Look, MethodSpec, Table3
from dspbench.methods.ulysses import H_DIM, L_DIM, forward_ops, gather_heads, joint_heads

NAME = "ulysses_deepspeed"

# Which tag the next DeepSpeed all-to-all gets. Forward (also a checkpoint's recompute): while a
# DistributedAttention runs, q, k, v until our local attention returns, then the output; the top
# of _FWD. Backward: DeepSpeed's autograd Functions call in from the engine, outside any forward;
# gradient hooks set _BWD as the gradient passes the output (its all-to-all is next), then our
# local attention's output (the three of q, k, v are next). One attention's backward finishes its
# q, k, v before the previous attention's output gradient is complete, so these never interleave.
_FWD: list[str] = []
_BWD = ["ulysses_out"]


def _tag() -> str:
    return _FWD[-1] if _FWD else _BWD[0]


def _set_bwd(tag: str):
    def hook(grad):
        _BWD[0] = tag
    return hook


_RECORDER: comm_external.record_external_all_to_all | None = None


def init_deepspeed() -> None:
    """Import DeepSpeed and set its comm up on our (already initialised) process group; once per process."""
    global _RECORDER
    if _RECORDER is not None:
        return
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")   # else a warning, and the same choice
    import deepspeed
    import deepspeed.comm as ds_comm
    from deepspeed.accelerator import get_accelerator
    if get_accelerator().device_name() == "cpu":
        # On the CPU accelerator init JIT-builds a shared-memory allreduce op (1-2 minutes); its
        # all-to-all is torch.distributed's anyway.
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    if not ds_comm.is_initialized():
        if not comm.is_initialized():
            raise RuntimeError(f"{NAME} needs an initialised process group (comm.init) before parallelize")
        deepspeed.init_distributed(dist_backend=comm.backend_name(), verbose=False)
    recorder = comm_external.record_external_all_to_all(ds_comm, _tag)
    recorder.__enter__()   # kept for the process: DeepSpeed's backward calls in from the autograd engine
    _RECORDER = recorder


class _MarkedLocal(nn.Module):
    """Our local attention; marks where DistributedAttention turns from q, k, v to the output."""

    def __init__(self, local: nn.Module):
        super().__init__()
        self.local = local

    def forward(self, q, k, v, joint=None, group=None, text_out=None, kmask=None):
        if joint is None:
            o = self.local(q, k, v, kmask=kmask)
        else:   # this rank's text heads join; the text output leaves through `text_out`
            o, ot = self.local(q, k, v, joint=joint_heads(joint, group), kmask=kmask)
            text_out.append(ot)
        _FWD[-1] = "ulysses_out"
        if o.requires_grad:   # backward: its gradient is here, q, k, v go back next
            o.register_hook(_set_bwd("ulysses_qkv"))
        return o


class DeepSpeedUlyssesAttention(nn.Module):
    """DeepSpeed's DistributedAttention on q, k, v `(B', L/N, H, D)` -> `(B', L/N, H, D)`, or, with
    `gather_dim=0` (B': `ulysses_all`'s attention over an unsharded dim), on `(B'/N, L, H, D)`."""

    def __init__(self, local: nn.Module, group, gather_dim: int = L_DIM):
        super().__init__()
        init_deepspeed()
        from deepspeed.sequence.layer import DistributedAttention
        # Batch-first (batch_dim_idx=0): scatter the heads, gather the sequence; back the other way.
        # Gathering B' instead: DeepSpeed's sequence-first layout (batch_dim_idx=1) reads dim 0 as
        # its sequence, so it scatters the heads and gathers B', rank-major, as our all-to-all does.
        self.batch_dim_idx = 0 if gather_dim == L_DIM else 1
        self.dist_attn = DistributedAttention(_MarkedLocal(local), group, scatter_idx=H_DIM, gather_idx=gather_dim)
        self.group = group

    def forward(self, q, k, v, joint=None, kmask=None):
        _FWD.append("ulysses_qkv")
        text_out: list = []
        # Padded keys (methods/padding.py): gathering L gathers every rank's key mask too.
        mask = None if kmask is None else kmask.gathered(self.group) if self.batch_dim_idx == 0 else kmask
        try:
            if joint is None:
                o = self.dist_attn(q, k, v, self.batch_dim_idx, kmask=mask)
            else:   # joint text only where the attended dim is gathered (full3d)
                assert self.batch_dim_idx == 0, "joint text needs gather_dim == L"
                o = self.dist_attn(q, k, v, 0, None, joint=joint, group=self.group, text_out=text_out, kmask=mask)
        finally:
            _FWD.pop()
        if o.requires_grad:   # backward: the output's all-to-all goes back first
            o.register_hook(_set_bwd("ulysses_out"))
        return o if joint is None else (o, gather_heads(text_out[0], self.group, "ulysses_joint_out"))  # None: K, V only


def _check(cfg, shape, dims):
    # DeepSpeed itself is `requires` (the target's stack, or what `run` finds installed)
    return heads_divisible(cfg, dims.sp, NAME) or shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    # at sp 1 nothing to distribute (and DeepSpeed's comm needs a process group): the local kernel stays
    return embed_attention(model, dims, lambda attn: attn.inner if dims.sp == 1
                           else DeepSpeedUlyssesAttention(attn.inner, dims.sp_group))


METHOD = MethodSpec(
    name=NAME, summary="DeepSpeed's own DistributedAttention (Ulysses) inside attention over the sharded dim",
    constraints="deepspeed in the stack, heads % sp == 0 and the sharded dim % sp == 0",
    check=_check, parallelize=_parallelize, forward_ops=forward_ops, requires=("deepspeed",),
    trace_as="ulysses",   # DeepSpeed's switch is ours: the trace runs ours (DeepSpeed's own layout copies uncounted)
    report=Look(label="DeepSpeed-Ulysses", colour="#56B4E9", order=50, table3=Table3("4M/N", 4, per_n=True)),
    splits_heads=True,
)
