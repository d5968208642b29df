"""argparse types for numbers with a range: a value out of it is argparse's own refusal (exit 2,
`argument --iters: must be >= 1, got 0`), one line naming the option, before anything runs."""
from __future__ import annotations

import argparse


def _number(text: str, kind, name: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None


def count(text: str) -> int:
    """An integer >= 1 (steps, ranks, repeats)."""
    v = _number(text, int, "an integer >= 1")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def at_least_0(text: str) -> int:
    """An integer >= 0 (0 with a stated meaning: a seed, `threads 0` = cores / ranks)."""
    v = _number(text, int, "an integer >= 0")
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def positive(text: str) -> float:
    """A number > 0 (seconds, sizes)."""
    v = _number(text, float, "a number > 0")
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return v
