"""Sweeps across the emulated multi-node SLURM (slurm/multinode.sh) through submitit, for real.

The sweep is submitted from inside node 0's namespace (`local_cluster.sh exec`); each job's tasks
rendezvous across nodes with MASTER_ADDR from the node list, SLURM_PROCID/LOCALID -> rank/local
rank. Records are read here (the results directory is a shared file system, as on a cluster).
- the CI smoke: 2 nodes x 1 rank, dsp at sp=2 (the SP group spans both nodes), ~30 s;
- every SP method on 2 nodes x 2 ranks at sp=2 (SP inside a node) and sp=4 (SP across nodes): 2 min on
  a quiet 2-core machine, 10 under load, so only with DSPBENCH_MULTINODE_FULL=1 (the documented command of the issue:
  `DSPBENCH_MULTINODE_FULL=1 pytest tests/test_sweep_multinode.py`).
"""
from __future__ import annotations

import os
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dspbench.records.io import read_dir
from test_slurm_multinode import bring_up, in_cluster

pytestmark = pytest.mark.slurm

FULL = os.environ.get("DSPBENCH_MULTINODE_FULL") == "1"
FIXED = """
[fixed]
model = "stdit-tiny"
frames = 4
spatial = 16
batch = 1
mode = "train"
dtype = "fp32"
backend = "gloo"
warmup = {warmup}
iters = {iters}
check = true
timeout_s = 180
"""


def sweep(folder: Path, name: str, grid: str, ranks_per_node: int, timeout: float,
          warmup: int = 0, iters: int = 1) -> list[dict]:
    """Submit from node 0, wait for every job to leave the queue, return the records."""
    spec = folder / f"{name}.toml"
    spec.write_text(textwrap.dedent(f"""
        [sweep]
        name = "{name}"
        cluster = "local_multinode"
        configs_per_job = 12
        [cluster]
        gpus_per_node = {ranks_per_node}
        """) + FIXED.format(warmup=warmup, iters=iters) + grid)
    root = folder / name
    r = in_cluster(sys.executable, "-m", "dspbench.cli", "sweep", str(spec), "--executor", "slurm",
                   "--results", str(root), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    ids = re.findall(r"submitted job (\d+):", r.stdout)
    assert ids, r.stdout
    deadline = time.monotonic() + timeout
    while set(in_cluster("squeue", "-h", "-o", "%i").stdout.split()) & set(ids):
        if time.monotonic() > deadline:
            in_cluster("scancel", *ids)
            pytest.fail(f"jobs {ids} not done after {timeout:.0f} s")
        time.sleep(2)
    records, problems = read_dir(root / "records")
    assert problems == []
    return records


def check_across_nodes(records: list[dict], ranks_per_node: int) -> None:
    """Each configuration ok exactly once, oracle-exact, ledger == formula, each rank's node named."""
    ids = [r["run_id"] for r in records]
    assert len(ids) == len(set(ids)), "a configuration recorded twice"
    for r in records:
        what = f"{r['method']} sp={r['sp']}"
        assert r["status"] == "ok", f"{what}: {r['error']}"
        assert r["comm_formula_match"] is True and r["comm_symmetric"] is True, what
        assert r["oracle_max_abs_err"] is not None, what        # checked against the single-device oracle
        hosts = [f"n{i // ranks_per_node}" for i in range(r["world_size"])]   # node-major placement
        p = r["placement"]
        assert p["rank_hosts"] == hosts and p["nodes"] == 2, (what, p)
        spans = len({hosts[i] for i in range(r["sp"])})          # the first SP group's nodes
        assert p["sp_group_nodes"] == spans, (what, p)
        assert sorted(r["environ"]["hostnames"]) == ["n0", "n1"], what


@pytest.fixture(scope="module")
def cluster():
    bring_up()


def test_ci_smoke_two_nodes_one_rank_each(cluster, tmp_path):
    grid = '[[grid]]\nmethod = ["dsp"]\ngpus = [2]\nsp = [2]\n'
    records = sweep(tmp_path, "mn_smoke", grid, ranks_per_node=1, timeout=180)
    assert len(records) == 1
    check_across_nodes(records, ranks_per_node=1)
    assert records[0]["placement"]["sp_group_nodes"] == 2        # the SP group spans both nodes


@pytest.mark.timeout(1500)
@pytest.mark.skipif(not FULL, reason="every method on 2 x 2 takes 2-10 min on 2 cores: DSPBENCH_MULTINODE_FULL=1")
def test_every_method_two_nodes_two_ranks(cluster, tmp_path):
    grid = ('[[grid]]\nmethod = ["dsp", "ulysses", "ulysses_deepspeed", "ring", "megatron_sp", "usp"]\n'
            'gpus = [4]\nsp = [2, 4]\n')
    records = sweep(tmp_path, "mn_all", grid, ranks_per_node=2, timeout=1400, warmup=1, iters=2)
    assert len(records) == 12
    check_across_nodes(records, ranks_per_node=2)
    assert {(r["sp"], r["placement"]["sp_group_nodes"], r["placement"]["dp_group_nodes"]) for r in records} == \
        {(2, 1, 2), (4, 2, 1)}      # sp=2: SP inside a node, DP across; sp=4: SP across nodes


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_sweep_the_partition_cannot_hold_exits_2_before_submitting(cluster, tmp_path, dry_run):
    """multinode_2x4 needs 2 nodes x 4 tasks; the 2 x 2 cluster's nodes have 2 CPUs each. sinfo says
    so before sbatch would: exit 2, every configuration and the limit named, nothing queued or written."""
    root = tmp_path / "r"
    before = set(in_cluster("squeue", "-h", "-o", "%i").stdout.split())
    r = in_cluster(sys.executable, "-m", "dspbench.cli", "sweep", "multinode_2x4", "--executor", "slurm",
                   "--results", str(root), *(["--dry-run"] if dry_run else []), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cannot run on partition 'debug'; nothing was submitted" in r.stderr
    assert "dsp stdit-tiny T=8 S=16 gpus=8 sp=8 train: needs 2 node(s) with 4 tasks x 1 CPUs" in r.stderr
    assert "at most 2 CPUs" in r.stderr and "Traceback" not in r.stderr
    assert set(in_cluster("squeue", "-h", "-o", "%i").stdout.split()) == before
    assert not root.exists()
