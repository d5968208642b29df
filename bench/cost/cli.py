"""The cost stage's command, `dspbench predict`; its handler imports the cost model lazily
(so `dspbench --help` and the other commands do not pay for its imports)."""
from __future__ import annotations

import argparse

from dspbench.records.args import add_run_args


def add_predict_args(p: argparse.ArgumentParser) -> None:
    add_run_args(p)   # its --hardware (optional for run) is required here: checked in cmd_predict
    g = p.add_argument_group("prediction only")
    g.add_argument("--compiled", action="store_true",
                   help="price the host costs of torch.compile instead of eager (profiles with a [compute.curve])")
    g.add_argument("--vae", choices=("single", "tiled", "patch_parallel"), default="single",
                   help="sample mode: the VAE decode's variant in the whole-pipeline stages")
    p.set_defaults(out="results/predicted")


def cmd_predict(args) -> int:
    from dspbench.cost.predict import cmd_predict as run
    return run(args)


COMMANDS = {
    "predict": ("predict one configuration's step time and memory on a hardware profile (cost model)",
                add_predict_args, cmd_predict),
}
