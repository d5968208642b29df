"""nccl-tests logs whose results nccl-tests found wrong, and logs of one message size, through
`calibrate --from-nccl-tests` (bench/calibrate/nccl_logs.py, from_logs.py). The logs are the
synthetic fixtures of tests/fixtures/nccl_tests/h100-1node (nccl-tests' 2.x layout: size count type
redop root | time algbw busbw #wrong out of place | the same in place), edited as a run would print
them: a row with wrong results, an older version's in-place alltoall wrong on every row, and the
`-b 1G -e 1G` run people use for bandwidth."""
from __future__ import annotations

from pathlib import Path

import pytest

from dspbench.calibrate.from_logs import profile_from_logs
from dspbench.cli import main
from dspbench.cost.hardware import from_dict, load_profile

FIX = Path(__file__).parent / "fixtures" / "nccl_tests" / "h100-1node"
ALL_REDUCE = (FIX / "all_reduce_perf.log").read_text()
ALLTOALL = "\n".join((FIX / "alltoall_and_sendrecv.log").read_text().splitlines()[:33]) + "\n"   # its first test
ROW_16M = "    16777216       4194304     float     sum      -1    109.3  153.50  268.63       0    110.2  152.24  266.41       0"
GIB = 1 << 30


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def _rows(text):
    return [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith(("#", "+", "$"))]


def test_a_row_wrong_out_of_place_is_refused_naming_it(tmp_path, capsys):
    assert ROW_16M in ALL_REDUCE
    log = _write(tmp_path, "all_reduce_perf.log", ALL_REDUCE.replace(ROW_16M, ROW_16M.replace("268.63       0",
                                                                                             "268.63       3")))
    line = ALL_REDUCE.splitlines().index(ROW_16M) + 1
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--from-nccl-tests", str(log), "--name", "x", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"all_reduce_perf.log:{line}: size 16777216 B: out-of-place #wrong 3" in err and not out.exists()
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_older_error_column_above_rounding_is_wrong_and_zero_is_not(tmp_path):
    old_log = FIX.parent / "all_gather_perf_old_noroot.log"     # `error` columns of 0e+00
    old = old_log.read_text()
    assert " 0e+00" in old and profile_from_logs([str(old_log)], "x")
    bad = old.replace(" 0e+00", " 2e-01", 1)
    with pytest.raises(ValueError, match=r"out-of-place #wrong 2e-01"):
        profile_from_logs([str(_write(tmp_path, "all_gather_perf.log", bad))], "x")


def test_only_in_place_wrong_fits_the_out_of_place_column_and_says_so(tmp_path):
    # an older nccl-tests checks in-place alltoall against the wrong buffer: every in-place row wrong
    lines = [l[: l.rindex("N/A")] + f"{l.split()[1]:>3}" if l in _rows(ALLTOALL) else l for l in ALLTOALL.splitlines()]
    wrong = _write(tmp_path, "alltoall_perf.log", "\n".join(lines) + "\n")
    right = _write(tmp_path, "alltoall_right_perf.log", ALLTOALL)
    d, notes = profile_from_logs([str(wrong)], "x")
    ref, _ = profile_from_logs([str(right)], "x")
    assert d["link"]["intra"]["busbw_GBps"]["all_to_all"] == ref["link"]["intra"]["busbw_GBps"]["all_to_all"]
    assert d["link"]["intra"]["time_s_op"]["all_to_all"] == ref["link"]["intra"]["time_s_op"]["all_to_all"]
    src = d["sources"]["link.intra.all_to_all"]
    assert "in-place #wrong not 0 at line(s) 18, 19," in src and "the out-of-place column" in src
    assert "in-place" not in ref["sources"]["link.intra.all_to_all"]
    assert any("in-place results wrong" in n and "out-of-place column is fitted" in n for n in notes)


def _one_size(tmp_path):
    """The alltoall run again as `-b 1G -e 1G` (its 1 GiB row) and as `-b 1K -e 16M` (its small rows)."""
    head, rows = ALLTOALL.split("#        (B)")[0], _rows(ALLTOALL)
    units = "#        (B)" + ALLTOALL.split("#        (B)")[1].splitlines()[0] + "\n"
    big = (head.replace("-b 1K -e 1G", "-b 1G -e 1G").replace("minBytes 1024 maxBytes 1073741824",
                                                              f"minBytes {GIB} maxBytes {GIB}") + units + rows[-1] + "\n")
    small = (head.replace("-e 1G", "-e 16M").replace("maxBytes 1073741824", "maxBytes 16777216") + units
             + "\n".join(r for r in rows if int(r.split()[0]) <= 1 << 24) + "\n")
    return _write(tmp_path, "alltoall_perf_1G.log", big), _write(tmp_path, "alltoall_perf_small.log", small)


def test_a_log_of_one_size_gives_bandwidth_with_the_latency_of_a_second_log(tmp_path):
    big, small = _one_size(tmp_path)
    d, _ = profile_from_logs([str(big), str(small)], "x")
    alone, _ = profile_from_logs([str(small)], "x")
    alpha = alone["link"]["intra"]["alpha_s_op"]["all_to_all"]      # the small sizes' own fit
    link = from_dict(d).intra
    assert link.alpha_s_op["all_to_all"] == alpha > 0
    # 1 GiB in 2460.2 us on 8 ranks: busbw = 7/8 x 1 GiB / (t - 7 alpha)
    assert link.busbw_GBps["all_to_all"] == pytest.approx(GIB * 7 / 8 / (2460.2e-6 - 7 * alpha) / 1e9, rel=1e-9)
    assert 380 < link.busbw_GBps["all_to_all"] < 390
    assert [s for s, _ in link.time_s_op["all_to_all"]] == [1024 * 4 ** i for i in range(8)] + [GIB]
    src = d["sources"]["link.intra.all_to_all"]
    assert "bandwidth from nccl-tests log" in src and "alltoall_perf_1G.log" in src and "one size, 1073741824 B" in src
    assert "latency from nccl-tests log" in src and "alltoall_perf_small.log" in src


def test_a_log_of_one_size_alone_states_its_latency_as_assumed(tmp_path, capsys):
    big, _ = _one_size(tmp_path)
    out = tmp_path / "p.toml"
    assert main(["calibrate", "--from-nccl-tests", str(big), "--name", "one", "--output", str(out)]) == 0
    prof, base = load_profile(str(out)), load_profile("h100-ib")
    alpha = base.intra.alpha_s_op.get("all_to_all", base.intra.alpha_s)
    assert prof.intra.alpha_s_op["all_to_all"] == pytest.approx(alpha)
    assert prof.intra.busbw_GBps["all_to_all"] == pytest.approx(GIB * 7 / 8 / (2460.2e-6 - 7 * alpha) / 1e9)
    assert "assumed: latency" in prof.sources["link.intra.all_to_all"] and "h100-ib's" in prof.sources["link.intra.all_to_all"]
