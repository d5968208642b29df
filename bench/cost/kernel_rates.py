"""Per-GPU kernel rates (bench/cost/rates/<gpu>.toml), read and looked up, each answer with its source.

A GPU prices a kernel by what that kernel reaches on that chip, not by one fraction of peak: a
flash-attention-2 kernel (mma.sync) is instruction-bound at about a third of an H100's dense peak
but can be tensor-peak-bound on an H20, whose peak is a seventh of it. Each table holds, per GPU:
dense GEMM rates by dtype with the size at which a GEMM reaches half of it, attention rates per
implementation x head dim x pass over sequence lengths, convolution rates, the achieved share of
HBM bandwidth and the device's gap between kernels. Every entry carries `kind` (published,
measured, derived, datasheet) and `source`; a derived one its `formula`. A table without a source
on an entry, or a GPU kind without a table, is refused (`RateTableError`, exit 2 at the CLI).
"""
from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import dataclass
from importlib import resources

ATTN_KERNELS = ("fa2", "fa3", "cudnn", "sdpa_flash", "sdpa_efficient", "math")
KINDS = ("published", "measured", "derived", "datasheet")
FA_HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)   # the head sizes flash kernels are instantiated for
Q_TILE = 128      # query rows per thread block of the flash forward (FA2/FA3 at head dim 64-128)
K_TILE = 64       # keys per inner step: a shorter key block is computed masked, its share wasted


class RateTableError(ValueError):
    """A rate table that cannot price: missing, unsourced, or without the entry a kernel needs."""


@dataclass(frozen=True)
class Rate:
    """A rate in FLOP/s (or B/s for memory) and where it came from."""
    value: float
    kind: str
    source: str

    def label(self) -> str:
        return f"{self.kind}: {self.source}"


@dataclass(frozen=True)
class RateTable:
    gpu: str
    arch: str
    doc: dict

    def _entry(self, path: str, d: dict) -> dict:
        if d.get("kind") not in KINDS or not str(d.get("source", "")).strip():
            raise RateTableError(f"rate table {self.gpu}: {path} has no kind ({'/'.join(KINDS)}) or no source")
        if d["kind"] == "derived" and not str(d.get("formula", "")).strip():
            raise RateTableError(f"rate table {self.gpu}: {path} is derived but states no formula")
        return d

    def gemm(self, dtype: str) -> tuple[Rate, float]:
        """(saturated GEMM rate, FLOPs of a GEMM at half of it)."""
        d = self.doc.get("gemm", {}).get(dtype)
        if d is None:
            raise RateTableError(f"rate table {self.gpu}: no [gemm.{dtype}] entry")
        d = self._entry(f"[gemm.{dtype}]", d)
        return Rate(float(d["tflops"]) * 1e12, d["kind"], d["source"]), float(d.get("half_flops", 0.0))

    def conv(self, dtype: str) -> Rate:
        d = self.doc.get("conv", {}).get(dtype) or self.doc.get("conv", {}).get("bf16")
        if d is None:
            raise RateTableError(f"rate table {self.gpu}: no [conv.{dtype}] entry")
        d = self._entry(f"[conv.{dtype}]", d)
        return Rate(float(d["tflops"]) * 1e12, d["kind"], d["source"])

    def hbm_efficiency(self) -> Rate:
        d = self._entry("[memory]", self.doc.get("memory", {}))
        return Rate(float(d["hbm_efficiency"]), d["kind"], d["source"])

    def device_gap(self) -> Rate:
        d = self._entry("[launch]", self.doc.get("launch", {}))
        return Rate(float(d["device_gap_s"]), d["kind"], d["source"])

    def attention_entries(self, impl: str, head_dim: int, pass_: str, dtype: str) -> dict | None:
        for e in self.doc.get("attention", []):
            if (e.get("impl"), int(e.get("head_dim", 0)), e.get("pass"), e.get("dtype", "bf16"), bool(e.get("causal"))) \
                    == (impl, head_dim, pass_, dtype, False):
                return self._entry(f"[[attention]] {impl} hd{head_dim} {pass_} {dtype}", e)
        return None

    def attention_head_dims(self, impl: str) -> list[int]:
        return sorted({int(e["head_dim"]) for e in self.doc.get("attention", []) if e.get("impl") == impl})


def rate_tables() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("dspbench.cost.rates").iterdir() if p.name.endswith(".toml"))


