"""ZeRO stages 1 and 2 on DeepSpeed's engine, over our DP x SP mesh (`--zero 1|2`).

Why DeepSpeed, not torch's FSDP2: FSDP2 shards gradients whenever it shards anything, so it has
ZeRO-2 and ZeRO-3 but no ZeRO-1; DeepSpeed's `DeepSpeedZeroOptimizer` has both 1 and 2, and it
knows a sequence-parallel mesh: given an `mpu` with a sequence-parallel group it partitions over
the sequence x data group (every rank holding a copy of a replicated parameter) and divides the
reduced gradient by dp (world / sp), i.e. sums the SP ranks' partial gradients and averages the
DP replicas, exactly what `sync_replicated_grads` + `sync_data_parallel_grads` do by hand at
`--zero 0`. Reduction runs in fp32 (`communication_data_type`), in buckets (`reduce_bucket_size`)
overlapped with the backward (`overlap_comm`): the engine's, not ours.

Megatron-SP shards weights over its SP group, so DeepSpeed sees that group as model parallel
(ZeRO then partitions over DP only) and the parameters it replicates get their SP partial
gradients summed by a gradient hook through our comm layer (`grad_sync`, in the ledger) before
DeepSpeed's own reduction sees them.

Traffic: the engine's collectives go through deepspeed.comm, not methods/comm/layer.py; they are
recorded into an engine ledger of their own (methods/comm/external.py, record_engine_collectives),
which equals bench/cost/comm.py's `engine_ops`: DeepSpeed all-reduces the gradient buckets (where
the ZeRO paper reduce-scatters), all-reduces the gradient norm and all-gathers the updated
parameters. The method's ledger still holds every byte the method moves, and equals its formula
without the hand-rolled gradient syncs (methods/spec.py, `engine=True`).
"""
from __future__ import annotations

import os

import torch

from dspbench.methods.comm import layer as comm
from dspbench.methods.comm.external import record_engine_collectives
from dspbench.records.engine import BUCKET_ELEMS
from dspbench.methods.common import is_sharded

class _Mesh:
    """DeepSpeed's `mpu` interface over our Dims: the groups its engine and ZeRO optimizer ask for."""

    def __init__(self, dims, world_group, tensor_parallel: bool):
        self.dims, self.world_group, self.tp = dims, world_group, tensor_parallel
        # Megatron-SP: the SP group is model parallel, nothing is sequence parallel for DeepSpeed.
        self.mp_group = dims.sp_group if tensor_parallel else _singleton(dims)

    def get_model_parallel_group(self):
        return self.mp_group

    def get_model_parallel_world_size(self):
        return comm.size(self.mp_group)

    def get_model_parallel_rank(self):
        return comm.rank(self.mp_group)

    def get_data_parallel_group(self):
        return self.dims.dp_group

    def get_data_parallel_world_size(self):
        return comm.size(self.dims.dp_group)

    def get_data_parallel_rank(self):
        return comm.rank(self.dims.dp_group)

    def get_sequence_parallel_group(self):
        return self.mp_group if self.tp else self.dims.sp_group

    def get_sequence_parallel_world_size(self):
        return 1 if self.tp else comm.size(self.dims.sp_group)

    def get_sequence_parallel_rank(self):
        return 0 if self.tp else comm.rank(self.dims.sp_group)

    def get_sequence_data_parallel_group(self):
        return self.dims.dp_group if self.tp else self.world_group

    def get_sequence_data_parallel_world_size(self):
        return comm.size(self.get_sequence_data_parallel_group())

    def get_sequence_data_parallel_rank(self):
        return comm.rank(self.get_sequence_data_parallel_group())


_GROUPS: dict = {}


def _singleton(dims):
    """This rank's group of one (new_group is collective: every rank creates every rank's)."""
    key = ("one", comm.world_size())
    if key not in _GROUPS:
        _GROUPS[key] = [comm.new_group([r]) for r in range(comm.world_size())][comm.world_rank()]
    return _GROUPS[key]


def _world():
    key = ("world", comm.world_size())
    if key not in _GROUPS:
        _GROUPS[key] = comm.new_group(list(range(comm.world_size())))
    return _GROUPS[key]


def _sum_over_sp(group):
    def hook(grad):
        # A copy: the engine may hand the same storage to other consumers; never reduce it in place.
        return comm.all_reduce_(grad.clone(memory_format=torch.contiguous_format), group, "grad_sync")
    return hook


def ds_config(stage: int, dtype: str, batch: int) -> dict:
    return {
        "train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
                              "reduce_scatter": True, "reduce_bucket_size": BUCKET_ELEMS,
                              "allgather_bucket_size": BUCKET_ELEMS},
        "communication_data_type": "fp32", "seq_parallel_communication_data_type": "fp32",
        "bf16": {"enabled": dtype == "bf16"}, "fp16": {"enabled": False},
        "zero_allow_untested_optimizer": True, "gradient_clipping": 0.0, "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


def init_deepspeed_comm() -> None:
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    # DeepSpeed's engine insists on LOCAL_RANK; our local launcher (fork/spawn) does not set it.
    os.environ.setdefault("LOCAL_RANK", str(comm.world_rank() % max(torch.cuda.device_count(), 1)
                                            if torch.cuda.is_available() else comm.world_rank()))
    import deepspeed
    import deepspeed.comm as ds_comm
    from deepspeed.accelerator import get_accelerator
    if get_accelerator().device_name() == "cpu":   # skip a minutes-long JIT build of a shm op
        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    if not ds_comm.is_initialized():
        deepspeed.init_distributed(dist_backend=comm.backend_name(), verbose=False)


def zero_engine(model, dims, stage: int, dtype: str, batch: int, lr: float = 1e-4):
    """DeepSpeed's engine with AdamW under ZeRO `stage` (1 or 2) over the dims' mesh."""
    if stage not in (1, 2):
        raise ValueError(f"zero_engine runs ZeRO 1 or 2, got {stage}")
    init_deepspeed_comm()
    import deepspeed
    tp = any(is_sharded(p) for p in model.parameters())
    if tp and dims.sp > 1:
        for p in model.parameters():
            if not is_sharded(p):
                p.register_hook(_sum_over_sp(dims.sp_group))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config(stage, dtype, batch),
                                      mpu=_Mesh(dims, _world(), tp))
    import deepspeed.comm as ds_comm
    record_engine_collectives(engine, ds_comm)   # into an engine_ledger() when one is open
    return engine
