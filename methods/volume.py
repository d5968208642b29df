"""Per-layer communication volume in the paper's Table 3 convention, from ledger bytes.

Table 3 (forward, per layer, M = bytes of one full activation (B, T, S, C), N = SP degree) counts
each collective by the whole tensor it logically moves per device: the local shard for an
all-to-all (M/N), the gathered tensor for an all-gather (M), the full input for a reduce-scatter
(M), every K/V block that visits a device for a ring (2M). Our ledger counts wire bytes (what a
rank sends, nccl-tests' convention); for all of these ops paper = wire * N / (N - 1).
Layer-internal traffic excludes the model exit gather, gradient synchronisation and CFG
parallelism's exchange of the noise prediction (once per sampling step).
"""
from __future__ import annotations

from dspbench.methods.comm.ledger import untag

NOT_PER_LAYER = ("seq_gather", "grad_sync", "dp_grad_sync", "cfg_exchange")


def paper_per_layer(tagged_totals: dict[str, int], n: int, layers: int, phase: str = "fwd") -> float:
    """Bytes per layer in the paper's convention, from {'tag/op.phase': wire bytes}."""
    wire = sum(v for k, v in tagged_totals.items()
               if k.split("/", 1)[0] not in NOT_PER_LAYER and k.endswith(f".{phase}"))
    return wire * n / (n - 1) / layers


def per_op(tagged_totals: dict[str, int]) -> dict[str, int]:
    return untag(tagged_totals)
