"""`dspbench compare A B [--by method|cfg] [--results DIR] [--out DIR] [--format md|csv]`.

Two results folders, or (`--by method`) two methods of one folder, or (`--by cfg`, A and B each
`batch` or `parallel`) sample-mode CFG as a batch of 2 against CFG parallelism in one folder, or
(`--by source`, A and B each measured, predicted or published) one source's numbers against another's
on the same configurations, like with like (compare_source.py). Prints per configuration B's
step time over A's with a 95% bootstrap interval and "~" where not significant (compare.py), and
writes compare.md / compare.csv under --out when given.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="results folder A (or, with --by method, method A: the base; with --by cfg, "
                             "batch or parallel)")
    p.add_argument("b", help="results folder B (or, with --by method, method B; with --by cfg, batch or parallel)")
    p.add_argument("--by", choices=["folder", "method", "cfg", "source"], default="folder",
                   help="compare two folders (default), two methods of --results, (cfg) CFG as a batch "
                        "of 2 against CFG parallel (--cfg-parallel) at the same GPUs, per method, or (source) "
                        "two sources of --results: measured, predicted, published, like with like")
    p.add_argument("--results", type=Path, default=None, help="with --by method or cfg: the results folder")
    p.add_argument("--out", type=Path, default=None, help="also write compare.md and compare.csv here")
    p.add_argument("--format", choices=["md", "csv"], default="md", help="what to print (default md)")


def run(args) -> int:
    from dspbench.reports.collect import load_sweep   # pandas, numpy: only when running
    from dspbench.reports.compare import GUIDANCE, by_cfg, by_method, folders, table
    from dspbench.reports.derive import enrich
    from dspbench.reports.style import label
    if args.by in ("method", "cfg", "source") and (args.results is None or not args.results.is_dir()):
        print(f"dspbench compare: error: --by {args.by} needs --results DIR, a results folder (got {args.results})",
              file=sys.stderr)
        return 2
    if args.by == "source":
        return by_source(args)
    if args.by == "cfg":
        if bad := [g for g in (args.a, args.b) if g not in GUIDANCE]:
            print(f"dspbench compare: --by cfg compares {' and '.join(GUIDANCE)}, got {', '.join(bad)}",
                  file=sys.stderr)
            return 2
        runs = enrich(load_sweep(args.results).runs)
        df, title = by_cfg(runs, args.a, args.b), f"CFG {args.b} vs CFG {args.a}: seconds per video"
    elif args.by == "method":
        runs = enrich(load_sweep(args.results).runs)
        missing = [m for m in (args.a, args.b) if m not in set(runs["method"])]
        if missing:
            print(f"dspbench compare: no runs of {', '.join(missing)} under {args.results} "
                  f"(methods: {', '.join(sorted(set(runs['method'].dropna())))})", file=sys.stderr)
            return 2
        df, title = by_method(runs, args.a, args.b), f"{label(args.b)} vs {label(args.a)}: step time"
    else:
        for d in (args.a, args.b):
            if not Path(d).is_dir():
                print(f"dspbench compare: no such results folder: {d}", file=sys.stderr)
                return 2
        ra, rb = (enrich(load_sweep(d).runs) for d in (args.a, args.b))
        df, title = folders(ra, rb, (str(args.a), str(args.b))), f"{args.b} vs {args.a}: step time"
    return emit(table(df, title), args)


def by_source(args) -> int:
    from dspbench.reports.collect import load_sweep
    from dspbench.reports.compare import table
    from dspbench.reports.compare_source import SIDES, by_source as pair, notes
    from dspbench.reports.derive import enrich
    if bad := [s for s in (args.a, args.b) if s not in SIDES] or ([args.a] if args.a == args.b else []):
        print(f"dspbench compare: --by source compares two of {', '.join(SIDES)}, got {', '.join(bad)}",
              file=sys.stderr)
        return 2
    t = table(pair(enrich(load_sweep(args.results).runs), args.a, args.b),
              f"{args.b} vs {args.a}: the same configurations' times, like with like")
    t.notes = notes(args.a, args.b)
    return emit(t, args)


def emit(t, args) -> int:
    """Print (and with --out, write) a comparison table; 1 where nothing paired."""
    if t.empty:
        print("dspbench compare: no configuration is in both A and B (pairing on the full key)",
              file=sys.stderr)
        return 1
    if args.out:
        t.write(args.out)
    print(t.markdown(None) + "\n\n" + "\n".join(t.notes) if args.format == "md" else
          t.data.to_csv(index=False, float_format="%.6g"), end="\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="dspbench compare", description=__doc__.splitlines()[0])
    add_args(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
