"""--shard left unset: the dim the SP degree pads least (issue 42). Full3d at SP 16 with T = 21
padded T to 32 (a third of the tokens pads) while S = 3600 divided; now S is chosen, the summaries
say so and why, and the ranks receive the chosen dim."""
from __future__ import annotations

import argparse
import json

import pytest

from dspbench.facts.args import add_run_args, config_argv, config_from_args
from dspbench.facts.shard import choose_shard
from dspbench.records.config import RunConfig

FULL3D = dict(model="full3d-14b", gpus=16, sp=16, dtype="bf16", backend="nccl", mode="infer")


@pytest.mark.parametrize("kw, chosen", [
    (dict(method="ring", frames=21, spatial=3600), ("S", "shard S (T 21 would pad to 32 at SP 16; S 3600 divides)")),
    (dict(method="ring", frames=21, spatial=3601), ("S", "shard S (T 21 would pad to 32 at SP 16; S 3601 pads to 3616)")),
    (dict(method="ring", frames=16, spatial=3601), ("T", "")),                 # T divides: nothing to explain
    (dict(method="ring", frames=21, spatial=3600, pad="never"),
     ("S", "shard S (T 21 cannot be sharded at SP 16; S 3600 divides)")),
    (dict(method="ring", frames=16, spatial=3600, sp=1, gpus=1), ("T", "")),  # SP 1 shards nothing
    (dict(method="ring", frames=21, spatial=3600, sp="auto"), ("T", "")),     # the degree is not known yet
])
def test_the_dim_that_pads_least_is_chosen(kw, chosen):
    assert choose_shard(RunConfig(**{**FULL3D, **kw})) == chosen


def test_a_tie_or_a_method_that_ignores_the_shard_keeps_t():
    # T and S pad to the same token count (16 x 24 = 12 x 32): T kept, as before (no choice to explain)
    assert choose_shard(RunConfig(**{**FULL3D, "method": "ring", "frames": 12, "spatial": 24})) == ("T", "")
    # S pads less than T but some: still the least waste
    assert choose_shard(RunConfig(**{**FULL3D, "method": "ring", "frames": 12, "spatial": 30}))[0] == "S"
    # DSP shards T at entry and switches: every --shard pads it alike
    assert choose_shard(RunConfig(method="dsp", model="stdit-tiny", frames=5, spatial=16, gpus=2, sp=2)) == ("T", "")


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_run_args(p)
    return p.parse_args(argv)


def test_the_ranks_receive_the_chosen_shard():
    cfg = config_from_args(_parse(["--method", "ring", "--model", "full3d-14b", "--gpus", "16", "--sp", "16",
                                   "--frames", "21", "--spatial", "3600"]))
    assert cfg.shard == "S" and cfg.shard_auto.startswith("shard S (T 21 would pad to 32")
    argv = config_argv(cfg)
    assert argv[argv.index("--shard") + 1] == "S"
    assert config_from_args(_parse(argv)) == cfg        # a rank parses back the same configuration
    given = config_from_args(_parse(["--method", "ring", "--model", "full3d-14b", "--gpus", "16", "--sp", "16",
                                     "--frames", "21", "--spatial", "3600", "--shard", "T"]))
    assert given.shard == "T" and given.shard_auto == ""


def test_predict_says_which_shard_it_chose_and_why(tmp_path, capsys):
    from dspbench.cli import main
    base = ["predict", "--method", "ring", "--model", "full3d-14b", "--gpus", "16", "--sp", "16", "--frames", "21",
            "--spatial", "3600", "--mode", "infer", "--hardware", "h100-ib"]
    assert main(base + ["--records-file", str(tmp_path / "auto.jsonl")]) == 0
    assert "\nshard S (T 21 would pad to 32 at SP 16; S 3600 divides)\n" in capsys.readouterr().out
    rec = json.loads((tmp_path / "auto.jsonl").read_text())
    assert (rec["shard"], rec["padded_frames"], rec["pad_token_share"]) == ("S", 21, 0.0)
    assert main(base + ["--shard", "T", "--records-file", str(tmp_path / "t.jsonl")]) == 0
    assert "\nshard " not in capsys.readouterr().out      # given: nothing chosen, nothing said
    rec = json.loads((tmp_path / "t.jsonl").read_text())
    assert (rec["shard"], rec["padded_frames"]) == ("T", 32)


@pytest.mark.gloo
def test_run_says_which_shard_it_chose_and_runs_it(tmp_path, capsys):
    from dspbench.cli import main
    assert main(["run", "--method", "ring", "--model", "full3d-tiny", "--gpus", "2", "--sp", "2", "--frames", "3",
                 "--spatial", "16", "--mode", "infer", "--iters", "1", "--warmup", "0", "--check",
                 "--records-file", str(tmp_path / "r.jsonl")]) == 0
    assert "\nshard S (T 3 would pad to 4 at SP 2; S 16 divides)\n" in capsys.readouterr().out
    rec = json.loads((tmp_path / "r.jsonl").read_text())
    assert rec["status"] == "ok" and rec["shard"] == "S" and rec["padded_frames"] == 3 and rec["comm_formula_match"]


def test_a_sweep_point_without_shard_takes_the_least_waste_and_a_given_one_stays(tmp_path):
    from helpers import tiny_sweep, write_spec
    from dspbench.slurm.plan import expand
    from dspbench.slurm.spec import load_sweep
    head = tiny_sweep().split("[fixed]")[0]
    point = '[fixed]\nmodel = "full3d-1.3b"\nmode = "infer"\nmethod = "ring"\ngpus = 4\nsp = 4\nframes = 21\nspatial = 64\n'
    path = write_spec(tmp_path, head + point + "[[grid]]\nseed = [0]\n")
    [cfg] = expand(load_sweep(str(path)))
    assert (cfg.shard, cfg.shard_auto) == ("S", "shard S (T 21 would pad to 24 at SP 4; S 64 divides)")
    given = write_spec(tmp_path, head + point + '[[grid]]\nshard = ["T"]\n', "given.toml")
    [cfg] = expand(load_sweep(str(given)))
    assert (cfg.shard, cfg.shard_auto) == ("T", "")
