"""nccl-tests output, as people paste it, into the rows `dspbench calibrate` fits a profile from.

nccl-tests (NVIDIA/nccl-tests) prints, per test: a `# nThread ...` header, a `# Using devices` block
(`#  Rank  0 Group  0 Pid 123 on host1 device  0 [0x18] NVIDIA H100 80GB HBM3`), a column header,
then one row per size: size (B), count (elements), type, redop, [root], then out-of-place time (us),
algbw, busbw, #wrong (older versions: error), then the same in place. Versions differ: 2.x with or
without the root column, `#wrong` or `error`, `N/A` where a column does not apply. Several tests
may follow one another in one file; MPI and `-g` launches differ only in the devices block.

What is read: the out-of-place time per size (the honest input; algbw = size / time, busbw = algbw x
nccl-tests' bus factor: 2(n-1)/n all_reduce, (n-1)/n all_gather, reduce_scatter and alltoall, 1
sendrecv (nccl-tests' doc/PERFORMANCE.md), the same factors as methods/comm/ledger.py's wire bytes). A
row whose printed busbw disagrees with its own size and time by more than the printing allows is
garbled; a row cut short at the end of a file is reported and skipped; anything else that is not
nccl-tests output, a table with no rows, or logs of two different clusters (GPU models) mixed is a
LogError naming file:line. Results nccl-tests found wrong are never fitted: a row whose out-of-place
`#wrong` (a count) is not 0, or whose older `error` (the largest difference) exceeds WRONG_ERROR, is a
LogError; one wrong in place only (older versions report that for in-place alltoall) keeps its
out-of-place time, and the test lists its lines (`inplace_wrong`) for the profile's sources. A table
of one size is a truncated one unless its header says it ran one (`minBytes` = `maxBytes`, as
`-b 1G -e 1G` prints): `one_size`, read for bandwidth (bench/calibrate/from_logs.py). Which collective a table is: the `*_perf` name on a command line above
it or in the file name, else its counts and bus factor (said so in the source).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dspbench.methods.comm.ledger import BUS_FACTOR

BINARIES = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter",
            "alltoall_perf": "all_to_all", "sendrecv_perf": "send_recv"}
_DEVICE = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_ROW = re.compile(r"^\s*\d+\s+\d+\s+\w+")
_BYTES = re.compile(r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
WRONG_ERROR = 1e-3     # older nccl-tests' `error` column is the largest difference: far above float rounding


class LogError(ValueError):
    """Not nccl-tests output, or output that cannot be trusted: names file:line and why (exit 2)."""


@dataclass
class Test:
    """One nccl-tests table: its collective, devices and rows (size, out-of-place time in seconds)."""
    file: str
    first_line: int
    op: str = ""
    op_how: str = ""
    ranks: dict = field(default_factory=dict)     # rank -> (host, gpu model)
    rows: list = field(default_factory=list)      # [(size, time_s, line)]
    skipped: list = field(default_factory=list)   # "file:line: why"
    last_line: int = 0
    sizes_run: tuple = ()                         # (minBytes, maxBytes) of the `# nThread` header
    inplace_wrong: list = field(default_factory=list)   # lines whose in-place results were wrong

    @property
    def one_size(self) -> bool:
        return len({r[0] for r in self.rows}) == 1

    @property
    def world(self) -> int:
        return len(self.ranks)

    @property
    def hosts(self) -> list[str]:
        return sorted({h for h, _ in self.ranks.values()})

    @property
    def gpu(self) -> str:
        return sorted({g for _, g in self.ranks.values()})[0] if self.ranks else ""

    def where(self) -> str:
        return f"{self.file}:{self.first_line}-{self.last_line}"


def _float(cell: str) -> float | None:
    return None if cell.upper() in ("N/A", "NA", "-") else float(cell)


def parse_file(path: str | Path) -> list[Test]:
    """Every test table in one file (LogError when there is none, or one cannot be trusted)."""
    path = Path(path)
    lines = path.read_text(errors="replace").splitlines()
    tests, cur, hint = [], None, _binary_in(path.name)
    for i, line in enumerate(lines, 1):
        hint = _binary_in(line) or hint
        if line.startswith("# nThread") or (line.startswith("#") and "Using devices" in line and cur is None):
            cur = Test(str(path), i, op=hint or "", op_how="named" if hint else "")
            run = _BYTES.search(line)
            cur.sizes_run = (int(run.group(1)), int(run.group(2))) if run else ()
            tests.append(cur)
            continue
        if cur is None:
            continue
        m = _DEVICE.match(line.strip())
        if m:
            cur.ranks[int(m.group(1))] = (m.group(2), m.group(3))
        elif _ROW.match(line):
            _row(cur, line, i, is_last=i == len(lines))
        cur.last_line = i
    if not tests:
        raise LogError(f"{path}:1: not nccl-tests output (no '# nThread' header or '# Using devices' block)")
    for t in tests:
        _finish(t)
    return tests


def _binary_in(text: str) -> str:
    m = re.search(r"(all_reduce_perf|all_gather_perf|reduce_scatter_perf|alltoall_perf|sendrecv_perf)", text)
    return BINARIES[m.group(1)] if m else ""


def _row(t: Test, line: str, n: int, is_last: bool) -> None:
    """size count type redop [root] | time algbw busbw #wrong (out of place) | the same in place."""
    cells = line.split()
    first = {13: 5, 12: 4}.get(len(cells))
    if first is None:
        msg = f"{t.file}:{n}: a row with {len(cells)} columns (nccl-tests prints 12, or 13 with root)"
        if is_last:
            t.skipped.append(msg + ": a truncated last row, skipped")
            return
        raise LogError(msg)
    try:
        size, count = int(cells[0]), int(cells[1])
        time_us, algbw, busbw = (_float(c) for c in cells[first:first + 3])
    except ValueError:
        raise LogError(f"{t.file}:{n}: a garbled row: {line.strip()!r}") from None
    if time_us is None or time_us <= 0:
        t.skipped.append(f"{t.file}:{n}: no out-of-place time (N/A), skipped")
        return
    if _wrong(cells[first + 3], t, n):
        raise LogError(f"{t.file}:{n}: size {size} B: out-of-place #wrong {cells[first + 3]}: nccl-tests found its "
                       "results wrong, so its time is not fitted (rerun the test; check the GPUs and links)")
    if len(cells) > first + 7 and _wrong(cells[first + 7], t, n):
        t.inplace_wrong.append(n)
    t.rows.append((size, time_us * 1e-6, n, count, algbw, busbw, cells[2], cells[3]))


