"""torch's native context parallel (torch.distributed.tensor.experimental, what torchtitan uses)
at the inner-attention seam: torch's own code moves K and V, dspbench only shards the sequence.

Shard one sequence dim; inside attention over it q, k, v become DTensors sharded on the sequence
and SDPA runs through torch's context-parallel dispatcher (methods/comm/dtensor.py, which records
its functional collectives). Default rotate method (all-gather): forward, K and V all-gathered
(2M per attention, paper convention, as `allgather_kv`). Backward (CUDA only, see below): K and V
all-gathered again, and the dK, dV accumulators (fp32) passed one rank on N times by
`permute_tensor`, as the ring's.

Where it runs (torch 2.13): the forward on CPU/gloo, where DTensor's sharding propagation
redistributes K and V to replicated (two all-gathers of M: the same bytes as CUDA's one of 2M);
the backward only on CUDA, since `aten._scaled_dot_product_flash_attention_for_cpu_backward` has
no sharding strategy. `check_run` says so. The CUDA backward's formula is read from torch's
`_templated_ring_attention_backward`, not yet measured on a GPU.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from dspbench.methods.comm.dtensor import TorchContextParallelAttention, context_parallel_error
from dspbench.methods.common import act_bytes, embed_attention, n_attn, shard_divisible
from dspbench.methods.spec import Look, MethodSpec, Op, Table3

NO_KEY_MASK = ("torch's context-parallel SDPA takes no key mask here (use allgather_kv, its algorithm in our "
               "code, or a shape the degree divides)")
NAME = "torch_cp"
TAGS = {"all_gather": "torch_cp_kv", "send_recv": "torch_cp_dkv", "all_to_all": "torch_cp_a2a"}


class _Local(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v))).transpose(1, 2)


def _check(cfg, shape, dims):
    if cfg.joint:
        return (f"{NAME}: torch's context-parallel SDPA takes no extra keys and values, so joint text "
                "(full3d text_mode joint) cannot join its attention: use ring, usp or allgather_kv")
    why = context_parallel_error()
    if why:
        return f"{NAME} needs torch.distributed.tensor.experimental's context parallel (torch >= 2.7): {why}"
    return shard_divisible(cfg, shape, dims)


def _check_run(dtype: str, mode: str, backend: str) -> str | None:
    if mode == "train" and backend != "nccl":
        return (f"{NAME}: torch's context parallel has no CPU backward (aten._scaled_dot_product_flash_attention_"
                "for_cpu_backward has no sharding strategy in torch 2.13): train on CUDA (nccl), or run infer/sample")
    return None


def _parallelize(model, dims):
    return embed_attention(model, dims, lambda attn: TorchContextParallelAttention(dims.sp_group, TAGS) if dims.sp > 1 else _Local())


def _forward_ops(cfg, shape, dims, b):
    # nccl-tests size of an all-gather is its output: the full K and V, 2M per attention.
    return [Op(TAGS["all_gather"], "all_gather", 2 * act_bytes(cfg, shape, b), n_attn(cfg, dims.shard))]


def _backward_ops(cfg, shape, dims, b):
    dkv = 2 * act_bytes(cfg, shape, 4) // dims.sp    # this rank's dK, dV accumulators, fp32
    return [Op(TAGS["all_gather"], "all_gather", 2 * act_bytes(cfg, shape, b), n_attn(cfg, dims.shard)),
            Op(TAGS["send_recv"], "send_recv", dkv, dims.sp * n_attn(cfg, dims.shard))]


METHOD = MethodSpec(
    name=NAME, summary="torch's context_parallel (DTensor SDPA, all-gather rotation) inside attention over the "
                       "sharded dim",
    constraints="torch >= 2.7; the sharded dim % sp == 0; training on CUDA only (torch 2.13: no CPU backward)",
    check=_check, parallelize=_parallelize, forward_ops=_forward_ops, backward_ops=_backward_ops,
    check_run=_check_run, no_key_mask=NO_KEY_MASK,
    # Table 3: not in the paper, its convention (whole tensors moved per device)
    report=Look(label="torch context_parallel", colour="#332288", order=90, table3=Table3("2M", 2)),
)
