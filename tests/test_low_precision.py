"""Every method in bf16 against the fp32 oracle, at world sizes 2 and 4 (gloo, CPU).

bf16 keeps 8 bits of mantissa, so the unsharded model in bf16 is already ~1e-2 (relative) away
from the fp32 oracle. What a method may add on top is what it changes in the arithmetic, so the
tolerance is per method, as a multiple of the unsharded bf16 model's own error (same weights, same
input, same fp32 oracle), measured in the same test:
- dsp, ulysses, ulysses_deepspeed, usp's all-to-all part: collectives move bf16 values exactly;
  only the local kernels see other shapes (other blocking, other summation order).
- ring (and usp's ring part): partial attentions merged by log-sum-exp in fp32, one more rounding
  of each block's output to bf16 before the merge; grows slowly with the ring size (docs/gpu.md).
- allgather_kv: the ranks' partial dK, dV are summed by the reduce-scatter in bf16 (N roundings).
- megatron_sp: the row-parallel linears' partial products are rounded to bf16 and summed by the
  reduce-scatter in bf16: N roundings instead of one.
"""
import pytest

import oracle_tasks as ot

MODEL, SHAPE = "stdit-tiny", (1, 8, 16)
# err(method) <= FACTOR x err(unsharded bf16) on the output, every parameter gradient and the
# input gradient (max abs). Observed worst ratios at world 2 and 4 (2026-12-03): 1.00 for dsp,
# ulysses and usp; 1.09 for ring and megatron_sp (output, world 4); 1.004 for allgather_kv (grads, world 4). A real indexing or scaling bug
# gives errors of the order of the values themselves, tens of times these.
FACTOR = {"dsp": 1.25, "ulysses": 1.25, "ulysses_all": 1.25, "usp": 1.5, "ring": 1.5, "megatron_sp": 1.5, "allgather_kv": 1.5}


@pytest.mark.gloo
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("method", sorted(FACTOR))
def test_bf16_error_against_fp32_oracle_is_the_precision_not_the_parallelism(rank_pool, method, world):
    res = rank_pool(world).run(ot.low_precision_case, method, MODEL, SHAPE, world)
    for r in res:
        assert "unsupported" not in r, r
        for k, e in r["method"].items():
            base = r["single"][k]
            assert base <= 0.05 * max(1.0, r["scale"][k]), (k, base)     # bf16 itself: a few % at most
            assert e <= FACTOR[method] * base, (k, e, base)
