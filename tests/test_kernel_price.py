"""Kernel rates read from a GPU's table and kernels priced on it (bench/cost/kernel_rates.py, kernel_price.py)."""
import pytest

from dspbench.cost.kernel_price import price_kernel, resolve_attn_kernel
from dspbench.cost.kernel_rates import (RateTableError, attention_rate, load_rate_table, padded_head_dim,
                                        read_rate_table, tile_fill)
from dspbench.cost.rank_trace import Kernel

SRC = 'kind = "published"\nsource = "test table"'
TABLE = f'''
gpu = "g"
arch = "hopper"
[gemm.bf16]
tflops = 500.0
half_flops = 1e9
{SRC}
[conv.bf16]
tflops = 100.0
{SRC}
[memory]
hbm_efficiency = 0.5
{SRC}
[launch]
device_gap_s = 1e-6
{SRC}
[[attention]]
impl = "fa2"
head_dim = 128
causal = false
pass = "fwd"
dtype = "bf16"
points = [[512, 200.0], [8192, 400.0]]
{SRC}
[[attention]]
impl = "fa2"
head_dim = 128
causal = false
pass = "fwd_bwd"
dtype = "bf16"
points = [[512, 175.0], [8192, 350.0]]
{SRC}
'''


def table(text=TABLE):
    return read_rate_table(text, "g", "test")


def test_an_unsourced_or_unexplained_entry_is_refused_when_read():
    with pytest.raises(RateTableError, match="no kind .* or no source"):
        table(TABLE.replace('source = "test table"', 'source = " "', 1))
    with pytest.raises(RateTableError, match="derived but states no formula"):
        table(TABLE.replace('kind = "published"', 'kind = "derived"', 1))
    with pytest.raises(RateTableError, match="gpu = 'g', expected 'other'"):
        read_rate_table(TABLE, "other", "test")


def test_a_gpu_kind_without_a_table_is_refused():
    with pytest.raises(RateTableError, match="no kernel rate table for GPU kind 'no-such-gpu'"):
        load_rate_table("no-such-gpu")


def test_attention_rate_interpolates_in_log_length_and_the_backward_follows_flash_s_convention():
    t = table()
    mid = attention_rate(t, "fa2", 128, 2048, 2048, "fwd", "bf16")[0]
    assert mid == pytest.approx(300e12)                        # halfway in log between 512 and 8192
    assert attention_rate(t, "fa2", 128, 1 << 16, 1 << 16, "fwd", "bf16")[0] == pytest.approx(400e12)
    bwd = attention_rate(t, "fa2", 128, 8192, 8192, "bwd", "bf16")[0]
    assert 3.5 / 350 == pytest.approx(1 / 400 + 2.5 / (bwd / 1e12))   # fwd + bwd time = fwd_bwd time


def test_short_sequences_lose_the_unfilled_tiles():
    t = table()
    r16 = attention_rate(t, "fa2", 128, 16, 16, "fwd", "bf16")
    assert r16[0] == pytest.approx(200e12 * tile_fill(16, 16) / tile_fill(512, 512))
    assert "tile fill (derived)" in r16[1].source


def test_a_head_runs_at_the_instantiated_size_at_or_above_it():
    assert padded_head_dim(72, [64, 128]) == 128
    assert padded_head_dim(64, [64, 128]) == 64
    with pytest.raises(RateTableError):
        padded_head_dim(300, [64, 128])


def test_an_implementation_the_table_lacks_names_the_flag():
    with pytest.raises(RateTableError, match="--attn-kernel fa3: no rate for it on g"):
        attention_rate(table(), "fa3", 128, 1024, 1024, "fwd", "bf16")


def _gemm(m, n, k):
    a = ("t", (m, k), (k, 1), "bfloat16")
    return Kernel("mm", "gemm", (a, ("t", (k, n), (n, 1), "bfloat16")), 2.0 * m * n * k,
                  2.0 * (m * k + k * n + m * n), gemm=(1, m, n, k))


def test_a_big_gemm_is_compute_bound_and_a_thin_one_memory_bound():
    t = table()
    s, bound, rate = price_kernel(_gemm(8192, 8192, 8192), t, 2e12, "fa2")
    f = 2.0 * 8192 ** 3
    assert bound == "compute" and s == pytest.approx(f / (500e12 * f / (f + 1e9)) + 1e-6)
    s, bound, _ = price_kernel(_gemm(8, 8192, 8192), t, 2e12, "fa2")
    assert bound == "memory" and s == pytest.approx(2.0 * (8 * 8192 * 2 + 8192 * 8192) / 1e12 + 1e-6)


def test_auto_is_sdpa_s_choice_and_a_ring_keeps_its_lse_kernel():
    t = table()
    assert resolve_attn_kernel("auto", t, "ulysses") == "cudnn"        # Hopper
    assert resolve_attn_kernel("auto", t, "ring") == "sdpa_flash"      # the ring's block kernel returns the LSE
    assert resolve_attn_kernel("fa3", t, "ring") == "fa3"
