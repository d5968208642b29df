"""Small helpers the test modules share (not fixtures: plain functions, imported by name)."""
from __future__ import annotations

import textwrap
from pathlib import Path


def write_spec(folder: Path, text: str, name: str = "s.toml") -> Path:
    """Write a sweep spec (dedented TOML) into `folder` and return its path."""
    path = Path(folder) / name
    path.write_text(textwrap.dedent(text))
    return path
