"""Block attention kernels that return the log-sum-exp, the contract a ring needs.

Layout (B, H, L, D). `block_forward` returns (out, lse) with lse (B, H, L) in fp32; `block_backward`
takes the *final* (merged) out and lse of the whole ring, which makes each block's dq, dk, dv the
exact partial gradients (flash-attention's backward, see ring-flash-attention's ring_flash_attn.py).
- CPU: torch's flash kernel for CPU (any float dtype).
- CUDA, bf16/fp16: torch's flash-attention kernel (`_scaled_dot_product_flash_attention`).
- otherwise (CUDA fp32, other devices): an fp32 reference that materialises the L x L scores.
- Dao-AILab flash-attn, when installed, takes over on CUDA in bf16/fp16
  (methods/flash_attn_kernels.py; DSPBENCH_ATTN_KERNEL=auto|flash_attn|torch).
"""
from __future__ import annotations

import torch

from dspbench.methods import flash_attn_kernels as fa

aten = torch.ops.aten


def _cuda_flash(q) -> bool:
    return q.device.type == "cuda" and q.dtype in (torch.bfloat16, torch.float16) and q.shape[-1] <= 256


def block_forward(q, k, v, scale: float):
    if fa.use_flash_attn(q):
        return fa.block_forward(q, k, v, scale)
    if q.device.type == "cpu":
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, scale=scale)
        return out, lse.float()
    if _cuda_flash(q):
        out, lse = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)[:2]
        return out, lse.float()
    return _reference_forward(q, k, v, scale)


def block_backward(dout, q, k, v, out, lse, scale: float):
    if fa.use_flash_attn(q):
        return fa.block_backward(dout, q, k, v, out, lse, scale)
    if q.device.type == "cpu":
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, False,
                                                                         scale=scale)
    if _cuda_flash(q):
        L, S = q.shape[-2], k.shape[-2]
        cum = torch.empty(0, dtype=torch.int32, device=q.device)   # unused for dense (non-varlen) input
        seed = offset = torch.empty((), dtype=torch.int64, device=q.device)
        return aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse, cum, cum, L, S, 0.0, False, seed, offset, scale=scale)
    return _reference_backward(dout, q, k, v, out, lse, scale)


def _reference_forward(q, k, v, scale):
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    lse = torch.logsumexp(s, dim=-1)
    out = torch.matmul(torch.exp(s - lse[..., None]), v.float())
    return out.to(q.dtype), lse


def _reference_backward(dout, q, k, v, out, lse, scale):
    qf, kf, vf, do = q.float(), k.float(), v.float(), dout.float()
    p = torch.exp(torch.matmul(qf, kf.transpose(-1, -2)) * scale - lse[..., None])
    dv = torch.matmul(p.transpose(-1, -2), do)
    dp = torch.matmul(do, vf.transpose(-1, -2))
    ds = p * (dp - (do * out.float()).sum(-1, keepdim=True))
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-1, -2), qf) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
