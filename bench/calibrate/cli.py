"""The calibration stage's commands, `dspbench calibrate` and `dspbench emulate`; handlers import
their module lazily."""
from __future__ import annotations

import argparse

from dspbench.calibrate.options import OPS, check_items
from dspbench.records.argtypes import at_least_0, count, positive

from dspbench.records.config import DTYPES

DEFAULT_SIZES = "64K,512K,4M,16M"


def add_calibrate_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("world")
    g.add_argument("--gpus", type=count, default=2, help="ranks")
    g.add_argument("--launcher", choices=("local", "env", "slurm"), default="local",
                   help="local: fork the ranks here (file rendezvous); env: this process is RANK of WORLD_SIZE; "
                        "slurm: the same from srun's SLURM_* variables")
    g.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    g.add_argument("--gpus-per-node", type=at_least_0, default=0,
                   help="ranks per node in the written profile (0: all ranks on one node, or 1 under env)")
    g.add_argument("--tiers", action="store_true",
                   help="measure each tier into [link.intra], [link.inter], [link.span]: a node's ranks, one rank "
                        "per node, the whole world (needs --gpus-per-node; ranks node-major, as srun places them)")
    g.add_argument("--nics-per-node", type=at_least_0, default=0,
                   help="inter-node links per node in the written profile (0: one per GPU; the emulated cluster: 1)")
    g.add_argument("--timeout", type=positive, default=600.0, dest="timeout_s")
    g.add_argument("--threads", type=at_least_0, default=0, help="torch threads per rank (0: cores / ranks)")
    c = p.add_argument_group("collectives (nccl-tests sizes: bytes per rank, K/M/G suffixes)")
    c.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated sizes")
    c.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of " + ", ".join(OPS))
    c.add_argument("--iters", type=count, default=5, help="timed iterations per size")
    c.add_argument("--warmup", type=at_least_0, default=1)
    c.add_argument("--overlap-repeats", type=count, default=3, help="ring-overlap probes (their spread is recorded)")
    c.add_argument("--cpu-ranks-per-host", type=at_least_0, default=0,
                   help="ranks sharing this host's cores (ring overlap: a hop's CPU time is stretched by ranks/cores; "
                        "0: the world for gloo, as in the emulated cluster and --launcher local; 1 for nccl)")
    m = p.add_argument_group("compute (one block forward+backward at this rank's shard of the shape)")
    m.add_argument("--model", default="stdit-tiny")
    m.add_argument("--frames", type=count, default=16)
    m.add_argument("--spatial", type=count, default=64)
    m.add_argument("--batch", type=count, default=1)
    m.add_argument("--sp", type=at_least_0, default=0, help="shard T by this degree for the compute shape (0: --gpus)")
    m.add_argument("--dtype", choices=DTYPES, default="fp32")
    m.add_argument("--compute-iters", type=count, default=5, help="timed compute steps (their spread is recorded)")
    m.add_argument("--gemm-widths", default="",
                   help="comma-separated hidden widths C: forward+backward GEMM FLOP/s of a block's linears at C "
                        "and split C/n for every n dividing the world (tensor-parallel widths; bench/calibrate/gemm.py)")
    m.add_argument("--methods", default="",
                   help="`all` or comma-separated methods whose own per-step work (beyond FLOPs and collectives: "
                        "layout copies, a ring's per-hop merges, waits at each synchronisation) is measured: each "
                        "trains at this shape and each --method-sp; measured step - the profile's prediction of it "
                        "(signed) is [compute] method_overhead_s (bench/calibrate/methods.py)")
    m.add_argument("--method-sp", default="",
                   help="comma-separated SP degrees the --methods train at, each applied only at its degree "
                        "(default: --sp; calibrate the degrees you will predict, e.g. 2,4 on 4 ranks)")
    m.add_argument("--method-iters", type=count, default=5,
                   help="timed steps per method and degree (after 2 warm-up steps)")
    m.add_argument("--method-repeats", type=count, default=1,
                   help="rounds of the --methods runs, their order rotated each round; each method's step is the "
                        "median of its rounds' medians (the differences between methods are a few percent: "
                        "one round's noise can reorder them)")
    m.add_argument("--zero-host", action=argparse.BooleanOptionalAction, default=True,
                   help="with --methods including dsp: also train dsp under DeepSpeed ZeRO 1 and 2 at its first "
                        "--method-sp, beside its ZeRO-0 run, for the engine's host work per parameter tensor "
                        "([engine] zero_host_s_per_param_tensor; skipped, and said, without DeepSpeed)")
    m.add_argument("--depth", type=at_least_0, default=0,
                   help="blocks in the benchmarked model (0: the model's; 1: one block, e.g. STDiT-XL at paper "
                        "shapes on one GPU); FLOP/s is per analytic FLOP of that depth")
    f = p.add_argument_group("from what a cluster already has (no ranks started)")
    f.add_argument("--from-nccl-tests", nargs="+", default=None, metavar="LOG",
                   help="nccl-tests logs (all_reduce/all_gather/reduce_scatter/alltoall/sendrecv_perf, one node or "
                        "several): fit the links of a profile on --base (default: the logs' GPU model's datasheet)")
    f.add_argument("--from-records", default=None, metavar="DIR",
                   help="your own `dspbench run` records on that hardware: compute efficiency and dispatch from the "
                        "baseline's steps, each method's own per-step work from its steps (bench/calibrate/"
                        "from_records.py); other hardware or a dirty tree refused unless --force; with "
                        "--from-nccl-tests, onto the profile made from the logs")
    f.add_argument("--nccl-tests-out", default=None, metavar="DIR",
                   help="also write this calibration's collective measurements in nccl-tests' format, one file per op")
    o = p.add_argument_group("output")
    o.add_argument("--name", default="calibrated", help="profile name")
    o.add_argument("--base", default=None,
                   help="datasheet profile the measured values replace (needed with one rank: no collectives)")
    o.add_argument("--output", default=None, help="profile TOML path (default results/profiles/<name>.toml)")
    o.add_argument("--json", action="store_true", help="print the measurements as JSON")
    o.add_argument("--force", action="store_true",
                   help="write the profile even when its measurements spread too much to predict with "
                        "(bench/calibrate/quality.py MAX_SPREAD); the spread is stored either way")


