"""Models from a file (models/registry.py): presets of the public video DiTs, model files, --model-set
overrides, sizes in frames x pixels; bad input exits 2 naming the file and field, nothing written;
every method equals the oracle on two presets shrunk to CPU size with their real ratios."""
import importlib.util
import json
import shutil

import pytest

import oracle_tasks as ot
from dspbench.cli import main
from dspbench.models.params import param_count
from dspbench.models.registry import presets, resolve, video_to_tokens, with_overrides
from oracle_tasks import assert_matches_oracle

PRESETS = ["cogvideox-2b", "cogvideox-5b", "flux.1-dev", "hunyuanvideo", "latte-xl", "ltx-video", "mochi-1",
           "opensora-1.0", "opensora-1.2", "step-video-t2v", "wan2.1-1.3b", "wan2.1-14b"]


def test_every_preset_loads_with_its_source_and_what_it_simplifies():
    assert set(presets()) == set(PRESETS)
    for name in presets():
        e = resolve(name)
        assert e.published["params"] > 0 and len(e.published["source"]) > 40 and e.notes["simplifies"]
        assert video_to_tokens(name, e.sampling["video"])
    # the loader refuses any guidance but these two, so check which: the guidance-distilled ones by name
    assert {n for n in presets() if resolve(n).sampling["guidance"] == "distilled"} == {"flux.1-dev", "hunyuanvideo"}


@pytest.mark.parametrize("name", PRESETS)
def test_parameter_count_within_3_percent_of_the_published(name):
    e = resolve(name)
    assert param_count(e.config) == pytest.approx(e.published["params"], rel=0.03)


@pytest.mark.parametrize("name,blocks", [("hunyuanvideo", (20, 40, "dual")), ("flux.1-dev", (19, 38, "dual")),
                                         ("mochi-1", (48, 0, "dual")), ("cogvideox-5b", (42, 0, "expert"))])
def test_mmdit_presets_use_their_real_block_kinds(name, blocks):
    cfg = resolve(name).config
    assert (cfg.depth, cfg.single_depth, cfg.text_stream) == blocks and cfg.modulation == "linear"


@pytest.mark.parametrize("name,video,ts", [("hunyuanvideo", "129x720x1280", (33, 3600)),
                                          ("cogvideox-5b", "49x480x720", (13, 1350)),
                                          ("wan2.1-14b", "81x480x832", (21, 1560)),
                                          ("flux.1-dev", "1x1024x1024", (1, 4096)),
                                          ("mochi-1", "163x480x848", (28, 1590)),
                                          ("opensora-1.0", "16x512x512", (16, 1024))])
def test_video_sizes_convert_through_the_vae_and_patch(name, video, ts):
    assert video_to_tokens(name, video) == ts


def test_a_size_that_does_not_convert_names_the_nearest():
    with pytest.raises(ValueError, match=r"nearest: \{125,129\}x720x1280"):
        video_to_tokens("hunyuanvideo", "127x720x1280")


def _predict(tmp_path, model, *extra):
    path = tmp_path / "p.jsonl"
    args = ["predict", "--model", model, "--video", "81x480x832", "--mode", "sample", "--method", "ring", "--gpus", "4",
            "--sp", "4", "--shard", "S", "--hardware", "h100-ib", "--dtype", "bf16", "--records-file", str(path), "--json",
            *extra]
    return main(args), path


