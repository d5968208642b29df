"""One rank's kernels as the method's own sharding gives them (bench/cost/rank_trace.py)."""
from dataclasses import replace

import pytest

from dspbench.cost.rank_trace import _by_depth, _one_call, rank_kernels
from dspbench.models import get_config
from dspbench.records.config import RunConfig


def cfg(method, sp, model="stdit-tiny", T=8, S=64, mode="train", **kw):
    return RunConfig(method=method, model=model, frames=T, spatial=S, gpus=sp, sp=sp, mode=mode, dtype="fp32", **kw)


def flops(rk, kind):
    return sum(k.flops * n for k, n in rk.items() if k.kind == kind)


def attn(rk):
    return [(k.attn, n) for k, n in rk.items() if k.kind == "attention" and k.attn[-1] == "fwd"]


@pytest.mark.parametrize("method", ["dsp", "ulysses", "ring", "allgather_kv", "usp", "megatron_sp"])
def test_the_ranks_share_the_model_s_work_and_each_repeats_the_replicated_part(method):
    # an even shape: N ranks' attention adds up to the single device's; GEMMs are linear in the
    # tokens, F(T) = a T + r, where r (timestep and text embeddings, the text's keys and values) runs
    # on every rank: N ranks compute F(T) + (N - 1) r
    one = rank_kernels(cfg(method, 1, mode="infer"))
    four = rank_kernels(cfg(method, 4, mode="infer"))
    replicated = 2 * flops(rank_kernels(cfg(method, 1, T=4, mode="infer")), "gemm") - flops(one, "gemm")
    assert replicated > 0
    assert 4 * flops(four, "attention") == pytest.approx(flops(one, "attention"), rel=1e-9)
    if method == "megatron_sp":   # tensor parallel shards the text's key/value projection too: less is repeated
        assert flops(one, "gemm") < 4 * flops(four, "gemm") < flops(one, "gemm") + 3 * replicated
    else:
        assert 4 * flops(four, "gemm") == pytest.approx(flops(one, "gemm") + 3 * replicated, rel=1e-9)


def test_ulysses_attends_at_full_length_on_a_quarter_of_the_heads_and_the_ring_in_chunk_pairs():
    one = dict(attn(rank_kernels(cfg("ulysses", 1, mode="infer", shard="S"))))
    uly = dict(attn(rank_kernels(cfg("ulysses", 4, mode="infer", shard="S"))))
    ring = attn(rank_kernels(cfg("ring", 4, mode="infer", shard="S")))
    spatial_full = max(a for a in one if a[1] == 64)            # (B'H, 64, 64, D): the spatial attention
    assert (spatial_full[0] // 4, 64, 64, *spatial_full[3:]) in uly
    chunks = [(a, n) for a, n in ring if a[1] == 16 and a[2] == 16]
    assert chunks and sum(n for _, n in chunks) % 4 == 0        # N blocks of L/N keys per attention


def test_depth_extrapolation_equals_tracing_the_whole_stack():
    c = cfg("ring", 2, mode="train")
    mcfg = replace(get_config("stdit-tiny"), depth=3)
    direct = _one_call(c, mcfg)[0]
    extrapolated = _by_depth(c, mcfg)[0]
    assert extrapolated == direct


def test_checkpointing_adds_one_forward_of_every_block():
    plain = rank_kernels(cfg("dsp", 2, mode="train"))
    ckpt = rank_kernels(cfg("dsp", 2, mode="train", grad_ckpt=True))
    fwd_blocks = _by_depth(cfg("dsp", 2, mode="infer"), get_config("stdit-tiny"), blocks_only=True)[0]
    extra = sum(k.flops * n for k, n in fwd_blocks.items() if k.kind == "gemm")
    assert extra > 0
    assert flops(ckpt, "gemm") == pytest.approx(flops(plain, "gemm") + extra)


def test_padding_is_priced_as_the_method_pads():
    # T 6 at SP 4 pads to 8 on the embedded methods' shard: each rank computes 2 frames' tokens
    even = rank_kernels(cfg("ulysses", 4, T=8, mode="infer"))
    uneven = rank_kernels(cfg("ulysses", 4, T=6, mode="infer"))
    assert flops(uneven, "gemm") == pytest.approx(flops(even, "gemm"), rel=0.02)


def test_cfg_parallel_runs_half_the_batch_of_cfg_as_a_batch():
    batch = rank_kernels(cfg("ulysses", 2, mode="sample", cfg=True))
    parallel = rank_kernels(replace(cfg("ulysses", 2, mode="sample", cfg=True, cfg_parallel=True), gpus=4))
    assert 2 * flops(parallel, "gemm") == pytest.approx(flops(batch, "gemm"), rel=1e-9)


def test_every_collective_the_rank_issues_is_charged_as_a_host_launch():
    from dspbench.cost.gpu_compute import gpu_compute
    from dspbench.cost.hardware import load_profile
    prof = load_profile("h100-ib")
    per = float(prof.host["s_per_kernel"])
    for method in ("dsp", "megatron_sp"):
        cfg = RunConfig(method=method, model="stdit-tiny", frames=8, spatial=16, sp=2, gpus=2)
        rk = rank_kernels(cfg)
        launches = rk.count + sum(n for _, n in rk.collectives)
        assert sum(n for _, n in rk.collectives) > 0
        got = gpu_compute(cfg, prof)
        assert got.explain["host"]["calls"] == launches
        assert got.host_s == pytest.approx(launches * per + float(prof.host["call_s"]))


def test_tracing_leaves_the_process_excepthook_as_it_found_it():
    import sys
    hook = sys.excepthook
    rank_kernels(cfg("dsp", 2, S=16))
    assert sys.excepthook is hook      # torch's init_process_group wraps it, one "[rank0]: " per trace
