import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from rankpool import RankPool  # noqa: E402

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
