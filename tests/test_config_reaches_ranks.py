"""A RunConfig field reaches the ranks under every launcher: local hands the ranks the object, env,
torchrun and slurm ranks parse the flags generated from the fields' declarations (records/args.py)."""
import os
import socket
import subprocess
import sys
from dataclasses import fields, replace

import pytest
from helpers import every_field_set

from dspbench.facts.args import config_argv
from dspbench.records.config import RunConfig
from dspbench.records.io import read_records

# Fields that may differ from the default and still give a short, successful 2-rank run: the rest of
# every_field_set() (a fault, a huge timeout, CFG parallel ...) would change what runs, not whether it
# arrives; test_sweep_spec's round trip covers those field by field.
RUNNABLE = ("method", "model", "video", "seed", "repeat", "bucket_weight", "threads", "a2a",
            "ulysses_degree", "sp_auto", "pad", "batch")


def runnable_config(launcher: str) -> RunConfig:
    every = every_field_set()
    base = RunConfig(gpus=2, sp=2, warmup=0, iters=1, timeout_s=120, launcher=launcher,
                     mem_budget_mib=1 << 20, shard="S")
    return replace(base, **{k: getattr(every, k) for k in RUNNABLE}, frames=every.frames, spatial=every.spatial)


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _rank_env(launcher: str, rank: int, port: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    if launcher == "slurm":   # what srun sets; the harness maps it onto torch's variables
        return {**env, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(rank),
                "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "localhost", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    return {**env, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port}


def _launch(launcher: str, cfg: RunConfig, records) -> None:
    run = ["-m", "dspbench.cli", "run", *config_argv(cfg), "--records-file", str(records)]
    if launcher == "local":
        procs = [subprocess.Popen([sys.executable, *run])]
    elif launcher == "torchrun":
        procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc-per-node", "2", *run])]
    else:
        port = _free_port()
        procs = [subprocess.Popen([sys.executable, *run], env=_rank_env(launcher, r, port)) for r in range(2)]
    assert [p.wait(timeout=240) for p in procs] == [0] * len(procs)


@pytest.mark.parametrize("launcher", ["local", "env", "torchrun", "slurm"])
def test_every_field_reaches_the_ranks_and_their_record(tmp_path, launcher):
    cfg = runnable_config(launcher)
    _launch(launcher, cfg, tmp_path / "r.jsonl")
    records, problems = read_records(tmp_path / "r.jsonl")
    assert problems == [] and len(records) == 1 and records[0]["status"] == "ok", records[0]["error"]
    rec = records[0]
    assert {f.name: rec[f.name] for f in fields(RunConfig)} == cfg.to_dict()
    assert rec["run_id"] == cfg.run_id()
