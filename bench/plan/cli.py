"""`dspbench plan`: which method, SP degree, DP, checkpointing and ZeRO stage for this model on this
cluster, ranked by the cost model with intervals. Its handler imports the plan lazily."""
from __future__ import annotations

import argparse


from dspbench.facts.args import add_field, add_model_args
from dspbench.plan.measuring import sweep_fields
from dspbench.records.argtypes import at_least_0, count
from dspbench.records.config import DTYPES, MODES, RunConfig


def add_plan_args(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    g = p.add_argument_group("workload (the model flags of `run`)")
    add_model_args(g)
    g.add_argument("--mode", choices=MODES, default=d.mode,
                   help="train: samples/s; sample (and infer): seconds per video")
    g.add_argument("--gpus", type=count, required=True, help="GPUs (ranks) of the cluster to plan for")
    g.add_argument("--batch-per-gpu", type=count, default=d.batch, dest="batch",
                   help="samples per data-parallel replica per step (RunConfig.batch; a replica is SP GPUs)")
    g.add_argument("--dtype", choices=DTYPES, default=None,
                   help="model dtype (None: bf16 on a GPU profile, else fp32)")
    g.add_argument("--backend", choices=("gloo", "nccl"), default=None,
                   help="None: nccl on a GPU profile, else gloo")
    g.add_argument("--sample-steps", type=count, default=None,
                   help=f"model calls per video (sample mode; default: a preset's [sampling] steps, else {d.sample_steps})")
    g.add_argument("--cfg", action=argparse.BooleanOptionalAction, default=None,
                   help="sample mode: classifier-free guidance (the workload, not a setting; default: a preset's "
                   "[sampling] guidance, cfg on unless distilled; other models off)")
    g.add_argument("--shard", choices=("T", "S", "H", "W"), default=d.shard,
                   help="the sequence dim embedded methods shard first (the model's other dims are tried too)")
    g.add_argument("--mem-budget-mib", type=at_least_0, default=d.mem_budget_mib,
                   help="emulated memory per rank, MiB (CPU clusters; 0: the profile's device memory)")
    h = p.add_argument_group("plan")
    h.add_argument("--hardware", required=True,
                   help="hardware profile (bench/cost/profiles/*.toml or a calibrated .toml)")
    h.add_argument("--methods", default="all", help="all, or a comma-separated list of methods")
    h.add_argument("--stack", default=None, metavar="PKG,...",
                   help="the cluster's software beyond torch (deepspeed, flash-attn; none): which methods and ZeRO "
                   "stages it can run; replaces the profile's [stack] (nothing installed here is looked at)")
    h.add_argument("--buckets", default=None, metavar="FILE.csv",
                   help="plan a weighted shape mix: a CSV resolution,frames,weight (a sweep's bucket_file); each "
                   "candidate ranked on its weighted mean step over the buckets (replaces --frames/--spatial)")
    h.add_argument("--top", type=count, default=10,
                   help="rows shown, and measured by --emit-sweep (with each method's best)")
    h.add_argument("--what-if", action="append", default=[], metavar="KEY=VALUE",
                   help="change a profile field, e.g. link.inter=25GB/s, compute.efficiency=0.5 (repeatable)")
    h.add_argument("--what-if-grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="plan at each value (repeatable: the product) and print the crossover table")
    o = p.add_argument_group("output (written only when the plan succeeds)")
    o.add_argument("--json", action="store_true", help="print the plan as one JSON document on stdout")
    o.add_argument("--explain", action="store_true",
                   help="under each row shown: what its step counted, kernels per kind and collectives per op "
                        "(calls and ms; every row's `mechanism_costs` in --json)")
    o.add_argument("--emit-sweep", default=None, metavar="FILE.toml",
                   help="write a sweep spec measuring the top K and each method's best")
    o.add_argument("--cluster", default="local", help="the emitted sweep's cluster profile (slurm/clusters/)")
    o.add_argument("--repeats", type=count, default=1,
                   help="the emitted sweep's [sweep] repeats: each configuration measured N times (plan.check "
                        "takes the median), so noise does not decide the measured order")
    for f in sweep_fields():           # how the emitted sweep measures: more timed steps, less noise
        add_field(o, f)
    o.add_argument("--report", default=None, metavar="DIR",
                   help="write plan.json and render the report (table, frontier and crossover figures) in DIR")


def cmd_plan(args) -> int:
    from dspbench.plan.command import run
    return run(args)


COMMANDS = {
    "plan": ("rank every method x SP x DP x checkpointing x ZeRO for a model on a cluster (cost model, with intervals)",
             add_plan_args, cmd_plan),
}
