"""The partition fit check (slurm/capacity.py) on the text SLURM prints: sinfo's node lines (the
format captured from the local 2-node cluster and a GPU cluster's gres), scontrol's limits, and
each way a shape can fail to fit. The real check against a running cluster is in
tests/test_sweep_multinode.py; these are its parsers and its arithmetic, without a cluster."""
import subprocess

import pytest

from dspbench.slurm.capacity import (CapacityError, Partition, check_plan_fits, gres_gpus, parse_scontrol_limit,
                                     parse_sinfo, shape_misfit)
from dspbench.slurm.plan import Job, Shape
from dspbench.slurm.spec import ClusterProfile

TWO_BY_TWO = "n0|2|(null)|idle\nn1|2|(null)|idle\n"                 # sinfo -h -N -o '%N|%c|%G|%T', 2 x 2
GPU_NODES = "g01|96|gpu:h100:8(S:0-1)|mixed\ng02|96|gpu:h100:8(S:0-1)|idle\ng03|96|gpu:h100:8|down*\n"
SCONTROL = "PartitionName=debug\n   MaxNodes=UNLIMITED MaxTime=7-00:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED\n"


def test_parsers_read_what_slurm_prints():
    assert [(n.name, n.cpus, n.gpus) for n in parse_sinfo(GPU_NODES)] == [("g01", 96, 8), ("g02", 96, 8), ("g03", 96, 8)]
    assert gres_gpus("gpu:4,gpu:a100:2(S:0)") == 6 and gres_gpus("(null)") == 0
    assert parse_scontrol_limit(SCONTROL, "MaxNodes") is None
    assert parse_scontrol_limit("MaxNodes=4 MaxCPUsPerNode=32", "MaxCPUsPerNode") == 32


CPU = ClusterProfile(partition="debug", gpus_per_node=4, request_gpus=False, cpus_per_task=1)
GPU = ClusterProfile(partition="gpu", gpus_per_node=8, request_gpus=True, cpus_per_task=8)


def test_each_limit_is_named():
    small = Partition("debug", parse_sinfo(TWO_BY_TWO), None, None)
    assert shape_misfit(2, 2, CPU, small) is None
    assert "0 big enough" in shape_misfit(2, 4, CPU, small)
    assert "3 node" not in (shape_misfit(1, 2, CPU, small) or "")
    gpus = Partition("gpu", parse_sinfo(GPU_NODES), None, None)
    assert shape_misfit(2, 8, GPU, gpus) is None
    assert "2 usable node(s)" in shape_misfit(3, 8, GPU, gpus)       # g03 is down
    assert "MaxNodes=1" in shape_misfit(2, 8, GPU, Partition("gpu", gpus.nodes, 1, None))
    assert "MaxCPUsPerNode=32" in shape_misfit(1, 8, GPU, Partition("gpu", gpus.nodes, None, 32))


def fake_slurm(sinfo: str, scontrol: str = SCONTROL):
    def run(cmd, **_):
        out = sinfo if cmd[0] == "sinfo" else scontrol
        return subprocess.CompletedProcess(cmd, 0, out, "")
    return run


def test_the_plan_check_lists_every_configuration_that_does_not_fit():
    jobs = [Job(Shape(1, 2), ["fits"]), Job(Shape(2, 4), ["a", "b"])]
    with pytest.raises(CapacityError, match="2 configuration") as e:
        check_plan_fits(jobs, CPU, describe=str, run=fake_slurm(TWO_BY_TWO))
    assert "  a: needs 2 node(s)" in str(e.value) and "  b: " in str(e.value) and "fits" not in str(e.value)
    assert check_plan_fits(jobs[:1], CPU, describe=str, run=fake_slurm(TWO_BY_TWO)).name == "debug"
    assert isinstance(e.value, ValueError)          # the CLI's exit 2
