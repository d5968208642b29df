"""dsp_overlap: DSP whose switches are chunked so that communication overlaps attention.

DSP (dspbench/methods/dsp.py) switches the whole T shard to a target dim D (S; H or W for
axial3d) before each attention over T and back after it, and attention waits for both. Attention
over T treats D as batch, so here the T shard is cut into K chunks along D and pipelined:

    post switch(0); for i: wait switch(i); post switch(i+1); attend chunk i; post switch-back(i)

so chunk i+1's all-to-all is on the wire while chunk i is attended over, and chunk i's way back
overlaps chunk i+1's attention. Same bytes as DSP, as 2K all-to-alls of M/(NK) per attention over
T (the ledger counts each chunk's). The backward's conjugate all-to-alls block (no overlap).
K = CHUNKS where N divides D/K, else 1 (then it is DSP with an async switch).
"""
from __future__ import annotations

import torch

from dspbench.methods import Look, MethodSpec, Op
from dspbench.methods.comm import async_ops as comm_async, layer as comm
from dspbench.methods import dsp as _dsp
from dspbench.methods.common import act_bytes, attentions, n_attn, shard_sequence
from dspbench.models.layers import AxisAttention

CHUNKS = 2   # chunks per switch: 2 is enough to hide one all-to-all behind the other chunk's attention


def chunks_for(extent: int, n: int) -> int:
    """The largest k <= CHUNKS such that every chunk of the target dim still splits n ways."""
    return max(k for k in range(1, CHUNKS + 1) if extent % (k * n) == 0)


class OverlappedSwitchAttention(AxisAttention):
    """Attention over T whose input and output are T shards; the switches are chunked and async.

    Installed by swapping the class of an existing AxisAttention: parameters keep their names
    (the oracle compares gradients by name) and `inner` stays the local kernel.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, g = self.seq, self.group
        n, entry = comm.size(g), seq[_dsp.ENTRY]
        target = seq[_dsp.switch_target({d: x.shape[i] for d, i in seq.items()}, n)]
        # (B, T/N, .., D, .., C) -> K x (B, T/N, .., D/K, .., C): independent for attention over T.
        parts = x.chunk(chunks_for(x.shape[target], n), target)
        # chunk: (B, T/N, .., D/K, .., C) -a2a(D->T)-> (B, T, .., D/(KN), .., C)
        pending = comm_async.all_to_all_async(parts[0], target, entry, g, "switch")
        back = []
        for i in range(len(parts)):
            xi = pending.wait()
            if i + 1 < len(parts):   # the next chunk travels while this one is attended over
                pending = comm_async.all_to_all_async(parts[i + 1], target, entry, g, "switch")
            # (B, T, .., D/(KN), .., C) -a2a(T->D)-> (B, T/N, .., D/K, .., C), waited at the end
            back.append(comm_async.all_to_all_async(super().forward(xi), entry, target, g, "switch"))
        return torch.cat([b.wait() for b in back], dim=target)


def _parallelize(model, dims):
    seq = model.cfg.seq_dims
    shard_sequence(model, seq[_dsp.ENTRY], dims.sp_group)
    for attn in attentions(model, axis=seq[_dsp.ENTRY]):
        attn.__class__ = OverlappedSwitchAttention
        attn.seq, attn.group = seq, dims.sp_group
    return model


def _forward_ops(cfg, shape, dims, b):
    ext = cfg.seq_extents(shape)
    k = chunks_for(ext[_dsp.switch_target(ext, dims.sp)], dims.sp)
    # DSP's 2 switches of M/N per attention over T, each as k all-to-alls of M/(Nk).
    return [Op("switch", "all_to_all", act_bytes(cfg, shape, b) // (dims.sp * k), 2 * k * n_attn(cfg))]


METHOD = MethodSpec(
    name="dsp_overlap",
    summary=f"DSP with each switch in {CHUNKS} async chunks overlapping attention (example plugin)",
    constraints=_dsp.METHOD.constraints + f"; {CHUNKS} chunks where sp divides D/{CHUNKS}, else 1",
    check=_dsp.METHOD.check, parallelize=_parallelize, forward_ops=_forward_ops,
    # DSP's hue, darker, listed right after DSP; records carry it, so reports draw it so
    report=Look(label="DSP (overlapped switches)", colour="#8C3B00", order=15),
)
