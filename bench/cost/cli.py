"""The cost stage's command, `dspbench predict`; its handler imports the cost model lazily
(so `dspbench --help` and the other commands do not pay for its imports)."""
from __future__ import annotations

import argparse

from dspbench.facts.args import add_run_args


def add_predict_args(p: argparse.ArgumentParser) -> None:
    add_run_args(p)   # its --hardware (optional for run) is required here: checked in cmd_predict
    g = p.add_argument_group("prediction only")
    g.add_argument("--compiled", action="store_true",
                   help="price the host costs of torch.compile instead of eager (profiles with a [compute.curve])")
    g.add_argument("--vae", choices=("single", "tiled", "patch_parallel"), default="single",
                   help="sample mode: the VAE decode's variant in the whole-pipeline stages")
    b = p.add_argument_group("bucketed workload (records/buckets.py): one record per bucket, then the mix")
    b.add_argument("--buckets", default=None, metavar="TxS[:W],...",
                   help="buckets as T x S tokens with weights, e.g. 21x1560:3,21x3600:1 (replaces --frames/--spatial)")
    b.add_argument("--bucket-file", default=None, metavar="CSV",
                   help="buckets in OpenSora's terms: a CSV resolution,frames,weight (480p, 720p or HxW pixels)")
    p.set_defaults(out="results/predicted")


def cmd_predict(args) -> int:
    from dspbench.cost.predict import cmd_predict as run
    return run(args)


COMMANDS = {
    "predict": ("predict one configuration's step time and memory on a hardware profile (cost model)",
                add_predict_args, cmd_predict),
}
