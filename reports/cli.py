"""`dspbench report RESULTS_DIR [--out DIR]`: build a sweep's report and say where it is."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from dspbench.reports import compare_cli


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("results_dir", type=Path, help="a sweep's results folder (records *.jsonl, any depth), "
                   "or a plan's (plan.json, from `dspbench plan --report DIR`)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: RESULTS_DIR/report)")
    p.add_argument("--jobs", type=int, default=None, help="processes drawing figures (default: up to 2)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dspbench report",
                                description="Tables, figures, index.md and a self-contained index.html "
                                            "from the records under results/<sweep>/.")
    add_args(p)
    return run(p.parse_args(argv))


def run(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        print(f"dspbench report: error: --jobs must be >= 1, got {args.jobs}", file=sys.stderr)
        return 2
    if not args.results_dir.is_dir():
        print(f"dspbench report: no such directory: {args.results_dir}", file=sys.stderr)
        return 2
    if (args.results_dir / "plan.json").is_file() and not any(args.results_dir.rglob("*.jsonl")):
        from dspbench.reports.plan_report import render   # a plan's folder (`dspbench plan --report DIR`)
        print(f"report written: {render(args.results_dir)}")
        return 0
    logging.basicConfig(level=logging.WARNING, format="dspbench report: %(message)s")  # data problems
    from dspbench.reports.report import build_report   # heavy imports (pandas, matplotlib, torch) only when running
    page = build_report(args.results_dir, args.out, jobs=args.jobs)
    print(f"report written: {page} and {page.with_name('index.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


COMMANDS = {
    "report": ("turn a sweep's records into tables, figures and a report (index.md, index.html)", add_args, run),
    "compare": ("A vs B per configuration: step-time ratio, bootstrap CI, '~' when not significant "
                "(two results folders, or --by method)", compare_cli.add_args, compare_cli.run),
}
