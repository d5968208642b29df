"""Benchmark (not a test): build a report from 10,000 synthetic records and print the time.

    python -m dspbench.micro.report_speed [--records 10000] [--keep DIR]

Goal: under 3 s for the report itself on a 2-core machine. Generating the records and importing
torch/matplotlib are timed separately: they are not part of building a report.
"""
from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=10_000)
    p.add_argument("--keep", help="write the records and the report here (default: a temp dir)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    import matplotlib.pyplot  # noqa: F401  (imports timed apart from the report)
    import dspbench.methods  # noqa: F401
    from dspbench.reports.report import build_report
    from dspbench.micro.synth_records import sweep_records
    t_import = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp) / "bench-sweep"
        (root / "jobs").mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        recs = sweep_records(args.records)
        for i in range(0, len(recs), 500):     # 500 records per job file, as from a job array
            lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in recs[i:i + 500])
            (root / "jobs" / f"job-{i // 500:03d}.jsonl").write_text(lines)
        t_gen = time.perf_counter() - t0
        cpu0 = _cpu_s()
        t0 = time.perf_counter()
        page = build_report(root)
        t_report = time.perf_counter() - t0
        cpu = _cpu_s() - cpu0
        print(f"imports {t_import:.2f} s; generating {len(recs)} records {t_gen:.2f} s")
        # CPU seconds (this process and its figure workers) say how busy the machine was: wall
        # time well above CPU time / workers means other processes had the cores.
        print(f"build_report on {len(recs)} records: {t_report:.2f} s wall, {cpu:.2f} s CPU "
              f"(goal < 3 s wall) -> {page}")
    return t_report


if __name__ == "__main__":
    main()
