"""--zero 1/2 on DeepSpeed's engine: the same loss trajectory as --zero 0 (our hand-rolled gradient
syncs), for every method, on a DP x SP mesh; the method's ledger == its formula without the syncs."""
import importlib.util

import pytest

import zero_tasks as zt

pytestmark = [
    pytest.mark.gloo, pytest.mark.deepspeed,
    pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"),
]

METHODS = ["dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "usp"]


@pytest.fixture(scope="module")
def zero0(rank_pool):
    return {m: rank_pool(4).run(zt.train_losses, m, "stdit-tiny", (1, 4, 16), 2, 0) for m in METHODS}


@pytest.mark.parametrize("stage", [1, 2])
@pytest.mark.parametrize("method", METHODS)
def test_zero_loss_trajectory_equals_zero0(rank_pool, zero0, method, stage):
    # world 4 = dp 2 x sp 2: ZeRO partitions over all 4 ranks (Megatron-SP: over dp), sums SP, averages DP.
    res = rank_pool(4).run(zt.train_losses, method, "stdit-tiny", (1, 4, 16), 2, stage)
    for r, base in zip(res, zero0[method]):
        # fp32 AdamW from the same weights and data: only summation order differs (bucketed fp32 reduce).
        assert r["losses"] == pytest.approx(base["losses"], rel=1e-5, abs=1e-6)
        assert r["losses"][-1] != r["losses"][0]
        assert r["ledger"] == r["engine_formula"], (r["ledger"], r["engine_formula"])
        # DeepSpeed's own collectives, recorded: the bucket all-reduce, the norm, the parameter all-gather
        assert r["engine_ledger"] == r["engine_comm_formula"], (r["engine_ledger"], r["engine_comm_formula"])
        assert {k.split("/")[0] for k in r["engine_ledger"]} == {"zero_grads", "zero_norm", "zero_params"}
        assert base["ledger"] == base["formula"]


@pytest.mark.parametrize("stage", [1, 2])
def test_zero_at_pure_sequence_parallelism(rank_pool, stage):
    # sp 4 x dp 1: the engine's group is the SP group alone; its gradients are sums, not means.
    base = rank_pool(4).run(zt.train_losses, "ulysses_all", "stdit-tiny", (1, 4, 16), 4, 0)
    res = rank_pool(4).run(zt.train_losses, "ulysses_all", "stdit-tiny", (1, 4, 16), 4, stage)
    assert res[0]["losses"] == pytest.approx(base[0]["losses"], rel=1e-5, abs=1e-6)
    assert res[0]["engine_ledger"] == res[0]["engine_comm_formula"] and base[0]["engine_ledger"] == {}


def test_engine_traffic_formula_per_group_bucket_and_padding():
    """What DeepSpeed 0.19 issues per step (the runs above hold the recorded ledger equal to it): the
    fp32 gradients all-reduced bucket by bucket, one fp32 norm, the parameters all-gathered in the
    model dtype from a flat group padded to 2 elements per rank."""
    import torch  # noqa: F401
    from dspbench.methods import Dims, get_method
    from dspbench.models import get_config
    from dspbench.models.params import param_count
    from dspbench.cost.comm import engine_comm, engine_ops
    from dspbench.records.engine import BUCKET_ELEMS
    cfg = get_config("stdit-tiny")
    P = param_count(cfg)
    got = engine_comm(get_method("dsp"), cfg, Dims(sp=2, dp=2), 2, 2)
    padded = -(-P // 8) * 8
    assert got == {"zero_grads/all_reduce.bwd": 2 * 4 * P * 3 // 4, "zero_norm/all_reduce.step": 2 * 4 * 3 // 4,
                   "zero_params/all_gather.step": 2 * padded * 3 // 4}
    assert engine_comm(get_method("dsp"), cfg, Dims(sp=2, dp=2), 2, 0) == {}
    assert engine_comm(get_method("dsp"), cfg, Dims(sp=1, dp=1), 2, 2) == {}
    meg = get_method("megatron_sp")
    local = P - meg.sharded_params(cfg) + meg.sharded_params(cfg) // 2
    assert engine_comm(meg, cfg, Dims(sp=2, dp=2), 4, 1)["zero_grads/all_reduce.bwd"] == 2 * 4 * local // 2
    # its SP group is DeepSpeed's model-parallel group: the norm is summed there and over DP
    assert engine_comm(meg, cfg, Dims(sp=2, dp=2), 4, 1)["zero_norm/all_reduce.step"] == 4 + 4
    big = get_config("stdit-xl")
    Pb = param_count(big)
    assert Pb > 2 * BUCKET_ELEMS
    grads = [o for ph, o in engine_ops(get_method("dsp"), big, Dims(sp=4, dp=1), 2, 2) if o.tag == "zero_grads"]
    assert sum(o.count for o in grads) == -(-Pb // BUCKET_ELEMS)
    assert sum(o.count * o.payload for o in grads) == 4 * Pb


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory):
    from dspbench.records.config import RunConfig
    from dspbench.run.harness import run_config
    out = tmp_path_factory.mktemp("zero_mem")
    base = dict(method="dsp", model="stdit-small", frames=8, spatial=16, gpus=4, sp=2, warmup=1, iters=2, timeout_s=300)
    return {z: run_config(RunConfig(**base, zero=z), out / "r.jsonl") for z in (0, 2)}


@pytest.mark.parametrize("zero", [0, 2])
def test_memory_per_rank_measured_beside_the_memory_model(small_runs, zero):
    # The record carries the memory model's prediction for this very configuration next to what
    # the run added to each rank's resident memory after its baseline (peak reset after warm-up).
    rec = small_runs[zero]
    assert rec["status"] == "ok", rec["error"]
    assert rec["peak_mem_reset"] and rec["zero"] == zero and rec["comm_formula_match"]
    model = rec["mem_model"]
    states = model["weights"] + model["grads"] + model["optimizer"]
    # the model states the memory model counts must be resident: a lower bound the measurement obeys
    assert rec["mem_run_bytes"] >= states, (rec["mem_run_bytes"], model)
    # ZeRO-2 partitions gradients and optimizer state over the 4 ranks (world = dp 2 x sp 2)
    if zero == 2:
        z0 = small_runs[0]["mem_model"]
        assert model["optimizer"] == pytest.approx(z0["optimizer"] * 12 / 8 / 4)
        assert model["grads"] == pytest.approx(z0["grads"] / 4)


@pytest.mark.parametrize("zero", [0, 2])
def test_the_record_carries_the_engines_recorded_traffic_beside_its_formula(small_runs, zero):
    rec = small_runs[zero]
    if zero == 0:   # our own syncs: in the method's ledger, no engine
        assert rec["engine_comm"] is None and rec["engine_comm_formula_match"] is None
        return
    assert rec["engine_comm_formula_match"] is True
    assert rec["engine_comm"] == rec["engine_comm_formula"] and "zero_grads/all_reduce.bwd" in rec["engine_comm"]
    assert set(rec["engine_comm_time_s"]) == {"all_reduce.bwd", "all_reduce.step", "all_gather.step"}
    assert all(t > 0 for t in rec["engine_comm_time_s"].values())
    assert not any(k.startswith("zero_") for k in rec["comm_tagged"])     # apart from the method's ledger
