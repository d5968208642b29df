"""ring-flash-attn's own ring (`ring_flash_attn_func`, zhuzilin/ring-flash-attention) at the
inner-attention seam: the algorithm and traffic of `ring`, in the library's code.

Shard one sequence dim; inside attention over it the library passes K, V around the SP ring
(N-1 exchanges forward, N-1 backward) and the dK, dV accumulators in fp32 (N exchanges), posting
`batch_isend_irecv` itself. `comm_external.record_ring_flash_attn` puts those exchanges in the
ledger with the ring's tags, so `ring`'s formula holds for it byte for byte.

Needs flash-attn (CUDA) and transformers, which `import ring_flash_attn` pulls in; on CPU the
tests import it against a stand-in of flash-attn's private API (tests/fake_flash_attn.py).
Known defects of 0.1.8 (tests/test_ring_flash.py asserts them as strict xfails): in fp32 its
backward's `.to(torch.float32)` aliases the per-block dq buffer the next block overwrites
(gradients wrong by O(1)), and it returns dq as bf16 whatever the input dtype (fp16 loses
mantissa). So training is supported in bf16 only; the forward is right in every dtype.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from dspbench.methods.comm import external as comm_external, layer as comm
from dspbench.methods.common import embed_attention, shard_divisible
from dspbench.methods.ring import backward_ops, forward_ops
from dspbench.methods.spec import Look, MethodSpec, Table3

NO_KEY_MASK = ("ring-flash-attn's ring_flash_attn_func takes no key mask (use ring, its algorithm in our code, "
               "or a shape the degree divides)")
NAME = "ring_flash"


def _library():
    import ring_flash_attn
    import ring_flash_attn.ring_flash_attn as module
    comm_external.record_ring_flash_attn(module, "ring_kv", "ring_dkv")
    return ring_flash_attn


class RingFlashAttention(nn.Module):
    """Drop-in for LocalAttention: q, k, v (B', L/N, H, D) -> (B', L/N, H, D), flash-attn's layout."""

    def __init__(self, group):
        super().__init__()
        self.group = group
        self.func = _library().ring_flash_attn_func

    def forward(self, q, k, v):
        if comm.size(self.group) == 1:   # the library would send to itself
            return F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)
        return self.func(q.contiguous(), k, v, causal=False, group=self.group)


def _check(cfg, shape, dims):
    if cfg.joint:
        return (f"{NAME}: ring-flash-attn's ring_flash_attn_func takes no extra keys and values, so joint text "
                "(full3d text_mode joint) cannot join its attention: use ring, usp or allgather_kv")
    # whether the library imports is `requires` (the target's stack), not a constraint of the shape
    return shard_divisible(cfg, shape, dims)


def _check_run(dtype: str, mode: str, backend: str) -> str | None:
    if mode == "train" and dtype != "bf16":
        return (f"{NAME}: ring-flash-attn 0.1.8's backward is wrong in {dtype} (fp32: dq aliases the per-block "
                "buffer, O(1) error; dq always returned as bf16): train in bf16, or run infer/sample")
    return None


def _parallelize(model, dims):
    return embed_attention(model, dims, lambda attn: RingFlashAttention(dims.sp_group))


METHOD = MethodSpec(
    name=NAME, summary="ring-flash-attn's ring_flash_attn_func inside attention over the sharded dim",
    constraints="flash-attn in the stack (ring-flash-attn, flash-attn, transformers); the sharded dim % sp == 0; "
                "training in bf16 only",
    check=_check, parallelize=_parallelize, forward_ops=forward_ops, backward_ops=backward_ops,
    check_run=_check_run, no_key_mask=NO_KEY_MASK, requires=("flash-attn",),
    trace_as="ring",   # the library's ring is ours (forward_ops and backward_ops say so): its kernels, traced
    # the ring's hue, lighter: the library's ring beside ours; Table 3: not in the paper, its convention
    report=Look(label="ring-flash-attn", colour="#66C2A5", order=70, table3=Table3("2M", 2)),
)
