"""The communication ledger: every collective's bytes, per op, phase and tag, on this rank.

Byte convention (nccl-tests, doc/PERFORMANCE.md), per rank and per call:
- `payload_bytes` is nccl-tests' "size" S of the op: the local input for all_to_all and
  all_reduce, the gathered output for all_gather, the full input for reduce_scatter, the bytes
  sent for a point-to-point exchange.
- `wire_bytes` is what this rank sends to other ranks: S * wire factor below. For the ring
  collectives that is also what each rank receives. Algorithm bandwidth is S / t and bus
  bandwidth is algbw * BUS_FACTOR[op](n), so busbw = wire bytes / t for every op.

The ledger never synchronises, so it also works under the fake process group, which lets tests
compare measured bytes with each method's analytic formula at N = 64 in one process.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

# busbw / algbw for a group of n ranks (nccl-tests); also wire bytes / payload bytes.
BUS_FACTOR = {
    "all_to_all": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "send_recv": lambda n: 1.0,
}
OPS = tuple(BUS_FACTOR)
PHASES = ("fwd", "bwd")


def wire_bytes(op: str, payload: int, n: int) -> int:
    """Bytes one rank sends for an op of nccl-tests size `payload` in a group of n (exact integer)."""
    if op == "send_recv":
        return payload
    if op == "all_reduce":
        # A flat buffer of any size (a gradient sync): with n not dividing it (world 3) the ring's
        # chunks are uneven and ranks send a chunk element more or less; counted rounded down.
        return 2 * payload * (n - 1) // n
    assert payload * (n - 1) % n == 0, (op, payload, n)
    return payload * (n - 1) // n


@dataclass(frozen=True)
class Event:
    op: str
    phase: str
    group_size: int
    payload_bytes: int
    wire_bytes: int
    tag: str
    time_s: float | None = None


def key(ev_or_op, phase: str | None = None, tag: str | None = None) -> str:
    """'tag/op.phase' (or 'op.phase' without a tag): the key of ledgers and formulas alike."""
    if isinstance(ev_or_op, Event):
        ev_or_op, phase, tag = ev_or_op.op, ev_or_op.phase, ev_or_op.tag
    base = f"{ev_or_op}.{phase}"
    return f"{tag}/{base}" if tag else base


def untag(d: dict[str, int]) -> dict[str, int]:
    """Collapse 'tag/op.phase' keys to 'op.phase'."""
    out: dict[str, int] = defaultdict(int)
    for k, v in d.items():
        out[k.split("/", 1)[-1]] += v
    return dict(out)


class Ledger:
    """`with Ledger() as led:` records every collective issued on this rank until exit.

    `timed=True` is for a separate, instrumented iteration: comm.py then puts a barrier before
    each op and times it alone, which perturbs the step, so never time real iterations with it.
    """

    def __init__(self, timed: bool = False):
        self.timed = timed
        self.events: list[Event] = []

    def __enter__(self) -> "Ledger":
        _STACK.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _STACK.remove(self)

    def add(self, ev: Event) -> None:
        self.events.append(ev)

    def totals(self, tagged: bool = True, field: str = "wire_bytes") -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for ev in self.events:
            out[key(ev) if tagged else key(ev.op, ev.phase)] += getattr(ev, field)
        return dict(out)

    def times(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for ev in self.events:
            out[key(ev.op, ev.phase)] += ev.time_s or 0.0
        return dict(out)

    def counts(self, tagged: bool = True) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for ev in self.events:
            out[key(ev) if tagged else key(ev.op, ev.phase)] += 1
        return dict(out)

    @property
    def wire_total(self) -> int:
        return sum(ev.wire_bytes for ev in self.events)


_STACK: list[Ledger] = []


def active() -> Ledger | None:
    return _STACK[-1] if _STACK else None


def record(op: str, phase: str, group_size: int, payload: int, tag: str, time_s: float | None = None) -> None:
    led = active()
    if led is not None:
        led.add(Event(op, phase, group_size, payload, wire_bytes(op, payload, group_size), tag, time_s))


class Stopwatch:
    """Times one op when the active ledger is timed (after a barrier, so skew is not counted)."""

    def __init__(self, sync):
        self.sync = sync
        self.elapsed: float | None = None

    def __enter__(self):
        led = active()
        self.on = led is not None and led.timed
        if self.on:
            self.sync(before=True)
            self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.on:
            self.sync(before=False)
            self.elapsed = time.perf_counter() - self.t0
