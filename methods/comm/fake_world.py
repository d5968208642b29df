"""The comm layer's tracing band: a fake process group, so a method's own sharding can be traced
on the meta device for one rank of a world that is not there (bench/cost/rank_trace.py).

Nothing runs on a wire: torch's "fake" backend completes every collective at once. Kept here, with
the other modules that call torch.distributed (tests/test_comm.py), so that contract has no
exception outside methods/comm/.
"""
from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def fake_world(world_size: int, rank: int = 0):
    """A fake default process group of world_size for the block's duration, torn down after."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        raise RuntimeError("a fake world needs a process without a process group (it makes its own)")
    hook = sys.excepthook     # init_process_group wraps it with a "[rank0]: " prefix, once per world
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()
        sys.excepthook = hook
