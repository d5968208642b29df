"""A vs B, per configuration: the step-time ratio with a bootstrap confidence interval, and "~"
where the difference is not significant (benchstat's convention).

Pairing: two results folders pair on the full configuration key (derive.CONFIG: the comparison
key plus method and shard); two methods of one folder (`by="method"`) pair on the comparison key
(derive.COMPARE), so each side of every ratio has the same model, shape, GPUs, SP, DP, source and
hardware.

Samples: records carry the per-iteration step times of each run (`step_times_s`), and a sweep
with repeats has several runs per configuration. The bootstrap is two-level: resample the runs
(repeats) with replacement, then each drawn run's iterations; the statistic is the median step
time of the pooled draw, B's over A's. Runs without per-iteration times contribute their median
alone. 95% percentile interval over BOOT draws, with a fixed seed (a report is a pure function of
its records). Significance as benchstat: a two-sided Mann-Whitney U test on the pooled iteration
times, p < 0.05; we also require the interval to exclude 1. Either failing prints "~".
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.derive import COMPARE, CONFIG
from dspbench.reports.fmt import Table
from dspbench.reports.style import label

BOOT = 1000
ALPHA = 0.05
COLUMNS = ["a", "b", "n_a", "n_b", "median_a_s", "median_b_s", "ratio", "ci_lo", "ci_hi", "p", "significant"]


def samples(g: pd.DataFrame) -> list[np.ndarray]:
    """One array per run (repeat): its per-iteration step times, else its median step time."""
    out = []
    for times, med in zip(g["step_times_s"], g["step_time_median_s"]):
        if isinstance(times, list) and times:
            out.append(np.asarray(times, dtype=float))
        elif not pd.isna(med):
            out.append(np.asarray([med], dtype=float))
    return out


def _boot_medians(runs: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """BOOT medians of a two-level resample (runs, then each drawn run's iterations)."""
    r = len(runs)
    pick = rng.integers(0, r, size=(BOOT, r))
    lens = {len(x) for x in runs}
    if len(lens) == 1:        # rectangular: one vectorised draw, flat indices into the runs
        k = lens.pop()
        flat = np.concatenate(runs)
        idx = (pick[:, :, None] * k + rng.integers(0, k, size=(BOOT, r, k))).reshape(BOOT, r * k)
        return _median_rows(flat[idx])
    meds = np.array([np.median(x) for x in runs])
    return _median_rows(meds[pick])


def _median_rows(x: np.ndarray) -> np.ndarray:
    """Row medians with one partition (np.median's general path costs more on small rows)."""
    m = x.shape[1]
    h = m // 2
    if m % 2:
        return np.partition(x, h, axis=1)[:, h]
    part = np.partition(x, (h - 1, h), axis=1)
    return (part[:, h - 1] + part[:, h]) / 2


def mann_whitney_p(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value, normal approximation with tie correction."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return math.nan
    allv = np.concatenate([x, y])
    ranks = pd.Series(allv).rank(method="average").to_numpy()
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, counts = np.unique(allv, return_counts=True)
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - (counts ** 3 - counts).sum() / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)      # continuity correction
    return max(0.0, min(1.0, math.erfc(max(z, 0) / math.sqrt(2))))


def pair_stats(a: list[np.ndarray], b: list[np.ndarray], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    pa, pb = np.concatenate(a), np.concatenate(b)
    ratio = float(np.median(pb) / np.median(pa))
    boot = _boot_medians(b, rng) / _boot_medians(a, rng)
    lo, hi = (float(v) for v in np.quantile(boot, [0.025, 0.975]))
    p = mann_whitney_p(pa, pb)
    sig = bool(p < ALPHA and not (lo <= 1.0 <= hi))
    return {"n_a": len(pa), "n_b": len(pb), "median_a_s": float(np.median(pa)),
            "median_b_s": float(np.median(pb)), "ratio": ratio, "ci_lo": lo, "ci_hi": hi, "p": p,
            "significant": sig}


def compare_frames(ra: pd.DataFrame, rb: pd.DataFrame, key: list[str], names=("A", "B")) -> pd.DataFrame:
    """Per configuration (rows of both frames agreeing on `key`): B's step time over A's."""
    ok_a = ra[ra["status"].isin(("ok", "predicted")) & ra["step_time_median_s"].notna()]
    ok_b = rb[rb["status"].isin(("ok", "predicted")) & rb["step_time_median_s"].notna()]
    ga = {k: g for k, g in ok_a.groupby(key, dropna=False, sort=True)}
    rows = []
    for i, (k, gb) in enumerate(ok_b.groupby(key, dropna=False, sort=True)):
        if k not in ga:
            continue
        st = pair_stats(samples(ga[k]), samples(gb), seed=i)
        rows.append({**dict(zip(key, k)), "a": names[0], "b": names[1], **st})
    return pd.DataFrame(rows, columns=key + COLUMNS)


def by_method(runs: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Method b against method a in one folder, paired on the comparison key."""
    return compare_frames(runs[runs["method"] == a], runs[runs["method"] == b], list(COMPARE), (a, b))


GUIDANCE = ("batch", "parallel")   # `--by cfg`: CFG as a batch of 2 on every rank, or on two rank groups


def by_cfg(runs: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Sample mode with CFG: guidance form b against a in one folder (batch: cond + uncond as a batch
    of 2, parallel: --cfg-parallel), paired on the full key except SP, which CFG parallelism halves
    at the same GPUs; DP stays in the key, so both sides make the same videos per step."""
    for g in (a, b):
        if g not in GUIDANCE:
            raise ValueError(f"--by cfg compares {' and '.join(GUIDANCE)}, got {g!r}")
    cfg = runs[(runs["mode"] == "sample") & runs["cfg"].astype(bool)]
    side = lambda g: cfg[cfg["cfg_parallel"].astype(bool) == (g == "parallel")]
    key = [k for k in CONFIG if k not in ("sp", "cfg_parallel")]
    return compare_frames(side(a), side(b), key, (f"CFG {a}", f"CFG {b}"))


def folders(ra: pd.DataFrame, rb: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    return compare_frames(ra, rb, list(CONFIG), names)


def verdict(row) -> str:
    """benchstat's column: the change in step time, or '~' when not significant."""
    if not row["significant"]:
        return "~"
    return f"{(row['ratio'] - 1) * 100:+.1f}%"


SHOW = {"model": "model", "mode": "mode", "dtype": "dtype", "batch": "B", "frames": "T", "spatial": "S",
        "gpus": "GPUs", "sp": "SP", "dp": "DP", "zero": "ZeRO", "cfg": "CFG", "cfg_parallel": "CFG parallel", "source": "numbers",
        "hardware": "hardware", "method": "method", "shard": "shard", "grad_ckpt": "ckpt", "software": "software",
        "device": "device", "includes": "time includes"}
ALWAYS = ("method", "frames", "spatial", "gpus", "sp", "source", "device", "includes")   # (by source: device, includes)


def table(df: pd.DataFrame, title: str, name: str = "compare") -> Table:
    """md/csv/html form: key columns that vary (and the essentials), then the statistics."""
    if df.empty:
        return Table(name, title, df, pd.DataFrame())
    keys = [c for c in SHOW if c in df and (c in ALWAYS or df[c].nunique(dropna=False) > 1)]
    a, b = df["a"].iloc[0], df["b"].iloc[0]
    disp = pd.DataFrame({SHOW[c]: (df[c].map(label) if c == "method" else df[c]) for c in keys})
    disp[f"A: {label(a)} (ms)"] = (df["median_a_s"] * 1e3).map(fmt.num)
    disp[f"B: {label(b) if df['b'].nunique() == 1 else 'method'} (ms)"] = (df["median_b_s"] * 1e3).map(fmt.num)
    # by source, a side's time may be a whole pipeline (published end to end), not a step
    disp["B/A time" if "includes" in df else "B/A step time"] = df["ratio"].map(lambda x: f"{x:.3f}")
    disp["95% CI"] = [f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(df["ci_lo"], df["ci_hi"])]
    disp["p"] = df["p"].map(lambda x: "—" if pd.isna(x) else "<0.001" if x < 1e-3 else f"{x:.3f}")
    disp["n"] = [f"{x}+{y}" for x, y in zip(df["n_a"], df["n_b"])]
    disp["delta"] = [verdict(r) for r in df.to_dict("records")]
    bs = ", ".join(label(x) for x in df["b"].unique())
    notes = [f"A = {label(a)}, B = {bs}; each row pairs them on the full key (same source and "
             "hardware). B/A: ratio of median step times (<1: B faster); 95% CI from a two-level "
             f"bootstrap (repeats, then iterations; {BOOT} draws); p: Mann-Whitney U on the "
             "iteration times; n: iteration samples A+B. delta: change in step time, or ~ when "
             "p >= 0.05 or the CI holds 1 (benchstat's rule)."]
    return Table(name, title, df, disp.reset_index(drop=True), notes)
