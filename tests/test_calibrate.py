"""Calibration: structure of the table and the written profile (never timing), and the fit."""
from __future__ import annotations

import json

import pytest

from dspbench.calibrate import fit, parse_size, table
from dspbench.cost_comm import steps
from dspbench.hardware import dumps, from_dict, load_profile

OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")


def test_parse_size():
    assert parse_size("4K") == 4096 and parse_size("1M") == 1 << 20 and parse_size("512") == 512


def test_fit_recovers_alpha_and_bandwidth():
    rows = [{"op": "all_gather", "ranks": 4, "wire_bytes": w, "time_s": 3 * 2e-4 + w / 5e8,
             "size": w} for w in (1e4, 1e5, 1e6, 1e7)]
    (alpha, bw), = fit(rows).values()
    assert alpha == pytest.approx(2e-4) and bw == pytest.approx(5e8)
    assert steps("all_gather", 4) == 3


def test_dumps_round_trips():
    d = {"name": "x", "device": {"name": "cpu: y", "memory_gb": 1.5}, "compute": {"flops_per_s": {"fp32": 2e9}},
         "link": {"intra": {"alpha_s": 1e-3, "busbw_GBps": {"all_to_all": 0.1}}}, "sources": {"a.b": 'say "so"'}}
    import tomllib
    assert tomllib.loads(dumps(d, "c")) == d


def test_calibrate_world2_loopback(tmp_path, capsys):
    from dspbench.cli import main
    out = tmp_path / "p.toml"
    rc = main(["calibrate", "--gpus", "2", "--sizes", "4K,16K", "--iters", "1", "--warmup", "0",
               "--compute-iters", "1", "--frames", "4", "--spatial", "16", "--threads", "1",
               "--output", str(out), "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    rows = res["collectives"]
    assert [(r["op"], r["size"]) for r in rows] == [(op, s) for op in OPS for s in (4096, 16384)]
    for r in rows:
        assert r["time_s"] > 0 and r["ranks"] == 2
        assert {"count", "algbw_GBps", "busbw_GBps", "wire_bytes"} <= set(r)
    assert table(rows).splitlines()[0].split()[:4] == ["op", "size(B)", "count", "time(us)"]
    prof = load_profile(str(out))
    assert prof.kind == "calibrated" and prof.flops("fp32") > 0 and prof.gpus_per_node == 2
    assert set(prof.inter.busbw_GBps) == set(OPS)
    assert json.loads(out.with_suffix(".json").read_text())["compute"]["flops_per_s"] > 0
    assert from_dict(prof.raw).name == "calibrated"
