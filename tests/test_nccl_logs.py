"""A profile from the nccl-tests logs a cluster already has (bench/calibrate/nccl_logs.py, from_logs.py):
the published formats parse (2.x with and without root, #wrong or error, N/A cells, -g and MPI launches,
several tests in one file, one node of 8 and two nodes of 8), each log feeds its tier, the fit
recovers the bandwidths and latencies the logs were written with, every value names its file and
lines, predict accepts the profile; truncated, garbled, foreign and mixed inputs exit 2 with file:line
and write nothing; and calibrate's own measurements written in that format come back as the profile
calibrate writes directly. Fixtures: tests/fixtures/nccl_tests/ (synthetic, in the published format)."""
import json
from pathlib import Path

import pytest

from dspbench.calibrate.from_logs import profile_from_logs
from dspbench.calibrate.nccl_logs import LogError, parse_file
from dspbench.cli import main
from dspbench.cost.hardware import devices, from_dict, load_profile

FIX = Path(__file__).parent / "fixtures" / "nccl_tests"
H100_LOGS = [FIX / f for f in ("all_reduce_perf_1node_h100.log", "all_gather_perf_old_noroot.log", "several_tests_mpi.log",
                               "sendrecv_perf_2nodes_1rank.log", "all_reduce_perf_2nodes_8gpus.log")]


def test_every_published_format_parses_with_its_collective_ranks_and_hosts():
    got = {p.name: [(t.op, t.world, len(t.hosts), len(t.rows)) for t in parse_file(p)] for p in H100_LOGS}
    assert got["all_reduce_perf_1node_h100.log"] == [("all_reduce", 8, 1, 11)]
    assert got["all_gather_perf_old_noroot.log"] == [("all_gather", 8, 1, 11)]          # no root column, 'error'
    assert got["several_tests_mpi.log"] == [("reduce_scatter", 8, 1, 11), ("all_to_all", 8, 1, 11)]
    assert got["sendrecv_perf_2nodes_1rank.log"] == [("send_recv", 2, 2, 11)]           # N/A in place
    assert got["all_reduce_perf_2nodes_8gpus.log"] == [("all_reduce", 16, 2, 11)]
    t = parse_file(FIX / "alltoall_perf_truncated.log")[0]
    assert len(t.rows) == 10 and "alltoall_perf_truncated.log:27" in t.skipped[0] and "truncated last row" in t.skipped[0]


def test_each_log_feeds_its_tier_and_the_fit_recovers_what_was_logged():
    d, notes = profile_from_logs([str(p) for p in H100_LOGS], "h100-logs")
    prof = from_dict(d)
    assert prof.device == "H100 SXM5" and prof.peak_flops["bf16"] == devices()["h100-sxm"]["peak_flops"]["bf16"]  # the GPU model picked the base
    intra = {"all_reduce": 360, "all_gather": 370, "reduce_scatter": 355, "all_to_all": 340}
    for op, bw in intra.items():
        assert prof.intra.busbw_GBps[op] == pytest.approx(bw, rel=0.01), op
    assert prof.intra.ranks == 8 and prof.intra.alpha_s_op["all_reduce"] == pytest.approx(28e-6 / 14, rel=0.05)
    assert prof.inter.busbw_GBps["send_recv"] == pytest.approx(46, rel=0.01) and prof.inter.ranks == 2
    assert prof.span.busbw_GBps["all_reduce"] == pytest.approx(88, rel=0.01)
    assert (prof.span.ranks, prof.span.per_node, prof.gpus_per_node) == (16, 8, 8)
    src = prof.sources
    assert "all_reduce_perf_1node_h100.log:2-30" in src["link.intra.all_reduce"] and "measured" in src["link.intra.all_reduce"]
    assert src["link.intra.send_recv"].startswith("kept from h100-ib: no nccl-tests log")
    assert src["link.inter.all_to_all"].startswith("kept from h100-ib")


