"""Issue 41 item 1: a calibrated CPU prices each method from what it does, counted (its traced
kernels at measured per-kernel costs, its collectives per call), with no fitted per-method term."""
from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from dspbench.calibrate.kernels import COUNTS, UNKNOWNS, bench_kernels, counts, solve
from dspbench.cost.cpu_kernels import attn_tiles, cpu_compute, memory_class, work_s
from dspbench.cost.gpu_compute import trace_key
from dspbench.cost.hardware import from_dict, load_profile
from dspbench.cost.mechanism import explain
from dspbench.cost.model import predict
from dspbench.cost.rank_trace import rank_kernels
from dspbench.records.config import RunConfig

KERNELS = {"s_per_kernel": 2e-5, "s_per_gemm_flop": 3e-11, "s_per_attn_flop": 4e-11, "s_per_byte": 2e-10,
           "s_per_kernel_infer": 1e-5}     # a profile calibrated before the memory classes and the tile term
CLASSED = {**KERNELS, "s_per_byte": 3e-11, "s_per_byte_math": 2e-10, "s_per_byte_norm": 7e-11, "s_per_attn_tile": 1e-6}
BASE = "results/plan-validation/rounds/profile-200mbit/tiers-profile.toml"


def profile(kernels=KERNELS, **raw_changes):
    raw = copy.deepcopy(load_profile(BASE).raw)
    raw["kernels"] = dict(kernels)
    raw.update(raw_changes)
    return from_dict(raw)


def cfg(method, **kw):
    base = dict(method=method, model="stdit-tiny", frames=16, spatial=256, sp=2, gpus=4, mode="train")
    return RunConfig(**{**base, **kw})


def test_a_linear_is_counted_as_the_cost_model_counts_it():
    x = torch.randn(64, 32, requires_grad=True)
    w = torch.randn(128, 32, requires_grad=True)
    c = counts(lambda: F.linear(x, w).sum().backward())
    # forward x @ w.T and the two backward GEMMs (grad x, grad w): 3 x 2mnk
    assert c["gemm_flops"] == 3 * 2 * 64 * 128 * 32
    assert c["attn_flops"] == 0 and c["kernels"] >= 3 and c["mem_bytes"] > 0


def test_the_solve_recovers_known_costs_from_rows_they_generated():
    truth = dict(zip(UNKNOWNS, (3e-5, 2e-11, 5e-11, 2e-6, 3e-11, 2e-10, 7e-11)))
    # kernels, gemm FLOPs, attention FLOPs, tiles, streaming, transcendental and norm bytes: as the benchmarks' rows mix them
    shapes = [(300, 5e6, 1e5, 8, 4e5, 1e4, 2e4), (7, 1e8, 0, 0, 2e6, 0, 0), (7, 4e8, 0, 0, 8e6, 0, 0),
              (7, 0, 6e7, 4, 7e5, 0, 0), (7, 0, 9e8, 16, 3e6, 0, 0), (7, 0, 2e6, 256, 1e6, 0, 0),
              (7, 0, 4e6, 128, 1e6, 0, 0), (6, 0, 0, 0, 3e6, 0, 0), (6, 0, 0, 0, 1.2e7, 0, 0),
              (9, 0, 0, 0, 1e6, 2e6, 0), (9, 0, 0, 0, 1e6, 0, 3e6)]
    rows = [{**dict(zip(COUNTS, c)), "seconds": sum(n * truth[u] for n, u in zip(c, UNKNOWNS))} for c in shapes]
    got = solve(rows)
    for name, value in truth.items():
        assert got[name] == pytest.approx(value, rel=1e-6), name
    assert max(abs(r) for r in got["residuals"]) < 1e-9


def test_memory_kernels_are_classed_by_what_their_bytes_cost_a_cpu_thread():
    x = torch.randn(64, 32, requires_grad=True)

    def block():
        h = F.layer_norm(x, (32,))
        h = F.gelu(h, approximate="tanh") + 1.0
        (h.t().contiguous() * 2).sum().backward()
    from dspbench.cost.rank_trace import trace_ops
    kernels, _ = trace_ops(block)
    classes = {k.op: memory_class(k) for k in kernels if k.kind == "memory"}
    assert classes["gelu"] == classes["gelu_backward"] == "math"
    assert classes["native_layer_norm"] == classes["native_layer_norm_backward"] == "norm"
    assert classes["clone"] == classes["add"] == classes["mul"] == "stream"
    c = counts(block)
    assert c["math_bytes"] > 0 and c["norm_bytes"] > 0 and c["mem_bytes"] > 0 and c["attn_tiles"] == 0


def test_a_classed_profile_prices_each_memory_class_at_its_own_rate_and_allocations_at_dispatch_only():
    classed, flat = profile(CLASSED), profile()
    rk = rank_kernels(trace_key(cfg("ulysses_all")))
    seen = set()
    for k, _ in rk.items():
        if k.kind != "memory":
            continue
        cls = memory_class(k)
        seen.add(cls)
        rate = {"alloc": 0.0, "math": CLASSED["s_per_byte_math"], "norm": CLASSED["s_per_byte_norm"],
                "stream": CLASSED["s_per_byte"]}[cls]
        assert work_s(k, classed) == pytest.approx(k.bytes * rate, rel=1e-12), (k.op, cls)
        assert work_s(k, flat) == pytest.approx(k.bytes * KERNELS["s_per_byte"], rel=1e-12)   # as before the classes
    assert seen == {"alloc", "math", "norm", "stream"}