def _wrong(cell: str, t: Test, n: int) -> bool:
    """A #wrong count above 0, or an older `error` (largest difference) above WRONG_ERROR; N/A is not wrong."""
    try:
        value = _float(cell)
    except ValueError:
        raise LogError(f"{t.file}:{n}: a #wrong cell {cell!r} that is not a number") from None
    if value is None:
        return False
    return value > 0 if re.fullmatch(r"\d+", cell) else value > WRONG_ERROR


def _finish(t: Test) -> None:
    if not t.rows:
        raise LogError(f"{t.file}:{t.first_line}: a test with no rows (a truncated table?)")
    if not t.ranks:
        raise LogError(f"{t.file}:{t.first_line}: no '# Using devices' block: ranks and hosts unknown")
    if not t.op:
        t.op, t.op_how = _infer_op(t), "inferred from its counts and bus factor"
    n, factor = t.world, BUS_FACTOR[t.op](t.world)
    _check_counts(t)
    ran_one = len(t.sizes_run) == 2 and t.sizes_run[0] == t.sizes_run[1]
    if t.one_size and not ran_one:
        raise LogError(f"{t.file}:{t.rows[0][2]}: a truncated table: {len(t.rows)} row(s) of a run of sizes "
                       f"{t.sizes_run or 'unknown'}; a latency + bandwidth fit needs at least 2 sizes")
    for size, time_s, line, count, algbw, busbw, *_ in t.rows:
        if busbw is not None and time_s > 0:
            expect = size / time_s / 1e9 * factor
            # nccl-tests prints 2 decimals of GB/s and of microseconds: allow that much, and 2%
            if abs(busbw - expect) > 0.011 + 0.02 * expect + expect * 0.006 / (time_s * 1e6):
                raise LogError(f"{t.file}:{line}: busbw {busbw} GB/s does not follow from size {size} B and time "
                               f"{time_s * 1e6:.2f} us for {t.op} on {n} ranks (expected {expect:.2f}): "
                               "a garbled row, or rows with wrong counts")
    t.last_line = max(t.last_line, t.rows[-1][2])


TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
              "double": 8, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}


