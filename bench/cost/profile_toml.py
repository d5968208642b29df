"""Writing a hardware profile dict as TOML (what `dspbench calibrate` writes; bench/cost/hardware.py
reads it back). Apart from hardware.py, which owns what a profile is and how it is read.
May import: the standard library only."""
from __future__ import annotations


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _value(k)


def dumps(d: dict, comment: str = "") -> str:
    """TOML text for a profile dict: scalars first, then tables (nested tables as [a.b])."""
    lines = [f"# {c}" for c in comment.splitlines()]

    def table(prefix: str, t: dict) -> None:
        scalars = {k: v for k, v in t.items() if not (isinstance(v, dict) and _is_table(k, v))}
        if prefix:
            lines.append(f"\n[{prefix}]")
        lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
        for k, v in t.items():
            if k not in scalars:
                table(f"{prefix}.{k}" if prefix else k, v)

    table("", d)
    return "\n".join(lines) + "\n"


def _is_table(k: str, v: dict) -> bool:
    # Small maps of numbers (per-op or per-dtype values) stay inline; sections become tables.
    return k in ("device", "compute", "link", "intra", "inter", "span", "overlap", "sources", "calibration", "curve", "host", "kernels", "engine",
                 "stack")
