"""Each method's look in reports (label, colour, order, Table 3 row), from what the records say.

Reports may not import methods (tests/test_layout.py), so a method's look travels with its records
(`method_meta`, from its MethodSpec's `report`) and plans (plan.json), and `learn` keeps what this
process read. Records written before they carried it are answered by `registry`, where a stage
that may import methods sets one (bench/cli.py: the method registry, built-ins and plugins alike).
Plain Python (no matplotlib), so that setting the registry costs a command nothing.
"""
from __future__ import annotations

import zlib
from typing import Callable

# For a method that names no colour: Tol's muted and light schemes, none of them a built-in's hue,
# picked by a hash of the name, so a plugin keeps its colour in every figure and every report.
PALETTE = ("#CC6677", "#117733", "#88CCEE", "#DDCC77", "#AA4499", "#44AA99", "#999933", "#6699CC")

registry: Callable[[str], dict | None] | None = None
_LEARNT: dict[str, dict] = {}


def learn(method, meta) -> None:
    """Keep `method`'s look (a record's `method_meta`); the last one read wins."""
    if isinstance(method, str) and isinstance(meta, dict):
        _LEARNT[method] = meta


def learn_records(records) -> None:
    for r in records:
        learn(r.get("method"), r.get("method_meta"))


def meta(method: str) -> dict:
    """What is known of `method`'s look: learnt, else the registry's answer (kept, a miss too)."""
    if method not in _LEARNT and registry is not None:
        _LEARNT[method] = registry(method) or {}
    return _LEARNT.get(method) or {}


def label(method: str) -> str:
    return meta(method).get("label") or method


def colour(method: str) -> str:
    return meta(method).get("colour") or PALETTE[zlib.crc32(method.encode()) % len(PALETTE)]


def order(methods) -> list[str]:
    """Methods with an order hint by it, then the others alphabetically."""
    methods = set(methods)
    hinted = {m: meta(m).get("order") for m in methods}
    hinted = {m: h for m, h in hinted.items() if isinstance(h, (int, float))}
    return sorted(hinted, key=lambda m: (hinted[m], m)) + sorted(methods - set(hinted))


def table3(method: str) -> tuple[str, Callable[[int], float] | None]:
    """The paper's Table 3 formula for `method` and its factor of M at N ranks; ("", None) if none."""
    t = meta(method).get("table3")
    if not isinstance(t, dict):
        return "", None
    coeff, per_n = t["coeff"], t.get("per_n", False)
    return t["formula"], (lambda n: coeff / n) if per_n else (lambda n: float(coeff))
