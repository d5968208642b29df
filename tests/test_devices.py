"""The device table (bench/cost/devices.toml) states each SKU's datasheet facts once: profiles take
them by `sku`, and measured records take their MFU peak from it by torch's device name."""
import tomllib

import pytest

from dspbench.cost.hardware import PROFILE_DIR, available_profiles, device_peak, devices, from_dict, load_profile
from dspbench.facts.build import Outcome, build_record
from dspbench.records.config import RunConfig
from dspbench.run.harness import with_peak

SKU_FACTS = {"device": ("name", "memory_gb", "hbm_TBps"), "compute": ("peak_flops",)}


def test_every_sku_has_its_facts_and_a_source():
    for key, sku in devices().items():
        assert {"name", "torch_names", "memory_gb", "hbm_TBps", "peak_flops", "source"} <= set(sku), key
        assert sku["peak_flops"]["bf16"] > sku["peak_flops"]["fp32"] > 0


@pytest.mark.parametrize("name", available_profiles())
def test_a_profile_naming_a_sku_restates_none_of_its_facts(name):
    raw = tomllib.loads((PROFILE_DIR / f"{name}.toml").read_text())
    if "sku" not in raw.get("device", {}):
        return      # an emulated or measured device: its own facts
    restated = [f"{t}.{k}" for t, keys in SKU_FACTS.items() for k in keys if k in raw.get(t, {})]
    assert not restated, f"{name} restates {restated} of sku {raw['device']['sku']}"
    sku = devices()[raw["device"]["sku"]]
    p = load_profile(name)
    assert p.peak_flops == sku["peak_flops"] and p.memory_bytes == sku["memory_gb"] * 1e9 and p.device == sku["name"]


def test_a_profile_value_wins_over_its_sku_and_an_unknown_sku_is_an_error():
    p = from_dict({"name": "x", "device": {"sku": "h100-sxm", "memory_gb": 40}})
    assert p.memory_bytes == 40e9 and p.peak_flops["bf16"] == 989.5e12
    with pytest.raises(ValueError, match="unknown device sku 'h100-sxn'"):
        from_dict({"name": "x", "device": {"sku": "h100-sxn"}})


def test_measured_mfu_takes_the_peak_of_the_exact_sku_by_torch_name():
    assert device_peak("NVIDIA H100 80GB HBM3", "bf16") == 989.5e12
    assert device_peak("NVIDIA H100 PCIe", "bf16") == 756.5e12        # same family, another peak
    assert device_peak("NVIDIA H100 80GB HBM3", "fp32") is None        # TF32/FP32: no MFU
    assert device_peak("cpu", "bf16") is None
    cfg = RunConfig(dtype="bf16", gpus=1)
    metrics = {"step_time_median_s": 0.5, "peak_mem_bytes_per_rank": [1], "device_name": "NVIDIA H200"}
    rec = build_record(cfg, with_peak(cfg, Outcome("ok", None, metrics)))
    assert rec["device_peak_flops"] == 989.5e12
    assert rec["mfu"] == pytest.approx(rec["flops_per_step"] / 0.5 / 989.5e12)
    cpu = build_record(cfg, with_peak(cfg, Outcome("ok", None, {**metrics, "device_name": "cpu"})))
    assert cpu["mfu"] is None


def test_every_sku_fact_cites_its_datasheet_table():
    from test_cost import source_problem
    assert not {k: sku["source"] for k, sku in devices().items() if source_problem(sku["source"])}


def _synthetic_gpu_record():
    import random
    from dspbench.micro.synth_records import GPU_ENV, make_record
    cfg = RunConfig(method="ulysses", model="stdit-tiny", gpus=2, sp=2, frames=4, spatial=16, dtype="bf16", iters=3)
    return make_record(cfg, random.Random(0), flops_per_s=400e12, bytes_per_s=150e9, env=GPU_ENV)


def test_synthetic_records_take_their_mfu_peak_from_the_device_table(tmp_path, monkeypatch):
    """synth_records states no peak of its own: its H100-like records divide by the table's (issue 42),
    and a table that says otherwise moves their MFU with it."""
    import dspbench.cost.hardware as hardware
    rec = _synthetic_gpu_record()
    achieved = rec["mfu"] * devices()["h100-sxm"]["peak_flops"]["bf16"]
    doctored = tmp_path / "devices.toml"       # a table of one SKU, its peak another
    doctored.write_text('[h100-sxm]\ntorch_names = ["NVIDIA H100 80GB HBM3"]\npeak_flops = { bf16 = 500e12 }\n')
    monkeypatch.setattr(hardware, "DEVICE_TABLE", doctored)
    assert _synthetic_gpu_record()["mfu"] == pytest.approx(achieved / 500e12, rel=1e-12)
