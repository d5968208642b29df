"""Every hardware profile loads and its numbers are in the range of a real device of its kind: a
datasheet figure typed in the wrong unit (TB/s as GB/s, dense vs sparse, GB vs GiB by 1000x) fails here."""
from __future__ import annotations

import pytest

from dspbench.cost.hardware import available_profiles, load_profile

TFLOP, GB = 1e12, 1e9
# the GPUs published SP tables ran on (issue 32): each has a datasheet profile
PUBLISHED_GPUS = {"h20-nvlink": "H20", "l20-pcie": "L20", "l40-pcie": "L40", "a100-ib": "A100", "h800-nvlink": "H800",
                  "h100-ib": "H100"}
GPU_PROFILES = [n for n in available_profiles() if n != "emulated-cpu"]


def test_the_gpus_of_published_tables_have_profiles():
    for name, device in PUBLISHED_GPUS.items():
        p = load_profile(name)
        assert p.device.startswith(device) and p.kind == "datasheet", (name, p.device, p.kind)


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_gpu_profile_fields_are_sane(name):
    p = load_profile(name)
    assert 16 * GB <= p.memory_bytes <= 200 * GB
    assert 0.3e12 <= p.hbm_Bps <= 10e12                       # GDDR6 0.86 TB/s .. HBM3e 4.8
    bf16, fp32 = p.peak_flops["bf16"], p.peak_flops["fp32"]
    assert 50 * TFLOP <= bf16 <= 2500 * TFLOP and fp32 < bf16  # dense tensor-core bf16 beats fp32
    assert 0 < p.efficiency <= 1 and 0 < p.usable_memory_fraction <= 1 and 0 <= p.reserved_bytes < p.memory_bytes
    assert p.gpus_per_node in (1, 2, 4, 8, 16)
    for link in (p.intra, p.inter):
        assert 1e-6 <= link.alpha_s <= 1e-4 and 0 < link.efficiency <= 1
        assert 5 * GB <= link.busbw("all_to_all") <= 1000 * GB
    assert p.intra.busbw("all_to_all") >= p.inter.busbw("all_to_all")   # a node's own links are never slower
    assert p.usable_bytes > 0.8 * p.memory_bytes - 4 * GB


def test_pcie_cards_have_no_nvlink_rate():
    """L20 and L40 have no NVLink: their intra-node rate is PCIe Gen4's (32 GB/s a direction), far
    below an NVLink node's, which is what makes SP's all-to-alls dear there."""
    nvlink = load_profile("h20-nvlink").intra.busbw("all_to_all")
    for name in ("l20-pcie", "l40-pcie"):
        p = load_profile(name)
        assert p.intra.busbw("all_to_all") <= 32 * GB < nvlink / 10
        assert "PCIe" in p.sources["link.intra.bw_GBps"]


def test_h20_trades_compute_for_memory():
    h20, h100 = load_profile("h20-nvlink"), load_profile("h100-ib")
    assert h20.peak_flops["bf16"] < h100.peak_flops["bf16"] / 6 and h20.memory_bytes > h100.memory_bytes
