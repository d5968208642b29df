"""How much a configuration's place in its job moves its measured score: a diagnosis of the sweep's
order, shown beside a plan check, never applied to any score.

A job runs its configurations one after another and appends their records to its own file in that
order (one writer per file, append-only: bench/records/io.py), so a record's place is its line index
among its file's measured records. Since sweeps rotate each repeat's order (slurm/plan.py `rotated`)
a configuration is measured at several places, and the log score splits into a configuration term
plus a place term, fitted by alternating means (least squares on the additive model). Where no
configuration was measured at two places (a fixed order) the two cannot be told apart: None.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from dspbench.records.io import read_records

FIT_ROUNDS = 50     # alternating means converge to the least-squares fit; 50 rounds is far past it here


def placed(root: str | Path, keep: Callable[[dict], bool]) -> list[tuple[dict, int]]:
    """(record, place in its job) for every kept record under root; place counts kept records only."""
    out = []
    for path in sorted(Path(root).rglob("*.jsonl")):
        kept = [r for r in read_records(path)[0] if keep(r)]
        out += [(r, place) for place, r in enumerate(kept)]
    return out


def place_effect(scores: list[tuple[str, int, float]]) -> dict | None:
    """scores: (configuration key, place, score > 0). The fitted place terms as ratios to the mean
    place ({place: ratio}), with the configurations and records they rest on; None when no
    configuration was seen at two places."""
    by_config: dict[str, set[int]] = {}
    for key, place, _ in scores:
        by_config.setdefault(key, set()).add(place)
    if not any(len(p) > 1 for p in by_config.values()):
        return None
    logs = [(key, place, math.log(s)) for key, place, s in scores]
    config = {k: 0.0 for k in by_config}
    place = {p: 0.0 for _, p, _ in logs}
    for _ in range(FIT_ROUNDS):
        config = _means({k: [v - place[p] for kk, p, v in logs if kk == k] for k in config})
        place = _means({q: [v - config[k] for k, p, v in logs if p == q] for q in place})
        shift = sum(place.values()) / len(place)          # the place terms average to 0
        place = {q: b - shift for q, b in place.items()}
    return {"ratio": {q: math.exp(b) for q, b in sorted(place.items())},
            "configurations": len(by_config), "records": len(scores)}


def _means(groups: dict) -> dict:
    return {k: sum(v) / len(v) for k, v in groups.items()}


def place_line(effect: dict | None) -> str:
    if effect is None:
        return ("place in the job: not separable from the configuration (each was measured at one place "
                "only, a fixed order)")
    ratios = effect["ratio"]
    lo, hi = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
    return (f"place in the job (a diagnosis, applied to nothing): the first configuration of a job measured "
            f"{ratios[0] - 1:+.1%} against the mean place; places range {ratios[lo] - 1:+.1%} (place {lo + 1}) "
            f"to {ratios[hi] - 1:+.1%} (place {hi + 1}); fitted over {effect['records']} records of "
            f"{effect['configurations']} configurations (plan/placement.py)")
