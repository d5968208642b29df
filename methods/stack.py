"""The software stack a method needs beyond torch: the names a method's `requires` and a target's
declared stack use, and how `dspbench run` tells whether one is installed here.

Two questions, kept apart:
- can the *target* run it? `predict` and `plan` are analytic: they read the stack the target
  declares (a profile's `[stack]`, or `--stack`) and never what this machine has installed, so a
  plan is the same on a laptop without DeepSpeed as on the cluster (`missing_from`);
- can *this machine* run it? Only `dspbench run` asks, by importing (`not_installed`).
"""
from __future__ import annotations

import importlib.util
from typing import NamedTuple


class Package(NamedTuple):
    what: str        # what the name stands for (the libraries a method imports)
    extra: str       # the dspbench extra that installs it


# One name per installable piece of a stack; a method's `requires` and a `[stack]` use these.
PACKAGES = {
    "deepspeed": Package("DeepSpeed (ulysses_deepspeed, ZeRO-1/2's engine)", "deepspeed"),
    # ring-flash-attn imports flash-attn (CUDA) and transformers: the three come together (the gpu extra)
    "flash-attn": Package("flash-attn with ring-flash-attn and transformers (ring_flash)", "gpu"),
}
# What ZeRO-1/2 (`--zero`) runs on: DeepSpeed's engine (bench/run/zero.py).
ZERO_REQUIRES = ("deepspeed",)


def parse(text: str, where: str = "--stack") -> tuple[str, ...]:
    """`deepspeed,flash-attn` (or `none`: nothing beyond torch) -> the names, checked and sorted."""
    items = [] if text.strip().lower() == "none" else [t.strip() for t in text.split(",") if t.strip()]
    return checked(items, where)


def checked(items, where: str) -> tuple[str, ...]:
    """The names of a declared stack, each one known (a typo would silently prune methods)."""
    if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"{where}: a list of package names ({', '.join(PACKAGES)}), got {items!r}")
    for item in items:
        if item not in PACKAGES:
            raise ValueError(f"{where}: unknown package {item!r} (known: {', '.join(PACKAGES)}; none for torch only)")
    return tuple(sorted(set(items)))


def label(stack: tuple[str, ...]) -> str:
    return ", ".join(stack) or "none (torch only)"


def missing_from(requires: tuple[str, ...], stack: tuple[str, ...]) -> tuple[str, ...]:
    """What `requires` names that the declared `stack` lacks (analytic: nothing is imported)."""
    return tuple(r for r in requires if r not in stack)


def not_installed(package: str) -> str | None:
    """Why `package` cannot be used on this machine, or None: the check of `dspbench run` only."""
    if package == "deepspeed":
        if importlib.util.find_spec("deepspeed") is None:
            return "DeepSpeed is not installed (pip install 'dspbench[deepspeed]')"
        return None
    if package == "flash-attn":
        try:
            import ring_flash_attn  # noqa: F401
        except Exception as e:  # noqa: BLE001 - ImportError, or flash-attn's CUDA extension failing
            return ("ring-flash-attn with flash-attn (CUDA) and transformers is not importable "
                    f"(pip install 'dspbench[gpu]'): {type(e).__name__}: {e}")
        return None
    raise KeyError(f"unknown package {package!r} (known: {', '.join(PACKAGES)})")
