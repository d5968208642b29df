import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from rankpool import RankPool  # noqa: E402
from dspbench.cli import wire_reports  # noqa: E402

# As `dspbench` does: the sample records (tests/data/sample_results) predate `method_meta`, and
# their report shows each method's look from the registry (tests/test_method_look.py checks both ways).
wire_reports()

_POOLS: dict[int, RankPool] = {}


def _warm_imports() -> None:
    """Import lazily-loaded modules before forking, so no rank pays for them (sympy: seconds)."""
    import torch
    import torch.testing  # noqa: F401
    torch.testing.assert_close(torch.zeros(1), torch.zeros(1))
    import dspbench.methods.ring  # noqa: F401
    import dspbench.methods.megatron_sp  # noqa: F401
    import dspbench.methods.ulysses  # noqa: F401
    import dspbench.methods.dsp  # noqa: F401
    import dspbench.methods.allgather_kv  # noqa: F401
    import dspbench.methods.ring_flash  # noqa: F401
    import dspbench.methods.dsp_hybrid  # noqa: F401
    import dspbench.methods.torch_cp  # noqa: F401
    import torch.distributed.tensor.experimental._context_parallel  # noqa: F401 - torch_cp's, seconds


@pytest.fixture(scope="session")
def rank_pool():
    """rank_pool(world) -> a healthy RankPool of that world size, reused across tests."""
    _warm_imports()

    def get(world: int) -> RankPool:
        pool = _POOLS.get(world)
        if pool is None or not pool.healthy:
            pool = _POOLS[world] = RankPool(world)
        return pool

    yield get
    for p in _POOLS.values():
        p.close()
