"""Terms fitted to published points: the tuning split only, never the held-out points.

`python -m dspbench.cost.tune` fits, for each published hardware with a tuned profile (TUNED), the
one term that profile tunes, the device curve's host time per kernel (`host_s_per_kernel`,
bench/cost/curve.py), to the published records on that hardware whose `published.split` is `tune`,
by least squares on log(predicted / published) over a grid (5 us steps, then 1 us), and prints it. The tuned profile holds
what this prints (tests/test_tune.py keeps them equal). docs/gpu-evidence.md says what was tuned
on what, and shows the held-out points predicted with the tuned profile, untouched.
"""
from __future__ import annotations

import math
import sys
from dataclasses import replace

from dspbench.cost.evidence_published import TUNED, predicted_point, published_points

COARSE_S = tuple(i * 5e-6 for i in range(1, 61))   # host seconds per kernel: 5 to 300 us, then 1 us around the best


def tuning_points(hardware: str) -> list[dict]:
    """The published records on `hardware` in the tuning split (the only ones a fit may read)."""
    return [r for r in published_points() if r["published"]["split"] == "tune" and r["hardware_profile"] == hardware]


def loss(profile, points: list[dict]) -> float:
    return sum(math.log(predicted_point(r, profile)["pred_s"] / r["published"]["latency_s"]) ** 2 for r in points)


def with_host(profile, host_s_per_kernel: float):
    return replace(profile, curve={**profile.curve, "host_s_per_kernel": host_s_per_kernel})


def fit(hardware: str) -> float:
    """The grid's host time per kernel that best predicts `hardware`'s tuning points on its tuned profile."""
    from dspbench.cost.hardware import load_profile
    base, points = load_profile(TUNED[hardware]), tuning_points(hardware)
    if not points:
        raise ValueError(f"no published tuning points on {hardware}")
    best = min(COARSE_S, key=lambda h: loss(with_host(base, h), points))
    fine = [best + i * 1e-6 for i in range(-4, 5)]
    return min(fine, key=lambda h: loss(with_host(base, h), points))


def main(argv=None) -> int:
    for hardware, tuned in TUNED.items():
        print(f"{tuned}: host_s_per_kernel = {fit(hardware):.3g} (fitted to {len(tuning_points(hardware))} "
              f"tuning points on {hardware})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
