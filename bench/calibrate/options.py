"""Calibrate's and emulate's option values checked before anything is measured or built, and
reasons said of the option that carried them (exit 2, one line)."""
from __future__ import annotations

import contextlib

OPS = ("all_to_all", "all_gather", "reduce_scatter", "all_reduce", "send_recv")


@contextlib.contextmanager
def named(flag: str):
    """A bad input's reason (file:line: why) said of the option that named the file."""
    try:
        yield
    except ValueError as e:
        raise type(e)(f"{flag}: {e.args[0] if e.args else e}") from None


def check_items(flag: str, text: str, parse, ok, what: str, empty_ok: bool = True) -> None:
    """A comma-separated option: each item parses and passes `ok`; none at all only where empty_ok."""
    items = [t for t in text.split(",")]
    if not text.strip():
        if empty_ok:
            return
        raise ValueError(f"{flag}: empty; give comma-separated {what}")
    for item in items:
        try:
            value = parse(item.strip()) if item.strip() else None
        except (ValueError, KeyError):
            value = None
        if value is None or not ok(value):
            raise ValueError(f"{flag} {text!r}: {item.strip()!r} is not one of the {what}")
