"""A second, independently written set of nccl-tests fixtures through `calibrate --from-nccl-tests`
(bench/calibrate/nccl_logs.py, from_logs.py): older Rank lines without Group, reduce_scatter named
by its file alone, alltoall and sendrecv in one file, a 2 x 8 alltoall, one rank per node; rows with
wrong counts and one-row tables refused. And `--from-records` (bench/calibrate/from_records.py) on the
real H200 records in results/gpu-h200: efficiency, dispatch, per-method overhead, refusals.

The logs are synthetic fixtures in nccl-tests' published layouts (tests/fixtures/nccl_tests/README.md).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dspbench.calibrate.nccl_logs import parse_file
from dspbench.cli import main
from dspbench.cost.hardware import devices, load_profile

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "nccl_tests"
ONE_NODE = sorted((FIX / "h100-1node").glob("*.log"))
TWO_NODES = sorted((FIX / "h100-2nodes").glob("*.log"))
OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")


def _calibrate(args, out):
    return main(["calibrate", *args, "--name", "from-logs", "--output", str(out)])


def test_every_layout_parses_to_its_test_ranks_and_hosts():
    got = {(p.name, t.op, t.world, len(t.hosts), len(t.rows)) for p in ONE_NODE + TWO_NODES for t in parse_file(p)}
    assert got == {
        ("all_reduce_perf.log", "all_reduce", 8, 1, 11),              # 2.13: banner, root, #wrong, -g 8
        ("all_gather_perf.log", "all_gather", 8, 1, 11),              # older: no root, error, no Group
        ("reduce_scatter_perf.log", "reduce_scatter", 8, 1, 11),      # MPI, named by the file alone
        ("alltoall_and_sendrecv.log", "all_to_all", 8, 1, 11),        # two tests in one file
        ("alltoall_and_sendrecv.log", "send_recv", 8, 1, 11),         # in-place cells N/A
        ("all_reduce_alltoall_2x8.log", "all_reduce", 16, 2, 11),
        ("all_reduce_alltoall_2x8.log", "all_to_all", 16, 2, 11),
        ("inter_1x2.log", "all_reduce", 2, 2, 11),
        ("inter_1x2.log", "send_recv", 2, 2, 11)}
    size, time_s, line, *_ = parse_file(FIX / "h100-1node" / "all_reduce_perf.log")[0].rows[-1]
    assert (size, line) == (1 << 30, 28) and time_s == pytest.approx(3987.4e-6)


def test_one_and_two_node_logs_make_a_profile_predict_accepts(tmp_path, capsys):
    out = tmp_path / "h100-logs.toml"
    assert _calibrate(["--from-nccl-tests", *map(str, ONE_NODE + TWO_NODES)], out) == 0
    prof = load_profile(str(out))
    assert prof.kind == "calibrated" and prof.gpus_per_node == 8
    assert prof.flops("bf16") == pytest.approx(devices()["h100-sxm"]["peak_flops"]["bf16"] * 0.45)  # the datasheet
    # busbw of the fit against the fixtures' large-size busbw (their generator: NVLink ~470, IB ~47)
    assert prof.intra.ranks == 8 and prof.intra.busbw_GBps["all_reduce"] == pytest.approx(470, rel=0.03)
    assert prof.intra.busbw_GBps["all_to_all"] == pytest.approx(385, rel=0.03)
    assert (prof.span.ranks, prof.span.per_node) == (16, 8)
    assert prof.span.busbw_GBps["all_reduce"] == pytest.approx(185, rel=0.03)
    assert prof.inter.ranks == 2 and prof.inter.busbw_GBps["send_recv"] == pytest.approx(47.5, rel=0.03)
    assert set(prof.intra.time_s_op) == set(OPS)
    assert prof.intra.measured_time("all_reduce", 1 << 30, 8) == pytest.approx(3987.4e-6)
    src = prof.sources
    assert f"{FIX / 'h100-1node' / 'all_reduce_perf.log'}:3-33 (11 sizes, 8 ranks on 1 host" in src["link.intra.all_reduce"]
    assert f"{FIX / 'h100-1node' / 'alltoall_and_sendrecv.log'}:" in src["link.intra.send_recv"]
    assert src["link.inter.all_gather"].startswith("kept from h100-ib")
    assert "priced from link.intra and link.inter" in src["link.span.all_gather"]     # no span table: tiers price it
    capsys.readouterr()
    cfg = ["--method", "dsp", "--model", "stdit-xl", "--gpus", "16", "--sp", "16", "--frames", "64", "--spatial",
           "1024", "--dtype", "bf16", "--json", "--out", str(tmp_path)]
    assert main(["predict", "--hardware", str(out), *cfg]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["status"] == "predicted" and rec["hardware_profile"] == "from-logs"
    # 16 ranks over 2 nodes: the all-reduce is priced from the logged 2 x 8 table, not the datasheet
    ar = rec["comm_time_s"]["all_reduce.bwd"]
    assert main(["predict", "--hardware", "h100-ib", *cfg]) == 0
    assert ar < json.loads(capsys.readouterr().out)["comm_time_s"]["all_reduce.bwd"] / 2
    assert main(["plan", "--hardware", str(out), "--model", "stdit-xl", "--frames", "64", "--spatial", "1024",
                 "--gpus", "16", "--dtype", "bf16", "--methods", "dsp,ulysses", "--top", "2", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["hardware"], plan["profile_kind"], plan["gpus_per_node"]) == ("from-logs", "calibrated", 8)


@pytest.mark.parametrize("name, where", [
    ("not_nccl_tests.txt", "not_nccl_tests.txt:1: not nccl-tests output"),
    ("truncated_table.log", "truncated_table.log:17: a truncated table"),
    ("garbled_row.log", "garbled_row.log:20: a row with 7 columns"),
    ("wrong_count_all_reduce_perf.log", "wrong_count_all_reduce_perf.log:19: count 512 does not fit size 16384 B"),
])
def test_bad_logs_exit_2_naming_file_and_line_and_write_nothing(tmp_path, capsys, name, where):
    out = tmp_path / "p.toml"
    assert _calibrate(["--from-nccl-tests", str(FIX / "bad" / name)], out) == 2
    assert where in capsys.readouterr().err and not out.exists()


def test_mixed_clusters_exit_2_naming_both_logs(tmp_path, capsys):
    out = tmp_path / "p.toml"
    assert _calibrate(["--from-nccl-tests", str(ONE_NODE[0]), str(FIX / "bad" / "a100_all_gather_perf.log")], out) == 2
    err = capsys.readouterr().err
    assert "different clusters" in err and "a100_all_gather_perf.log:" in err and f"{ONE_NODE[0]}:" in err
    assert not out.exists()


def test_a_truncated_last_row_is_reported_and_skipped(tmp_path, capsys):
    out = tmp_path / "p.toml"
    assert _calibrate(["--from-nccl-tests", str(FIX / "bad" / "truncated_last_row.log")], out) == 0
    assert "truncated_last_row.log:25: a row with 3 columns" in capsys.readouterr().err
    assert [s for s, _ in load_profile(str(out)).intra.time_s_op["all_reduce"]][-1] == 16777216


def _records(tmp_path, **environ):
    src = ROOT / "results" / "gpu-h200"
    d = tmp_path / "recs"
    d.mkdir()
    for f in ("records.jsonl", "xl_step.jsonl"):
        recs = [json.loads(l) for l in (src / f).read_text().splitlines()]
        for r in recs:
            r["environ"].update(environ)
        (d / f).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return d


FITTED = ("records.jsonl", "xl_step.jsonl", "sample_xl.jsonl", "sample_wan.jsonl")   # not heldout.jsonl


def test_records_of_the_h200_give_efficiency_dispatch_and_method_overheads(tmp_path, capsys):
    out, recs = tmp_path / "h200.toml", tmp_path / "gpu-h200"
    recs.mkdir()
    for f in FITTED:
        shutil.copy(ROOT / "results" / "gpu-h200" / f, recs / f)
    assert main(["calibrate", "--from-records", str(recs), "--name", "h200-rec", "--output", str(out)]) == 0
    prof = load_profile(str(out))
    assert prof.kind == "calibrated" and prof.device == "H200 SXM"           # the base picked by the records' GPU
    assert 0 < prof.efficiency < 1 and prof.module_overhead_s > 0
    assert set(prof.method_overhead_s) == {1} and set(prof.method_overhead_s[1]) == {"dsp", "ulysses", "ring",
                                                                                        "megatron_sp", "usp"}
    assert f"{recs / 'xl_step.jsonl'}:1 stdit-xl train" in prof.sources["compute.efficiency"]
    assert "records.jsonl:2" in prof.sources["compute.method_overhead_s.1.dsp"]
    capsys.readouterr()
    xl = json.loads((ROOT / "results" / "gpu-h200" / "xl_step.jsonl").read_text())
    args = ["--method", "single", "--model", "stdit-xl", "--gpus", "1", "--sp", "1", "--frames", "16", "--spatial",
            "1024", "--dtype", "bf16", "--grad-ckpt", "--json", "--out", str(tmp_path)]
    assert main(["predict", "--hardware", str(out), *args]) == 0
    pred = json.loads(capsys.readouterr().out)["step_time_median_s"]
    assert pred == pytest.approx(xl["step_time_median_s"], rel=0.1)       # the fit holds on a record it used


@pytest.mark.parametrize("base, environ, why", [
    ("h200-ib", {"devices": ["NVIDIA A100-SXM4-80GB"]}, "not the profile's H200"),
    ("a100-ib", {}, "ran on ['NVIDIA H200'], not the profile's A100"),
    ("h200-ib", {"git_dirty": True}, "dirty source tree")])
def test_records_from_other_hardware_or_a_dirty_tree_are_refused_unless_forced(tmp_path, capsys, base, environ, why):
    recs, out = _records(tmp_path, **environ), tmp_path / "p.toml"
    args = ["calibrate", "--from-records", str(recs), "--base", base, "--name", "x", "--output", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{recs / 'records.jsonl'}:1: " in err and why in err and not out.exists()
    assert main(args + ["--force"]) == 0 and "used with --force" in capsys.readouterr().err


def test_logs_and_records_together(tmp_path):
    """Links from the logs, compute from the records: one command, one profile."""
    (tmp_path / "h200").mkdir()
    for f in FITTED:
        shutil.copy(ROOT / "results" / "gpu-h200" / f, tmp_path / "h200" / f)
    logs = [str(p) for p in ONE_NODE]
    text = {p: Path(p).read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H200") for p in logs}
    for p, t in text.items():
        (tmp_path / Path(p).name).write_text(t)
    out = tmp_path / "both.toml"
    assert main(["calibrate", "--from-nccl-tests", *[str(tmp_path / Path(p).name) for p in logs],
                 "--from-records", str(tmp_path / "h200"), "--name", "both", "--output", str(out)]) == 0
    prof = load_profile(str(out))
    assert prof.intra.ranks == 8 and prof.device == "H200 SXM" and prof.module_overhead_s > 0   # base by the logs GPU
    assert "h200-ib" in prof.raw["description"] and "compute from the records" in prof.raw["description"]
