"""A profile from nccl-tests logs (`calibrate --from-nccl-tests`), from run records
(`--from-records`), and the round trip through `--nccl-tests-out`.

The logs are synthetic fixtures in nccl-tests' published layouts (tests/fixtures/nccl_tests/README.md);
the records are the real H200 ones in results/gpu-h200.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dspbench.calibrate.nccl_tests import parse_file
from dspbench.cli import main
from dspbench.cost.hardware import load_profile

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "nccl_tests"
ONE_NODE = sorted((FIX / "h100-1node").glob("*.log"))
TWO_NODES = sorted((FIX / "h100-2nodes").glob("*.log"))
OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")


def _calibrate(args, out):
    return main(["calibrate", *args, "--name", "from-logs", "--output", str(out)])


def test_every_layout_parses_to_its_test_ranks_and_hosts():
    got = {(p.name, t.name, t.ranks, tuple(t.hosts.values()), len(t.rows), t.rows[0].column)
           for p in ONE_NODE + TWO_NODES for t in parse_file(p)}
    assert got == {
        ("all_reduce_perf.log", "all_reduce", 8, (8,), 11, "out-of-place"),        # 2.13: banner, root, #wrong, -g 8
        ("all_gather_perf.log", "all_gather", 8, (8,), 11, "out-of-place"),        # older: no root, error, no Group
        ("reduce_scatter_perf.log", "reduce_scatter", 8, (8,), 11, "out-of-place"),  # MPI, named by the file
        ("alltoall_and_sendrecv.log", "alltoall", 8, (8,), 11, "out-of-place"),    # two tests in one file
        ("alltoall_and_sendrecv.log", "sendrecv", 8, (8,), 11, "out-of-place"),    # in-place cells N/A
        ("all_reduce_alltoall_2x8.log", "all_reduce", 16, (8, 8), 11, "out-of-place"),
        ("all_reduce_alltoall_2x8.log", "alltoall", 16, (8, 8), 11, "out-of-place"),
        ("inter_1x2.log", "all_reduce", 2, (1, 1), 11, "out-of-place"),
        ("inter_1x2.log", "sendrecv", 2, (1, 1), 11, "out-of-place")}
    ar = parse_file(FIX / "h100-1node" / "all_reduce_perf.log")[0]
    assert (ar.rows[-1].size, ar.rows[-1].time_us, ar.rows[-1].line) == (1 << 30, 3987.4, 28)


def test_a_table_names_its_test_where_only_one_fits(tmp_path):
    """No command line, no banner, a file name that says nothing: reduce_scatter (sum, per-rank
    count) and all_reduce (busbw 2(n-1)/n) are told apart; all_gather vs alltoall cannot be."""
    for src, want in (("reduce_scatter_perf.log", "reduce_scatter"), ("all_reduce_perf.log", "all_reduce")):
        text = (FIX / "h100-1node" / src).read_text()
        text = "\n".join(l for l in text.splitlines() if "_perf" not in l)
        (tmp_path / "log.txt").write_text(text)
        assert parse_file(tmp_path / "log.txt")[0].name == want
    text = "\n".join(l for l in (FIX / "h100-1node" / "all_gather_perf.log").read_text().splitlines()
                     if "_perf" not in l)
    (tmp_path / "log.txt").write_text(text)
    assert _calibrate(["--from-nccl-tests", str(tmp_path / "log.txt")], tmp_path / "p.toml") == 2
    assert not (tmp_path / "p.toml").exists()


def test_one_and_two_node_logs_make_a_profile_predict_accepts(tmp_path, capsys):
    out = tmp_path / "h100-logs.toml"
    assert _calibrate(["--from-nccl-tests", *map(str, ONE_NODE + TWO_NODES)], out) == 0
    prof = load_profile(str(out))
    assert prof.kind == "calibrated" and prof.device == "NVIDIA H100 80GB HBM3" and prof.gpus_per_node == 8
    assert prof.flops("bf16") == pytest.approx(989e12 * 0.45)            # the H100 datasheet's compute
    # busbw of the fit against the fixtures' large-size busbw (their generator: NVLink ~470, IB ~47)
    assert prof.intra.ranks == 8 and prof.intra.busbw_GBps["all_reduce"] == pytest.approx(470, rel=0.03)
    assert prof.intra.busbw_GBps["all_to_all"] == pytest.approx(385, rel=0.03)
    assert (prof.span.ranks, prof.span.per_node) == (16, 8)
    assert prof.span.busbw_GBps["all_reduce"] == pytest.approx(185, rel=0.03)
    assert prof.inter.ranks == 2 and prof.inter.busbw_GBps["send_recv"] == pytest.approx(47.5, rel=0.03)
    assert set(prof.intra.time_s_op) == set(OPS) and prof.intra.measured_time("all_reduce", 1 << 30, 8) == \
        pytest.approx(3987.4e-6)
    src = prof.sources
    assert src["link.intra.all_reduce"].startswith(f"{FIX / 'h100-1node' / 'all_reduce_perf.log'}:3-29: all_reduce_perf")
    assert src["link.intra.send_recv"].startswith(f"{FIX / 'h100-1node' / 'alltoall_and_sendrecv.log'}:36-62:")
    assert src["link.inter.all_gather"].startswith("not in the logs: base h100-ib's link.inter")
    assert prof.inter.busbw_GBps["all_gather"] == pytest.approx(50 * 0.8)    # the base's value for a missing op
    assert "link.intra.alpha_s" not in src                                   # the datasheet's reason is gone
    capsys.readouterr()
    cfg = ["--method", "dsp", "--model", "stdit-xl", "--gpus", "16", "--sp", "16", "--frames", "64", "--spatial",
           "1024", "--dtype", "bf16", "--json", "--out", str(tmp_path)]
    assert main(["predict", "--hardware", str(out), *cfg]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["status"] == "predicted" and rec["hardware_profile"] == "from-logs"
    # 16 ranks over 2 nodes: the all-reduce is priced from the logged 2x8 table
    ar = rec["comm_time_s"]["all_reduce.bwd"]
    assert main(["predict", "--hardware", "h100-ib", *cfg]) == 0
    assert ar < json.loads(capsys.readouterr().out)["comm_time_s"]["all_reduce.bwd"] / 2


@pytest.mark.parametrize("name, line, why", [
    ("not_nccl_tests.txt", 1, "not nccl-tests output"),
    ("truncated_table.log", 15, "truncated table"),
    ("garbled_row.log", 20, "row of 7 fields in a table of 13 columns"),
    ("wrong_count_all_reduce_perf.log", 19, "count 512 does not fit size 16384 B"),
])
def test_bad_logs_exit_2_naming_file_and_line_and_write_nothing(tmp_path, capsys, name, line, why):
    out = tmp_path / "p.toml"
    assert _calibrate(["--from-nccl-tests", str(FIX / "bad" / name)], out) == 2
    err = capsys.readouterr().err
    assert f"{FIX / 'bad' / name}:{line}: {why}" in err and not out.exists()


def test_mixed_clusters_exit_2_naming_both_logs(tmp_path, capsys):
    out = tmp_path / "p.toml"
    assert _calibrate(["--from-nccl-tests", str(ONE_NODE[0]), str(FIX / "bad" / "a100_all_gather_perf.log")], out) == 2
    err = capsys.readouterr().err
    assert "a100_all_gather_perf.log:5: mixed clusters" in err and f"{ONE_NODE[0]}:" in err and not out.exists()


def test_a_truncated_last_row_is_reported_and_skipped(tmp_path, capsys):
    out = tmp_path / "p.toml"
    assert _calibrate(["--from-nccl-tests", str(FIX / "bad" / "truncated_last_row.log")], out) == 0
    assert "truncated_last_row.log:25: truncated last row (3 of 13 fields): skipped" in capsys.readouterr().err
    assert [s for s, _ in load_profile(str(out)).intra.time_s_op["all_reduce"]][-1] == 16777216


def test_round_trip_through_nccl_tests_out_gives_calibrates_own_profile(tmp_path, capsys):
    """calibrate (gloo, 2 ranks) writes its profile and its measurements as nccl-tests logs; the
    profile built from those logs has the same links, to the printed precision (time: 0.01 us)."""
    direct, logs = tmp_path / "direct.toml", tmp_path / "logs"
    assert main(["calibrate", "--gpus", "2", "--sizes", "4K,64K,256K", "--iters", "2", "--warmup", "0",
                 "--compute-iters", "1", "--frames", "4", "--spatial", "16", "--threads", "1", "--overlap-repeats", "1",
                 "--output", str(direct), "--nccl-tests-out", str(logs), "--force"]) == 0
    names = sorted(p.name for p in logs.glob("*.log"))
    assert names == ["all_gather_perf.log", "all_reduce_perf.log", "alltoall_perf.log", "reduce_scatter_perf.log",
                     "sendrecv_perf.log"]
    assert main(["calibrate", "--from-nccl-tests", *map(str, sorted(logs.glob("*.log"))), "--base", "emulated-cpu",
                 "--name", "rt", "--output", str(tmp_path / "rt.toml")]) == 0
    a, b = load_profile(str(direct)).intra, load_profile(str(tmp_path / "rt.toml")).intra
    assert a.ranks == b.ranks == 2 and set(a.busbw_GBps) == set(b.busbw_GBps) == set(OPS)
    for op in OPS:
        assert [s for s, _ in a.time_s_op[op]] == [s for s, _ in b.time_s_op[op]]
        assert all(abs(x - y) <= 0.5e-8 for (_, x), (_, y) in zip(a.time_s_op[op], b.time_s_op[op]))
        assert b.busbw_GBps[op] == pytest.approx(a.busbw_GBps[op], rel=1e-4)
        assert b.alpha_s_op[op] == pytest.approx(a.alpha_s_op[op], rel=1e-4, abs=1e-8)


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


def test_records_of_the_h200_give_efficiency_dispatch_and_method_overheads(tmp_path, capsys):
    out = tmp_path / "h200.toml"
    assert main(["calibrate", "--from-records", str(ROOT / "results" / "gpu-h200"), "--name", "h200-rec",
                 "--output", str(out)]) == 0
    prof = load_profile(str(out))
    assert prof.kind == "calibrated" and prof.device == "H200 SXM"           # the base picked by the records' GPU
    assert 0 < prof.efficiency < 1 and prof.module_overhead_s > 0
    assert set(prof.method_overhead_s) == {"dsp", "ulysses", "ring", "megatron_sp", "usp"}
    assert prof.method_overhead_sp == 1
    assert "results/gpu-h200/xl_step.jsonl:1 stdit-xl train" in prof.sources["compute.efficiency"]
    assert "records.jsonl:2" in prof.sources["compute.method_overhead_s.dsp"]
    capsys.readouterr()
    xl = json.loads((ROOT / "results" / "gpu-h200" / "xl_step.jsonl").read_text())
    args = ["--method", "single", "--model", "stdit-xl", "--gpus", "1", "--sp", "1", "--frames", "16", "--spatial",
            "1024", "--dtype", "bf16", "--grad-ckpt", "--json", "--out", str(tmp_path)]
    assert main(["predict", "--hardware", str(out), *args]) == 0
    pred = json.loads(capsys.readouterr().out)["step_time_median_s"]
    assert pred == pytest.approx(xl["step_time_median_s"], rel=0.1)       # the fit holds on a record it used


@pytest.mark.parametrize("environ, why", [({"devices": ["NVIDIA A100-SXM4-80GB"]}, "not the profile's H200"),
                                          ({"git_dirty": True}, "dirty source tree")])
def test_records_from_other_hardware_or_a_dirty_tree_are_refused_unless_forced(tmp_path, capsys, environ, why):
    recs, out = _records(tmp_path, **environ), tmp_path / "p.toml"
    args = ["calibrate", "--from-records", str(recs), "--base", "h200-ib", "--name", "x", "--output", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{recs / 'records.jsonl'}:1: " in err and why in err and not out.exists()
    assert main(args + ["--force"]) == 0 and "used with --force" in capsys.readouterr().err


def test_logs_and_records_together(tmp_path):
    """Links from the logs, compute from the records: one command, one profile."""
    shutil.copytree(ROOT / "results" / "gpu-h200", tmp_path / "h200")
    logs = [str(p) for p in ONE_NODE]
    text = {p: Path(p).read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H200") for p in logs}
    for p, t in text.items():
        (tmp_path / Path(p).name).write_text(t)
    out = tmp_path / "both.toml"
    assert main(["calibrate", "--from-nccl-tests", *[str(tmp_path / Path(p).name) for p in logs],
                 "--from-records", str(tmp_path / "h200"), "--name", "both", "--output", str(out)]) == 0
    prof = load_profile(str(out))
    assert prof.intra.ranks == 8 and prof.device == "NVIDIA H200" and prof.module_overhead_s > 0
    assert "h200-ib" in prof.raw["description"] and "compute from the records" in prof.raw["description"]
