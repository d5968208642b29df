"""Where a tensor-parallel shard sits inside the full parameter (for oracle comparisons)."""
from __future__ import annotations

from typing import NamedTuple

import torch


class ShardSpec(NamedTuple):
    dim: int      # the split dim
    chunks: int | tuple[int, ...]   # fused sub-tensors along dim (q|k|v = 3, or their sizes where they
                                    # differ: a single-stream block's q|k|v|MLP), each split separately
    index: int    # this rank's part
    parts: int    # N


def take_shard(full: torch.Tensor, spec: ShardSpec) -> torch.Tensor:
    """This rank's part of every fused chunk, concatenated: the local parameter of the shard."""
    fused = full.split(list(spec.chunks), spec.dim) if isinstance(spec.chunks, tuple) else full.chunk(spec.chunks, spec.dim)
    pieces = [c.chunk(spec.parts, spec.dim)[spec.index] for c in fused]
    return torch.cat(pieces, dim=spec.dim)
