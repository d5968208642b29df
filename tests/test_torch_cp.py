"""torch's native context parallel (`torch_cp`) on gloo: its forward against the oracle, its bytes
against the formula and against `ring`'s, and the CPU backward it still lacks (torch 2.13).
DTensor's sharding propagation makes each first call slow (seconds): few, small cases."""
import pytest

import oracle_tasks as ot
from dspbench.methods import Dims, get_method
from dspbench.methods.volume import paper_per_layer
from dspbench.models import Shape, get_config

pytestmark = pytest.mark.gloo


@pytest.mark.parametrize("world,model,shape,shard", [(2, "stdit-tiny", (1, 4, 16), "T"),
                                                     (4, "stdit3-tiny", (2, 4, 16), "S"),
                                                     (2, "full3d-tiny", (1, 4, 16), "T")])
def test_forward_equals_oracle_and_moves_the_formulas_and_the_rings_bytes(rank_pool, world, model, shape, shard):
    cfg, n = get_config(model), world
    ring = get_method("ring").comm_bytes(cfg, Shape(*shape), Dims(sp=n, shard=shard), mode="infer")
    for r in rank_pool(world).run(ot.infer_case, "torch_cp", model, shape, world, shard):
        assert "unsupported" not in r, r
        assert r["output"] <= ot.RTOL * max(1.0, r["output_scale"]), r["output"]
        assert r["ledger"] == r["formula"], (r["ledger"], r["formula"])
        # all-gathers of K and V vs N-1 ring steps of them: the same bytes per layer (2M)
        assert paper_per_layer(r["ledger"], n, cfg.depth) == paper_per_layer(ring, n, cfg.depth)
        assert paper_per_layer(r["ledger"], n, cfg.depth) == 2 * shape[0] * 4 * 16 * cfg.hidden * 4


def test_cpu_backward_is_still_missing_in_torch(rank_pool):
    # what check_run's reason says; this fails (and check_run must change) once torch adds it
    err = rank_pool(2).run(ot.train_error, "torch_cp", "stdit-tiny", (1, 4, 16), 2)[0]
    assert "_scaled_dot_product_flash_attention_for_cpu_backward" in err and "sharding strategy" in err, err


def test_check_run_names_the_missing_backward():
    spec = get_method("torch_cp")
    assert "no CPU backward" in spec.check_run("fp32", "train", "gloo")
    assert spec.check_run("fp32", "infer", "gloo") is None and spec.check_run("bf16", "train", "nccl") is None
