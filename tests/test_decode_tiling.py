"""Issue 40 item 3: the VAE decode is priced as the model's source pipeline runs it (a preset's
[sampling] decode and tiling), windows walked as diffusers' tiled decoders walk them."""
from __future__ import annotations

import json

import pytest

from dspbench.cost.pipeline import DEFAULT_TILING, decode_of, latent_grid, pipeline_of, tiling_of
from dspbench.models import get_config
from dspbench.models.registry import load_file
from dspbench.models.vae import Tiling, decoder_flops, tile_shapes, tiling_flops


def _diffusers_hunyuan_windows(T, H, W, tile=(4, 32, 32), stride=(3, 24, 24)):
    """The loops of diffusers' AutoencoderKLHunyuanVideo._temporal_tiled_decode and tiled_decode,
    written out: temporal tiles z[i : i + 4 + 1] every 3 frames, then z[..., i : i + 32, j : j + 32]
    every 24 rows and columns when the tile exceeds 32 in either."""
    out = []
    for i in range(0, T, stride[0]):
        t = min(i + tile[0] + 1, T) - i
        if H > tile[1] or W > tile[2]:
            out += [(t, min(a + tile[1], H) - a, min(b + tile[2], W) - b)
                    for a in range(0, H, stride[1]) for b in range(0, W, stride[2])]
        else:
            out.append((t, H, W))
    return out


def test_hunyuanvideo_720p_decodes_in_the_windows_diffusers_walks():
    t = tiling_of("hunyuanvideo")
    assert (t.tile, t.stride, t.extra_frames) == ((4, 32, 32), (3, 24, 24), 1)
    shapes = tile_shapes(33, 90, 160, t)                  # 129 x 720 x 1280 through the 4x8x8 VAE
    assert shapes == _diffusers_hunyuan_windows(33, 90, 160)
    assert len(shapes) == 11 * 4 * 7


def test_latents_that_fit_a_tile_decode_once():
    assert tile_shapes(3, 20, 20, tiling_of("hunyuanvideo")) == [(3, 20, 20)]
    assert tile_shapes(13, 30, 45, tiling_of("cogvideox-5b")) == [(13, 30, 45)]


def test_a_tiled_decode_does_the_overlaps_work_twice():
    _, vae = pipeline_of("hunyuanvideo", get_config("hunyuanvideo"))
    t = tiling_of("hunyuanvideo")
    tiled, whole = tiling_flops(vae, 33, 90, 160, t), decoder_flops(vae, 33, 90, 160)
    assert tiled == sum(decoder_flops(vae, *s) for s in tile_shapes(33, 90, 160, t))
    assert 2.0 < tiled / whole < 3.5        # ~(5/3) in time x (32/24)^2 in space, less at the edges
    _, cvae = pipeline_of("cogvideox-5b", get_config("cogvideox-5b"))
    ct = tiling_of("cogvideox-5b")           # frames carry a causal cache: only space is re-decoded
    assert all(s[0] == 13 for s in tile_shapes(13, 60, 90, ct))


def test_the_decode_variant_defaults_to_the_pipelines():
    assert decode_of("hunyuanvideo") == "tiled" and decode_of("cogvideox-5b") == "tiled"
    assert decode_of("wan2.1-14b") == "single" and decode_of("stdit-tiny") == "single"
    assert tiling_of("wan2.1-14b") is DEFAULT_TILING and DEFAULT_TILING.tile == (0, 32, 32)


def test_predict_prices_the_presets_decode_unless_told_and_says_whose(capsys, tmp_path):
    from dspbench.cli import main
    argv = ["predict", "--model", "hunyuanvideo", "--mode", "sample", "--gpus", "8", "--sp", "8",
            "--method", "ulysses", "--hardware", "h100-ib", "--records-file", str(tmp_path / "r.jsonl")]

    def run(*extra):
        assert main(argv + list(extra)) == 0
        out = capsys.readouterr().out
        return out, json.loads(out.split("<RESULT>")[1].split("</RESULT>")[0])
    out, rec = run()
    assert rec["pipeline"]["vae_variant"] == "tiled"
    assert rec["pipeline"]["vae_tiling"]["source"].startswith("hunyuanvideo [sampling]: diffusers")
    assert "VAE tiling: windows of 4x32x32" in out and "308 decoder calls" in out
    _, single = run("--vae", "single")
    assert single["pipeline"]["vae_variant"] == "single" and single["pipeline"]["vae_tiling"] is None
    assert rec["predicted_stages_s"]["vae_decode"] > 2 * single["predicted_stages_s"]["vae_decode"]
    assert rec["predicted_stages_s"]["denoise"] == single["predicted_stages_s"]["denoise"]


def test_the_latents_keep_the_videos_aspect():
    m = get_config("hunyuanvideo")
    assert latent_grid(m, 33, 3600, "129x720x1280", "hunyuanvideo") == (33, 90, 160)
    assert latent_grid(m, 33, 3600) == (33, 120, 120)      # no video named: square-ish


@pytest.mark.parametrize("bad, words", [
    ('decode = "tiled"', "decode_source"),
    ('decode = "blurry"\ndecode_source = "x"', "decode must be one of"),
    ('decode = "single"\ndecode_source = "x"\ndecode_tile = [1, 2, 2]\ndecode_stride = [1, 1, 1]', "go together"),
    ('decode = "tiled"\ndecode_source = "x"\ndecode_tile = [4, 32, 32]', "go together"),
    ('decode = "tiled"\ndecode_source = "x"\ndecode_tile = [4, 32, 32]\ndecode_stride = [5, 24, 24]', "stride in 1..tile"),
    ('decode = "tiled"\ndecode_source = "x"\ndecode_tile = [4, 32]\ndecode_stride = [3, 24]', "frames, rows, columns"),
    ('decode = "tiled"\ndecode_source = "x"\ndecode_tile = [4, 32, 32]\ndecode_stride = [3, 24, 24]\n'
     'decode_extra_frames = -1', "decode_extra_frames"),
])
def test_a_bad_decode_in_a_model_file_is_refused_naming_the_field(tmp_path, bad, words):
    text = (tmp_path / "m.toml")
    text.write_text('[model]\nlayout = "full3d"\ndepth = 2\nhidden = 64\nheads = 4\n'
                    '[vae]\ntime = 4\nheight = 8\nwidth = 8\ncausal = true\n'
                    '[published]\nparams = 1e6\nsource = "test"\n'
                    f'[sampling]\n{bad}\n')
    with pytest.raises(ValueError, match=words):
        load_file(text, "m")


def test_a_tiling_with_a_zero_tile_leaves_that_dim_whole():
    t = Tiling((0, 8, 8), (0, 6, 6))
    assert {s[0] for s in tile_shapes(9, 20, 20, t)} == {9}
    assert len(tile_shapes(9, 20, 20, t)) == 4 * 4
