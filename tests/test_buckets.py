"""Bucketed workloads: the sweep key, the bucket file, the mix, and the smoke sweep's report."""
from __future__ import annotations

from functools import partial

import pytest

from dspbench.models.registry import video_to_tokens
from dspbench.records.buckets import BucketError, mix, parse_buckets, read_bucket_file, tokens_of


def test_bucket_file_in_opensora_terms(tmp_path):
    f = tmp_path / "b.csv"
    f.write_text("resolution,frames,weight\n480p,81,3\n720p,81,1\n256x256,17,0.5\n")
    wan = partial(video_to_tokens, "wan2.1-14b")
    assert read_bucket_file(f, wan) == [(21, 1560, 3.0), (21, 3600, 1.0), (5, 256, 0.5)]   # Wan 2.1's 480p, 720p
    f.write_text("resolution,frames,weight\n240p,16,1\n")
    with pytest.raises(BucketError, match=r"b.csv: row 2: resolution '240p' is neither HxW pixels"):
        read_bucket_file(f, wan)
    assert tokens_of("480x832", 1, wan) == (1, 1560)


@pytest.mark.parametrize("model, tokens", [("ltx-video", [(11, 390, 3.0), (11, 1024, 1.0)]),     # 8x32x32, patch 1
                                           ("latte-xl", [(81, 1560, 3.0), (81, 4096, 1.0)]),    # 2-D VAE: no time
                                           ("cogvideox-5b", [(21, 1560, 3.0), (21, 4096, 1.0)])])  # Wan's 4x8x8
def test_bucket_file_converts_through_each_models_own_vae(tmp_path, model, tokens):
    """Issue 42: the file was read with Wan's VAE for every model (LTX-Video's 480p x 81 priced as 21 x 1560
    tokens, not 11 x 390). CogVideoX shares Wan's compression, so it reads the same."""
    f = tmp_path / "b.csv"
    f.write_text("resolution,frames,weight\n480p,81,3\n1024x1024,81,1\n")
    assert read_bucket_file(f, partial(video_to_tokens, model)) == tokens
    f.write_text("resolution,frames,weight\n480p,80,1\n")
    with pytest.raises(BucketError, match=r"row 2: .*ltx-video: video 80x480x832 does not convert exactly .*nearest: "
                                          r"\{73,81\}x480x832"):
        read_bucket_file(f, partial(video_to_tokens, "ltx-video"))


def test_a_sweeps_bucket_file_converts_per_model(tmp_path):
    from dspbench.slurm.plan import expand
    from dspbench.slurm.spec import SpecError, load_sweep
    (tmp_path / "b.csv").write_text("resolution,frames,weight\n480p,81,3\n1024x1024,81,1\n")
    f = tmp_path / "s.toml"
    f.write_text('[fixed]\nmethod = "dsp"\n[[grid]]\nmodel = ["ltx-video", "wan2.1-1.3b"]\nbucket_file = "b.csv"\n')
    shapes = sorted((c.model, c.frames, c.spatial, c.bucket_weight) for c in expand(load_sweep(str(f))))
    assert shapes == [("ltx-video", 11, 390, 3.0), ("ltx-video", 11, 1024, 1.0),
                      ("wan2.1-1.3b", 21, 1560, 3.0), ("wan2.1-1.3b", 21, 4096, 1.0)]
    f.write_text('[fixed]\nmodel = "hunyuanvideo"\n[[grid]]\nmethod = ["dsp"]\nbucket_file = "b.csv"\n')
    assert sorted((c.frames, c.spatial) for c in expand(load_sweep(str(f)))) == [(21, 1560), (21, 4096)]
    f.write_text('[[grid]]\nmethod = ["dsp"]\nzip = { model = ["ltx-video"], sp = [1] }\nbucket_file = "b.csv"\n')
    with pytest.raises(SpecError, match="not in a zip"):
        load_sweep(str(f))


@pytest.mark.parametrize("rows, why", [([], "non-empty"), ([[4, 0]], "bucket #1"), ([[4, 16, -1]], "weight > 0"),
                                       ([[4, 16, 1, 2]], "bucket #1")])
def test_bad_buckets_name_the_bucket(rows, why):
    with pytest.raises(BucketError, match=why):
        parse_buckets("buckets", rows)


def test_bad_bucket_sweep_is_a_spec_error_naming_the_file(tmp_path):
    from dspbench.slurm.spec import SpecError, load_sweep
    f = tmp_path / "bad.toml"
    f.write_text('[fixed]\nmodel = "stdit-tiny"\nframes = 4\n[[grid]]\nmethod = ["dsp"]\nbuckets = [[4, 16]]\n')
    with pytest.raises(SpecError, match=r"bad.toml: \[\[grid\]\] #1: buckets set the shape: frames"):
        load_sweep(str(f))
    f.write_text('[[grid]]\nmethod = ["dsp"]\nbucket_file = "missing.csv"\n')
    with pytest.raises(SpecError, match="missing.csv"):
        load_sweep(str(f))