@pytest.mark.parametrize("name", ["wan2.1-1.3b", "hunyuanvideo", "cogvideox-5b"])   # cross, dual + single, expert
def test_a_toml_copy_given_by_path_predicts_what_the_name_does(tmp_path, capsys, name):
    copy = tmp_path / "my_model.toml"
    shutil.copy(resolve(name).path, copy)
    assert _predict(tmp_path, name)[0] == 0
    by_name = json.loads(capsys.readouterr().out)
    assert _predict(tmp_path, str(copy))[0] == 0
    by_path = json.loads(capsys.readouterr().out)
    assert by_name["status"] == "predicted" and by_name["video"] == "81x480x832"
    for k in ("step_time_median_s", "predicted_peak_mem_bytes", "comm_wire_bytes", "frames", "spatial", "params"):
        assert by_name[k] == by_path[k], k


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_predicts_a_sampled_video_end_to_end(tmp_path, capsys, name):
    """`predict --mode sample` at the preset's native size, with its text encoder and VAE priced. Step-Video
    (30B) is served tensor-parallel on 80 GB GPUs: replicated by SP, its weights and its 8B text encoder
    (75 GB) do not fit an H100, as the next test shows."""
    video = resolve(name).sampling["video"]
    method = "megatron_sp" if name == "step-video-t2v" else "usp"
    rc = main(["predict", "--model", name, "--video", video, "--mode", "sample", "--method", method, "--gpus", "8",
               "--sp", "8", "--hardware", "h100-ib", "--dtype", "bf16", "--records-file", str(tmp_path / "p.jsonl"),
               "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert rc == 0 and rec["status"] == "predicted" and rec["video"] == video, rec.get("error")
    assert rec["params"] == param_count(resolve(name).config) and rec["predicted_stages_s"]["text_encode"] > 0


def test_sample_mode_memory_holds_the_whole_pipeline_on_a_gpu(tmp_path, capsys):
    """Every GPU keeps the text encoder and the VAE beside the DiT while it denoises: Step-Video over
    SP 8 replicates 58.7 GB of DiT and 16.1 GB of encoder, more than an H100 holds; tensor parallel
    fits. A CPU profile's sample-mode prediction leaves them out (a CPU run loads neither)."""
    def predict(method, hardware="h100-ib", *workload):
        main(["predict", *(workload or ("--model", "step-video-t2v", "--video", "208x544x992")), "--mode", "sample",
              "--method", method, "--gpus", "8", "--sp", "8", "--hardware", hardware,
              "--records-file", str(tmp_path / "p.jsonl"), "--json"])
        return json.loads(capsys.readouterr().out)
    sp, tp = predict("ulysses"), predict("megatron_sp")
    assert sp["status"] == "oom" and tp["status"] == "predicted"
    assert sp["predicted_mem"]["text_encoder"] == pytest.approx(8.03e9 * 2) and sp["predicted_mem"]["vae"] > 0
    mem = tp["predicted_mem"]
    assert mem["peak"] == pytest.approx(mem["weights"] + mem["activations"] + mem["comm_buffers"] + mem["text_encoder"] + mem["vae"])
    main(["predict", "--model", "full3d-tiny", "--frames", "8", "--spatial", "64", "--mode", "sample", "--method",
          "ulysses", "--gpus", "4", "--sp", "4", "--hardware", "emulated-cpu", "--records-file", str(tmp_path / "c.jsonl"),
          "--json"])
    cpu = json.loads(capsys.readouterr().out)
    assert cpu["status"] == "predicted" and "text_encoder" not in cpu["predicted_mem"]


@pytest.mark.parametrize("body,why", [
    ("[model]\nlayout = 'full3d'\ndepth = 2\nhidden = 64\nheads = 4\nwidth = 3\n", "unknown model field(s) width"),
    ("[model]\nlayout = 'full3d'\ndepth = 2\nhidden = 64\n", "[model] is missing heads"),
    ("[model]\nlayout = 'cube'\ndepth = 2\nhidden = 64\nheads = 4\n", "unknown layout 'cube'"),
    ("[modle]\n", "unknown table(s) modle"),
])
def test_a_bad_model_file_exits_2_naming_file_and_field(tmp_path, capsys, body, why):
    f = tmp_path / "bad.toml"
    vae = "\n[vae]\ntime = 4\nheight = 8\nwidth = 8\ncausal = true\n[published]\nparams = 1e9\nsource = 'x'\n"
    f.write_text(body + ("" if body.startswith("[modle]") else vae))
    rc, path = _predict(tmp_path, str(f))
    err = capsys.readouterr().err
    assert rc == 2 and why in err and str(f) in err and not path.exists()


def test_a_misspelt_preset_and_a_bad_override_exit_2(tmp_path, capsys):
    assert _predict(tmp_path, "wan2.1-14B")[0] == 2
    assert "unknown model 'wan2.1-14B'" in capsys.readouterr().err
    rc, path = _predict(tmp_path, "wan2.1-1.3b", "--model-set", "hiden=64")
    assert rc == 2 and "unknown model field(s) hiden" in capsys.readouterr().err and not path.exists()
    with pytest.raises(ValueError, match="video 80x480x832 does not convert"):
        video_to_tokens("wan2.1-1.3b", "80x480x832")


SHRINK = ["depth=2", "hidden=64", "heads=4", "mlp_dim=128", "caption_channels=32", "text_len=8"]
SHRUNK = {"hunyuanvideo": with_overrides("hunyuanvideo", SHRINK + ["single_depth=2"]),   # dual, then single blocks
          "cogvideox-5b": with_overrides("cogvideox-5b", SHRINK + ["time_dim=16", "freq_dim=32"]),   # expert adaLN
          "mochi-1": with_overrides("mochi-1", SHRINK + ["text_hidden=32", "text_mlp_dim=48"]),   # narrower text
          "opensora-1.0": with_overrides("opensora-1.0", SHRINK[:3] + SHRINK[4:]),   # factorized (STDiT)
          "latte-xl": with_overrides("latte-xl", SHRINK[:3] + SHRINK[4:])}   # temporal blocks without text
HAS_DS = importlib.util.find_spec("deepspeed") is not None
# Every method whose check() accepts a full3d model with joint text (torch_cp and ring_flash refuse it).
FULL3D_METHODS = ["ulysses", "ring", "allgather_kv", "usp", "megatron_sp", "megatron_lm", "ulysses_all",
                  "dsp_hybrid"] + ["ulysses_deepspeed"] * HAS_DS
STDIT_METHODS = ["dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "megatron_lm", "allgather_kv", "usp"]
JOINT = ["hunyuanvideo", "cogvideox-5b", "mochi-1"]


@pytest.mark.gloo
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("model,method", [(j, m) for j in JOINT for m in FULL3D_METHODS]
                         + [(f, m) for f in ("opensora-1.0", "latte-xl") for m in STDIT_METHODS])
def test_every_method_equals_the_oracle_on_a_shrunk_preset(rank_pool, world, model, method):
    res = rank_pool(world).run(ot.oracle_case, method, SHRUNK[model], (1, 4, 16), world)
    assert_matches_oracle(res, world)


def test_dsp_is_not_applicable_to_a_full3d_preset():
    from dspbench.methods import Dims, get_method
    from dspbench.models import Shape
    why = get_method("dsp").check(resolve(SHRUNK["hunyuanvideo"]).config, Shape(1, 4, 16), Dims(sp=2))
    assert "not applicable" in why


def test_models_lists_presets_with_published_counts_and_native_sizes(capsys):
    assert main(["models", "--json"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(presets()) <= set(rows) and "stdit-xl" in rows
    hv = rows["hunyuanvideo"]
    assert (hv["video"], hv["T"], hv["S"]) == ("129x720x1280", 33, 3600) and hv["published_params"] == 12.82e9
    assert hv["flops_per_step"] > 1e15 and rows["stdit-xl"]["video"] == ""
    assert (hv["depth"], hv["single_depth"], hv["text_stream"]) == (20, 40, "dual")


@pytest.mark.parametrize("decoder,why", [
    ("channels = [128, 256]\n", "[vae] describes a decoder but is missing latent_channels, layers_per_block"),
    ("channels = [128, 200]\nlayers_per_block = 2\nlatent_channels = 16\n", "each a multiple of the first"),
    ("channels = [128, 256]\nlayers_per_block = 0\nlatent_channels = 16\n", "layers_per_block must be an integer >= 1"),
    ("channels = [128, 256]\nlayers_per_block = 2\nlatent_channels = 16\nmid_attention = 1\n",
     "mid_attention must be true or false"),
])
def test_a_bad_vae_decoder_exits_2_naming_the_field(tmp_path, capsys, decoder, why):
    f = tmp_path / "bad.toml"
    f.write_text("[model]\nlayout = 'full3d'\ndepth = 2\nhidden = 64\nheads = 4\n[vae]\ntime = 4\nheight = 8\n"
                 f"width = 8\ncausal = true\n{decoder}[published]\nparams = 1e9\nsource = 'x'\n")
    rc, path = _predict(tmp_path, str(f))
    err = capsys.readouterr().err
    assert rc == 2 and why in err and str(f) in err and not path.exists()
