"""The cost stage's commands, `dspbench predict` and `dspbench evidence add`; handlers import the cost model lazily
(so `dspbench --help` and the other commands do not pay for its imports)."""
from __future__ import annotations

import argparse

from dspbench.facts.args import add_run_args


def add_predict_args(p: argparse.ArgumentParser) -> None:
    # its --hardware unset is h100-ib, said on stderr (cmd_predict); an unset --dtype/--backend is the
    # profile's device's (cost/hardware.py device_defaults)
    add_run_args(p, by_profile=True)
    g = p.add_argument_group("prediction only")
    g.add_argument("--compiled", action="store_true",
                   help="price the host costs of torch.compile instead of eager (profiles with a [compute.curve])")
    g.add_argument("--explain", action="store_true",
                   help="print where the seconds go per kernel class (attention, GEMM, memory-bound, collectives, "
                   "host, VAE, text encoder) with each rate's source (GPU datasheet profiles)")
    g.add_argument("--stack", default=None, metavar="PKG,...",
                   help="the target's software beyond torch (deepspeed, flash-attn; none): which methods and ZeRO "
                   "stages it can run; replaces the profile's [stack] (nothing installed here is looked at)")
    g.add_argument("--vae", choices=("single", "tiled", "patch_parallel"), default=None,
                   help="sample mode: the VAE decode's variant in the whole-pipeline stages (default: what the "
                        "model's pipeline runs, its [sampling] decode, e.g. tiled for hunyuanvideo; else single)")
    b = p.add_argument_group("bucketed workload (records/buckets.py): one record per bucket, then the mix")
    b.add_argument("--buckets", default=None, metavar="TxS[:W],...",
                   help="buckets as T x S tokens with weights, e.g. 21x1560:3,21x3600:1 (replaces --frames/--spatial)")
    b.add_argument("--bucket-file", default=None, metavar="CSV",
                   help="buckets in OpenSora's terms: a CSV resolution,frames,weight (480p, 720p or HxW pixels), "
                        "converted through the model's own VAE and patch")
    p.set_defaults(out="results/predicted")


def cmd_predict(args) -> int:
    from dspbench.cost.predict import cmd_predict as run
    return run(args)


def add_evidence_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = sub.add_parser("add", help="check published measurements (a source TOML) and write them as records",
                       description="Check each source file (results/published/sources/*.toml: citation, hardware "
                       "profile, software, what the time includes, one [[point]] per row) and write its "
                       "records, source = published, to OUT/<name>.jsonl. Any problem: exit 2, nothing written.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a.add_argument("files", nargs="+", metavar="FILE", help="source TOML file(s)")
    a.add_argument("--out", default="results/published", help="folder of the published records")
    a.add_argument("--check", action="store_true", help="check only, write nothing")


def cmd_evidence(args) -> int:
    from dspbench.cost.published import cmd_evidence as run
    return run(args)


COMMANDS = {
    "predict": ("predict one configuration's step time and memory on a hardware profile (cost model)",
                add_predict_args, cmd_predict),
    "evidence": ("published GPU measurements as records (source = published), checked before written",
                 add_evidence_args, cmd_evidence),
}