def test_short_attentions_pay_per_tile_on_a_classed_profile():
    p = profile(CLASSED)
    rk = rank_kernels(trace_key(cfg("dsp", frames=8)))
    attn = [k for k, _ in rk.items() if k.kind == "attention"]
    temporal = min(attn, key=lambda k: k.attn[1])          # stdit's temporal attention: T tokens, S x heads of them
    assert attn_tiles(temporal) == temporal.attn[0] * 1    # 8 tokens: one 64-row tile per batch x head
    assert work_s(temporal, p) == pytest.approx(temporal.flops * CLASSED["s_per_attn_flop"]
                                                + attn_tiles(temporal) * CLASSED["s_per_attn_tile"], rel=1e-12)
    assert work_s(temporal, profile()) == pytest.approx(temporal.flops * KERNELS["s_per_attn_flop"], rel=1e-12)


def test_compute_is_the_sum_of_the_ranks_traced_kernels_at_their_costs():
    p, c = profile(), cfg("ring")
    rk = rank_kernels(trace_key(c))
    by_hand = 0.0
    for k, n in rk.items():
        work = (k.flops * KERNELS["s_per_gemm_flop"] if k.kind in ("gemm", "conv") else
                k.flops * KERNELS["s_per_attn_flop"] if k.kind == "attention" else k.bytes * KERNELS["s_per_byte"])
        by_hand += n * (KERNELS["s_per_kernel"] + work)
    by_hand += sum(n for _, n in rk.collectives) * KERNELS["s_per_kernel"]
    assert cpu_compute(c, p).seconds == pytest.approx(by_hand, rel=1e-12)
    assert predict(c, p).compute_s == pytest.approx(by_hand, rel=1e-12)


def test_what_a_method_adds_is_priced_from_its_own_kernels():
    p = profile()
    seconds = {m: cpu_compute(cfg(m), p) for m in ("dsp", "ulysses", "ulysses_all", "ring")}
    # Ulysses switches at every attention (DSP only between the two attentions), and ulysses_all
    # moves every tensor of the block: more permutes and copies, counted
    mem = {m: c.classes["memory"]["calls"] for m, c in seconds.items()}
    assert mem["dsp"] < mem["ulysses"] < mem["ulysses_all"]
    assert seconds["dsp"].seconds < seconds["ulysses"].seconds < seconds["ulysses_all"].seconds
    # the ring runs its chunk pairs: more attention kernels than the one-shot methods, each shorter
    assert seconds["ring"].classes["attention"]["calls"] > seconds["dsp"].classes["attention"]["calls"]


def test_no_fitted_method_term_applies_once_kernels_are_measured():
    p = profile()
    raw = copy.deepcopy(p.raw)
    raw["compute"]["method_overhead_s"] = {"2": {"dsp": 5.0}}
    raw["compute"]["module_overhead_s"] = 1.0
    fitted = from_dict(raw)
    assert predict(cfg("dsp"), fitted).step_s == pytest.approx(predict(cfg("dsp"), p).step_s, rel=1e-12)
    assert explain(cfg("dsp"), fitted, predict(cfg("dsp"), fitted))["fitted_s"] == 0.0


def test_inference_dispatches_at_its_own_per_kernel_cost():
    p = profile()
    slow = profile({**KERNELS, "s_per_kernel_infer": 1e-3})
    a, b = cpu_compute(cfg("dsp", mode="infer"), p), cpu_compute(cfg("dsp", mode="infer"), slow)
    kernels = rank_kernels(trace_key(cfg("dsp", mode="infer"))).count
    assert b.seconds - a.seconds >= kernels * (1e-3 - 1e-5) * (1 - 1e-9)


def test_the_explanation_counts_each_collective_and_kernel_kind():
    p = profile()
    c = cfg("ulysses")
    m = explain(c, p, predict(c, p))
    assert m["collectives"]["all_to_all.fwd"]["calls"] == 8     # 4 per attention x 2 attentions (stdit: spatial, temporal)
    assert m["collectives"]["all_to_all.fwd"]["seconds"] > 0
    assert sum(d["seconds"] for d in m["kernels"].values()) == pytest.approx(predict(c, p).compute_s, rel=1e-9)


