"""`dspbench compare A B [--by method] [--results DIR] [--out DIR] [--format md|csv]`.

Two results folders, or (`--by method`) two methods of one folder. Prints per configuration B's
step time over A's with a 95% bootstrap interval and "~" where not significant (compare.py), and
writes compare.md / compare.csv under --out when given.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from dspbench.reports import fmt
from dspbench.reports.fmt import Table
from dspbench.reports.style import label

SHOW = {"model": "model", "mode": "mode", "dtype": "dtype", "batch": "B", "frames": "T", "spatial": "S",
        "gpus": "GPUs", "sp": "SP", "dp": "DP", "zero": "ZeRO", "cfg": "CFG", "source": "numbers",
        "hardware": "hardware", "method": "method", "shard": "shard", "grad_ckpt": "ckpt"}
ALWAYS = ("method", "frames", "spatial", "gpus", "sp", "source")


def table(df: pd.DataFrame, title: str, name: str = "compare") -> Table:
    """md/csv/html form: key columns that vary (and the essentials), then the statistics."""
    if df.empty:
        return Table(name, title, df, pd.DataFrame())
    keys = [c for c in SHOW if c in df and (c in ALWAYS or df[c].nunique(dropna=False) > 1)]
    a, b = df["a"].iloc[0], df["b"].iloc[0]
    disp = pd.DataFrame({SHOW[c]: (df[c].map(label) if c == "method" else df[c]) for c in keys})
    disp[f"A: {label(a)} (ms)"] = (df["median_a_s"] * 1e3).map(fmt.num)
    disp[f"B: {label(b) if df['b'].nunique() == 1 else 'method'} (ms)"] = (df["median_b_s"] * 1e3).map(fmt.num)
    disp["B/A step time"] = df["ratio"].map(lambda x: f"{x:.3f}")
    disp["95% CI"] = [f"[{lo:.3f}, {hi:.3f}]" for lo, hi in zip(df["ci_lo"], df["ci_hi"])]
    disp["p"] = df["p"].map(lambda x: "—" if pd.isna(x) else f"{x:.3f}")
    disp["n"] = [f"{x}+{y}" for x, y in zip(df["n_a"], df["n_b"])]
    disp["delta"] = [_verdict(r) for r in df.to_dict("records")]
    bs = ", ".join(label(x) for x in df["b"].unique())
    notes = [f"A = {label(a)}, B = {bs}; each row pairs them on the full key (same source and "
             "hardware). B/A: ratio of median step times (<1: B faster); 95% CI from a two-level "
             "bootstrap (repeats, then iterations; 2000 draws); p: Mann-Whitney U on the "
             "iteration times; n: iteration samples A+B. delta: change in step time, or ~ when "
             "p >= 0.05 or the CI holds 1 (benchstat's rule)."]
    return Table(name, title, df, disp.reset_index(drop=True), notes)


def _verdict(r: dict) -> str:
    from dspbench.reports.compare import verdict
    return verdict(r)


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="results folder A (or, with --by method, method A: the base)")
    p.add_argument("b", help="results folder B (or, with --by method, method B)")
    p.add_argument("--by", choices=["folder", "method"], default="folder",
                   help="compare two folders (default) or two methods of --results")
    p.add_argument("--results", type=Path, default=None, help="with --by method: the results folder")
    p.add_argument("--out", type=Path, default=None, help="also write compare.md and compare.csv here")
    p.add_argument("--format", choices=["md", "csv"], default="md", help="what to print (default md)")


def run(args) -> int:
    from dspbench.reports.collect import load_sweep
    from dspbench.reports.compare import by_method, folders
    from dspbench.reports.derive import enrich
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