def test_mix_is_time_weighted_and_picks_each_buckets_best_degree():
    rows = [dict(sp=1, frames=4, spatial=16, bucket_weight=3.0, samples_per_s=6.0, pad_token_share=0.0),
            dict(sp=1, frames=8, spatial=16, bucket_weight=1.0, samples_per_s=1.0, pad_token_share=0.0),
            dict(sp=2, frames=4, spatial=16, bucket_weight=3.0, samples_per_s=3.0, pad_token_share=0.0),
            dict(sp=2, frames=8, spatial=16, bucket_weight=1.0, samples_per_s=2.0, pad_token_share=0.2)]
    m = mix(rows)
    assert m["per_sp"][1]["samples_per_s"] == pytest.approx(4 / (3 / 6 + 1 / 1))
    assert m["per_sp"][2]["pad_token_share"] == pytest.approx(0.2 / 4)
    assert m["best_sp"] == {(4, 16): 1, (8, 16): 2}
    assert m["best_sp_samples_per_s"] == pytest.approx(4 / (3 / 6 + 1 / 2))
    assert mix(rows[:3])["per_sp"][2] == {"samples_per_s": None, "missing": 1}


@pytest.mark.gloo
def test_bucket_smoke_sweep_runs_every_method_and_reports_the_mix(tmp_path):
    from dspbench.cli import main
    from dspbench.records.io import read_dir
    from dspbench.reports.report import analyse
    out = tmp_path / "buckets_smoke"
    assert main(["sweep", "buckets_smoke", "--results", str(out)]) == 0
    recs, problems = read_dir(out / "records")
    assert problems == [] and len(recs) == 39
    ok = [r for r in recs if r["status"] == "ok"]
    assert {r["method"] for r in ok} == {"single", "dsp", "ulysses", "ulysses_all", "ring", "megatron_sp",
                                        "megatron_lm", "usp", "allgather_kv", "dsp_hybrid"}
    assert len(ok) == 33 and all(r["oracle_max_abs_err"] < 1e-5 and r["bucket_weight"] > 0 for r in ok)
    padded = {(r["method"], r["frames"], r["spatial"]): (r["padded_frames"], r["padded_spatial"]) for r in ok
              if r["sp"] == 2}
    assert padded[("ring", 5, 16)] == (6, 16) and padded[("dsp", 4, 15)] == (4, 16)
    a = analyse(out)   # the report's tables (figures are the report tests' business)
    by = {t.name: t for t in a.tables}
    rows, mixed = by["buckets"].display, by["bucket_mix"].display
    assert len(rows) == 39 and set(rows["padded T x S"]) >= {"6 x 16", "4 x 16"}
    ring = mixed[(mixed["method"] == "Ring Attention")].iloc[0]
    assert ring["buckets run"] == "3 of 3" and ring["padding waste"] == "4.2%"   # 1/4 of samples x 1/6 pads
    assert ring["best SP per bucket"] == "4 x 15: 2, 4 x 16: 2, 5 x 16: 2"
    dsp = mixed[mixed["method"] == "DSP"]
    assert list(dsp["SP"]) == [1, 2] and "3 of 3" in by["bucket_mix"].markdown()


def test_predict_takes_the_bucket_mix(tmp_path, capsys):
    from dspbench.cli import main
    from dspbench.records.io import read_dir
    args = ["predict", "--method", "usp", "--model", "full3d-14b", "--gpus", "16", "--sp", "16", "--dtype", "bf16",
            "--mode", "infer", "--hardware", "h100-ib", "--out", str(tmp_path), "--shard", "T"]
    assert main(args + ["--buckets", "21x1560:3,21x3600:1"]) == 0
    out = capsys.readouterr().out
    assert "samples/s over the mix; padding waste 34.4% of tokens; best SP per bucket: 21x1560:" in out
    recs, _ = read_dir(tmp_path)
    assert [(r["frames"], r["spatial"], r["bucket_weight"], r["padded_frames"]) for r in recs] == [
        (21, 1560, 3.0, 32), (21, 3600, 1.0, 32)]     # T sharded 16 ways: 21 frames pad to 32
    assert main(args + ["--buckets", "21x:3"]) == 2 and not list(tmp_path.glob("*x*"))


def test_predict_converts_a_bucket_file_through_the_models_vae(tmp_path, capsys):
    from dspbench.cli import main
    from dspbench.records.io import read_dir
    (tmp_path / "b.csv").write_text("resolution,frames,weight\n480p,81,3\n1024x1024,81,1\n")
    assert main(["predict", "--method", "ulysses", "--model", "ltx-video", "--gpus", "8", "--sp", "8",
                 "--dtype", "bf16", "--mode", "infer", "--hardware", "h100-ib", "--out", str(tmp_path / "out"),
                 "--bucket-file", str(tmp_path / "b.csv")]) == 0
    recs, _ = read_dir(tmp_path / "out")
    assert [(r["frames"], r["spatial"], r["bucket_weight"]) for r in recs] == [(11, 390, 3.0), (11, 1024, 1.0)]


def test_predict_mix_without_shard_shards_each_bucket_where_it_pads_least(tmp_path, capsys):
    """Issue 42: --shard left unset, each bucket shards S (T 21 would pad to 32 at SP 16), not T for all."""
    from dspbench.cli import main
    from dspbench.records.io import read_dir
    assert main(["predict", "--method", "usp", "--model", "full3d-14b", "--gpus", "16", "--sp", "16", "--dtype", "bf16",
                 "--mode", "infer", "--hardware", "h100-ib", "--out", str(tmp_path),
                 "--buckets", "21x1560:3,21x3600:1"]) == 0
    out = capsys.readouterr().out
    assert "padding waste 0.4% of tokens" in out      # 1560 pads to 1568 in 3 of 4 samples
    assert "shard S (T 21 would pad to 32 at SP 16; S 3600 divides)" in out
    recs, _ = read_dir(tmp_path)
    assert [(r["shard"], r["padded_frames"], r["padded_spatial"]) for r in recs] == [("S", 21, 1568), ("S", 21, 3600)]
