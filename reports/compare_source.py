"""`dspbench compare A B --by source --results DIR`: one source's numbers against another's (measured,
predicted, published), like with like.

A published time is what its source timed (`time_includes`: end to end, text encoding and VAE
included, or the DiT only); a measured step time here is the denoising loop; a predicted sample-mode
record carries both (the loop, and `predicted_end_to_end_s`, the whole pipeline). Each side's rows
are labelled by what their time includes, and a row pairs only rows that include the same, on the
same configuration (the full key but source and backend), the same device (the hardware label
without its backend), eager or compiled alike, and the same USP split.
"""
from __future__ import annotations

import pandas as pd

from dspbench.reports.compare import compare_frames
from dspbench.reports.derive import CONFIG

SIDES = ("measured", "predicted", "published")


def side(runs: pd.DataFrame, source: str) -> pd.DataFrame:
    """The rows of `source`, one per time each can be compared on, `includes` saying what it holds."""
    rows = runs[runs["source"] == source]
    rows = rows.assign(device=rows["hardware"].astype(str).str.replace(r" \([^()]*\)$", "", regex=True),
                       ulysses_degree=rows.get("ulysses_degree", pd.Series(0, index=rows.index)).fillna(0))
    if source == "published":
        return rows.assign(includes=rows["time_includes"].fillna("end_to_end"))
    loop = rows.assign(includes="dit_only")
    if source != "predicted" or "predicted_end_to_end_s" not in rows:
        return loop
    whole = rows[rows["predicted_end_to_end_s"].notna()]
    whole = whole.assign(includes="end_to_end", step_time_median_s=whole["predicted_end_to_end_s"],
                         step_times_s=[None] * len(whole))
    return pd.concat([loop, whole], ignore_index=True)


KEY = [c for c in CONFIG if c not in ("source", "hardware", "backend")] + ["device", "ulysses_degree", "includes"]


def by_source(runs: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    for s in (a, b):
        if s not in SIDES:
            raise ValueError(f"--by source compares two of {', '.join(SIDES)}, got {s!r}")
    if a == b:
        raise ValueError(f"--by source needs two different sources, got {a} twice")
    return compare_frames(side(runs, a), side(runs, b), KEY, (a, b))


def notes(a: str, b: str) -> list[str]:
    return [f"A = {a} numbers, B = {b} numbers, each side labelled by its source; a row pairs them on the "
            "configuration (model, shape, GPUs, SP, method, steps, CFG, eager or compiled, USP split), the "
            "device, and what the time includes ('time includes': end_to_end = text encoding + every "
            "denoising step + VAE decode; dit_only = the denoising loop), never a whole-pipeline time with a "
            "loop's. B/A: B's time over A's. A published or predicted number is one value, not a sample: "
            "no interval or test applies to it, so its delta reads ~."]
