"""Ring Attention: shard one sequence dim; K and V travel around the SP ring.

Forward, N steps: attend q to the K, V block at hand while the next block is already in flight
(batch_isend_irecv), merging partial outputs by log-sum-exp in fp32 (N-1 exchanges of K, V).
Backward, N steps: K, V go around again (N-1 exchanges) and each block's dK, dV accumulator
travels with it in fp32 and makes one last hop home (N exchanges). Any head count.
Padded keys (methods/padding.py): each block is attended on its real keys only, and a block of pads
only is skipped (still passed on: the bytes stay those of padded M).

Joint text (full3d, MMDiT): the text q, k, v are replicated, so the text keys and values are one
more local block every rank attends to (no exchange), and the text queries join the local queries:
every rank sees every K, V block, so each computes the whole text output itself. Nothing more moves.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd import Function

from dspbench.models.layers import LocalAttention
from dspbench.methods.comm import async_ops as comm_async, layer as comm
from dspbench.methods.attn_kernels import block_backward, block_forward
from dspbench.methods.common import act_bytes, embed_attention, n_attn, shard_divisible
from dspbench.methods.spec import Look, MethodSpec, Op, Table3

KV_TAG, DKV_TAG = 1, 2   # P2P message tags: the K,V and dK,dV streams between the same peers


def _block_forward(q, k, v, scale, idx):
    """block_forward on the block's real keys (idx: their indices, None: all real); None if it has none."""
    if idx is None:
        return block_forward(q, k, v, scale)
    if idx.numel() == 0:
        return None
    return block_forward(q, k.index_select(2, idx), v.index_select(2, idx), scale)


def _block_backward(dout, q, k, v, out, lse, scale, aux, idx):
    """block_backward on the block's real keys; padded keys get zero dK, dV."""
    if idx is None:
        return block_backward(dout, q, k, v, out, lse, scale, aux)
    if idx.numel() == 0:
        return None, torch.zeros_like(k), torch.zeros_like(v)
    dq, dk_r, dv_r = block_backward(dout, q, k.index_select(2, idx), v.index_select(2, idx), out, lse, scale, aux)
    return dq, torch.zeros_like(k).index_copy_(2, idx, dk_r), torch.zeros_like(v).index_copy_(2, idx, dv_r)


def merge_partial(out, lse, blk_out, blk_lse):
    """Log-sum-exp merge of two partial softmax attentions, in fp32."""
    new_lse = torch.logaddexp(lse, blk_lse)
    out = out * torch.exp(lse - new_lse)[..., None] + blk_out.float() * torch.exp(blk_lse - new_lse)[..., None]
    return out, new_lse


