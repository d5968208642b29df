"""Twins (bench/plan/twins.py): configurations that run the same collectives and local kernels are one
plan row naming both, decided by mechanism and not by price; the verdict's runner-up is never a twin."""
from __future__ import annotations

from dataclasses import replace

import pytest

from dspbench.cost.hardware import load_profile
from dspbench.cost.model import predict
from dspbench.plan.axes import Request
from dspbench.plan.build import plan
from dspbench.plan.rank import methods_of
from dspbench.plan.twins import mechanism
from dspbench.records.config import RunConfig

XL = RunConfig(model="stdit-xl", frames=128, spatial=4096, gpus=16, dtype="bf16", backend="nccl")
TWINNED = ("ring", "usp", "ulysses", "ulysses_deepspeed", "dsp", "dsp_hybrid")


def _mechanisms(doc: dict, profile) -> list:
    return [mechanism(c, predict(c, profile)) for c in (RunConfig(**r["config"]) for r in doc["rows"])]


@pytest.fixture(scope="module")
def xl():
    return plan(Request(XL, TWINNED), load_profile("h100-ib"))


def test_twins_are_one_row_naming_both(xl):
    rows = xl["rows"]
    mechs = _mechanisms(xl, load_profile("h100-ib"))
    assert len(set(mechs)) == len(mechs)      # no mechanism is ranked twice
    ring = next(r for r in rows if r["method"] == "ring" and r["sp"] == 2)
    assert [t["name"] for t in ring["twins"]] == ["usp at Ulysses 1 x ring 2"]
    uly = next(r for r in rows if r["method"] == "ulysses" and r["sp"] == 2)
    assert {t["method"] for t in uly["twins"]} == {"ulysses_deepspeed", "usp"}
    assert any(t["name"] == "usp at Ulysses 2 x ring 1" for t in uly["twins"])
    assert all(t["method"] == "dsp_hybrid" for r in rows if r["method"] == "dsp" for t in r["twins"])
    assert not any(r["method"] in ("ulysses_deepspeed", "dsp_hybrid") for r in rows)   # only ever twins
    assert xl["best_per_method"]["dsp_hybrid"] == xl["best_per_method"]["dsp"]


def test_verdict_compares_the_winner_with_a_configuration_that_communicates_differently(xl):
    best, lead = xl["rows"][0], xl["lead"]
    assert best["method"] == "dsp" and [t["method"] for t in best["twins"]] == ["dsp_hybrid"]
    other = next(r for r in xl["rows"] if r["rank"] > 1 and not set(methods_of(r)) & set(methods_of(best)))
    assert lead["method"] == other["method"] not in ("dsp", "dsp_hybrid")
    assert lead["ratio"] > 1.0 and xl["verdict"].split(":")[0].endswith("(= dsp_hybrid)")
    # two methods only, ring and its USP twin: the runner-up is USP at a split that is not ring
    duo = plan(Request(XL, ("ring", "usp")), load_profile("h100-ib"))
    assert duo["rows"][0]["method"] == "ring" and "Ulysses 1 x" not in duo["lead"]["over"]
    assert duo["lead"]["ratio"] > 1.0


def test_twins_by_mechanism_not_by_price(xl):
    """A per-method term prices USP's ring split apart from ring: still twins, each with its own score;
    Megatron-LM's regather changes only the backward, so sampling makes it megatron_sp's twin."""
    prof = load_profile("h100-ib")
    # a calibrated profile carries the term (a datasheet one prices kernels and has none)
    taxed = replace(prof, kind="calibrated", method_overhead_s={2: {"usp": 0.05}})
    doc = plan(Request(replace(XL, mode="train"), ("ring", "usp")), taxed)
    ring = next(r for r in doc["rows"] if r["method"] == "ring" and r["sp"] == 2)
    twin = next(t for t in ring["twins"] if t["method"] == "usp")
    assert twin["score"] < ring["score"] * 0.99    # priced apart, yet one row
    sample = replace(XL, frames=16, spatial=1024, mode="sample", sample_steps=4, gpus=8)
    doc = plan(Request(sample, ("megatron_sp", "megatron_lm")), prof)
    assert all(sorted(methods_of(r)) == ["megatron_lm", "megatron_sp"] for r in doc["rows"])
    train = plan(Request(replace(sample, mode="train"), ("megatron_sp", "megatron_lm")), prof)
    assert not any(r["twins"] for r in train["rows"])   # the backward's regather: not twins in training


def test_mechanism_sees_what_prices_alike():
    """Ring around the attention over T and around the one over S move the same bytes: not twins."""
    prof = load_profile("h100-ib")
    a = replace(XL, method="ring", sp=2, shard="T", grad_ckpt=True)
    b = replace(a, shard="S")
    assert predict(a, prof).comm_wire == predict(b, prof).comm_wire
    assert mechanism(a, predict(a, prof)) != mechanism(b, predict(b, prof))
    u1 = replace(a, method="usp", ulysses_degree=1)
    assert mechanism(a, predict(a, prof)) == mechanism(u1, predict(u1, prof))
