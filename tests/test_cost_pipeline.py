"""Sample-mode predictions price the whole pipeline (bench/cost/pipeline.py): text encoding, the
denoising steps, the VAE decode, each a stage in the record, their sum the end-to-end time; the
DiT-only step time stays in step_time_median_s."""
from dataclasses import replace
import json

import pytest

from dspbench.cli import main
from dspbench.cost.hardware import load_profile
from dspbench.cost.predict import predicted_record
from dspbench.cost.tiers import op_time
from dspbench.methods.vae_patch import row_spans
from dspbench.methods.vae_patch_plan import comm_bytes, plan, rank_flops
from dspbench.models.vae import WAN21_VAE, decoder_flops
from dspbench.records.config import RunConfig

WAN = dict(method="ulysses", model="full3d-1.3b", frames=24, spatial=1560, gpus=4, sp=4, mode="sample",
           dtype="bf16", sample_steps=50, cfg=True)


def test_stages_sum_to_the_end_to_end_time_and_denoise_is_the_dit_alone():
    rec = predicted_record(RunConfig(**WAN), load_profile("h100-ib"))
    st = rec["predicted_stages_s"]
    assert set(st) == {"text_encode", "denoise", "vae_decode"} and all(v > 0 for v in st.values())
    assert rec["predicted_end_to_end_s"] == pytest.approx(sum(st.values()))
    assert st["denoise"] == rec["step_time_median_s"]
    assert rec["pipeline"]["text_encoder"] == "umt5-xxl" and rec["pipeline"]["latents"][0] == 24
    assert rec["pipeline"]["flops"]["text_encode"] == 2 * 5.7e9 * 512 * 2       # CFG: two prompts


def test_vae_variants():
    prof = load_profile("h200-ib-curve")
    one = predicted_record(RunConfig(**WAN), prof)["predicted_stages_s"]["vae_decode"]
    tiled = predicted_record(RunConfig(**WAN), prof, vae="tiled")["predicted_stages_s"]["vae_decode"]
    par = predicted_record(RunConfig(**WAN), prof, vae="patch_parallel")["predicted_stages_s"]["vae_decode"]
    assert tiled > one and one / 4 < par < one / 2


def test_patch_parallel_prices_the_slowest_slab_and_the_formulas_bytes_on_the_sp_link():
    """The decode over SP 4 (methods/vae_patch.py): rank 0's 20 of the 78 latent rows at the decode's
    rate, plus the ops of the plan the ledger is tested against (tests/test_vae_patch.py) for a rank
    inside the group (two halos), each on the SP group's link (one node: the intra tier)."""
    prof = load_profile("h200-ib-curve")
    rec = predicted_record(RunConfig(**WAN), prof, vae="patch_parallel")
    one = predicted_record(RunConfig(**WAN), prof)["predicted_stages_s"]["vae_decode"]
    T, H, W = rec["pipeline"]["latents"]
    assert (H, row_spans(H, 4)[0]) == (78, (0, 20))
    assert rank_flops(WAN21_VAE, T, H, W, 4, 0) * 78 == decoder_flops(WAN21_VAE, T, H, W) * 20
    sent = [sum(comm_bytes(WAN21_VAE, 1, T, H, W, 4, r, 2).values()) for r in range(4)]
    assert rec["pipeline"]["vae_comm_bytes"] == max(sent) == sent[1] > sent[0]
    comm_s = sum(o.count * op_time(prof.intra, o.op, o.payload, 4) for _, o in plan(WAN21_VAE, 1, T, H, W, 4, 1, 2))
    assert comm_s > 0
    assert rec["predicted_stages_s"]["vae_decode"] == pytest.approx(one * 20 / 78 + comm_s, rel=1e-9)


def test_train_records_have_no_stages_and_the_cli_prints_them(tmp_path, capsys):
    assert predicted_record(RunConfig(**{**WAN, "mode": "train", "cfg": False}), load_profile("h100-ib"))["predicted_stages_s"] is None
    args = ["predict", "--hardware", "h100-ib", "--records-file", str(tmp_path / "p.jsonl"), "--json"]
    for k, v in WAN.items():
        args += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    assert main(args) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["predicted_end_to_end_s"] > rec["step_time_median_s"]
    with pytest.raises(SystemExit) as e:
        main(args + ["--vae", "nope"])
    assert e.value.code == 2 and not (tmp_path / "q.jsonl").exists()


def test_a_datasheet_prediction_carries_its_assumed_interval_to_the_end_to_end_total():
    """The issue's command on the exact preset: every stage, the total, and an interval whose source
    is named (a datasheet's efficiencies are assumptions with stated ranges: bench/cost/interval.py)."""
    cfg = RunConfig(method="ulysses", model="hunyuanvideo", frames=33, spatial=3600, video="129x720x1280",
                    mode="sample", sample_steps=50, gpus=8, sp=8, shard="S", dtype="bf16")
    rec = predicted_record(cfg, load_profile("h100-ib"))
    assert set(rec["predicted_stages_s"]) == {"text_encode", "denoise", "vae_decode"}
    lo, hi = rec["pipeline"]["end_to_end_interval_s"]
    assert lo < rec["predicted_end_to_end_s"] < hi
    assert rec["step_time_low_s"] < rec["step_time_median_s"] < rec["step_time_high_s"]
    assert rec["interval_source"].startswith("assumed: datasheet profile")
    assert hi - lo == pytest.approx(rec["step_time_high_s"] - rec["step_time_low_s"])   # the fixed stages add no spread


