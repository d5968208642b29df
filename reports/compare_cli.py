"""`dspbench compare A B [--by method] [--results DIR] [--out DIR] [--format md|csv]`.

Two results folders, or (`--by method`) two methods of one folder. Prints per configuration B's
step time over A's with a 95% bootstrap interval and "~" where not significant (compare.py), and
writes compare.md / compare.csv under --out when given.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="results folder A (or, with --by method, method A: the base)")
    p.add_argument("b", help="results folder B (or, with --by method, method B)")
    p.add_argument("--by", choices=["folder", "method"], default="folder",
                   help="compare two folders (default) or two methods of --results")
    p.add_argument("--results", type=Path, default=None, help="with --by method: the results folder")
    p.add_argument("--out", type=Path, default=None, help="also write compare.md and compare.csv here")
    p.add_argument("--format", choices=["md", "csv"], default="md", help="what to print (default md)")


def run(args) -> int:
    from dspbench.reports.collect import load_sweep   # pandas, numpy: only when running
    from dspbench.reports.compare import by_method, folders, table
    from dspbench.reports.derive import enrich
    from dspbench.reports.style import label
    if args.by == "method":
        if args.results is None or not args.results.is_dir():
            print(f"dspbench compare: --by method needs --results DIR (got {args.results})", file=sys.stderr)
            return 2
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
    t = table(df, title)
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
