"""Small helpers the test modules share (not fixtures: plain functions, imported by name)."""
from __future__ import annotations

import textwrap
from pathlib import Path


def write_spec(folder: Path, text: str, name: str = "s.toml") -> Path:
    """Write a sweep spec (dedented TOML) into `folder` and return its path."""
    path = Path(folder) / name
    path.write_text(textwrap.dedent(text))
    return path


# The fixed part every tiny sweep spec of the tests shares: stdit-tiny, one timed step, a minute.
TINY_FIXED = """[fixed]
model = "stdit-tiny"
frames = 4
spatial = 16
warmup = 0
iters = 1
timeout_s = 60
"""


def tiny_sweep(name: str = "tiny", cluster: str = "local", **sweep) -> str:
    """The head of a tiny sweep spec: [sweep] (name, cluster, then any other keys) and TINY_FIXED."""
    extra = "".join(f"{k} = {v}\n" for k, v in sweep.items())
    return f'\n[sweep]\nname = "{name}"\ncluster = "{cluster}"\n{extra}{TINY_FIXED}'


# Values with a meaning a generic one would break: a method with a knob, a video that converts for the
# model (T 16, S 64 for stdit-tiny: 8x VAE, 2x2 patch), a fault the harness parses.
_MEANINGFUL = {"method": "usp", "model": "stdit-small", "video": "16x128x128", "inject_fault": "hang@1"}


def every_field_set():
    """A RunConfig with every field away from its default (frames and spatial follow the video), derived
    from the dataclass, so a field added later is covered without editing the tests that use this."""
    from dataclasses import fields, replace
    from dspbench.records.config import RunConfig
    values = {}
    for f in fields(RunConfig):
        opt = f.metadata["cli"]
        if f.name in ("frames", "spatial"):
            continue
        if f.name in _MEANINGFUL:
            values[f.name] = _MEANINGFUL[f.name]
        elif isinstance(f.default, bool):
            values[f.name] = True
        elif opt.choices:
            values[f.name] = next(c for c in reversed(opt.choices) if c != f.default)
        elif isinstance(f.default, (int, float)):
            values[f.name] = type(f.default)(f.default + 2)
        else:
            values[f.name] = f"{f.name}-value"
    cfg = replace(RunConfig(), **values)
    assert all(getattr(cfg, f.name) != f.default for f in fields(RunConfig) if f.name not in ("frames", "spatial"))
    return cfg
