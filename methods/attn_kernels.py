"""Block attention kernels that return the log-sum-exp, the contract a ring needs.

Layout (B, H, L, D). `block_forward` returns (out, lse, aux) with lse (B, H, L) in fp32 and aux what
the kernel's backward needs of its own forward besides out and lse (CUDA flash: the cumulative sequence
lengths, max lengths and RNG state, exactly as returned; () elsewhere). `block_backward` takes the
*final* (merged) out and lse of the whole ring plus the block's aux, which makes each block's dq, dk,
dv the exact partial gradients (flash-attention's backward, see ring-flash-attention's ring_flash_attn.py).
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
    # meta: the cost model's trace of one rank (bench/cost/rank_trace.py) sees the kernel a GPU runs
    if q.device.type == "meta":
        return True
    return q.device.type == "cuda" and q.dtype in (torch.bfloat16, torch.float16) and q.shape[-1] <= 256


def block_forward(q, k, v, scale: float):
    if fa.use_flash_attn(q):
        return (*fa.block_forward(q, k, v, scale), ())
    if _cuda_flash(q):
        # (out, lse, cum_seq_q, cum_seq_k, max_q, max_k, rng_state, unused, debug_mask). The backward
        # takes cum_seq_q .. unused back as they came: for dense input cum_seq_* are undefined (None),
        # and a defined tensor there, even an empty one, sends the backward down its varlen path.
        res = aten._scaled_dot_product_flash_attention(q, k, v, 0.0, False, False, scale=scale)
        return res[0], res[1].float(), tuple(res[2:8])
    if q.device.type == "cpu":
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, scale=scale)
        return out, lse.float(), ()
    return (*_reference_forward(q, k, v, scale), ())


def block_backward(dout, q, k, v, out, lse, scale: float, aux: tuple = ()):
    if fa.use_flash_attn(q):
        return fa.block_backward(dout, q, k, v, out, lse, scale)
    if _cuda_flash(q):
        if len(aux) != 6:
            raise ValueError("the CUDA flash backward needs its forward's aux (block_forward's third result)")
        cum_q, cum_k, max_q, max_k, rng_state, unused = aux
        return aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, 0.0, False, rng_state, unused, scale=scale)
    if q.device.type == "cpu":
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, False,
                                                                         scale=scale)
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


def describe(device: torch.device, dtype: torch.dtype, heads: int, head_dim: int, tokens: int = 64) -> dict:
    """Which attention kernels a run uses, for the record: the SDPA backend torch picks for the
    model's (non-ring) attention at this device, dtype and head size (torch's own dispatcher,
    asked on a probe of that shape), and the ring's block kernel (this module's choice)."""
    q = torch.zeros(1, heads, tokens, head_dim, device=device, dtype=dtype)
    try:
        from torch.nn.attention import SDPBackend
        sdpa = SDPBackend(torch._fused_sdp_choice(q, q, q)).name.lower()
    except (AttributeError, RuntimeError, ValueError) as e:   # a torch without the dispatcher's probe
        sdpa = f"unknown ({type(e).__name__})"
    if fa.use_flash_attn(q):
        ring = f"flash_attn {_fa_version()}".strip()
    elif q.device.type == "cpu":
        ring = "torch flash (CPU)"
    elif _cuda_flash(q):
        ring = "torch flash (CUDA)"
    else:
        ring = "fp32 reference (materialised scores)"
    return {"sdpa": sdpa, "ring_block": ring}


def _fa_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("flash-attn")
    except PackageNotFoundError:
        return ""
