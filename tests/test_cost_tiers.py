"""Two-tier pricing (bench/cost/tiers.py): group spans, the tier each collective pays, and the
tiered calibration's profile (its structure; never timing)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from dspbench.records.config import RunConfig
from dspbench.cost.tiers import op_time
from dspbench.cost.model import predict
from dspbench.cost.tiers import Span, members, span_of, tier_time
from dspbench.cost.hardware import Link, Profile, load_profile
from dspbench.methods import Dims

FAST = Link(alpha_s=1e-5, bw_GBps=10.0)     # the intra tier (a node's loopback / NVLink)
SLOW = Link(alpha_s=1e-4, bw_GBps=0.1)      # the inter tier (a shaped veth / InfiniBand)
# The emulated 2 x 2: two ranks per node, one link per node
EMU = Profile(name="emu", gpus_per_node=2, nics_per_node=1, intra=FAST, inter=SLOW, flops_per_s={"fp32": 1e10})
MB = 1 << 20


def span(op, group, dims, ranks=0, gpn=2):
    return span_of(members(op, group, ranks, dims), dims.world, gpn)


def test_spans_on_two_nodes_of_two():
    assert span("all_to_all", "sp", Dims(sp=2, dp=2)) == Span(n=2, per_node=2, nodes=1, flows=1, node_ranks=2)
    assert span("all_to_all", "sp", Dims(sp=4, dp=1)) == Span(n=4, per_node=2, nodes=2, flows=1, node_ranks=2)
    # DP groups {0, 2} and {1, 3}: one rank per node, two groups through each node's link
    assert span("all_reduce", "dp", Dims(sp=2, dp=2)) == Span(n=2, per_node=1, nodes=2, flows=2, node_ranks=2)


def test_usp_sub_groups_ulysses_consecutive_ring_strided():
    d = Dims(sp=4, dp=1)
    assert members("all_to_all", "sp", 2, d) == [0, 1]          # Ulysses sub-group: inside a node
    assert members("send_recv", "sp", 2, d) == [0, 2]           # ring sub-group: across nodes
    assert span("all_to_all", "sp", d, ranks=2).nodes == 1
    assert span("send_recv", "sp", d, ranks=2).nodes == 2


def test_zero_ops_over_the_whole_world_span_every_rank():
    d = Dims(sp=2, dp=2)
    assert members("reduce_scatter", "dp", 4, d) == [0, 1, 2, 3]
    assert members("reduce_scatter", "dp", 2, d) == [0, 2]
    assert span("reduce_scatter", "dp", d, ranks=4) == Span(n=4, per_node=2, nodes=2, flows=1, node_ranks=2)


def test_a_group_inside_a_node_pays_the_intra_tier_only():
    s = span("all_to_all", "sp", Dims(sp=2, dp=2))
    assert tier_time(EMU, "all_to_all", 4 * MB, s) == op_time(FAST, "all_to_all", 4 * MB, 2)


def test_hierarchical_all_to_all_prices_inter_node_bytes_on_the_shared_link():
    s = span("all_to_all", "sp", Dims(sp=4, dp=1))
    # half of each rank's payload leaves the node; both ranks of a node share its one link
    inter = 2 * SLOW.alpha_s + (4 * MB * 2 / 4) * 2 / SLOW.busbw("all_to_all")
    intra = 1 * FAST.alpha_s + (4 * MB * 1 / 4) / FAST.busbw("all_to_all")
    assert tier_time(EMU, "all_to_all", 4 * MB, s) == pytest.approx(max(inter, intra))
    # cheaper than paying the inter tier for every byte, dearer than one node
    assert op_time(FAST, "all_to_all", 4 * MB, 4) < tier_time(EMU, "all_to_all", 4 * MB, s)
    with_nic_per_gpu = replace(EMU, nics_per_node=2)
    assert tier_time(with_nic_per_gpu, "all_to_all", 4 * MB, s) == pytest.approx(inter / 2, rel=0.05)


def test_ring_hop_crossing_a_node_boundary_runs_at_the_inter_tier():
    s = span("send_recv", "sp", Dims(sp=4, dp=1))
    assert tier_time(EMU, "send_recv", MB, s) == pytest.approx(SLOW.alpha_s + MB / SLOW.busbw("send_recv"))


def test_megatron_gather_and_scatter_across_nodes_pay_their_slowest_hop():
    s = span("all_gather", "sp", Dims(sp=4, dp=1))
    for op in ("all_gather", "reduce_scatter"):
        expect = 3 * SLOW.alpha_s + 4 * MB * 3 / 4 / SLOW.busbw(op)     # 3 lockstep steps, a slow hop in each
        assert tier_time(EMU, op, 4 * MB, s) == pytest.approx(expect)


def test_dp_groups_sharing_a_node_link_share_its_bandwidth():
    s = span("all_reduce", "dp", Dims(sp=2, dp=2))
    assert tier_time(EMU, "all_reduce", MB, s) == pytest.approx(op_time(SLOW, "all_reduce", 2 * MB, 2))


def test_a_measured_span_table_wins_for_its_group_shape():
    table = replace(SLOW, time_s_op={"all_to_all": [[MB, 0.5], [2 * MB, 0.9]]}, ranks=4, per_node=2)
    prof = replace(EMU, span=table)
    assert tier_time(prof, "all_to_all", MB, span("all_to_all", "sp", Dims(sp=4, dp=1))) == 0.5
    # another shape (4 nodes of one rank) does not use it
    four = span_of([0, 1, 2, 3], 4, 1)
    assert tier_time(replace(prof, gpus_per_node=1), "all_to_all", MB, four) != 0.5


def test_paper_scale_ulysses_across_nodes_is_cheaper_than_all_bytes_on_infiniband():
    h100 = load_profile("h100-ib")
    cfg = RunConfig(model="stdit-xl", dtype="bf16", grad_ckpt=True, backend="nccl", launcher="slurm",
                    method="ulysses", gpus=16, sp=16, frames=32, spatial=1024)
    a2a = sum(v for k, v in predict(cfg, h100).comm_s.items() if "all_to_all" in k)
    # one GPU per node: every peer remote, every byte on InfiniBand (the one-level model's price)
    one_level = sum(v for k, v in predict(cfg, replace(h100, gpus_per_node=1)).comm_s.items() if "all_to_all" in k)
    assert 0.4 * one_level < a2a < 0.7 * one_level      # about half the bytes stay inside the node


def test_tiered_calibration_writes_each_tier(tmp_path, capsys):
    from dspbench.cli import main
    out = tmp_path / "tiers.toml"
    rc = main(["calibrate", "--gpus", "4", "--gpus-per-node", "2", "--tiers", "--nics-per-node", "1",
               "--sizes", "4K,16K", "--ops", "all_to_all,send_recv", "--iters", "1", "--warmup", "0",
               "--compute-iters", "1", "--frames", "4", "--spatial", "16", "--threads", "1",
               "--output", str(out), "--json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)["collectives"]
    assert {(r["tier"], r["ranks"], r["per_node"]) for r in rows} == {("intra", 2, 2), ("inter", 2, 1), ("span", 4, 2)}
    prof = load_profile(str(out))
    assert (prof.gpus_per_node, prof.nics_per_node) == (2, 1)
    assert (prof.intra.ranks, prof.inter.ranks, prof.span.ranks, prof.span.per_node) == (2, 2, 4, 2)
    assert {"link.intra", "link.inter", "link.span"} <= set(prof.sources)
    # the ring's overlap, measured on the world's ring and on the rings inside each node apart
    assert prof.ring_overlap_intra is not None and 0.0 <= prof.ring_overlap_intra <= 1.0
    assert "inside each node" in prof.sources["overlap.ring_intra"]
    assert "inside each node" not in prof.sources["overlap.ring"]


def _ring_plan_profile(ring: float, intra: float | None):
    return replace(load_profile("h100-ib"), ring_overlap=ring, ring_overlap_intra=intra)


def _ring_hidden(profile, sp: int, gpus: int) -> tuple[float, float]:
    cfg = RunConfig(model="stdit-xl", dtype="bf16", backend="nccl", method="ring", gpus=gpus, sp=sp,
                    frames=32, spatial=1024)
    p = predict(cfg, profile)
    return p.hidden_s, sum(v for k, v in p.comm_s.items() if k.startswith("ring_"))


def test_a_ring_inside_a_node_hides_by_the_intra_node_fraction():
    """A ring whose group is inside one node hides ring_intra of its hops; one across nodes, ring."""
    inside, across = (8, 8), (16, 16)           # SP 8 on an 8-GPU node; SP 16 over two nodes
    base_in, _ = _ring_hidden(_ring_plan_profile(0.6, None), *inside)
    assert base_in > 0
    assert _ring_hidden(_ring_plan_profile(0.6, 0.0), *inside)[0] == 0.0
    assert _ring_hidden(_ring_plan_profile(0.6, 0.3), *inside)[0] == pytest.approx(base_in / 2)
    # across nodes the intra-node fraction does not apply
    assert _ring_hidden(_ring_plan_profile(0.6, 0.0), *across) == _ring_hidden(_ring_plan_profile(0.6, None), *across)
    assert _ring_hidden(_ring_plan_profile(0.6, 0.0), *across)[0] > 0


def test_ring_intra_out_of_range_is_refused(tmp_path):
    from dspbench.cost.hardware import PROFILE_DIR
    text = (PROFILE_DIR / "h100-ib.toml").read_text()
    assert "[overlap]" in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("[overlap]", "[overlap]\nring_intra = 1.5", 1))
    with pytest.raises(ValueError, match="overlap fraction"):
        load_profile(str(bad))


def test_tiers_without_gpus_per_node_is_a_clear_error(capsys):
    from dspbench.cli import main
    assert main(["calibrate", "--gpus", "4", "--tiers"]) == 2
    assert "--gpus-per-node" in capsys.readouterr().err


def test_validation_driver_needs_dsp_as_the_baseline(capsys):
    from dspbench.calibrate.multinode import main
    with pytest.raises(SystemExit) as e:
        main(["--methods", "ulysses,ring"])
    assert e.value.code == 2 and "must include dsp" in capsys.readouterr().err


def test_the_overlap_knob_moves_the_intra_node_fraction_with_it():
    """The interval's overlap corners (cost/interval.py) scale ring_intra by the knob's factor."""
    from dspbench.cost.interval import corners
    prof = replace(_ring_plan_profile(0.5, 0.1), calibration={"overlap_fractions": [0.4, 0.5, 0.6]})
    fast, slow = corners(prof)
    assert (fast.ring_overlap, slow.ring_overlap) == (0.6, 0.4)
    assert fast.ring_overlap_intra == pytest.approx(0.12) and slow.ring_overlap_intra == pytest.approx(0.08)
