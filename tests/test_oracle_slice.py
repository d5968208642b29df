"""`--check` above the full-check budget (bench/run/oracle.py: check_shape) checks a slice that runs
the run's padding path: T and S keep their remainders mod N and the pads sit on the same ranks as
the run's, so every padding method at N 2, 3, 4 is checked padded, forward and backward (the pads
cut at the model's exit: the loss and the gradients see real tokens only), and a broken padding path
is caught on the slice. The budget is lowered in the ranks so a tiny run takes the slice path."""
from __future__ import annotations

import pytest

import oracle_tasks as ot
import padding_tasks as pt
from dspbench.models import Shape, get_config
from dspbench.run.oracle import check_shape, slice_extent
from test_padding import HEADS12, PADDED

RUN = (1, 11, 43)                        # T 11, S 43: uneven at 2, 3 and 4
BUDGET = 11 * 43 * 48 * 2 - 1            # one element short of the run's B*T*S*C*depth: the slice path


def _pads(extent: int, n: int) -> tuple[int, ...]:
    """Pads each rank holds of `extent` padded to a multiple of n and split in n equal chunks."""
    chunk = -(-extent // n)
    return tuple(min(chunk, max(0, (i + 1) * chunk - extent)) for i in range(n))


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("extent", [5, 11, 43, 64, 1560, 4093, 4096])
def test_the_slice_keeps_the_remainder_and_which_ranks_hold_pads(extent, n):
    for per_rank in (2, 4):
        e = slice_extent(extent, n, per_rank)
        assert e <= extent and e % n == extent % n
        run, small = _pads(extent, n), _pads(e, n)
        assert [p == 0 for p in small] == [p == 0 for p in run]             # the same ranks pad-free
        assert [p == -(-e // n) for p in small] == [p == -(-extent // n) for p in run]   # the same all-pad ranks
        assert e == extent or e <= n * max(per_rank, -extent % n + 1)     # and small: a chunk past the pads


def test_an_uneven_large_run_is_checked_on_an_uneven_slice():
    cfg = get_config("stdit-xl")
    for sp, want in ((2, (1, 3, 7)), (3, (1, 5, 10)), (4, (1, 7, 15)), (8, None)):
        _, s = check_shape(cfg, Shape(1, 64 * sp + RUN[1], 64 * sp + RUN[2]), sp)
        assert (s.frames % sp, s.spatial % sp) == ((64 * sp + 11) % sp, (64 * sp + 43) % sp)
        if want:
            assert (s.batch, s.frames, s.spatial) == want
    _, even = check_shape(cfg, Shape(2, 64, 4096), 4)
    assert (even.batch, even.frames, even.spatial) == (1, 8, 16)            # an even run: the even slice, as before


@pytest.mark.gloo
@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_method_checked_padded_on_the_slice(rank_pool, world):
    res = rank_pool(world).run(pt.sliced_cases, PADDED, "stdit-tiny", RUN, world, BUDGET, **HEADS12)
    for method in res[0]:
        shape = res[0][method]["checked_shape"]
        assert shape[1:] != RUN[1:] and (shape[1] % world, shape[2] % world) == (RUN[1] % world, RUN[2] % world)
        try:
            ot.assert_matches_oracle([r[method] for r in res], world)
        except AssertionError as e:
            raise AssertionError(f"{method} on {shape}: {e}") from e


@pytest.mark.gloo
def test_a_broken_padding_path_is_caught_on_the_slice(rank_pool):
    # padded tokens of 1e3 reaching attention unmasked: an even slice would never see them
    res = rank_pool(4).run(pt.sliced_cases, ["ring", "ulysses"], "stdit-tiny", RUN, 4, BUDGET, leak=True, **HEADS12)
    for method, r in res[0].items():
        assert r["output"] > 1e3 * ot.RTOL * max(1.0, r["output_scale"]), (method, r["output"])
