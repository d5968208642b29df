"""DeepSpeed ZeRO's own traffic and buffers, analytically: what the cost model prices and the record
accounts for `--zero 1|2` (bench/run/zero.py runs the engine; its collectives are not in the ledger)."""
from __future__ import annotations

from dspbench.records.engine import BUCKET_ELEMS


def engine_ops(spec, mcfg, dims, dtype_bytes: int, stage: int) -> list:
    """DeepSpeed's ZeRO collectives per step as [(phase, Op)], accounted (they are not recorded).

    ZeRO 1 and 2 move the same bytes (Rajbhandari et al. SC'20, Sec. 7.2.1): the gradients
    reduce-scattered in fp32 over the group that replicates them (the world; Megatron-SP: DP),
    and the updated parameter partitions all-gathered in the model dtype after the optimizer
    step (phase `step`). Op group "dp" with `ranks` = that group's size: it crosses nodes
    exactly when the world does (bench cost_comm.group_link).
    """
    from dspbench.methods.spec import Op
    from dspbench.models.params import param_count
    sharded = spec.sharded_params(mcfg)
    local = param_count(mcfg) - sharded + sharded // dims.sp
    n = dims.dp if sharded else dims.sp * dims.dp
    if stage == 0 or n == 1:
        return []
    return [("bwd", Op("zero_grads", "reduce_scatter", 4 * local, 1, "dp", ranks=n)),
            ("step", Op("zero_params", "all_gather", dtype_bytes * local, 1, "dp", ranks=n))]


def engine_comm(spec, mcfg, dims, dtype_bytes: int, stage: int) -> dict[str, int]:
    """{'tag/op.phase': wire bytes per rank per step} of `engine_ops` (the record's `engine_comm`)."""
    return {f"{o.tag}/{o.op}.{ph}": o.payload * (o.ranks - 1) // o.ranks
            for ph, o in engine_ops(spec, mcfg, dims, dtype_bytes, stage)}
