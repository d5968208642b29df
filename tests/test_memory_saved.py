"""The memory model's activation term against what autograd really saves, on 2 and 4 gloo ranks.

DSP keeps 1/sp of every activation; Megatron-SP's column-parallel linears keep their gathered,
full-length inputs for the weight gradient (methods/megatron_sp.py). The difference between the two
methods' saved tensors is what `unsharded_bytes` predicts, less the text keys and values Megatron-SP
shards by channel (a few per cent at these shapes, never more)."""
from __future__ import annotations

import oracle_tasks as ot
import pytest

from dspbench.cost.memory import unsharded_bytes
from dspbench.methods import get_method
from dspbench.models import Shape, get_config

CASES = [(2, "stdit-tiny", (1, 16, 256)), (4, "stdit-tiny", (1, 32, 256)), (2, "axial3d-tiny", (1, 4, 64)),
         (2, "full3d-tiny", (1, 4, 64))]


@pytest.mark.parametrize("world,model,shape", CASES)
def test_megatron_sp_saves_its_gathered_inputs_as_the_memory_model_says(rank_pool, world, model, shape):
    pool = rank_pool(world)
    dsp = pool.run(ot.saved_activation_bytes, "dsp", model, shape, world)
    meg = pool.run(ot.saved_activation_bytes, "megatron_sp", model, shape, world)
    assert len(set(dsp)) == 1 and len(set(meg)) == 1, (dsp, meg)     # every rank saves the same
    predicted = unsharded_bytes(get_method("megatron_sp"), get_config(model), Shape(*shape), world, "fp32", "train")
    assert 0.97 * predicted <= meg[0] - dsp[0] <= predicted, (meg[0] - dsp[0], predicted)


def test_the_unsharded_term_is_megatron_sp_s_alone_and_training_only():
    cfg, shape = get_config("stdit-tiny"), Shape(1, 16, 256)
    assert all(unsharded_bytes(get_method(m), cfg, shape, 4, "fp32", "train") == 0
               for m in ("dsp", "ulysses", "ring", "usp"))
    meg = get_method("megatron_sp")
    assert unsharded_bytes(meg, cfg, shape, 1, "fp32", "train") == 0
    assert unsharded_bytes(meg, cfg, shape, 4, "fp32", "infer") == 0
    full = unsharded_bytes(meg, cfg, shape, 4, "fp32", "train")
    # checkpointing keeps one block's gathered inputs (its recompute), not the stack's
    assert unsharded_bytes(meg, get_config("stdit-tiny", grad_ckpt=True), shape, 4, "fp32", "train") == full / cfg.n_blocks


@pytest.mark.parametrize("world,model,shape", CASES[:2])
def test_megatron_lm_keeps_only_shards_as_the_memory_model_says(rank_pool, world, model, shape):
    """megatron_lm re-gathers in the backward instead: it saves no more than DSP (less its text K/V),
    and the model gives it no unsharded term."""
    pool = rank_pool(world)
    dsp = pool.run(ot.saved_activation_bytes, "dsp", model, shape, world)[0]
    lm = pool.run(ot.saved_activation_bytes, "megatron_lm", model, shape, world)[0]
    assert 0.97 * dsp <= lm <= dsp, (lm, dsp)
    assert unsharded_bytes(get_method("megatron_lm"), get_config(model), Shape(*shape), world, "fp32", "train") == 0
