"""Kendall's tau between a predicted and a measured order: tau-b (ties left out) and tau-a (every pair).
Used by plan.check (the plan against its measurement) and plan.ceiling (a perfect prediction against
a simulated one)."""
from __future__ import annotations


def _pair_signs(predicted: list[float], measured: list[float]):
    for i in range(len(predicted)):
        for j in range(i + 1, len(predicted)):
            yield _sign(predicted[i] - predicted[j]), _sign(measured[i] - measured[j])


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def kendall_tau(predicted: list[float], measured: list[float]) -> float | None:
    """tau-b (the usual Kendall's tau, scipy's default): (concordant - discordant) / sqrt(pairs not tied
    in the prediction x pairs not tied in the measurement). Rows the cost model prices identically
    (dsp and dsp_hybrid, Ulysses and its DeepSpeed and USP forms move the same bytes) are a tie the
    plan declares: tau-b leaves those pairs out instead of counting them as misses, as tau-a does."""
    signs = list(_pair_signs(predicted, measured))
    untied_p = sum(1 for a, _ in signs if a)
    untied_m = sum(1 for _, b in signs if b)
    if not untied_p or not untied_m:
        return None
    return sum(a * b for a, b in signs) / (untied_p * untied_m) ** 0.5


def kendall_tau_a(predicted: list[float], measured: list[float]) -> float | None:
    """tau-a over every pair: (concordant - discordant) / pairs; a tie in either counts as neither."""
    signs = list(_pair_signs(predicted, measured))
    return sum(a * b for a, b in signs) / len(signs) if signs else None
