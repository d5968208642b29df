"""Bucketed workloads: a mix of shapes, each a share of the samples (OpenSora trains on buckets of
resolution x duration, every batch one bucket's shape).

A bucket is (T, S, weight): latent frames and tokens per frame after patchify, and its share of the
samples (weights need not sum to 1). A sweep lists them inline (`buckets = [[T, S, w], ...]`, w
defaults to 1) or in a CSV file in OpenSora's terms (`resolution,frames,weight`: pixels "HxW" or a
name below, video frames), converted through the VAE and patch of the model the bucket runs on
(its preset's [vae]: models/registry.py video_to_tokens, which the caller hands in: records import
no models). Wan 2.1's 4x8x8 causal VAE with patch 1x2x2 makes 480p x 81 frames T = 21, S = 1560;
LTX-Video's 8x32x32 makes it T = 11, S = 390: one conversion for every model priced the others
wrong, silently.

Each bucket runs as its own configuration (its own records); `mix` folds one method's per-bucket
rows into the workload's numbers: samples/s over the mix (time-weighted: sum w / sum w / rate),
the padding waste (sample-weighted share of padded tokens), and per bucket the best SP degree.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable

RESOLUTIONS = {"480p": (480, 832), "720p": (720, 1280)}   # Wan 2.1's sizes, in pixels

# "FxHxW" video -> (T, S) through one model's VAE and patch; a ValueError where it does not convert
VideoToTokens = Callable[[str], tuple[int, int]]


class BucketError(ValueError):
    """A bucket list or file is wrong; the message names where and why."""


def parse_buckets(where: str, rows) -> list[tuple[int, int, float]]:
    """[[T, S], [T, S, w], ...] -> [(T, S, w)], checked."""
    if not isinstance(rows, list) or not rows:
        raise BucketError(f"{where}: buckets must be a non-empty list of [T, S] or [T, S, weight], got {rows!r}")
    out = []
    for i, row in enumerate(rows):
        ok = (isinstance(row, list) and len(row) in (2, 3) and all(isinstance(v, int) and v >= 1 for v in row[:2])
              and (len(row) == 2 or (isinstance(row[2], (int, float)) and row[2] > 0)))
        if not ok:
            raise BucketError(f"{where}: bucket #{i + 1} must be [T, S] or [T, S, weight] with T, S >= 1 "
                              f"integers and weight > 0, got {row!r}")
        out.append((row[0], row[1], float(row[2]) if len(row) == 3 else 1.0))
    return out


def parse_flag(text: str) -> list[tuple[int, int, float]]:
    """`--buckets 21x1560:3,21x3600:1` -> [(T, S, w)] (weight 1 where none is given)."""
    rows = []
    for item in text.split(","):
        shape, _, weight = item.strip().partition(":")
        try:
            t, s = (int(v) for v in shape.lower().split("x"))
            rows.append([t, s] + ([float(weight)] if weight else []))
        except ValueError:
            raise BucketError(f"--buckets: {item.strip()!r} is not TxS or TxS:WEIGHT (e.g. 21x1560:3)") from None
    return parse_buckets("--buckets", rows)


def tokens_of(resolution: str, frames: int, to_tokens: VideoToTokens) -> tuple[int, int]:
    """(T, S) of a video of `frames` frames at `resolution` ("HxW" pixels or a name in RESOLUTIONS),
    through the model's VAE and patch (`to_tokens`)."""
    if resolution in RESOLUTIONS:
        h, w = RESOLUTIONS[resolution]
    else:
        try:
            h, w = (int(v) for v in resolution.lower().split("x"))
        except ValueError:
            raise BucketError(f"resolution {resolution!r} is neither HxW pixels nor one of "
                              f"{', '.join(RESOLUTIONS)}") from None
    try:
        return to_tokens(f"{frames}x{h}x{w}")
    except ValueError as e:   # names the model's VAE and the nearest sizes that convert
        raise BucketError(f"resolution {resolution!r} x {frames} frames: {e}") from None


def read_bucket_file(path: Path, to_tokens: VideoToTokens) -> list[tuple[int, int, float]]:
    """A CSV `resolution,frames,weight` (OpenSora's bucket terms) -> [(T, S, w)] for the model whose
    VAE and patch `to_tokens` applies."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise BucketError(f"{path}: {e.strerror}") from None
    if not rows or set(rows[0]) != {"resolution", "frames", "weight"}:
        raise BucketError(f"{path}: needs the header resolution,frames,weight and at least one row")
    out = []
    for i, r in enumerate(rows):
        try:
            t, s = tokens_of(r["resolution"].strip(), int(r["frames"]), to_tokens)
            w = float(r["weight"])
        except (BucketError, ValueError, TypeError) as e:
            raise BucketError(f"{path}: row {i + 2}: {e}") from None
        if w <= 0:
            raise BucketError(f"{path}: row {i + 2}: weight must be > 0, got {w}")
        out.append((t, s, w))
    return out


def mix(rows: list[dict]) -> dict:
    """One method's bucketed records (ok ones; keys frames, spatial, sp, bucket_weight, samples_per_s,
    pad_token_share) -> the workload summary, per SP degree and with each bucket's best degree."""
    by_sp: dict[int, list[dict]] = {}
    for r in rows:
        by_sp.setdefault(r["sp"], []).append(r)
    buckets = sorted({(r["frames"], r["spatial"], r["bucket_weight"]) for r in rows})
    per_sp = {}
    for sp, rs in sorted(by_sp.items()):
        have = {(r["frames"], r["spatial"]): r for r in rs}
        if len(have) < len(buckets):   # a bucket it could not run: no rate over the whole mix
            per_sp[sp] = {"samples_per_s": None, "missing": len(buckets) - len(have)}
            continue
        w = sum(b[2] for b in buckets)
        time_per_sample = sum(b[2] / have[b[:2]]["samples_per_s"] for b in buckets) / w
        waste = sum(b[2] * (have[b[:2]].get("pad_token_share") or 0.0) for b in buckets) / w
        per_sp[sp] = {"samples_per_s": 1 / time_per_sample, "pad_token_share": waste, "missing": 0}
    best = {}
    for t, s, _ in buckets:
        cands = [(r["samples_per_s"], r["sp"]) for r in rows if (r["frames"], r["spatial"]) == (t, s)]
        best[(t, s)] = max(cands) if cands else None
    # Each bucket at its own best degree (a mesh re-formed per bucket): the mix's upper bound here.
    switching = None
    if buckets and all(best[b[:2]] for b in buckets):
        w = sum(b[2] for b in buckets)
        switching = w / sum(b[2] / best[b[:2]][0] for b in buckets)
    return {"buckets": buckets, "per_sp": per_sp, "best_sp": {k: v and v[1] for k, v in best.items()},
            "best_sp_samples_per_s": switching}
