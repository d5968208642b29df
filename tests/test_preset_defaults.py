"""A preset's [sampling] is the default of predict, plan, run and sweeps in sample mode (bench/facts/
defaults.py): its native video, steps and guidance, each only where the user said nothing, and every
output says what it priced. Seconds (no run beyond one tiny CPU sample)."""
import json
from dataclasses import replace

import pytest

from helpers import tiny_sweep, write_spec
from dspbench.cli import main
from dspbench.facts.args import add_run_args, config_argv, config_from_args
from dspbench.facts.defaults import fill_defaults, priced_line
from dspbench.records.config import RunConfig
from dspbench.slurm.plan import expand
from dspbench.slurm.spec import load_sweep


def _predict(capsys, tmp_path, *argv):
    assert main(["predict", *argv, "--json", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def test_predict_of_the_issue_prices_the_native_video_its_steps_and_cfg(capsys, tmp_path):
    """`predict --model cogvideox-5b --mode sample`, no other flag: 49x480x720, 50 steps, CFG, on the
    default GPU profile, and it says so."""
    assert main(["predict", "--model", "cogvideox-5b", "--mode", "sample", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "priced 49x480x720 (T 13 x S 1350), 50 steps, CFG (2 calls per step): defaults from cogvideox-5b " \
           "[sampling]: video 49x480x720, 50 steps, CFG; method ulysses (DSP cannot apply to full3d)" in out.out
    assert "hardware h100-ib: the default" in out.err
    rec = json.loads(next(tmp_path.glob("*.jsonl")).read_text().splitlines()[-1])
    assert (rec["video"], rec["frames"], rec["spatial"], rec["sample_steps"], rec["cfg"]) == ("49x480x720", 13, 1350, 50, True)
    assert rec["status"] == "predicted" and rec["method"] == "ulysses" and rec["hardware_profile"] == "h100-ib"
    assert rec["defaults_from"].startswith("cogvideox-5b [sampling]")
    assert rec["cfg_guidance"] != "none"


def test_a_distilled_preset_samples_without_cfg_and_says_why(capsys, tmp_path):
    rec, _ = _predict(capsys, tmp_path, "--model", "hunyuanvideo", "--mode", "sample", "--gpus", "8", "--sp", "8")
    assert rec["cfg"] is False and rec["sample_steps"] == 50 and rec["video"] == "129x720x1280"
    assert "no CFG (guidance distilled)" in rec["defaults_from"]


def test_the_method_left_out_is_dsp_where_it_applies(capsys, tmp_path):
    rec, _ = _predict(capsys, tmp_path, "--model", "opensora-1.2", "--mode", "sample", "--gpus", "4", "--sp", "4")
    assert rec["method"] == "dsp" and "method" not in rec["defaults_from"]
    assert (rec["video"], rec["sample_steps"], rec["cfg"]) == ("101x720x1280", 30, True)


@pytest.mark.parametrize("flags, want", [
    (["--sample-steps", "4"], {"sample_steps": 4, "cfg": True, "video": "49x480x720"}),
    (["--no-cfg"], {"sample_steps": 50, "cfg": False}),
    (["--frames", "5", "--spatial", "30"], {"frames": 5, "spatial": 30, "video": "", "sample_steps": 50}),
    (["--video", "17x480x720"], {"frames": 5, "video": "17x480x720"}),
    (["--method", "ring"], {"method": "ring"}),
])
def test_a_flag_given_wins_and_only_the_rest_are_filled(capsys, tmp_path, flags, want):
    rec, _ = _predict(capsys, tmp_path, "--model", "cogvideox-5b", "--mode", "sample", "--gpus", "2", "--sp", "2", *flags)
    assert {k: rec[k] for k in want} == want
    given = {"--sample-steps": "steps", "--no-cfg": "CFG", "--frames": "video 4", "--video": "video 4", "--method": "method"}
    assert given[flags[0]] not in rec["defaults_from"]


def test_cfg_on_a_distilled_preset_when_asked(capsys, tmp_path):
    rec, _ = _predict(capsys, tmp_path, "--model", "flux.1-dev", "--mode", "sample", "--cfg")
    assert rec["cfg"] is True and "CFG" not in rec["defaults_from"]


def test_other_modes_and_built_ins_keep_runconfigs_defaults():
    base = RunConfig()
    for values in ({"model": "cogvideox-5b", "mode": "train"}, {"model": "stdit-tiny", "mode": "sample"}):
        out = fill_defaults(dict(values))
        cfg = RunConfig(**out)
        assert (cfg.frames, cfg.spatial, cfg.sample_steps, cfg.cfg) == (base.frames, base.spatial, base.sample_steps, False)
    assert "defaults_from" not in fill_defaults({"model": "stdit-tiny", "mode": "sample"})
    # train mode on a full3d preset: only the method (DSP cannot apply) is filled, and said
    assert fill_defaults({"model": "cogvideox-5b", "mode": "train"})["defaults_from"] == \
        "method ulysses (DSP cannot apply to full3d)"


def test_ranks_receive_every_default_resolved_so_none_is_decided_twice():
    """The launcher resolves the defaults; the argv its ranks parse says each field, CFG off included
    (--no-cfg), so a rank of a --no-cfg run on a CFG preset does not turn CFG back on."""
    import argparse
    p = argparse.ArgumentParser()
    add_run_args(p)
    cfg = config_from_args(p.parse_args(["--model", "cogvideox-5b", "--mode", "sample", "--no-cfg", "--gpus", "2"]))
    assert cfg.cfg is False and cfg.sample_steps == 50 and cfg.frames == 13
    argv = config_argv(cfg)
    assert "--no-cfg" in argv
    assert config_from_args(p.parse_args(argv)) == cfg
    on = replace(cfg, cfg=True)
    assert config_from_args(p.parse_args(config_argv(on))) == on


def test_a_sweep_point_takes_the_presets_sampling_where_it_leaves_it_out(tmp_path):
    head = tiny_sweep().split("[fixed]")[0]
    path = write_spec(tmp_path, head + '[fixed]\nmodel = "cogvideox-5b"\nmode = "sample"\ngpus = 2\nsp = 2\n'
                      '[[grid]]\nmethod = ["ulysses"]\nsample_steps = [3]\n')
    [cfg] = expand(load_sweep(str(path)))
    assert (cfg.frames, cfg.spatial, cfg.video, cfg.sample_steps, cfg.cfg) == (13, 1350, "49x480x720", 3, True)
    assert "3 steps" not in cfg.defaults_from and "video 49x480x720" in cfg.defaults_from


def test_plans_header_names_what_it_priced(capsys):
    assert main(["plan", "--model", "cogvideox-5b", "--mode", "sample", "--gpus", "4", "--hardware", "h100-ib",
                 "--methods", "ulysses,ring", "--no-cfg", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["priced"] == ("priced 49x480x720 (T 13 x S 1350), 50 steps, no CFG: defaults from cogvideox-5b "
                             "[sampling]: video 49x480x720, 50 steps")
    assert doc["request"]["cfg"] is False and doc["request"]["sample_steps"] == 50
    assert main(["plan", "--model", "cogvideox-5b", "--mode", "sample", "--gpus", "4", "--hardware", "h100-ib",
                 "--methods", "ulysses,ring", "--top", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("priced 49x480x720 (T 13 x S 1350), 50 steps, CFG")


def test_priced_line_says_the_guidance_per_call():
    cfg = RunConfig(mode="sample", sample_steps=7, cfg=True, cfg_parallel=True, gpus=2)
    assert priced_line(cfg) == "priced T 16 x S 64, 7 steps, CFG (2 calls per step, one per CFG half)"
    assert priced_line(RunConfig()) == "priced T 16 x S 64, one train step"


def test_run_says_what_it_sampled(capsys, tmp_path):
    assert main(["run", "--model", "stdit-tiny", "--mode", "sample", "--frames", "4", "--spatial", "16", "--sample-steps",
                 "2", "--iters", "1", "--warmup", "0", "--out", str(tmp_path)]) == 0
    assert "ran T 4 x S 16, 2 steps, no CFG" in capsys.readouterr().out
