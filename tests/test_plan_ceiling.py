"""The noise ceiling (plan/ceiling.py): the tau a predictor that knew the true order would expect
against a measurement whose repeats disagree this much."""
import math
import statistics

import pytest

from dspbench.plan.ceiling import ceiling_tau, noise_sd, repeats_for, true_scores


def rows_of(*repeats):
    return [{"by_repeat": dict(enumerate(r))} for r in repeats]


def test_repeats_that_agree_leave_no_noise_and_a_ceiling_of_one():
    rows = rows_of([10, 10, 10], [8, 8, 8], [5, 5, 5])
    assert noise_sd(rows) == 0 and ceiling_tau(rows) == 1.0 and repeats_for(rows, 0.8) == 3


def test_rows_that_differ_only_by_noise_have_a_ceiling_near_zero():
    # every row the same three values in a different order: no true difference, only noise
    rows = rows_of([9, 10, 11], [10, 11, 9], [11, 9, 10], [10, 9, 11])
    assert true_scores(rows, noise_sd(rows)) == pytest.approx([statistics.geometric_mean([9, 10, 11])] * 4)
    assert ceiling_tau(rows) == 0.0             # the rows' spread is all noise: no true order to find
    assert repeats_for(rows, 0.8) is None       # no number of repeats orders rows that are equal


def test_two_rows_match_the_closed_form():
    """Two rows, two repeats each (the median of 2 is their mean): the measured order is right with
    probability Phi(gap / sd), the shrunk gap over the noise; tau-b = 2 P - 1."""
    a, g = 0.05, 0.12                       # each row's repeats at +-a around its log score; rows g apart
    rows = rows_of([math.exp(g + a), math.exp(g - a)], [math.exp(a), math.exp(-a)])
    sd = noise_sd(rows)
    assert sd == pytest.approx(a * math.sqrt(2))
    gap = 2 * math.sqrt(g * g / 4 - sd * sd / 2)   # the rows' spread less the noise their means carry
    p = 0.5 * (1 + math.erf(gap / sd / math.sqrt(2)))
    assert ceiling_tau(rows, draws=4000) == pytest.approx(2 * p - 1, abs=0.03)


def test_more_repeats_raise_the_ceiling_and_the_same_records_give_the_same_ceiling():
    rows = rows_of([10, 11.5, 9], [9.6, 10.4, 8.8], [9, 8.1, 9.9], [7, 7.7, 6.6], [6.8, 7.4, 6.0])
    three, fifteen = ceiling_tau(rows), ceiling_tau(rows, 15)
    assert 0.3 < three < fifteen <= 1 and ceiling_tau(rows) == three
    n = repeats_for(rows, 0.8)
    assert n is not None and ceiling_tau(rows, n) >= 0.8 and (n == 3 or ceiling_tau(rows, n - 2) < 0.8)


def test_rows_measured_once_have_no_ceiling():
    rows = rows_of([10], [9], [8]) + rows_of([7, 7.1])
    assert noise_sd(rows) > 0 and ceiling_tau(rows) is None     # one repeated row: nothing to order
