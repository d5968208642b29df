"""Sequence-parallel methods: each a `METHOD` spec found by module name or plugged in by entry point."""
from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from dspbench.methods.dims import Dims, build_dims
from dspbench.methods.spec import Look, MethodSpec, Op, Table3

# A new built-in method is its module plus its name here; its report look is on its MethodSpec.
BUILTIN = ("single", "dsp", "ulysses", "ulysses_all", "ring", "megatron_sp", "ulysses_deepspeed", "usp",
           "allgather_kv", "ring_flash", "torch_cp", "dsp_hybrid", "megatron_lm")
ENTRY_POINT_GROUP = "dspbench.methods"
# A plugin's spec once loaded: its module is imported once anyway, and scanning every installed
# distribution's entry points on each call made the cost model's inner loop (`dspbench plan`) 2x slower.
_LOADED: dict = {}


def _plugins() -> dict:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available() -> list[str]:
    """Built-in methods, then plugged-in ones (entry points of group `dspbench.methods`)."""
    return list(BUILTIN) + sorted(n for n in _plugins() if n not in BUILTIN)


def unknown_method(name: str) -> str | None:
    """Why `name` is no method here (None if it is one): a typo, or a plugin not installed."""
    if name in BUILTIN or name in (plugins := _plugins()):
        return None
    installed = ", ".join(f"{n} ({ep.value})" for n, ep in sorted(plugins.items())) or "none"
    return (f"unknown method {name!r}: not built in ({', '.join(BUILTIN)}) and no installed plugin of that "
            f"name (entry-point group {ENTRY_POINT_GROUP!r}; installed plugins: {installed})")


def get_method(name: str) -> MethodSpec:
    if name in BUILTIN:
        spec = import_module(f"{__name__}.{name}").METHOD
    elif name in _LOADED:
        return _LOADED[name]
    elif name in (plugins := _plugins()):
        loaded = plugins[name].load()
        spec = getattr(loaded, "METHOD", loaded)
    else:
        raise KeyError(unknown_method(name))
    if not isinstance(spec, MethodSpec):
        raise TypeError(f"method {name!r} must export a MethodSpec named METHOD, got {type(spec).__name__}")
    if name not in BUILTIN:
        _LOADED[name] = spec
    return spec


def method_meta(name: str) -> dict | None:
    """A method's look as records carry it (`method_meta`), or None where no method has that name:
    for reports of records written before records carried it (bench/cli.py hands this to reports)."""
    try:
        return get_method(name).report.as_record()
    except (KeyError, TypeError, ImportError):
        return None


__all__ = ["BUILTIN", "Dims", "Look", "MethodSpec", "Op", "Table3", "available", "build_dims", "get_method",
           "method_meta", "unknown_method"]
