"""USP's split as a knob (`--ulysses-degree U`): Ulysses over U ranks of the heads, the ring over SP / U.
Every split is oracle-exact with the ledger equal to its formula; the splits move different bytes and
are priced apart; a split that does not divide, or the knob on another method, is refused clearly;
the run_id changes only when it is set."""
import pytest

from dspbench.cost.hardware import load_profile
from dspbench.cost.model import predict
from dspbench.records.config import RunConfig
from dspbench.run.harness import run_config

TINY = dict(method="usp", model="stdit-tiny", frames=4, spatial=16, gpus=4, sp=4, warmup=0, iters=1, timeout_s=120,
            check=True)


@pytest.mark.gloo
@pytest.mark.parametrize("u", [1, 2, 4])
def test_every_split_equals_the_oracle_and_its_formula(tmp_path, u):
    rec = run_config(RunConfig(**TINY, ulysses_degree=u), tmp_path / "r.jsonl")
    assert rec["status"] == "ok", rec["error"]
    assert rec["comm_formula_match"] and rec["oracle_max_abs_err"] < 1e-5
    kinds = {k.split("/")[0] for k in rec["comm_tagged"]}
    assert ("ring_kv" in kinds) == (u < 4) and ("usp_qkv" in kinds) == (u > 1)


def test_splits_are_priced_apart_and_the_default_is_the_largest():
    prof = load_profile("h100-ib")
    base = RunConfig(method="usp", model="stdit-xl", frames=64, spatial=4096, gpus=8, sp=8, dtype="bf16")
    steps = {u: predict(RunConfig(**{**base.__dict__, "ulysses_degree": u}), prof).step_s for u in (1, 2, 4, 8)}
    assert len(set(steps.values())) == 4
    assert predict(base, prof).step_s == steps[8]          # 16 heads: the largest divisor of 8 is 8


def test_a_split_that_does_not_divide_or_on_another_method_is_refused(tmp_path):
    rec = run_config(RunConfig(**{**TINY, "ulysses_degree": 3}), tmp_path / "r.jsonl")
    assert rec["status"] == "unsupported" and "Ulysses degree 3 (--ulysses-degree) does not divide the SP degree 4" in rec["error"]
    with pytest.raises(ValueError, match="needs method usp"):
        RunConfig(**{**TINY, "method": "ring", "ulysses_degree": 2}).validate()


def test_the_run_id_changes_only_when_set():
    assert RunConfig(**TINY).run_id() == RunConfig(**TINY, ulysses_degree=0).run_id()
    assert RunConfig(**TINY).run_id() != RunConfig(**TINY, ulysses_degree=2).run_id()


def test_plan_enumerates_usps_splits_that_divide_its_sp_degree():
    from dspbench.plan.axes import Request, candidates
    base = RunConfig(method="usp", model="stdit-tiny", frames=4, spatial=16, gpus=4, sp=1, mode="infer")
    got = candidates(Request(base, ("usp", "ring")))
    usp = {(c.sp, c.ulysses_degree) for c in got if c.method == "usp"}
    assert usp == {(2, 0), (2, 1), (2, 2), (4, 0), (4, 1), (4, 2), (4, 4)}
    assert {c.ulysses_degree for c in got if c.method == "ring"} == {0}
