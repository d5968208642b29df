"""The comm layer's unrecorded band: collectives on the wire alone, for benchmarks and calibration.

No method may call these: they record nothing in the ledger (a ledger open around a benchmark sees
only the method's own switch) and have no autograd. Split from methods/comm/layer.py, the recorded
layer; together the two are the only modules that call torch.distributed (tests/test_comm.py).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from dspbench.methods.comm.layer import Group, list_all_to_all, size


# ---------------------------------------------------------------- the switch benchmark's baselines
def ref_all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group: Group) -> torch.Tensor:
    """The reference switch, as VideoSys/OpenDiT write it (comm.list_all_to_all, which `--a2a list`
    records): tensor_split, list all_to_all, cat."""
    return x if size(group) == 1 else list_all_to_all(x, scatter_dim, gather_dim, group)


def raw_all_to_all_single_(recv: torch.Tensor, send: torch.Tensor, group: Group) -> torch.Tensor:
    """all_to_all_single on caller-preallocated contiguous buffers: the wire alone, no copy, no alloc."""
    if size(group) > 1:
        dist.all_to_all_single(recv, send, group=group)
    return recv


# ---------------------------------------------------------------- calibration (nccl-tests style, preallocated buffers)
def raw_all_gather_(out: torch.Tensor, send: torch.Tensor, group: Group) -> torch.Tensor:
    if size(group) > 1:
        dist.all_gather_single(out, send, group=group)   # as _all_gather
    return out


def raw_reduce_scatter_(out: torch.Tensor, send: torch.Tensor, group: Group) -> torch.Tensor:
    if size(group) > 1:
        dist.reduce_scatter_single(out, send, group=group)   # as _reduce_scatter
    return out


def raw_all_reduce_(buf: torch.Tensor, group: Group) -> torch.Tensor:
    if size(group) > 1:
        dist.all_reduce(buf, group=group)
    return buf
