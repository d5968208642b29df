"""Parallel degrees and their process groups: validated once, built once, named."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dspbench.models import H_DIM, S_DIM, T_DIM, W_DIM
from dspbench.methods.comm import layer as comm

# Every sequence dim name of every layout; which ones a model has: ModelConfig.seq_dims (checked
# by the methods' check(), since Dims does not know the model).
SEQ_DIMS = {"T": T_DIM, "S": S_DIM, "H": H_DIM, "W": W_DIM}


@dataclass(frozen=True)
class Dims:
    """A cfg x dp x sp mesh, SP innermost (consecutive ranks share an SP group, as within a node).

    `cfg` = 2 is CFG parallelism (sample mode): the world splits into two contiguous halves, the
    conditional pass on ranks [0, world/2) and the unconditional one on [world/2, world), each a
    dp x sp mesh of its own; rank r and r + world/2 are peers (`cfg_group`) and exchange their
    noise predictions every step. `cfg` = 1 is every other run.

    `shard` names the sequence dim that embedded methods (ulysses, ring, megatron_sp, usp) shard:
    T or S, or T, H or W for axial3d (their check() rejects a dim the model lacks); DSP decides
    per stage and ignores it.
    """
    sp: int = 1
    dp: int = 1
    shard: str = "T"
    sp_group: Any = field(default=None, compare=False, repr=False)
    dp_group: Any = field(default=None, compare=False, repr=False)
    cfg: int = 1
    cfg_group: Any = field(default=None, compare=False, repr=False)
    ulysses: int = 0    # USP's Ulysses degree u (ring r = sp / u); 0: the largest that divides the heads

    @property
    def world(self) -> int:
        return self.sp * self.dp * self.cfg

    @property
    def half(self) -> int:
        """Ranks per CFG group (the whole world without CFG parallelism)."""
        return self.sp * self.dp

    @property
    def shard_dim(self) -> int:
        return SEQ_DIMS[self.shard]

    def sp_groups(self) -> list[list[int]]:
        """World ranks of each SP group: consecutive, so with ranks placed node-major (SLURM's block
        distribution) an SP degree that divides the ranks per node keeps every SP group in one node."""
        return [list(range(s, s + self.sp)) for s in range(0, self.world, self.sp)]

    def dp_groups(self) -> list[list[int]]:
        return [list(range(h + off, h + self.half, self.sp))
                for h in range(0, self.world, self.half) for off in range(self.sp)]

    def cfg_groups(self) -> list[list[int]]:
        """Peer pairs (cond rank, uncond rank) under CFG parallelism; none without it."""
        return [[r, r + self.half] for r in range(self.half)] if self.cfg == 2 else []

    def placement(self, hosts: list[str]) -> dict:
        """Where the mesh sits: hosts[r] is world rank r's node. How many nodes the widest SP and DP
        group spans says which collectives cross the inter-node tier (1 = all inside one node)."""
        if len(hosts) != self.world:
            raise ValueError(f"{len(hosts)} hosts for a world of {self.world}")
        def span(groups):
            return max(len({hosts[r] for r in g}) for g in groups)
        where = {"rank_hosts": list(hosts), "nodes": len(set(hosts)),
                 "sp_group_nodes": span(self.sp_groups()), "dp_group_nodes": span(self.dp_groups())}
        if self.cfg == 2:   # the exchange crosses nodes when a pair does
            where["cfg_group_nodes"] = span(self.cfg_groups())
        return where

    def validate(self, world_size: int | None = None) -> None:
        if self.sp < 1 or self.dp < 1:
            raise ValueError(f"degrees must be >= 1: sp={self.sp} dp={self.dp}")
        if self.cfg not in (1, 2):
            raise ValueError(f"cfg must be 1 (no CFG parallelism) or 2 (cond and uncond groups), got {self.cfg}")
        if world_size is not None and self.world != world_size:
            raise ValueError(f"cfg({self.cfg}) * sp({self.sp}) * dp({self.dp}) = {self.world} != world size {world_size}")
        if self.shard not in SEQ_DIMS:
            raise ValueError(f"shard must be one of {sorted(SEQ_DIMS)}, got {self.shard!r}")


def build_dims(sp: int, shard: str = "T", cfg: int = 1, ulysses: int = 0) -> Dims:
    """Create the SP and DP groups (and CFG peer pairs, `cfg` = 2) on the current world; every rank
    must call this."""
    world = comm.world_size()
    if world % (sp * cfg):
        raise ValueError(f"cfg({cfg}) * sp({sp}) does not divide the world size {world}")
    dims = Dims(sp=sp, dp=world // (sp * cfg), shard=shard, cfg=cfg, ulysses=ulysses)
    dims.validate(world)
    me = comm.world_rank()
    sp_group = dp_group = cfg_group = None
    if world == 1:
        return dims
    # new_group is collective over the whole world: create every group on every rank, keep ours.
    # Degree-1 groups are real singleton groups, never None (None would mean the whole world).
    for ranks in dims.sp_groups():
        g = comm.new_group(ranks)
        if me in ranks:
            sp_group = g
    for ranks in dims.dp_groups():
        g = comm.new_group(ranks)
        if me in ranks:
            dp_group = g
    for ranks in dims.cfg_groups():
        g = comm.new_group(ranks)
        if me in ranks:
            cfg_group = g
    return Dims(sp=sp, dp=dims.dp, shard=shard, sp_group=sp_group, dp_group=dp_group, cfg=cfg, cfg_group=cfg_group,
                ulysses=ulysses)
