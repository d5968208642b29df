"""Where a tensor-parallel shard sits inside the full parameter (for oracle comparisons)."""
from __future__ import annotations

from typing import NamedTuple

import torch


class ShardSpec(NamedTuple):
    dim: int      # the split dim
    chunks: int   # fused sub-tensors along dim (q|k|v = 3), each split separately
    index: int    # this rank's part
    parts: int    # N


def take_shard(full: torch.Tensor, spec: ShardSpec) -> torch.Tensor:
    """This rank's part of every fused chunk, concatenated: the local parameter of the shard."""
    pieces = [c.chunk(spec.parts, spec.dim)[spec.index] for c in full.chunk(spec.chunks, spec.dim)]
    return torch.cat(pieces, dim=spec.dim)