def _check_counts(t: Test) -> None:
    """count = size / type bytes (/ ranks for all_gather and reduce_scatter: nccl-tests prints the
    count each rank passes; alltoall logs are seen both ways, so either is accepted): a row that
    breaks it is damaged, or its table is not of this devices block's ranks."""
    per_rank = t.op in ("all_gather", "reduce_scatter", "all_to_all")
    for size, _, line, count, _, _, dtype, _ in t.rows:
        width = TYPE_BYTES.get(dtype)
        if width is None:
            raise LogError(f"{t.file}:{line}: unknown data type {dtype!r}")
        if t.op == "all_to_all" and count * width == size:
            continue
        if count * width * (t.world if per_rank else 1) != size:
            want = size // width // (t.world if per_rank else 1)
            raise LogError(f"{t.file}:{line}: count {count} does not fit size {size} B of {dtype} for {t.op} on "
                           f"{t.world} ranks (expected {want}): a damaged row, or rows with wrong counts")


def _infer_op(t: Test) -> str:
    size, time_s, line, count, algbw, busbw, dtype, redop = t.rows[-1]
    n = t.world
    ratio = busbw / algbw if algbw else None
    per_rank = count * 4 * n == size or (dtype != "float" and count * n < size)
    if ratio is not None and abs(ratio - 2 * (n - 1) / n) < 0.02 and n > 2:
        return "all_reduce"
    if ratio is not None and abs(ratio - 1.0) < 0.02 and n > 2:
        return "send_recv"
    if redop.lower() in ("sum", "prod", "min", "max", "avg"):
        return "reduce_scatter" if per_rank else "all_reduce"
    if per_rank:
        return "all_gather"
    raise LogError(f"{t.file}:{t.first_line}: cannot tell which collective this is: name the file after its binary "
                   "(e.g. alltoall_perf.log) or keep the command line above the table")


def rows_for_fit(tests: list[Test]) -> list[dict]:
    """calibrate's row format (bench/calibrate/profile.py fit/link_dict) for tests of one group size."""
    out = []
    for t in tests:
        f = BUS_FACTOR[t.op](t.world)
        for size, time_s, *_ in t.rows:
            out.append({"op": t.op, "size": size, "count": size // 4, "time_s": time_s, "ranks": t.world,
                        "wire_bytes": size * f, "algbw_GBps": size / time_s / 1e9,
                        "busbw_GBps": size * f / time_s / 1e9})
    return out


# ---------------------------------------------------------------- writing (calibrate --nccl-tests-out)
def format_test(op: str, rows: list[dict], ranks: list[dict]) -> str:
    """calibrate's measurements of one op as nccl-tests prints them. The devices block is the ranks'
    own (host, pid, device: collectives._rank_facts); calibrate times out-of-place calls only and
    does not validate results, so the in-place and #wrong cells are N/A. Time keeps 2 decimals of a
    microsecond at every size (nccl-tests drops them above 100 us), which the round trip relies on."""
    binary = {v: k for k, v in BINARIES.items()}[op]
    n = rows[0]["ranks"]
    lines = [f"# {binary} (written by dspbench calibrate --nccl-tests-out: measured, nccl-tests' format; in-place "
             "not timed, results not validated: N/A)",
             f"# nThread 1 nGpus 1 minBytes {rows[0]['size']} maxBytes {rows[-1]['size']} step: (--sizes) "
             "warmup iters: 1 iters: 5 agg iters: 1 validation: 0 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {i:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10} device {r['local']:2d} [{r['bus']}] "
              f"{r['device']}" for i, r in enumerate(ranks[:n])]
    lines += ["#", "#" + " " * 62 + "out-of-place                       in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    f = BUS_FACTOR[op](n)
    redop = "sum" if op in ("all_reduce", "reduce_scatter", "send_recv") else "none"
    for r in rows:
        us = r["time_s"] * 1e6
        alg = r["size"] / r["time_s"] / 1e9
        count = r["size"] // 4 // (n if op in ("all_gather", "reduce_scatter", "all_to_all") else 1)
        na = " ".join(f"{'N/A':>{w}}" for w in (6, 8, 7, 7, 6))
        lines.append(f"{r['size']:12d} {count:13d}     float {redop:>7} {-1:7d} {us:8.2f} {alg:7.2f} "
                     f"{alg * f:7.2f} {na}")
    lines.append("# Out of bounds values : N/A (not validated)")
    return "\n".join(lines) + "\n"
