"""The best Kendall's tau a prediction can expect against a noisy measurement: the noise ceiling.

A plan is checked by the order its rows' measured medians give. Where the measurement's repeats
disagree with each other, even a predictor that knew every row's true score would not match that
order every time. This module says how well such a perfect predictor would be expected to do, from
the measurement's own repeats, so a tau below a bar can be read as the prediction's fault or as
the measurement's limit:

- the noise: each row's repeats give a spread of log score; pooled over the rows (root mean
  variance), that is one relative standard deviation for the whole measurement;
- the true scores: the rows' mean log scores, their spread around the grand mean shrunk by the
  noise the means themselves carry (variance across rows minus noise^2 / repeats), so the rows are
  not made to look further apart than the measurement shows;
- the ceiling: simulate the measurement (each repeat a true score times exp(normal(0, noise)), the
  row scored by the median of its repeats, as plan.check does) and average tau-b between the true
  order and the simulated one. A seeded generator: the same records give the same ceiling.

Normal noise on the log scale is an assumption; the pooled spread is measured.
"""
from __future__ import annotations

import math
import random
import statistics

from dspbench.plan.tau import kendall_tau

DRAWS = 400       # simulated measurements per ceiling: the ceiling's own spread is then ~0.005
SEED = 0
MAX_REPEATS = 31  # repeats_for looks no further


def _logs(row: dict) -> list[float]:
    return [math.log(v) for v in row["by_repeat"].values()]


def repeated(rows: list[dict]) -> list[dict]:
    """Rows measured at least twice: the only ones that show the noise."""
    return [r for r in rows if len(r.get("by_repeat") or {}) >= 2]


def noise_sd(rows: list[dict]) -> float | None:
    """The measurement's relative noise per repeat: the rows' variances of log score, pooled."""
    rows = repeated(rows)
    if not rows:
        return None
    return math.sqrt(statistics.fmean(statistics.variance(_logs(r)) for r in rows))


def true_scores(rows: list[dict], sd: float) -> list[float]:
    """Each row's score with the noise its mean carries taken out of the rows' spread."""
    means = [statistics.fmean(_logs(r)) for r in rows]
    repeats = statistics.fmean(len(r["by_repeat"]) for r in rows)
    centre, spread = statistics.fmean(means), statistics.pvariance(means)
    shrink = math.sqrt(max(0.0, spread - sd * sd / repeats) / spread) if spread > 0 else 0.0
    return [math.exp(centre + shrink * (m - centre)) for m in means]


def ceiling_tau(rows: list[dict], repeats: int | None = None, draws: int = DRAWS, seed: int = SEED) -> float | None:
    """The tau-b a predictor that knew the true order would expect against a median of `repeats`
    measurements as noisy as these (default: the repeats these rows had). None without 2 repeated rows;
    0 where the rows' spread is all noise (no true order to find)."""
    rows = repeated(rows)
    if len(rows) < 2:
        return None
    sd = noise_sd(rows)
    truth = true_scores(rows, sd)
    n = repeats or round(statistics.median(len(r["by_repeat"]) for r in rows))
    rng = random.Random(seed)
    taus = []
    for _ in range(draws):
        seen = [statistics.median(t * math.exp(rng.gauss(0.0, sd)) for _ in range(n)) for t in truth]
        tau = kendall_tau(truth, seen)
        if tau is not None:
            taus.append(tau)
    return statistics.fmean(taus) if taus else 0.0     # no true difference left: nothing to order


def repeats_for(rows: list[dict], bar: float, most: int = MAX_REPEATS) -> int | None:
    """The fewest repeats (odd, from 3) whose ceiling reaches `bar`; None if not even `most` do."""
    for n in range(3, most + 1, 2):
        c = ceiling_tau(rows, n)
        if c is None or c == 0.0:
            return None
        if c >= bar:
            return n
    return None
