"""nccl-tests output as people paste it: parsed into tests (op, ranks, hosts, GPUs, time by size).

nccl-tests (github.com/NVIDIA/nccl-tests) prints, per test: optionally `# Collective test starting:
<name>_perf`, the `# nThread ... nGpus ...` line, the `# Using devices` block (one `#  Rank r
[Group g] Pid p on <host> device d [<bus id>] <GPU model>` line per rank; `-g` launches list one
process's GPUs, MPI launches every process's), the column header (`size count type redop [root]`,
then out-of-place and in-place `time algbw busbw #wrong|error`), one row per size, and footer lines
(`# Avg bus bandwidth`). Several tests may follow one another in one file.

What each row means (nccl-tests docs/PERFORMANCE.md): size is bytes (the all-reduce and all-to-all
buffer, the all-gather output, the reduce-scatter input, a send/recv's message), count the
elements each rank passes to the call (size / type bytes, / ranks for all-gather, reduce-scatter and
all-to-all), time the microseconds of one call, algbw = size / time, busbw = algbw x 2(n-1)/n
(all-reduce), x (n-1)/n (all-gather, reduce-scatter, all-to-all), x 1 (send/recv). The profile is
fitted on time by size (the measurement; algbw and busbw are derived from it), out-of-place (the
in-place time where the out-of-place cell is N/A). busbw is only checked against algbw x factor(n):
a mismatch means the devices block and the table are not from one run.

Errors are `LogError`s naming `file:line` and why; a truncated last row of a file is reported in
`Test.notes` and skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dspbench.methods.ledger import BUS_FACTOR

# nccl-tests binary name (without _perf) -> the cost model's op; other tests are parsed and skipped.
NCCL_OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
            "alltoall": "all_to_all", "sendrecv": "send_recv"}
OTHER_TESTS = ("broadcast", "reduce", "gather", "scatter", "hypercube")
TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
              "double": 8, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
PER_RANK_COUNT = ("all_gather", "reduce_scatter", "all_to_all")    # count column = size / type / n
NO_REDOP = ("all_gather", "all_to_all")                             # redop column 'none'
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+"
                   r"\[([^\]]*)\]\s+(.+?)\s*$")
_PERF = re.compile(r"\b(" + "|".join(list(NCCL_OPS) + list(OTHER_TESTS)) + r")_perf\b")
_NCCL_LOG = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL (INFO|WARN)")    # NCCL_DEBUG lines interleave anywhere


class LogError(ValueError):
    """Input that is not usable nccl-tests output; the message starts with file:line."""


@dataclass
class Device:
    rank: int
    host: str
    gpu: str
    line: int


@dataclass
class Row:
    line: int
    size: int
    count: int
    dtype: str
    redop: str
    time_us: float
    algbw: float | None
    busbw: float | None
    column: str       # "out-of-place" or "in-place": whose time this is


@dataclass
class Test:
    path: str
    first_line: int
    name: str = ""                 # nccl-tests name without _perf ("" until known)
    devices: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    last_line: int = 0
    header_line: int = 0

    @property
    def op(self) -> str | None:
        return NCCL_OPS.get(self.name)

    @property
    def ranks(self) -> int:
        return len(self.devices)

    @property
    def hosts(self) -> dict[str, int]:
        """{host: ranks on it}, in order of appearance."""
        out: dict[str, int] = {}
        for d in self.devices:
            out[d.host] = out.get(d.host, 0) + 1
        return out

    @property
    def where(self) -> str:
        return f"{self.path}:{self.first_line}-{self.last_line}"


def parse_files(paths) -> list[Test]:
    tests = []
    for p in paths:
        tests.extend(parse_file(Path(p)))
    return tests


def parse_file(path: Path) -> list[Test]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        raise LogError(f"{path}:0: cannot read: {e.strerror}") from None
    tests = _Parser(str(path), lines).run()
    if not tests:
        raise LogError(f"{path}:1: not nccl-tests output: no '# nThread ... nGpus ...' header line in "
                       f"{len(lines)} lines")
    named = _name_from_file(path, tests)
    for t in tests:
        t.name = t.name or named or _infer_name(t)
        _check(t)
    return tests


class _Parser:
    """Line by line: between tests (any text: shell prompts, launcher output), in a test's header
    (devices, column names), in its table (rows until a '#' line)."""

    def __init__(self, path: str, lines: list[str]):
        self.path, self.lines = path, lines
        self.tests: list[Test] = []
        self.cur: Test | None = None
        self.cols: list[str] | None = None
        self.pending_name = ""          # a `<name>_perf` seen since the last test (command line, banner)

    def err(self, no: int, why: str) -> LogError:
        return LogError(f"{self.path}:{no}: {why}")

    def run(self) -> list[Test]:
        for no, raw in enumerate(self.lines, 1):
            self.line(no, raw.rstrip())
        if self.cur:
            self.close(len(self.lines))
        return self.tests

    def line(self, no: int, s: str) -> None:
        text = s.strip()
        if not text or _NCCL_LOG.match(text):
            return
        if text.startswith("#"):
            self.comment(no, text)
        elif self.cols is not None:
            self.row(no, text)
        else:
            m = _PERF.search(text)      # a command line between tests names the next one
            if m and not (self.cur and self.cur.rows):
                self.pending_name = m.group(1)

    def comment(self, no: int, text: str) -> None:
        if "nThread" in text and "nGpus" in text:
            if self.cur:
                self.close(no - 1)
            self.cur = Test(self.path, no, name=self.pending_name)
            self.pending_name, self.cols = "", None
            return
        m = _PERF.search(text)
        if "Collective test starting" in text and m:
            if self.cur and self.cur.rows:
                self.close(no - 1)
            self.pending_name = m.group(1)
            return
        if self.cur is None:
            return
        if self.cols is not None and self.cur.rows:     # the table ended (footer)
            self.cols = None
            self.cur.last_line = no
            return
        rank = _RANK.match(text)
        if rank:
            if rank.group(2) in (None, "0"):       # -m: further communicator groups repeat the same GPUs
                self.cur.devices.append(Device(int(rank.group(1)), rank.group(4), rank.group(7), no))
            return
        toks = text[1:].split()
        if toks[:2] == ["size", "count"]:
            self.cols = _columns(toks, lambda why: self.err(no, why))
            self.cur.header_line = no

    def row(self, no: int, text: str) -> None:
        toks = text.split()
        if len(toks) != len(self.cols) or not _numeric(toks[0]):
            if self._is_last(no):
                self.cur.notes.append(f"{self.path}:{no}: truncated last row ({len(toks)} of {len(self.cols)} "
                                      "fields): skipped")
                return
            if not _numeric(toks[0]):
                raise self.err(no, f"not a row of the table that starts at line {self.cur.header_line}: {text[:60]!r}")
            raise self.err(no, f"row of {len(toks)} fields in a table of {len(self.cols)} columns "
                               f"(header line {self.cur.header_line})")
        r = _row(no, dict(zip(self.cols, toks)), toks, self.cols, lambda why: self.err(no, why))
        if r is not None:
            self.cur.rows.append(r)
        self.cur.last_line = no

    def _is_last(self, no: int) -> bool:
        return all(not s.strip() for s in self.lines[no:])

    def close(self, no: int) -> None:
        t = self.cur
        t.last_line = max(t.last_line, t.header_line, t.first_line)
        self.tests.append(t)
        self.cur, self.cols = None, None


def _columns(toks: list[str], err) -> list[str]:
    """Column names of a header: size count type redop [root] (time algbw busbw #wrong|error) x 1 or 2."""
    base = toks[:5] if len(toks) > 4 and toks[4] == "root" else toks[:4]
    if base[:4] != ["size", "count", "type", "redop"]:
        raise err(f"unknown column header {' '.join(toks)!r} (expected size count type redop [root] ...)")
    groups, rest = [], toks[len(base):]
    while rest:
        g = rest[:4]
        if len(g) < 4 or g[:3] != ["time", "algbw", "busbw"] or g[3] not in ("#wrong", "error"):
            raise err(f"unknown columns {' '.join(rest)!r} (expected time algbw busbw #wrong|error)")
        groups.append(g)
        rest = rest[4:]
    if not groups or len(groups) > 2:
        raise err(f"{len(groups)} time/algbw/busbw groups (nccl-tests prints out-of-place and in-place)")
    names = ["out-of-place", "in-place"]
    return base + [f"{c}@{names[i]}" for i, g in enumerate(groups) for c in ("time", "algbw", "busbw", "err")]


def _numeric(tok: str) -> bool:
    try:
        float(tok)
        return True
    except ValueError:
        return tok == "N/A"


def _num(v: str, what: str, err) -> float | None:
    if v == "N/A":
        return None
    try:
        return float(v)
    except ValueError:
        raise err(f"{what} {v!r} is not a number") from None


def _row(no: int, cells: dict, toks: list[str], cols: list[str], err) -> Row | None:
    size, count = _num(cells["size"], "size", err), _num(cells["count"], "count", err)
    if size is None or count is None:
        raise err("size or count is N/A")
    for col in ("out-of-place", "in-place"):
        if f"time@{col}" not in cells:
            continue
        t = _num(cells[f"time@{col}"], "time", err)
        if t is not None:
            algbw, busbw = _num(cells[f"algbw@{col}"], "algbw", err), _num(cells[f"busbw@{col}"], "busbw", err)
            return Row(no, int(size), int(count), cells["type"], cells["redop"], t, algbw, busbw, col)
    return None         # every time cell N/A: nothing measured at this size


def _name_from_file(path: Path, tests: list[Test]) -> str:
    """A file named after one test (all_gather_perf.log, alltoall-2nodes.txt) names its unnamed tests."""
    stem = path.name.lower()
    for name in sorted(list(NCCL_OPS) + list(OTHER_TESTS), key=len, reverse=True):
        if name in stem:
            return name
    return ""


def _infer_name(t: Test) -> str:
    """The test from its table alone, where only one fits: the element count per size, the busbw /
    algbw factor at its ranks, the reduction column. all_gather and alltoall look alike; their file
    or command line must say."""
    r = max((r for r in t.rows if r.size and r.algbw), key=lambda r: r.algbw, default=None)   # the most digits
    if r is None or not t.ranks:
        return ""
    n, per = t.ranks, TYPE_BYTES.get(r.dtype, 0)
    fits = [name for name, op in NCCL_OPS.items()
            if _count_ok(op, r, n, per) and _factor_ok(op, r, n) and (r.redop == "none") == (op in NO_REDOP)]
    return fits[0] if len(fits) == 1 else ""


def _count_ok(op: str, r: Row, n: int, per: int) -> bool:
    return per > 0 and r.count * per * (n if op in PER_RANK_COUNT else 1) == r.size


def _factor_ok(op: str, r: Row, n: int) -> bool:
    """busbw = algbw x factor, to the printed precision (2 decimals each; a 1% margin above that)."""
    if not r.algbw or r.busbw is None or r.algbw < 0.05:
        return True
    want = r.algbw * BUS_FACTOR[op](n)
    return abs(r.busbw - want) <= 0.016 + 0.01 * want


def _check(t: Test) -> None:
    """A test's consistency: known name, devices, complete rows whose counts and busbw fit its op."""
    where = f"{t.path}:{t.first_line}"
    if not t.name:
        raise LogError(f"{where}: cannot tell which nccl-tests test this is (all_gather and alltoall tables look "
                       "alike): keep its command line or '# Collective test starting' line above it, or name the "
                       "file after it (e.g. all_gather_perf.log)")
    if t.op is None:
        t.notes.append(f"{where}: {t.name}_perf is not an op the cost model prices: skipped")
        return
    if not t.devices:
        raise LogError(f"{where}: no '# Using devices' block ('#  Rank 0 ... on <host> device 0 [...] <GPU>' "
                       "lines): ranks and hosts unknown")
    if not t.header_line:
        raise LogError(f"{where}: truncated: no table header (size count type redop ...) after the devices block")
    ranks = sorted(d.rank for d in t.devices)
    if ranks != list(range(len(ranks))):
        raise LogError(f"{t.path}:{t.devices[0].line}: devices block lists ranks {ranks}, not 0..{len(ranks) - 1}")
    _check_rows(t)


def _check_rows(t: Test) -> None:
    n, first = t.ranks, t.rows[0] if t.rows else None
    for r in t.rows:
        per = TYPE_BYTES.get(r.dtype)
        if per is None:
            raise LogError(f"{t.path}:{r.line}: unknown data type {r.dtype!r}")
        if not _count_ok(t.op, r, n, per):
            want = r.size // per // (n if t.op in PER_RANK_COUNT else 1)
            raise LogError(f"{t.path}:{r.line}: count {r.count} does not fit size {r.size} B of {r.dtype} for "
                           f"{t.name}_perf on {n} ranks (expected {want}): the table and the devices block "
                           "are not from one run, or the row is damaged")
        if not _factor_ok(t.op, r, n):
            raise LogError(f"{t.path}:{r.line}: busbw {r.busbw} is not algbw {r.algbw} x {BUS_FACTOR[t.op](n):.4g} "
                           f"({t.name}_perf on {n} ranks): the table and the devices block are not from one run")
    kept = [r for r in t.rows if r.size > 0 and r.dtype == first.dtype] if first else []
    if len(kept) < len(t.rows):
        t.notes.append(f"{t.where}: {len(t.rows) - len(kept)} rows of size 0 or another type than "
                       f"{first.dtype}: not fitted")
    t.rows = kept
    if len({r.size for r in t.rows}) < 2:
        raise LogError(f"{t.path}:{t.header_line}: truncated table: {len(t.rows)} usable rows; a latency + "
                       "bandwidth fit needs at least 2 sizes")