def cmd_calibrate(args) -> int:
    from dspbench.calibrate.command import cmd_calibrate as run
    return run(args)


def add_emulate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ranks", type=count, default=4, help="ranks, one network namespace each")
    p.add_argument("--rate", default=None,
                   help="tc tbf rate of every link, both directions (default: per setting, comm 50mbit, compute 1gbit; "
                        "holdout: comma-separated rates, default the grid's)")
    p.add_argument("--subnet", default="10.77.0", help="first three octets of the /24 inside the namespaces")
    p.add_argument("--repeats", type=count, default=5,
                   help="rounds per setting: compute re-measured, then every method once (rotated order)")
    p.add_argument("--settings", default="comm,compute", help="comma-separated: comm (comm-bound), compute, smoke (seconds, for tests)")
    p.add_argument("--methods", default=None,
                   help="comma-separated methods (default: settings dsp,ulysses,ring,megatron_sp; holdout all five)")
    p.add_argument("--out", default="results/emulated", help="records, profile and table go here")
    p.add_argument("--protocol", choices=("settings", "holdout"), default="settings",
                   help="settings: calibrate per setting at the methods' shapes (--settings); holdout: calibrate once "
                        "per rate, predict and measure a grid the calibration never touched (bench/calibrate/holdout.py)")
    p.add_argument("--grid", choices=("full", "smoke"), default="full",
                   help="holdout grid: full (2 layouts x 3 shapes x 2 rates) or smoke (seconds, for tests)")
    p.add_argument("--ns-prefix", default="dspb-",
                   help="namespace name prefix (this cluster removes only its own <prefix>br, <prefix>r<N>)")
    p.add_argument("--force", action="store_true", help="pass --force to calibrate (write a profile whose measurements spread too much)")
    p.add_argument("--check-only", action="store_true", help="only test that namespaces can be made, then exit")
    p.add_argument("--no-netns", action="store_true",
                   help="behave as if namespaces could not be made (tests the clean exit)")


def _tc_rate(text: str) -> float:
    """A tc rate's number (200mbit -> 200); 0 for what is not one."""
    import re
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(?:k|m|g)?bit", text)
    return float(m.group(1)) if m else 0.0


def check_emulate_args(args) -> None:
    """Every option's value before anything is built (or found impossible here): exit 2 naming it."""
    from dspbench.calibrate.emulate import SETTINGS
    from dspbench.methods import available
    if args.rate is not None:
        check_items("--rate", args.rate, str.strip, lambda v: _tc_rate(v) > 0,
                    "tc rates > 0 (e.g. 200mbit, 1gbit)", empty_ok=False)
    octets = args.subnet.split(".")
    if len(octets) != 3 or not all(o.isdigit() and int(o) <= 255 for o in octets):
        raise ValueError(f"--subnet {args.subnet!r}: expected three octets 0-255 (e.g. 10.77.0)")
    check_items("--settings", args.settings, str.strip, lambda v: v in SETTINGS, "settings " + ", ".join(SETTINGS),
                empty_ok=False)
    if args.methods is not None:
        check_items("--methods", args.methods, str.strip, lambda v: v in available(), "methods of `dspbench methods`")


def cmd_emulate(args) -> int:
    check_emulate_args(args)
    if args.protocol == "holdout":
        from dspbench.calibrate.holdout import cmd_holdout as run
    else:
        from dspbench.calibrate.emulate import cmd_emulate as run
    return run(args)


COMMANDS = {
    "calibrate": ("collective and compute micro-benchmarks; writes a hardware profile (TOML)",
                  add_calibrate_args, cmd_calibrate),
    "emulate": ("emulated cluster (netns + veth + tc): calibrate, predict and measure every method",
                add_emulate_args, cmd_emulate),
}
