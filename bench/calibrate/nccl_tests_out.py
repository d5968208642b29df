"""`dspbench calibrate --nccl-tests-out DIR`: calibrate's own collective measurements written as
nccl-tests output, one file per op (and tier), `<test>_perf[-<tier>].log`.

So the logs path (`--from-nccl-tests`, bench/calibrate/from_logs.py) can be checked against the
direct one: a profile built from these files equals the profile calibrate writes, to the printed
precision (tests/test_calibrate_nccl_tests.py). The devices block holds the ranks' real hosts, pids
and devices (gathered by calibrate_rank); the rows are calibrate's medians. Deviations from
nccl-tests, stated in the files: time is printed with two decimals at every size (nccl-tests drops
decimals above 100 us), so the round trip keeps 10 ns; calibrate does not time in-place calls nor
validate results, so those cells are N/A.
"""
from __future__ import annotations

from pathlib import Path

from dspbench.calibrate.collectives import tier_groups
from dspbench.calibrate.nccl_tests import NCCL_OPS

TEST_NAME = {op: name for name, op in NCCL_OPS.items()}
REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "all_gather": "none", "all_to_all": "none",
         "send_recv": "sum"}


def _devices(members: list[int], ranks: list[dict]) -> list[str]:
    lines = ["#", "# Using devices"]
    for i, w in enumerate(members):
        r = ranks[w]
        lines.append(f"#  Rank {i:2d} Group  0 Pid {r['pid']:6d} on {r['host']:>10} device {r['local']:2d} "
                     f"[{r['bus']}] {r['device']}")
    return lines


def _row(r: dict) -> str:
    n = r["ranks"]
    count = r["size"] // 4 // (n if r["op"] in ("all_gather", "reduce_scatter", "all_to_all") else 1)
    t_us = r["time_s"] * 1e6
    algbw = r["size"] / r["time_s"] / 1e9
    busbw = r["wire_bytes"] / r["time_s"] / 1e9
    return (f"{r['size']:>12}  {count:>12}  {'float':>8}  {REDOP[r['op']]:>6}  {-1:>6}  {t_us:>10.2f}  "
            f"{algbw:>6.2f}  {busbw:>6.2f}  {'N/A':>6}  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}")


def format_test(op: str, rows: list[dict], members: list[int], ranks: list[dict], opts: dict) -> str:
    name = TEST_NAME[op] + "_perf"
    sizes = [r["size"] for r in rows]
    head = [f"# Written by dspbench calibrate --nccl-tests-out ({opts['backend']}): its own measurements, median of "
            f"{opts['iters']} samples of back-to-back calls; in-place not timed, results not validated (N/A)",
            f"# Collective test starting: {name}",
            f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: (--sizes) warmup iters: "
            f"{opts['warmup']} iters: {opts['iters']} agg iters: 1 validation: 0 graph: 0",
            *_devices(members, ranks), "#",
            f"#{'':>60}out-of-place{'':>23}in-place",
            "#       size         count      type   redop    root       time   algbw   busbw #wrong     time   "
            "algbw   busbw #wrong",
            "#        (B)    (elements)                                 (us)  (GB/s)  (GB/s)            (us)  "
            "(GB/s)  (GB/s)"]
    avg = sum(r["wire_bytes"] / r["time_s"] / 1e9 for r in rows) / len(rows)
    tail = ["# Out of bounds values : N/A (not validated)", f"# Avg bus bandwidth    : {avg:.4f}", "#",
            f"# Collective test concluded: {name}", ""]
    return "\n".join(head + [_row(r) for r in rows] + tail)


def write_logs(out_dir: str | Path, result: dict, opts: dict) -> list[Path]:
    """One nccl-tests file per (tier, op) of result['collectives']; the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    world, ranks = result["world"], result["ranks"]
    groups = tier_groups(world, opts["gpus_per_node"]) if opts.get("tiers") else {None: [list(range(world))]}
    written = []
    for tier, tier_groups_ in groups.items():
        for op in dict.fromkeys(r["op"] for r in result["collectives"]):
            rows = [r for r in result["collectives"] if r["op"] == op and r.get("tier") == tier]
            if not rows:
                continue
            path = out / f"{TEST_NAME[op]}_perf{'-' + tier if tier else ''}.log"
            path.write_text(format_test(op, rows, tier_groups_[0], ranks, opts))
            written.append(path)
    return written
