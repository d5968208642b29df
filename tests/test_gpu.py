"""The CUDA path on one GPU: bf16 model against the fp32 oracle, NCCL harness runs, CUDA timing.

One GPU cannot host several NCCL ranks, so SP degrees > 1 are covered on CPU/gloo; here: kernels,
numerics and the harness's CUDA path at world size 1. Skipped without CUDA.
"""
import pytest
import torch

from dspbench.records.config import RunConfig
from dspbench.run.harness import run_config
from dspbench.models import Shape, build_model, get_config, make_inputs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_bf16_model_on_cuda_close_to_fp32_oracle():
    cfg = get_config("stdit-tiny")
    torch.manual_seed(0)
    ref = build_model(cfg)
    x, t, y, _ = make_inputs(cfg, Shape(2, 8, 64))
    out_ref = ref(x, t, y)
    model = build_model(cfg)
    model.load_state_dict(ref.state_dict())
    model = model.to("cuda", torch.bfloat16)
    out = model(*(v.to("cuda", torch.bfloat16) for v in (x, t, y))).float().cpu()
    # bf16 keeps 8 mantissa bits: 2-block model, errors of a few 1e-2 relative to the output scale.
    assert (out - out_ref).abs().max() <= 5e-2 * out_ref.abs().max()


@pytest.mark.parametrize("mode", ["train", "infer", "sample"])
def test_harness_on_nccl_records_cuda_timing_and_memory(tmp_path, mode):
    cfg = RunConfig(method="single", model="stdit-tiny", frames=8, spatial=64, gpus=1, sp=1, mode=mode,
                    dtype="bf16", backend="nccl", warmup=1, iters=3, sample_steps=2, check=(mode == "train"))
    rec = run_config(cfg, tmp_path / "r.jsonl")
    assert rec["status"] == "ok", rec["error"]
    assert rec["peak_mem_bytes"] > 0 and rec["step_time_median_s"] > 0
    assert rec["environ"]["devices"][0] != "unknown" and rec["environ"]["cuda"]


def test_checkpointing_lowers_peak_memory_on_cuda(tmp_path):
    peaks = {}
    for ckpt in (False, True):
        cfg = RunConfig(method="single", model="stdit-small", frames=16, spatial=256, gpus=1, sp=1,
                        dtype="bf16", backend="nccl", warmup=1, iters=2, grad_ckpt=ckpt)
        rec = run_config(cfg, tmp_path / "r.jsonl")
        assert rec["status"] == "ok", rec["error"]
        peaks[ckpt] = rec["peak_mem_bytes"]
    assert peaks[True] < peaks[False]
