"""Dims.placement: which node each rank is on and how many nodes the SP and DP groups span."""
import pytest

from dspbench.methods.dims import Dims


def test_sp_inside_a_node_dp_across():
    p = Dims(sp=2, dp=2).placement(["n0", "n0", "n1", "n1"])      # node-major: SLURM's block distribution
    assert p == {"rank_hosts": ["n0", "n0", "n1", "n1"], "nodes": 2, "sp_group_nodes": 1, "dp_group_nodes": 2}


def test_sp_across_nodes():
    p = Dims(sp=4, dp=1).placement(["n0", "n0", "n1", "n1"])
    assert (p["sp_group_nodes"], p["dp_group_nodes"]) == (2, 1)


def test_cyclic_placement_puts_every_sp_group_across_nodes():
    p = Dims(sp=2, dp=2).placement(["n0", "n1", "n0", "n1"])      # round-robin: the layout to avoid
    assert (p["sp_group_nodes"], p["dp_group_nodes"]) == (2, 1)


def test_groups_partition_the_world():
    d = Dims(sp=4, dp=2)
    assert d.sp_groups() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert d.dp_groups() == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_wrong_number_of_hosts_is_an_error():
    with pytest.raises(ValueError, match="3 hosts for a world of 4"):
        Dims(sp=2, dp=2).placement(["n0", "n0", "n1"])