@functools.lru_cache(maxsize=None)
def load_rate_table(gpu: str) -> RateTable:
    """The shipped table of a GPU kind (bench/cost/rates/<gpu>.toml), checked whole."""
    path = resources.files("dspbench.cost.rates") / f"{gpu}.toml"
    if not gpu or not path.is_file():
        raise RateTableError(f"no kernel rate table for GPU kind {gpu!r} (bench/cost/rates/; have: "
                             f"{', '.join(rate_tables())})")
    return read_rate_table(path.read_text(), gpu, path.name)


def read_rate_table(text: str, gpu: str, where: str) -> RateTable:
    """A table from its TOML text, every entry checked (kind, source, a derived entry's formula), so an
    unsourced number is refused before anything is priced with it."""
    doc = tomllib.loads(text)
    if doc.get("gpu") != gpu:
        raise RateTableError(f"rate table {where}: gpu = {doc.get('gpu')!r}, expected {gpu!r}")
    table = RateTable(gpu, doc.get("arch", ""), doc)
    for section in ("gemm", "conv"):
        for dtype, entry in doc.get(section, {}).items():
            table._entry(f"[{section}.{dtype}]", entry)
    for name in ("memory", "launch"):
        table._entry(f"[{name}]", doc.get(name, {}))
    for e in doc.get("attention", []):
        table._entry(f"[[attention]] {e.get('impl')} hd{e.get('head_dim')} {e.get('pass')}", e)
        if e.get("impl") not in ATTN_KERNELS or not e.get("points"):
            raise RateTableError(f"rate table {where}: [[attention]] impl {e.get('impl')!r} unknown or without points")
    return table


def _interp_log(points: list, x: float) -> float:
    """Rate at length x, linear in log length between the table's points, flat beyond the last."""
    pts = sorted((float(a), float(b)) for a, b in points)
    if x >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x <= x1:
            w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + w * (y1 - y0)
    return pts[0][1]


def tile_fill(lq: float, lk: float) -> float:
    """Share of a flash kernel's tile work that is real for these lengths: a 16-row query block of a
    128-row tile computes 128 rows' worth."""
    fq = lq / (math.ceil(lq / Q_TILE) * Q_TILE)
    fk = lk / (math.ceil(lk / K_TILE) * K_TILE)
    return fq * fk


def padded_head_dim(d: int, have: list[int]) -> int:
    """The instantiated head size a flash kernel runs a head of size d at (72 runs as 96), priced at
    the table's nearest head dim at or above that."""
    kernel = next((h for h in FA_HEAD_DIMS if h >= d), None)
    table = next((h for h in have if h >= (kernel or d)), None)
    if kernel is None or table is None:
        raise RateTableError(f"head dim {d}: no attention entry at or above it (table has {have})")
    return table


def attention_rate(table: RateTable, impl: str, head_dim: int, lq: int, lk: int, pass_: str,
                   dtype: str) -> tuple[float, Rate, int]:
    """(FLOP/s, its source, the head dim priced) of one attention kernel. The backward's rate comes from
    the fwd and fwd_bwd entries (flash's convention: backward FLOPs 2.5x the forward's, fwd+bwd 3.5x).
    Shorter than the table's first length: that rate scaled by the tiles' fill (derived)."""
    have = table.attention_head_dims(impl)
    if not have:
        raise RateTableError(f"--attn-kernel {impl}: no rate for it on {table.gpu} ({table.arch}); the table has "
                             f"{', '.join(sorted({e['impl'] for e in table.doc.get('attention', [])})) or 'none'}")
    hd = padded_head_dim(head_dim, have)
    fwd = table.attention_entries(impl, hd, "fwd", dtype) or table.attention_entries(impl, hd, "fwd", "bf16")
    if fwd is None:
        raise RateTableError(f"rate table {table.gpu}: no {impl} forward entry at head dim {hd}")
    L = max(lk, 1)
    first = min(float(p[0]) for p in fwd["points"])

    def at(points):
        r = _interp_log(points, max(L, first))
        return r * (tile_fill(lq, lk) / tile_fill(first, first) if L < first else 1.0)

    rate, src = at(fwd["points"]) * 1e12, fwd
    if pass_ == "bwd":
        fb = table.attention_entries(impl, hd, "fwd_bwd", dtype) or table.attention_entries(impl, hd, "fwd_bwd", "bf16")
        if fb is None:
            raise RateTableError(f"rate table {table.gpu}: no {impl} fwd_bwd entry at head dim {hd} (the backward's rate)")
        r_f, r_fb = at(fwd["points"]), at(fb["points"])
        rate, src = 2.5 / (3.5 / r_fb - 1.0 / r_f) * 1e12, fb
    note = src["source"] + (f"; length {L} below the table's {int(first)}: scaled by tile fill (derived)" if L < first else "")
    return rate, Rate(rate, src["kind"], note), hd
