"""The RunConfig fields that say how plan's emitted sweep measures (not priced): `plan`'s flags for
them (plan/cli.py) and the recorded command (plan/command.py) both read them from here. Imports
nothing heavy: `dspbench --help` builds plan's flags without torch."""
from __future__ import annotations

from dataclasses import fields

from dspbench.records.config import RunConfig

SWEEP_FIELDS = ("warmup", "iters")


def sweep_fields():
    return [f for f in fields(RunConfig) if f.name in SWEEP_FIELDS]
