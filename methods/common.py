"""Pieces shared by several methods: sequence split/gather at the model's seams, gradient sync."""
from __future__ import annotations

import torch
from torch import nn

from dspbench.models.config import ModelConfig, Shape
from dspbench.models.layers import AxisAttention
from dspbench.methods.comm import layer as comm
from dspbench.methods.dims import Dims

SHARDED = "_dspbench_shard"   # attribute on parameters a method shards (not replicated over SP)


def shard_sequence(model: nn.Module, dim: int, group) -> None:
    """Split the token grid along `dim` where it enters the blocks; gather it where it leaves."""
    model.seq_enter.register_forward_hook(lambda m, args, out: comm.split(out, dim, group))
    model.seq_exit.register_forward_hook(lambda m, args, out: comm.gather(out, dim, group, "seq_gather"))


def attentions(model: nn.Module, axis: int | None = None):
    """Self-attention seams, optionally only those attending over activation dim `axis` (full3d: over all)."""
    return [m for m in model.modules() if isinstance(m, AxisAttention) and (axis is None or axis in m.axes)]


def embed_attention(model: nn.Module, dims: Dims, inner_for, every: bool = False) -> nn.Module:
    """The embedded methods' seam: the sequence sharded on `dims.shard_dim` from the blocks' entry
    to their exit, and each self-attention over that dim (`every`: each one) given the method's
    inner attention `inner_for(attn)`, which may wrap `attn.inner`, the local kernel."""
    shard_sequence(model, dims.shard_dim, dims.sp_group)
    for attn in attentions(model, axis=None if every else dims.shard_dim):
        attn.inner = inner_for(attn)
    return model


def is_sharded(p: torch.Tensor) -> bool:
    return getattr(p, SHARDED, None) is not None


@torch.no_grad()
def sync_replicated_grads(model: nn.Module, dims: Dims) -> None:
    """Sum the partial gradients of SP-replicated parameters over the SP group, in one buffer.

    Each SP rank saw only its shard of the tokens, so its gradient of a replicated parameter is a
    partial sum; one all-reduce restores the full gradient. Parameters a method shards (tensor
    parallelism) already hold complete gradients of their shard and are skipped.
    """
    grads = [p.grad for p in model.parameters() if p.grad is not None and not is_sharded(p)]
    _all_reduce_coalesced(grads, dims.sp_group, "grad_sync", average=False)


@torch.no_grad()
def sync_data_parallel_grads(model: nn.Module, dims: Dims) -> None:
    """Average all gradients over the DP group (each DP rank saw a different micro-batch)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    _all_reduce_coalesced(grads, dims.dp_group, "dp_grad_sync", average=True)


def _all_reduce_coalesced(grads, group, tag: str, average: bool) -> None:
    if not grads or comm.size(group) == 1:
        return
    for dtype in sorted({g.dtype for g in grads}, key=str):
        same = [g for g in grads if g.dtype == dtype]
        flat = torch.cat([g.reshape(-1) for g in same])
        comm.all_reduce_(flat, group, tag, average=average)
        off = 0
        for g in same:
            g.copy_(flat[off:off + g.numel()].view_as(g))
            off += g.numel()


# ---------------------------------------------------------------- analytic helpers
def act_bytes(cfg: ModelConfig, shape: Shape, dtype_bytes: int, width: int | None = None) -> int:
    """Bytes of one full activation (B, T, S, width) of the block stack (M in the paper)."""
    return shape.batch * shape.tokens * (width or cfg.hidden) * dtype_bytes


def text_bytes(cfg: ModelConfig, shape: Shape, dtype_bytes: int) -> int:
    """Bytes of the text stream (B, Ly, C): what joint attention gathers per attention."""
    return shape.batch * cfg.text_len * cfg.hidden * dtype_bytes


def out_bytes(cfg: ModelConfig, shape: Shape, dtype_bytes: int) -> int:
    """Bytes of the final layer's output tokens (what the exit gather moves)."""
    return act_bytes(cfg, shape, dtype_bytes, cfg.patch_volume * cfg.out_channels)


def seq_dims_divisible(shape: Shape, n: int, which: str) -> str | None:
    h, w = shape.token_hw
    ext = {"T": shape.frames, "S": shape.spatial, "H": h, "W": w}[which]
    if ext % n:
        name = {"T": "frames T", "S": "spatial tokens S", "H": "token rows H", "W": "token columns W"}[which]
        return f"{name}={ext} is not divisible by the SP degree {n}"
    return None


def shard_divisible(cfg: ModelConfig, shape: Shape, dims: Dims) -> str | None:
    """Embedded methods shard `dims.shard`: it must be a sequence dim of this model, divisible by sp."""
    if dims.shard not in cfg.seq_dims:
        return f"shard={dims.shard} is not a sequence dim of {cfg.layout} ({', '.join(cfg.seq_dims)})"
    return seq_dims_divisible(shape, dims.sp, dims.shard)


def heads_divisible(cfg: ModelConfig, n: int, method: str) -> str | None:
    if cfg.heads % n:
        return f"{method} splits attention heads: heads={cfg.heads} is not divisible by the SP degree {n}"
    return None


def n_attn(cfg: ModelConfig, dim: str = "T") -> int:
    """Self-attentions that attend over sequence dim `dim` in the whole model: `depth` of each kind
    whose span holds it (one kind for stdit, axial3d, full3d; hybrid3d: the factorized one and the full one)."""
    return cfg.stack_depth * sum(dim in span for span in cfg.attn_spans)