def test_predict_prices_what_the_device_runs_unless_told(tmp_path, capsys):
    """The issue's command gives no --dtype: on a GPU profile that is bf16 over NCCL (a 13B video DiT
    in fp32 would be priced ~13x slower than anyone runs it), on a CPU profile fp32 over gloo; a
    given --dtype/--backend wins, and `plan` fills them from the same place."""
    from dspbench.cost.hardware import device_defaults
    from dspbench.plan.command import request_of
    base = ["predict", "--model", "full3d-1.3b", "--frames", "6", "--spatial", "1560", "--mode", "sample",
            "--sample-steps", "2", "--method", "ulysses", "--gpus", "2", "--sp", "2", "--json",
            "--records-file", str(tmp_path / "p.jsonl")]

    def predict(*extra):
        main(base + list(extra))            # exit 1 where the model does not fit (the CPU profile): a record all the same
        out = capsys.readouterr()
        return json.loads(out.out), out.err

    gpu, note = predict("--hardware", "h100-ib")
    assert (gpu["dtype"], gpu["backend"]) == ("bf16", "nccl") and "dtype bf16, backend nccl: the default on h100-ib" in note
    fp32, note = predict("--hardware", "h100-ib", "--dtype", "fp32")
    assert (fp32["dtype"], fp32["backend"]) == ("fp32", "nccl") and note.startswith("backend nccl: the default")
    assert fp32["step_time_median_s"] > 5 * gpu["step_time_median_s"]    # fp32 peak is a fraction of bf16's
    cpu, _ = predict("--hardware", "emulated-cpu")
    assert (cpu["dtype"], cpu["backend"]) == ("fp32", "gloo") and gpu["status"] == fp32["status"] == "predicted"
    for name in ("h100-ib", "emulated-cpu"):
        args = type("Args", (), {"dtype": None, "backend": None, "top": 1, "repeats": 1, "methods": "dsp",
                                 "model": "stdit-tiny", "model_set": [], "frames": 8, "spatial": 16, "video": ""})()
        req = request_of(args, load_profile(name))
        assert {"dtype": req.base.dtype, "backend": req.base.backend} == device_defaults(load_profile(name))


def test_a_preset_that_describes_its_decoder_is_priced_by_it():
    """HunyuanVideo's and CogVideoX's decoders (their presets' [vae] channels, layers_per_block, ...)
    are diffusers' structure: upsamplers keep the channels, CogVideoX's middle block has no attention;
    a preset without a decoder (Wan 2.1) keeps Wan's."""
    import torch
    from dspbench.cost.pipeline import pipeline_of
    from dspbench.models.registry import get_config
    from dspbench.models.vae import FrameAttention, VAEDecoder

    def decoder(name):
        vae = pipeline_of(name, get_config(name))[1]
        with torch.device("meta"):
            return vae, VAEDecoder(vae)
    hy, hy_mod = decoder("hunyuanvideo")
    cog, cog_mod = decoder("cogvideox-5b")
    wan, _ = decoder("wan2.1-14b")
    assert wan == WAN21_VAE and hy.stage_dims() == [512, 512, 512, 256, 128] and cog.stage_dims() == [512, 512, 256, 256, 128]
    assert hy.time_scale == cog.time_scale == 4 and hy.spatial_scale == cog.spatial_scale == 8
    assert any(isinstance(m, FrameAttention) for m in hy_mod.modules())
    assert not any(isinstance(m, FrameAttention) for m in cog_mod.modules())
    assert sum(p.numel() for p in cog_mod.parameters()) < sum(p.numel() for p in hy_mod.parameters())
    # 33 x 90 x 160 latents (720p x 129 frames): about twice Wan's decoder's work
    assert 1.8 < decoder_flops(hy, 33, 90, 160) / decoder_flops(WAN21_VAE, 33, 90, 160) < 2.6


def test_hopper_datasheet_profiles_price_the_decode_at_the_measured_conv_rate(tmp_path):
    """[compute] conv_peak_fraction (0.14, measured on an H200) prices the VAE decode where no curve
    does; a profile without it (A100: not measured) keeps its efficiency; a bad value is refused."""
    from dspbench.cost.hardware import from_dict
    cfg = RunConfig(**{**WAN, "gpus": 1, "sp": 1})
    for name, fraction in (("h100-ib", 0.14), ("h800-nvlink", 0.14), ("a100-ib", None)):
        prof = load_profile(name)
        # the A100's fraction must be absent too (this read `... or fraction is None`: any A100 passed)
        assert prof.conv_peak_fraction == fraction
        assert ("compute.conv_peak_fraction" in prof.sources) == (fraction is not None)
        # the fraction is the price where no rate table is (a profile without a sku); with its GPU's
        # table the decode is priced conv by conv (cost/stage_kernels.py) and differs from it
        bare = replace(prof, sku="")
        rec = predicted_record(cfg, bare)
        rate = prof.peak_flops["bf16"] * fraction if fraction else prof.flops("bf16")
        assert rec["predicted_stages_s"]["vae_decode"] == pytest.approx(rec["pipeline"]["flops"]["vae_decode"] / rate)
        by_kernel = predicted_record(cfg, prof)["predicted_stages_s"]["vae_decode"]
        assert by_kernel != pytest.approx(rec["predicted_stages_s"]["vae_decode"], rel=1e-3)
    with pytest.raises(ValueError, match="conv_peak_fraction must be in"):
        from_dict({**load_profile("h100-ib").raw, "compute": {"efficiency": 0.45, "conv_peak_fraction": 1.4}})
