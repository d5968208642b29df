"""Rank-side tasks of tests/test_ring_flash.py: ring-flash-attn's real algorithm on gloo, through
the CPU stand-in of flash-attn (fake_flash_attn.import_ring_flash_attn), against our oracle, our
ring and our allgather_kv."""
from __future__ import annotations

import torch

import fake_flash_attn
import oracle_tasks as ot
from dspbench.methods import get_method
from dspbench.methods.comm import layer as comm
from dspbench.methods.allgather_kv import AllGatherKVAttention
from dspbench.methods.ring import RingAttention
from dspbench.methods.ring_flash import RingFlashAttention
from dspbench.models import Shape, get_config
from dspbench.models.layers import LocalAttention
from dspbench.run.oracle import oracle_errors

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def oracle_case(model: str, shape: tuple, sp: int, dtype: str = "fp32") -> dict:
    """ring_flash (in `dtype`) and the unsharded model (same dtype) against the fp32 oracle."""
    fake_flash_attn.import_ring_flash_attn()
    cfg, shape, dims = get_config(model), Shape(*shape), ot.dims_for(sp)
    spec = get_method("ring_flash")
    reason = spec.check(cfg, shape, dims)
    if reason:
        return {"unsupported": reason}
    par = oracle_errors(spec, cfg, shape, dims, dtype=DTYPES[dtype], ref_dtype=torch.float32)
    one = oracle_errors(get_method("single"), cfg, shape, ot.dims_for(1), dtype=DTYPES[dtype],
                        ref_dtype=torch.float32)
    return {"method": par, "single": one}


def _qkv(seed: int, heads: int = 4, length: int = 32, head_dim: int = 16, dtype=torch.float32):
    """Full q, k, v (1, L, H, D), the same on every rank, and this rank's shards (leaf tensors)."""
    g = torch.Generator().manual_seed(seed)
    full = [torch.randn(1, length, heads, head_dim, generator=g).to(dtype) for _ in range(3)]
    dout = torch.randn(1, length, heads, head_dim, generator=g).to(dtype)
    n, r = comm.world_size(), comm.world_rank()
    shard = [t.chunk(n, 1)[r].clone().requires_grad_() for t in full]
    return full, shard, dout.chunk(n, 1)[r]


def _run(attn, shard, dout):
    out = attn(*shard)
    out.backward(dout)
    return [out.detach().float()] + [t.grad.float() for t in shard]


def _max_err(a, b):
    return max((x - y).abs().max().item() for x, y in zip(a, b))


def against_ring(dtype: str) -> dict:
    """Output and q, k, v gradients of ring-flash-attn's ring vs ours, same shards."""
    fake_flash_attn.import_ring_flash_attn()
    _, shard, dout = _qkv(0, dtype=DTYPES[dtype])
    lib = _run(RingFlashAttention(None), shard, dout)
    shard = [t.detach().clone().requires_grad_() for t in shard]
    ours = _run(RingAttention(None), shard, dout)
    names = ("out", "dq", "dk", "dv")
    return {"err": {n: (a - b).abs().max().item() for n, a, b in zip(names, lib, ours)},
            "scale": {n: b.abs().max().item() for n, b in zip(names, ours)}}


def dq_dtype(dtype: str) -> str:
    """The dtype of the dq that ring-flash-attn's backward returns for inputs of `dtype`."""
    rfa = fake_flash_attn.import_ring_flash_attn()
    _, (q, k, v), dout = _qkv(1, dtype=DTYPES[dtype])
    impl = rfa.ring_flash_attn.ring_flash_attn_backward.__wrapped__ if hasattr(
        rfa.ring_flash_attn.ring_flash_attn_backward, "__wrapped__") else rfa.ring_flash_attn.ring_flash_attn_backward
    out, lse = rfa.ring_flash_attn.ring_flash_attn_forward(None, q.detach(), k.detach(), v.detach(),
                                                           q.shape[-1] ** -0.5, causal=False)
    dq, _, _ = impl(None, dout, q.detach(), k.detach(), v.detach(), out, lse, q.shape[-1] ** -0.5, causal=False)
    return str(dq.dtype).replace("torch.", "")


def allgather_kv_against_llama3() -> float:
    """Our allgather_kv vs ring-flash-attn's llama3_flash_attn_varlen_func (one sequence, sharded
    contiguously, as Llama 3's context parallelism does), fp32: max error over out, dq, dk, dv."""
    rfa = fake_flash_attn.import_ring_flash_attn()
    _, shard, dout = _qkv(2)
    ours = _run(AllGatherKVAttention(LocalAttention(), None), shard, dout)
    n, r = comm.world_size(), comm.world_rank()
    length = shard[0].shape[1] * n
    cu = torch.tensor([0, length], dtype=torch.int32)
    cu_q, cu_k, max_q, max_k, kslice = rfa.llama3_flash_attn_prepare_cu_seqlens(cu, False, r, n)
    packed = [t.detach()[0].clone().requires_grad_() for t in shard]      # (L/N, H, D): varlen packing
    out = rfa.llama3_flash_attn_varlen_func(*packed, cu_q, cu_k, max_q, max_k, heads_k_stride=packed[1].shape[1],
                                            local_k_slice=kslice, causal=False)
    out.backward(dout[0])
    lib = [out.detach()[None]] + [t.grad[None] for t in packed]
    return _max_err(lib, ours)
