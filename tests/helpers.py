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
