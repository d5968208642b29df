"""Micro-benchmarks on pytest-benchmark: `make bench` runs them timed (JSON under results/benchmarks),
`make bench-compare` compares the last two saved runs; `make test` runs each once, untimed
(pyproject's addopts say --benchmark-disable), so they cannot rot.

Single-process ones (attention kernels, the ledger's cost per event, `predict`, `report`) are
timed by the fixture. The switch is timed inside its gloo ranks (bench/micro/switch.py: barrier,
per-op timers, slowest rank per iteration, rounds paired): the fixture's pedantic mode runs it once
and times the whole run (spawn included, not the number to read); the per-variant medians and the
ratios go to `extra_info`, which the saved JSON keeps.
"""
from __future__ import annotations

import json

import pytest
import torch

from dspbench.methods import attn_kernels
from dspbench.methods.comm.ledger import Ledger, record

pytestmark = pytest.mark.benchmark


def _enabled(benchmark) -> bool:
    return not benchmark.disabled


# ---------------------------------------------------------------- the DSP switch (multi-rank)
def test_switch_against_raw_a2a_plus_copy_and_the_reference(benchmark):
    from dspbench.micro import switch
    # timed: 4, 16, 64 MiB per rank as the issue asks; untimed (CI): one small size, one round
    kw = (dict(sizes_mib=(4, 16, 64), repeats=7, iters=5, warmup=2) if _enabled(benchmark)
          else dict(sizes_mib=(0.25,), repeats=1, iters=1, warmup=0, frames=8, hidden=64))
    res = benchmark.pedantic(switch.run, kwargs=dict(world=4, **kw), rounds=1, iterations=1)
    for size in res["sizes"]:
        assert size["verify"]["a_equals_b"], size["verify"]
        mib = size["payload_mib"]
        for v in switch.VARIANTS:
            benchmark.extra_info[f"{mib:g}MiB.{v}.median_s"] = size["variants_s"][v]["median"]
        for r in ("a/b", "a/(c+d)"):
            s = size["ratios"][r]
            benchmark.extra_info[f"{mib:g}MiB.{r}"] = [s["median"], s["p10"], s["p90"]]
    benchmark.extra_info["source"] = "measured inside 4 gloo ranks on this machine (bench/micro/switch.py)"
    benchmark.extra_info["conditions"] = res["conditions"]       # load, cores, threads per rank, competing CPU
    benchmark.extra_info["noisy"] = res["noisy"]                 # [] = quiet; the goals are judged only then
    assert res["conditions"]["ranks"] == 4 and res["conditions"]["threads_per_rank"] == 1


# ---------------------------------------------------------------- `--a2a list`'s extra copies (multi-rank)
def _a2a_styles_probe(sizes, iters):
    from dspbench.calibrate.a2a_style import bench_a2a_styles
    return bench_a2a_styles(sizes, iters=iters, warmup=1, device="cpu")


def test_a2a_list_extra_per_byte_repeats_within_the_calibrations_band(benchmark):
    """Two calibrations of the list style's extra seconds per byte on 2 gloo ranks, back to back: timed, they
    agree within 4x (memory-bound copies of 2-8 MiB; 4x is the band a loaded machine still holds). Untimed
    (make test) the probe runs once small, so it cannot rot, and no ratio is judged: a timing is no test."""
    from dspbench.run.ranks import run_ranks
    sizes, iters = ((2 << 20, 8 << 20), 9) if _enabled(benchmark) else ((64 << 10,), 1)

    def twice():
        return [run_ranks(_a2a_styles_probe, 2, sizes, iters)[0] for _ in range(2)]
    first, second = benchmark.pedantic(twice, rounds=1, iterations=1)
    a, b = first["extra_s_per_byte"], second["extra_s_per_byte"]
    benchmark.extra_info.update({"extra_s_per_byte": [a, b], "sizes": list(sizes),
                                 "source": "measured inside 2 gloo ranks on this machine (bench/calibrate/a2a_style.py)"})
    if _enabled(benchmark):
        assert a > 0 and b > 0 and 0.25 <= b / a <= 4, (first, second)


# ---------------------------------------------------------------- attention kernels
KERNELS = {
    "torch_cpu_flash": lambda q, k, v, s: attn_kernels.block_forward(q, k, v, s),
    "fp32_reference": lambda q, k, v, s: attn_kernels._reference_forward(q, k, v, s),
    "sdpa": lambda q, k, v, s: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=s),
}


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("impl", sorted(KERNELS))
def test_attention_kernel_forward_and_backward(benchmark, impl, dtype):
    torch.set_num_threads(1)
    length = 512 if _enabled(benchmark) else 32
    g = torch.Generator().manual_seed(0)
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    q, k, v = (torch.randn(1, 4, length, 32, generator=g).to(dt).requires_grad_() for _ in range(3))

    def step():
        out = KERNELS[impl](q, k, v, 32 ** -0.5)
        out = out[0] if isinstance(out, tuple) else out
        out.float().sum().backward()
        return out

    out = benchmark(step)
    assert out.shape == q.shape and torch.isfinite(out.float()).all()
    benchmark.extra_info["shape_BHLD"] = [1, 4, length, 32]


# ---------------------------------------------------------------- the ledger, predict, report
def test_ledger_cost_per_event(benchmark):
    events = 1000

    def run():
        with Ledger() as led:
            for _ in range(events):
                record("all_to_all", "fwd", 4, 1 << 20, "bench")
        return led

    led = benchmark(run)
    assert len(led.events) == events and led.wire_total == events * (3 << 18)
    benchmark.extra_info["events_per_round"] = events


PREDICT_CASES = [("dsp", "stdit-xl", 8), ("ulysses", "stdit-xl", 8), ("ring", "stdit3-xl", 16),
                 ("allgather_kv", "stdit-xl", 8), ("megatron_sp", "stdit-xl", 8)]


@pytest.mark.parametrize("method,model,gpus", PREDICT_CASES, ids=lambda c: str(c))
def test_predict_per_configuration(benchmark, method, model, gpus):
    from dspbench.cost.hardware import load_profile
    from dspbench.cost.model import predict
    from dspbench.records.config import RunConfig
    cfg = RunConfig(method=method, model=model, gpus=gpus, sp=gpus, frames=64, spatial=1024, dtype="bf16",
                    backend="nccl")
    profile = load_profile("h100-ib")
    pred = benchmark(predict, cfg, profile)
    assert pred is not None


def test_report_on_synthetic_records(benchmark, tmp_path):
    from dspbench.micro.synth_records import sweep_records
    from dspbench.reports.report import build_report
    n = 10_000 if _enabled(benchmark) else 60
    root = tmp_path / "bench-sweep"
    (root / "jobs").mkdir(parents=True)
    recs = sweep_records(n)
    for i in range(0, n, 500):     # 500 records per job file, as from a job array
        lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in recs[i:i + 500])
        (root / "jobs" / f"job-{i // 500:03d}.jsonl").write_text(lines)
    page = benchmark.pedantic(build_report, args=(root,), rounds=1 if not _enabled(benchmark) else 3,
                              iterations=1)
    html = page.read_text()
    assert 'id="headline"' in html and "Synthetic data" in html   # the report's first screen, marked synthetic
    benchmark.extra_info["records"] = n
    benchmark.extra_info["source"] = "synthetic records (dspbench.micro.synth_records)"
