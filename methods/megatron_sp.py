"""Megatron-SP: tensor-parallel linears with sequence-parallel regions between them.

Outside attention and MLP the token grid is sharded on one sequence dim (norms, modulation,
residuals run on the shard). Every column-parallel linear all-gathers its input along that dim
(backward: reduce-scatter), every row-parallel linear reduce-scatters its partial output (backward:
all-gather). Heads and MLP channels are split N ways, so heads % N == 0. Text keys/values come
from replicated text tokens: `kv` is column-parallel without a gather.

Joint text (full3d, MMDiT): the text q, k, v come from replicated text tokens too (`text_qkv`
column-parallel without a gather), so each rank joins its H/N text heads to its H/N heads of the
gathered sequence. The text output (B, Ly, H/N*D) is all-gathered over its features before a
replicated `text_proj` (backward: reduce-scatter), which keeps the text stream whole on every rank.
A dual-stream block's text MLP (`TextMlp`) stays replicated. Where the text goes through the video's
own linears (CogVideoX's expert blocks, single-stream blocks' fused linears), the same sharded
weights serve it: a column-parallel linear takes the replicated text without a gather, and a
row-parallel one all-reduces the text's partial sums (`tp_text_reduce`) instead of reduce-scattering
them. The text stream is the one input of three dims (B, Ly, C); the token grid has four or more.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from dspbench.models.layers import AxisAttention, CrossAttention, Mlp
from dspbench.models.mmdit import TextMlp
from dspbench.models.single_stream import JointAttentionCore, SingleStreamBlock
from dspbench.methods.comm import layer as comm
from dspbench.methods.common import SHARDED, act_bytes, heads_divisible, shard_divisible, shard_sequence, text_bytes
from dspbench.methods.shards import ShardSpec, take_shard
from dspbench.methods.spec import Look, MethodSpec, Op, Table3


def _sharded_param(full: torch.Tensor, spec: ShardSpec) -> nn.Parameter:
    p = nn.Parameter(take_shard(full.detach(), spec).clone())
    setattr(p, SHARDED, spec)
    return p


TEXT_DIMS = 3   # the text stream (B, Ly, C); the token grid (B, T, S, C) or (B, T, H, W, C) has more


class ColumnParallelLinear(nn.Module):
    """Output features split N ways (per fused chunk: q|k|v keep their head order)."""

    def __init__(self, lin: nn.Linear, chunks: int, dims, gather: bool, regather: bool = False):
        super().__init__()
        spec = ShardSpec(dim=0, chunks=chunks, index=comm.rank(dims.sp_group), parts=dims.sp)
        self.weight = _sharded_param(lin.weight, spec)
        self.bias = _sharded_param(lin.bias, spec)
        self.gather, self.dim, self.group = gather, dims.shard_dim, dims.sp_group
        self.regather = regather and gather

    def forward(self, x):
        if x.dim() == TEXT_DIMS:   # the replicated text stream: whole already
            return F.linear(x, self.weight, self.bias)
        if self.regather:       # megatron_lm: keep the shard, gather again in the backward
            return comm.gather_linear_regather(x, self.weight, self.bias, self.dim, self.group, "tp_gather",
                                               "tp_regather")
        if self.gather:
            x = comm.gather_from_seq(x, self.dim, self.group, "tp_gather")   # (.., L/N, ..) -> (.., L, ..)
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """Input features split N ways; partial sums reduce-scattered back to the sequence shard."""

    def __init__(self, lin: nn.Linear, dims, chunks: int | tuple = 1):
        super().__init__()
        spec = ShardSpec(dim=1, chunks=chunks, index=comm.rank(dims.sp_group), parts=dims.sp)
        self.weight = _sharded_param(lin.weight, spec)
        self.bias = nn.Parameter(lin.bias.detach().clone())   # replicated: added once, after the sum
        self.dim, self.group = dims.shard_dim, dims.sp_group

    def forward(self, x):
        if x.dim() == TEXT_DIMS:   # the replicated text stream: every rank needs the whole sum
            return comm.sum_replicated(F.linear(x, self.weight), self.group, "tp_text_reduce") + self.bias
        y = comm.reduce_scatter_to_seq(F.linear(x, self.weight), self.dim, self.group, "tp_scatter")
        return y + self.bias


class GatheredInputLinear(nn.Module):
    """A replicated linear whose input arrives split over features: all-gather them first."""

    def __init__(self, lin: nn.Linear, dims):
        super().__init__()
        self.weight, self.bias, self.group = lin.weight, lin.bias, dims.sp_group   # replicated, as they were

    def forward(self, x):
        return F.linear(comm.gather_from_seq(x, x.dim() - 1, self.group, "tp_text_gather"), self.weight, self.bias)


def _plan(mod: nn.Module):
    """Tensor-parallel plan by seam type: (linear name, kind, fused chunks or their sizes)."""
    if isinstance(mod, SingleStreamBlock):   # q|k|v|MLP in, attention|MLP out
        C, Fh = mod.widths[0], mod.widths[3]
        return [("linear1", "col", mod.widths), ("linear2", "row", (C, Fh))]
    if isinstance(mod, (JointAttentionCore, TextMlp)):   # no linears of its own; replicated
        return []
    if isinstance(mod, AxisAttention):
        text = {"qkv": [("text_qkv", "col_replicated", 3), ("text_proj", "gather_in", 1)],
                "kv": [("text_kv", "col_replicated", 2)]}.get(getattr(mod, "text", None), [])
        return [("qkv", "col", 3), ("proj", "row", 1)] + text
    if isinstance(mod, CrossAttention):
        return [("q", "col", 1), ("kv", "col_replicated", 2), ("proj", "row", 1)]
    if isinstance(mod, Mlp):
        return [("fc1", "col", 1), ("fc2", "row", 1)]
    return []


def _parallelize(model, dims, regather: bool = False):
    shard_sequence(model, dims.shard_dim, dims.sp_group)
    for mod in list(model.modules()):
        for name, kind, chunks in _plan(mod):
            lin = getattr(mod, name)
            if kind == "gather_in":
                new = GatheredInputLinear(lin, dims)
            elif kind == "row":
                new = RowParallelLinear(lin, dims, chunks)
            else:
                new = ColumnParallelLinear(lin, chunks, dims, gather=(kind == "col"), regather=regather)
            setattr(mod, name, new)
    return model


def tp_check(name: str):
    """The check of a method that splits heads as Megatron-SP does; its reasons name `name`."""
    return lambda cfg, shape, dims: heads_divisible(cfg, dims.sp, name) or shard_divisible(cfg, shape, dims)


_check = tp_check("megatron_sp")


def _forward_ops(cfg, shape, dims, b):
    regions = gathered_inputs(cfg)        # self-attentions, cross-attentions, MLPs (single blocks: one)
    M = act_bytes(cfg, shape, b)           # full activation: the gathered output / scattered input
    text = text_bytes(cfg, shape, b)
    return [Op("tp_gather", "all_gather", M, regions), Op("tp_scatter", "reduce_scatter", M, regions),
            Op("tp_text_gather", "all_gather", text, text_proj_gathers(cfg)),
            Op("tp_text_reduce", "all_reduce", text, text_reduces(cfg))]


def text_proj_gathers(cfg):
    """Replicated text output projections (`text_proj`) whose input is gathered over features."""
    return cfg.n_joint_text_out if cfg.text_stream in ("attention", "dual") else 0


def text_reduces(cfg):
    """Row-parallel linears the text goes through itself: an expert block's output projection and
    MLP, a single-stream block's fused output (where the text continues)."""
    expert = 2 * cfg.n_joint_text_out if cfg.text_stream == "expert" else 0
    return expert + cfg.n_text_out - cfg.n_joint_text_out


