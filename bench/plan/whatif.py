"""`--what-if key=value`: one field of the hardware profile changed, so a plan shows where its
ranking flips. Keys are the profile TOML's dotted paths (bench/cost/hardware.py); `link.intra` and
`link.inter` alone mean that level's bandwidth, with a unit (GB/s, the default; Gb/s or Gbit/s;
MB/s; Mbit/s). Setting a level's bandwidth drops what a calibration measured on it (per-op bus
bandwidths and time tables, which would otherwise win; for link.inter also the node-spanning
table, measured over it), so the new rate is the one priced."""
from __future__ import annotations

import copy
import re

from dspbench.cost.hardware import Profile, from_dict

LINK_KEYS = ("alpha_s", "bw_GBps", "efficiency")
KEYS = {**{f"device.{k}": float for k in ("memory_gb", "hbm_TBps", "usable_memory_fraction", "reserved_gb")},
        **{f"device.{k}": int for k in ("gpus_per_node", "nics_per_node")},
        "compute.efficiency": float, "overlap.ring": float,
        **{f"link.{lvl}.{k}": float for lvl in ("intra", "inter") for k in LINK_KEYS},
        "link.intra": "bandwidth", "link.inter": "bandwidth"}
UNITS = {"Gb/s": 1 / 8, "Gbit/s": 1 / 8, "Gbps": 1 / 8, "MB/s": 1e-3, "Mb/s": 1e-3 / 8, "Mbit/s": 1e-3 / 8}   # -> GB/s
MEASURED = ("busbw_GBps", "time_s_op", "alpha_s_op", "ranks", "per_node")


def parse(text: str) -> tuple[str, float]:
    """'link.inter=50GB/s' -> ('link.inter.bw_GBps', 50.0); an unknown key or value is a ValueError."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or key not in KEYS:
        raise ValueError(f"--what-if {text!r}: expected KEY=VALUE with KEY one of {', '.join(KEYS)}")
    if KEYS[key] == "bandwidth":
        return f"{key}.bw_GBps", bandwidth(value, text)
    try:
        return key, KEYS[key](value)
    except ValueError:
        raise ValueError(f"--what-if {text!r}: {value!r} is not a number") from None


def bandwidth(value: str, text: str) -> float:
    """GB/s from '50', '50GB/s', '400Gb/s', '400Gbit/s', '200Mbit/s' (b: bits, B: bytes)."""
    m = re.fullmatch(r"\s*([0-9.]+(?:e-?[0-9]+)?)\s*([A-Za-z/]*)\s*", value)
    if not m:
        raise ValueError(f"--what-if {text!r}: {value!r} is not a bandwidth (e.g. 50GB/s, 400Gb/s, 200Mbit/s)")
    number, unit = float(m.group(1)), m.group(2)
    if not unit or unit in ("GB/s", "GBps"):
        return number
    factor = UNITS.get(unit)
    if factor is None:
        raise ValueError(f"--what-if {text!r}: unknown unit {unit!r} (GB/s, Gb/s, Gbit/s, MB/s, Mb/s, Mbit/s)")
    return number * factor


def apply(profile: Profile, edits: list[tuple[str, float]]) -> Profile:
    """The profile with each (dotted key, value) set in its TOML and read again."""
    if not edits:
        return profile
    raw = copy.deepcopy(profile.raw) or {"name": profile.name}
    for key, value in edits:
        *path, leaf = key.split(".")
        table = raw
        for p in path:
            table = table.setdefault(p, {})
        if path[:1] == ["link"] and leaf == "bw_GBps":
            for k in MEASURED:
                table.pop(k, None)
            if path == ["link", "inter"]:   # the node-spanning table was measured over this link too
                raw.get("link", {}).pop("span", None)
        table[leaf] = value
    raw["link"] = _both_levels(profile.raw.get("link", {}), raw.get("link", {}))
    raw["name"] = f"{profile.name} [{', '.join(f'{k}={v:g}' for k, v in edits)}]"
    return from_dict(raw)


def _both_levels(before: dict, after: dict) -> dict:
    """A profile that wrote one link level uses it for both (hardware.from_dict): keep that
    when the edit added the other level's table with one key only."""
    out = dict(after)
    for lvl, other in (("intra", "inter"), ("inter", "intra")):
        if lvl not in before and lvl in after and other in before:
            out[lvl] = {**before[other], **after[lvl]}
    return out


def label(edits: list[tuple[str, float]]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in edits)
