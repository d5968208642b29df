"""The `dspbench` command: each stage registers its own sub-commands; this file only gathers them.

Stages (in `dspbench --help` order): run (run, models, methods, demo), cost (predict, evidence), plan (plan),
calibrate (calibrate, emulate), reports (report), micro (bench-ledger, bench-switch), slurm (sweep). It also
hands reports the method registry (`wire_reports`), which reports may not import themselves.
"""
from __future__ import annotations

import argparse
import re
import sys
from importlib import import_module
from importlib.metadata import PackageNotFoundError, requires

STAGES = ("dspbench.run.cli", "dspbench.cost.cli", "dspbench.plan.cli", "dspbench.calibrate.cli",
          "dspbench.reports.cli", "dspbench.micro.cli", "dspbench.slurm.cli", "dspbench.gpu.cli")


def _gather() -> tuple[dict, dict]:
    commands, passthrough = {}, {}
    for name in STAGES:
        mod = import_module(name)
        commands.update(mod.COMMANDS)
        passthrough.update(getattr(mod, "PASSTHROUGH", {}))
    return commands, passthrough


def _registry_meta(name: str) -> dict | None:
    return import_module("dspbench.methods").method_meta(name)   # torch loads only when asked


def wire_reports() -> None:
    """Reports may not import methods: a record written before records carried its method's look
    (`method_meta`) gets the look the method registry declares today, a plugin's too."""
    import_module("dspbench.reports.meta").registry = _registry_meta


def missing_extra(e: ModuleNotFoundError) -> str | None:
    """The one-line reason a command stopped on an optional package that is not installed: the package
    and the extra of pyproject.toml that brings it (read from the installed metadata, so the extras
    are stated once); None when the module is no extra's (a real error: its traceback stands)."""
    top = (e.name or "").split(".")[0]
    try:
        reqs = requires("dspbench") or []
    except PackageNotFoundError:        # a source tree on sys.path, not installed: no extras known
        reqs = []
    extras = []
    for req in reqs:
        name, extra = re.match(r"[A-Za-z0-9_.-]+", req).group(0), re.search(r'extra == "([^"]+)"', req)
        if extra and name.lower().replace("_", "-") == top.lower().replace("_", "-"):
            extras.append(extra.group(1))
    # the test extra also lists what the suite imports (ring-flash-attn): name the extra meant for use
    extra = next((x for x in extras if x not in ("test", "dev")), extras[0] if extras else None)
    return extra and f"needs {top}, which is not installed (pip install 'dspbench[{extra}]')"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    commands, passthrough = _gather()
    wire_reports()
    if argv and argv[0] in passthrough:   # benchmarks parse their own flags
        return passthrough[argv[0]](argv[1:]) or 0
    parser = argparse.ArgumentParser(prog="dspbench", description="dspbench: sequence parallelism for "
                                     "spatial-temporal transformers, measured honestly.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_args, handler) in commands.items():
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
    except ModuleNotFoundError as e:    # an optional extra the command needs: say which, not a traceback
        why = missing_extra(e)
        if why is None:
            raise
        print(f"dspbench {args.command}: error: {why}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