@pytest.mark.parametrize("bad", [{"s_per_byte": 0.0}, {"s_per_kernel": -1.0}, {"s_per_attn_flop": "fast"}])
def test_a_kernels_table_missing_or_with_a_non_positive_term_is_refused(bad):
    terms = {**KERNELS, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        profile(terms)
    partial = {k: v for k, v in KERNELS.items() if k != "s_per_gemm_flop"}
    with pytest.raises(ValueError, match="s_per_gemm_flop"):
        profile(partial)


def test_the_rank_side_benchmark_measures_positive_costs_that_explain_its_rows():
    torch.set_num_threads(1)
    got = bench_kernels("stdit-tiny", "fp32", torch.device("cpu"), iters=3)
    assert all(got[k] > 0 and math.isfinite(got[k]) for k in UNKNOWNS + ("s_per_kernel_infer",))
    assert len(got["rows"]) == len(got["residuals"]) + 1      # the no-grad row is not in the solve
    # a dispatch cost of microseconds, a rate of GFLOP/s and a bandwidth of GB/s: a CPU
    assert 1e-7 < got["s_per_kernel"] < 1e-3
    assert 1e8 < 1 / got["s_per_gemm_flop"] < 1e13 and 1e8 < 1 / got["s_per_byte"] < 1e12
    # a tanh-GELU's bytes cost a thread more than an add's (its arithmetic per element); every row is
    # looped to the same contention state (SAMPLE_MIN_S), so each row's sample spans several calls when short
    assert got["s_per_byte_math"] > got["s_per_byte"]
    assert all(r["calls_per_sample"] >= 1 for r in got["rows"])
    assert max(r["calls_per_sample"] for r in got["rows"]) > 1


def test_calibrated_method_steps_are_reported_as_residual_shares_not_applied():
    from dspbench.calibrate.methods import add_method_overheads
    prof = copy.deepcopy(profile().raw)
    prof["compute"].pop("method_overhead_s", None)
    prof["sources"] = {}
    c = cfg("dsp")
    predicted = predict(c, from_dict(prof)).step_s
    add_method_overheads(prof, {"2": {"dsp": {"step_s": predicted * 1.25, "step_times_s": [predicted * 1.25],
                                              "config": c.to_dict()}}}, {})
    assert "method_overhead_s" not in prof["compute"]
    assert prof["calibration"]["method_residual_share"]["2"]["dsp"] == pytest.approx(0.2)
    assert "reported, not applied" in prof["sources"]["calibration.method_residual_share.2.dsp"]
    assert predict(c, from_dict(prof)).step_s == pytest.approx(predicted)


def test_the_plan_says_no_method_term_applies_and_explains_each_row(tmp_path, capsys):
    from dspbench.cli import main
    from dspbench.cost.profile_toml import dumps
    path = tmp_path / "k.toml"
    path.write_text(dumps(profile().raw))
    assert main(["plan", "--model", "stdit3-tiny", "--frames", "8", "--spatial", "64", "--gpus", "4",
                 "--hardware", str(path), "--methods", "dsp,ulysses", "--top", "2", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "method terms: none: every method priced from its traced kernels" in out
    assert "kernels memory" in out and "all_to_all.fwd" in out


def test_a_plan_on_a_profile_its_calibration_warned_about_says_so_in_its_header(tmp_path, capsys):
    from dspbench.cli import main
    from dspbench.cost.profile_toml import dumps
    raw = copy.deepcopy(profile().raw)
    raw.setdefault("calibration", {})["warnings"] = ["machine loaded: load average 9.0 on 2 cores before calibrating"]
    path = tmp_path / "warned.toml"
    path.write_text(dumps(raw))
    args = ["plan", "--model", "stdit-tiny", "--frames", "8", "--spatial", "64", "--gpus", "4", "--methods", "dsp",
            "--top", "1", "--hardware"]
    assert main(args + [str(path)]) == 0
    head = capsys.readouterr().out.splitlines()[:8]
    assert "profile warning (from its calibration): machine loaded: load average 9.0 on 2 cores before calibrating" in head
    raw["calibration"]["warnings"] = []
    path.write_text(dumps(raw))
    assert main(args + [str(path)]) == 0
    assert "profile warning" not in capsys.readouterr().out


def test_the_calibration_reports_its_models_step_against_its_kernels_sum_and_warns_beyond_a_fifth():
    from dspbench.calibrate.kernels import add_step_ratio
    raw = copy.deepcopy(profile(CLASSED).raw)
    raw["calibration"] = {"warnings": []}
    c = RunConfig(method="single", model="stdit-tiny[depth=2]", frames=4, spatial=256, batch=1, sp=1, gpus=1,
                  mode="train", dtype="fp32")
    priced = cpu_compute(c, from_dict(raw)).seconds
    compute = {"model": "stdit-tiny", "depth": 2, "shape": [1, 4, 256], "dtype": "fp32"}
    add_step_ratio(raw, {**compute, "fwd_bwd_s": priced * 1.1})
    assert raw["calibration"]["kernel_step_ratio"] == pytest.approx(1.1)
    assert raw["calibration"]["warnings"] == [] and "not applied" in raw["sources"]["calibration.kernel_step_ratio"]
    add_step_ratio(raw, {**compute, "fwd_bwd_s": priced * 1.3})
    assert raw["calibration"]["kernel_step_ratio"] == pytest.approx(1.3)
    assert "1.30x the sum of its kernels" in raw["calibration"]["warnings"][0]
    assert predict(cfg("dsp"), from_dict(raw)).step_s == pytest.approx(predict(cfg("dsp"), profile(CLASSED)).step_s)