class _RingAttention(Function):
    @staticmethod
    def forward(ctx, q, k, v, kt, vt, group, masks):
        ring, n = comm_async.RingExchange(group), comm.size(group)
        scale = q.shape[-1] ** -0.5
        kv = [k, v]
        out = lse = None
        auxes = []   # per block, what its kernel's backward needs of the forward (CUDA flash)
        text_aux = None
        if kt is not None:   # the replicated text block, local on every rank
            blk_out, lse, text_aux = block_forward(q, kt, vt, scale)
            out = blk_out.float()
        for step in range(n):
            pending = ring.start(kv, "ring_kv", KV_TAG) if step < n - 1 else None
            res = _block_forward(q, kv[0], kv[1], scale, masks[step])
            auxes.append(None if res is None else res[2])
            if res is not None:   # a block of padded keys only adds nothing (and is still passed on)
                blk_out, blk_lse, _ = res
                out, lse = (blk_out.float(), blk_lse) if out is None else merge_partial(out, lse, blk_out, blk_lse)
            if pending is not None:
                kv = pending.wait()
        out = out.to(q.dtype)
        ctx.save_for_backward(q, k, v, kt, vt, out, lse)
        ctx.group, ctx.scale, ctx.auxes, ctx.text_aux, ctx.masks = group, scale, auxes, text_aux, masks
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, kt, vt, out, lse = ctx.saved_tensors
        ring, n = comm_async.RingExchange(ctx.group), comm.size(ctx.group)
        dout = dout.contiguous()
        kv, dq, dkv = [k, v], torch.zeros_like(q, dtype=torch.float32), None
        dkt = dvt = None
        if kt is not None:   # the text block's dK, dV stay here: partial, summed with the replicated grads
            dq_b, dkt, dvt = block_backward(dout, q, kt, vt, out, lse, ctx.scale, ctx.text_aux)
            dq += dq_b
        for step in range(n):
            pending_kv = ring.start(kv, "ring_kv", KV_TAG) if step < n - 1 else None
            dq_b, dk_b, dv_b = _block_backward(dout, q, kv[0], kv[1], out, lse, ctx.scale, ctx.auxes[step],
                                               ctx.masks[step])
            if dq_b is not None:
                dq += dq_b
            if dkv is None:
                acc = [dk_b.float(), dv_b.float()]
            else:
                acc = [a + b for a, b in zip(dkv.wait(), (dk_b, dv_b))]
            # The accumulator of the block at hand follows that block to the next rank.
            dkv = ring.start(acc, "ring_dkv", DKV_TAG)
            if pending_kv is not None:
                kv = pending_kv.wait()
        dk, dv = dkv.wait()   # after N hops each accumulator is back with the block's owner
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dkt, dvt, None, None


class RingAttention(nn.Module):
    """Drop-in for LocalAttention: q, k, v (B', L/N, H, D) -> (B', L/N, H, D); `joint` as LocalAttention.
    `kmask` (methods/padding.KeyMask): the block each step holds is masked by its owner's key mask."""

    def __init__(self, group):
        super().__init__()
        self.group = group

    def forward(self, q, k, v, joint=None, kmask=None):
        if comm.size(self.group) == 1:   # a ring of one is plain attention (no P2P to oneself)
            return LocalAttention()(q, k, v, joint=joint, kmask=kmask)
        n = comm.size(self.group)
        masks = [None if kmask is None else kmask.from_peer(self.group, s).real(q.device) for s in range(n)]
        L = q.shape[1]
        kt = vt = None
        if joint is not None:   # text queries join the local ones; text K, V are a local block
            q = q if joint[0] is None else torch.cat([q, joint[0]], dim=1)
            kt, vt = (t.transpose(1, 2).contiguous() for t in joint[1:])
        # Kernels want (B', H, L, D) contiguous.
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        o = _RingAttention.apply(q, k, v, kt, vt, self.group, masks).transpose(1, 2)
        return o if joint is None else (o[:, :L], None if joint[0] is None else o[:, L:])


def _check(cfg, shape, dims):
    return shard_divisible(cfg, shape, dims)


def _parallelize(model, dims):
    return embed_attention(model, dims, lambda attn: RingAttention(dims.sp_group))


def _kv(cfg, shape, dims, b):
    return 2 * act_bytes(cfg, shape, b) // dims.sp    # this rank's K and V blocks


def forward_ops(cfg, shape, dims, b):
    return [Op("ring_kv", "send_recv", _kv(cfg, shape, dims, b), (dims.sp - 1) * n_attn(cfg, dims.shard))]


def backward_ops(cfg, shape, dims, b):
    return [Op("ring_kv", "send_recv", _kv(cfg, shape, dims, b), (dims.sp - 1) * n_attn(cfg, dims.shard)),
            Op("ring_dkv", "send_recv", _kv(cfg, shape, dims, 4), dims.sp * n_attn(cfg, dims.shard))]


METHOD = MethodSpec(
    name="ring", summary="K/V ring passing with log-sum-exp merge inside attention over the sharded dim",
    constraints="the sharded dim % sp == 0; any head count",
    check=_check, parallelize=_parallelize, forward_ops=forward_ops, backward_ops=backward_ops,
    report=Look(label="Ring Attention", colour="#009E73", order=60, table3=Table3("2M", 2)),
)