def test_predict_accepts_a_profile_made_from_logs(tmp_path, capsys):
    out = tmp_path / "h100-logs.toml"
    assert main(["calibrate", "--from-nccl-tests", *map(str, H100_LOGS), "--name", "h100-logs", "--output", str(out)]) == 0
    capsys.readouterr()
    rc = main(["predict", "--method", "dsp", "--model", "stdit-xl", "--frames", "64", "--spatial", "4096", "--gpus", "16",
               "--sp", "16", "--dtype", "bf16", "--hardware", str(out), "--records-file", str(tmp_path / "p.jsonl"), "--json"])
    rec = json.loads(capsys.readouterr().out)
    assert rc == 0 and rec["hardware_profile"] == "h100-logs" and rec["predicted_comm_time_s"] > 0


@pytest.mark.parametrize("files,where", [
    (["not_nccl_tests.log"], "not_nccl_tests.log:1: not nccl-tests output"),
    (["all_reduce_perf_garbled.log"], "all_reduce_perf_garbled.log:25: busbw 999.99"),
    (["all_reduce_perf_1node_h100.log", "all_gather_perf_a100.log"], "logs of different clusters mixed"),
    (["missing.log"], "missing.log:0: no such file"),
])
def test_bad_logs_exit_2_with_file_and_line_and_write_nothing(tmp_path, capsys, files, where):
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--from-nccl-tests", *(str(FIX / f) for f in files), "--output", str(out)]) == 2
    assert where in capsys.readouterr().err and not out.exists()


def test_a_truncated_table_in_the_middle_is_an_error(tmp_path):
    lines = (FIX / "all_reduce_perf_1node_h100.log").read_text().splitlines()
    cut = next(i for i, l in enumerate(lines) if l.strip().startswith("65536"))
    lines[cut] = lines[cut][:40]
    bad = tmp_path / "all_reduce_perf_cut.log"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError, match=rf"all_reduce_perf_cut.log:{cut + 1}: a row with"):
        parse_file(bad)


@pytest.mark.gloo
def test_calibrates_own_measurements_in_nccl_tests_format_round_trip(tmp_path, capsys):
    """calibrate --nccl-tests-out writes what it measured as nccl-tests prints it; a profile from those
    logs has the links calibrate wrote directly, to the printed precision (2 decimals of a microsecond)."""
    direct, logs = tmp_path / "direct.toml", tmp_path / "logs"
    assert main(["calibrate", "--gpus", "2", "--sizes", "64K,1M,4M", "--iters", "2", "--warmup", "0",
                 "--compute-iters", "1", "--frames", "4", "--spatial", "16", "--threads", "1", "--force",
                 "--output", str(direct), "--nccl-tests-out", str(logs)]) == 0
    written = sorted(p.name for p in logs.glob("*.log"))
    assert written == ["all_gather_perf.log", "all_reduce_perf.log", "alltoall_perf.log", "reduce_scatter_perf.log",
                       "sendrecv_perf.log"]
    import socket
    ar = parse_file(logs / "all_reduce_perf.log")[0]
    assert ar.hosts == [socket.gethostname()] and ar.world == 2        # the ranks' own devices block
    assert "N/A (not validated)" in (logs / "all_reduce_perf.log").read_text()    # in-place never timed: N/A
    d, _ = profile_from_logs([str(p) for p in sorted(logs.glob("*.log"))], "from-logs", base="emulated-cpu")
    a, b = load_profile(str(direct)).intra, from_dict(d).intra
    for op in a.busbw_GBps:
        assert b.busbw_GBps[op] == pytest.approx(a.busbw_GBps[op], rel=2e-3), op
        assert b.alpha_s_op[op] == pytest.approx(a.alpha_s_op[op], rel=2e-3, abs=2e-8), op
        assert [s for s, _ in b.time_s_op[op]] == [s for s, _ in a.time_s_op[op]]
