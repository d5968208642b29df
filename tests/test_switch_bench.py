"""The switch micro-benchmark's machinery (bench/micro/switch.py), tiny and fast: no timing asserts."""
from __future__ import annotations

import json

import pytest

from dspbench.micro import switch as sb

pytestmark = pytest.mark.gloo


def test_bench_runs_and_reports(tmp_path, capsys):
    path = tmp_path / "switch.json"
    res = sb.main(["--world", "2", "--sizes-mib", "0.25", "--repeats", "1", "--iters", "1",
                   "--warmup", "1", "--json", str(path)])
    out = capsys.readouterr().out
    for word in ("a/b", "a/(c+d)", "goals", "a==b", *(sb.LABELS[v] for v in sb.VARIANTS)):
        assert word in out
    assert json.loads(path.read_text()) == res
    assert res["world"] == 2 and res["backend"] == "gloo" and res["goals"] == {"a/b": 0.7, "a/(c+d)": 1.15}
    assert set(res["variants"]) == set(sb.VARIANTS)
    (s,) = res["sizes"]
    b, t, sp, c = s["local_shape"]
    assert (b, t, c) == (1, 32, 1152) and sp % 2 == 0 and s["payload_bytes"] == b * t * sp * c * 4
    # The correctness check, done once before timing: (a) and (b) agree on every rank.
    assert s["verify"]["a_equals_b"] is True
    assert s["verify"]["out_shape"] == [b, 2 * t, sp // 2, c]
    assert s["verify"]["a_out_is_view"] and s["verify"]["a_out_contiguous"]  # B = 1: the exit is a view
    for v in sb.VARIANTS:
        q = s["variants_s"][v]
        assert len(q["samples"]) == 1 and 0 < q["p10"] <= q["median"] <= q["p90"]
    assert set(s["ratios"]) == {"a/b", "a/(c+d)", "c/b"}
    assert set(s["goals_met"]) == set(sb.GOALS) and all(isinstance(x, bool) for x in s["goals_met"].values())


def test_local_shape():
    assert sb.local_shape(4 * 2**20, 4, 64, 1152) == (1, 16, 56, 1152)
    assert sb.local_shape(1, 4, 64, 1152) == (1, 16, 4, 1152)  # at least one row per rank
    with pytest.raises(ValueError):
        sb.local_shape(2**20, 3, 64, 1152)


def _verify_task(shape, break_reference: bool):
    import torch

    from dspbench.methods.comm import layer as comm, raw as comm_raw
    x = torch.randn(shape, generator=torch.Generator().manual_seed(comm.rank(None)))
    original = comm_raw.ref_all_to_all
    if break_reference:  # a wrong reference must be caught
        comm_raw.ref_all_to_all = lambda *a: original(*a).flip(1)
    try:
        return sb.verify(x, None)
    finally:
        comm_raw.ref_all_to_all = original


@pytest.mark.parametrize("batch", [1, 2])
def test_verify_catches_a_mismatch(rank_pool, batch):
    pool = rank_pool(2)
    shape = (batch, 3, 4, 5)
    good = pool.run(_verify_task, shape, False)
    assert all(r["a_equals_b"] for r in good)
    assert all(r["out_shape"] == [batch, 6, 2, 5] for r in good)
    assert all(r["a_out_is_view"] == (batch == 1) for r in good)  # B > 1: one copy on the way out
    bad = pool.run(_verify_task, shape, True)
    assert not any(r["a_equals_b"] for r in bad)
