"""The `dspbench` command: run, models, methods, demo (and sweep, report, ... as they land)."""
from __future__ import annotations

import argparse
import json
import sys

from . import commands


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in commands.PASSTHROUGH:   # benchmarks parse their own flags
        return commands.PASSTHROUGH[argv[0]](argv[1:]) or 0
    parser = argparse.ArgumentParser(prog="dspbench", description=__doc__.split(":")[0] + ".")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_args, handler) in commands.COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text,
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        add_args(p)
        p.set_defaults(handler=handler)
    args = parser.parse_args(argv)
    try:
        return args.handler(args) or 0
    except (ValueError, KeyError, FileNotFoundError) as e:
        print(f"dspbench {args.command}: error: {e.args[0] if e.args else e}", file=sys.stderr)
        return 2


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    sys.exit(main())
