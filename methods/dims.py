"""Parallel degrees and their process groups: validated once, built once, named."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dspbench.models import H_DIM, S_DIM, T_DIM, W_DIM
from dspbench.methods import comm

# Every sequence dim name of every layout; which ones a model has: ModelConfig.seq_dims (checked
# by the methods' check(), since Dims does not know the model).
SEQ_DIMS = {"T": T_DIM, "S": S_DIM, "H": H_DIM, "W": W_DIM}


@dataclass(frozen=True)
class Dims:
    """A dp x sp mesh, SP innermost (consecutive ranks share an SP group, as within a node).

    `shard` names the sequence dim that embedded methods (ulysses, ring, megatron_sp, usp) shard:
    T or S, or T, H or W for axial3d (their check() rejects a dim the model lacks); DSP decides
    per stage and ignores it.
    """
    sp: int = 1
    dp: int = 1
    shard: str = "T"
    sp_group: Any = field(default=None, compare=False, repr=False)
    dp_group: Any = field(default=None, compare=False, repr=False)

    @property
    def world(self) -> int:
        return self.sp * self.dp

    @property
    def shard_dim(self) -> int:
        return SEQ_DIMS[self.shard]

    def validate(self, world_size: int | None = None) -> None:
        if self.sp < 1 or self.dp < 1:
            raise ValueError(f"degrees must be >= 1: sp={self.sp} dp={self.dp}")
        if world_size is not None and self.sp * self.dp != world_size:
            raise ValueError(f"sp({self.sp}) * dp({self.dp}) = {self.sp * self.dp} != world size {world_size}")
        if self.shard not in SEQ_DIMS:
            raise ValueError(f"shard must be one of {sorted(SEQ_DIMS)}, got {self.shard!r}")


def build_dims(sp: int, shard: str = "T") -> Dims:
    """Create the SP and DP groups on the current world; every rank must call this."""
    world = comm.world_size()
    if world % sp:
        raise ValueError(f"sp={sp} does not divide the world size {world}")
    dims = Dims(sp=sp, dp=world // sp, shard=shard)
    dims.validate(world)
    me = comm.world_rank()
    sp_group = dp_group = None
    if world == 1:
        return dims
    # new_group is collective over the whole world: create every group on every rank, keep ours.
    # Degree-1 groups are real singleton groups, never None (None would mean the whole world).
    for start in range(0, world, sp):
        ranks = list(range(start, start + sp))
        g = comm.new_group(ranks)
        if me in ranks:
            sp_group = g
    for off in range(sp):
        ranks = list(range(off, world, sp))
        g = comm.new_group(ranks)
        if me in ranks:
            dp_group = g
    return Dims(sp=sp, dp=dims.dp, shard=shard, sp_group=sp_group, dp_group=dp_group)