def gathered_inputs(cfg):
    """Column-parallel linears that gather their input, over the block stack (the forward's tp_gather
    count): autograd keeps each gathered input, full length, for the weight gradient. Megatron-LM
    instead keeps the shard and gathers again in the backward, one more all-gather per linear
    (methods/megatron_lm.py); this method moves the paper's bytes and pays in memory
    (bench/cost/memory.py). A single-stream block has one: its fused linear feeds attention and MLP."""
    return cfg.n_self_attn + cfg.n_cross_attn + cfg.n_blocks - cfg.single_depth


def _sharded_params(cfg):
    C, Fh, Ct = cfg.hidden, cfg.mlp_hidden, cfg.text_width
    self_attn = (3 * C * C + 3 * C) + C * C
    cross = (C * C + C) + (2 * C * C + 2 * C) + C * C
    mlp = (C * Fh + Fh) + Fh * C
    single = C * (3 * C + Fh) + 3 * C + Fh + (C + Fh) * C   # linear1 whole, linear2 without its bias
    fused = cfg.single_depth   # single-stream blocks: their attention and MLP share two fused linears
    return ((cfg.n_self_attn - fused) * self_attn + cfg.n_cross_attn * cross + (cfg.n_blocks - fused) * mlp
            + fused * single + _text_sharded(cfg, C, Ct))


def _text_sharded(cfg, C, Ct):
    """The text's own column-parallel q, k, v (`text_qkv`; the stack's last joint block: `text_kv`)."""
    if not cfg.joint or cfg.text_stream == "expert":
        return 0
    last_kv = cfg.single_depth == 0   # the last block is a joint one: text keys and values only
    return cfg.n_joint_text_out * (3 * C * Ct + 3 * C) + (2 * C * Ct + 2 * C if last_kv else 0)


METHOD = MethodSpec(
    name="megatron_sp", summary="tensor parallel + sequence parallel regions (AG before column, RS after row)",
    constraints="heads % sp == 0 and the sharded dim % sp == 0",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops, sharded_params=_sharded_params,
    unsharded_saved=gathered_inputs,
    report=Look(label="Megatron-SP", colour="#CC79A7", order=110, table3=Table3("8M", 8)),
    splits_heads=True,
)
