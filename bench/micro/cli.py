"""The micro-benchmarks' commands; each parses its own flags (PASSTHROUGH)."""
from __future__ import annotations

import argparse


def _ledger(argv) -> int:
    from dspbench.micro.ledger import main
    return main(argv) or 0


def _switch(argv) -> int:
    from dspbench.micro.switch import main
    main(argv)
    return 0


def _rest(p: argparse.ArgumentParser) -> None:
    p.add_argument("rest", nargs=argparse.REMAINDER)


PASSTHROUGH = {"bench-ledger": _ledger, "bench-switch": _switch}
COMMANDS = {
    "bench-ledger": ("benchmark: the ledger's cost on a training step (goal <= 2%%)", _rest, lambda a: _ledger(a.rest)),
    "bench-switch": ("micro-benchmark of the DSP switch (all-to-all) against its baselines", _rest,
                     lambda a: _switch(a.rest)),
}
