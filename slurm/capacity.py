"""Does the partition hold each job of a plan? Asked of SLURM itself before anything is submitted.

sbatch refuses an allocation larger than the partition ("More processors requested than
permitted", "Requested node configuration is not available") only when it is called, and submitit
raises that deep inside a batch, after earlier arrays of the same sweep were queued. Here each
allocation shape of the plan (nodes x tasks per node x CPUs per task, GPUs per node when the
profile requests them) is held against what `sinfo` reports for the partition's usable nodes and
the partition's own limits (`scontrol show partition`: MaxNodes, MaxCPUsPerNode). A shape that does
not fit names its configurations and the limit; `dspbench sweep` exits 2 and submits nothing, under
`--dry-run` too.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from dspbench.slurm.spec import ClusterProfile, SpecError

USABLE_STATES = ("idle", "mixed", "allocated", "completing", "reserved", "planned")


class CapacityError(SpecError):
    """A configuration needs more than the partition has (a ValueError: `dspbench` exits 2)."""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    cpus: int
    gpus: int
    state: str


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: list[NodeInfo]
    max_nodes: int | None           # None: UNLIMITED
    max_cpus_per_node: int | None

    def usable(self) -> list[NodeInfo]:
        return [n for n in self.nodes if n.state.rstrip("*~#!%$@^-+").lower() in USABLE_STATES]


def gres_gpus(gres: str) -> int:
    """GPUs in a sinfo %G field: 'gpu:8', 'gpu:h100:8(S:0-1)', '(null)', several comma-separated."""
    total = 0
    for item in gres.split(","):
        m = re.match(r"gpu(?::[^:(]+)?:(\d+)", item.strip())
        total += int(m.group(1)) if m else 0
    return total


def parse_sinfo(text: str) -> list[NodeInfo]:
    """Lines of `sinfo -h -N -o '%N|%c|%G|%T'` (one per node and partition)."""
    nodes = {}
    for line in text.splitlines():
        if line.strip():
            name, cpus, gres, state = line.split("|")
            nodes[name] = NodeInfo(name, int(cpus.rstrip("+")), gres_gpus(gres), state.strip())
    return list(nodes.values())


def parse_scontrol_limit(text: str, key: str) -> int | None:
    m = re.search(rf"\b{key}=(\S+)", text)
    return int(m.group(1)) if m and m.group(1).isdigit() else None


def query_partition(name: str, run=subprocess.run) -> Partition:
    """The partition as SLURM reports it ("" = the default partition)."""
    part = name or _default_partition(run)
    sinfo = run(["sinfo", "-h", "-N", "-p", part, "-o", "%N|%c|%G|%T"], capture_output=True, text=True, timeout=30)
    if sinfo.returncode != 0:
        raise CapacityError(f"sinfo failed for partition {part!r}: {sinfo.stderr.strip()}")
    shown = run(["scontrol", "show", "partition", part], capture_output=True, text=True, timeout=30).stdout
    return Partition(part, parse_sinfo(sinfo.stdout), parse_scontrol_limit(shown, "MaxNodes"),
                     parse_scontrol_limit(shown, "MaxCPUsPerNode"))


def _default_partition(run) -> str:
    out = run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30).stdout.split()
    default = [p for p in out if p.endswith("*")]
    if not default:
        raise CapacityError("the cluster has no default partition: set `partition` in the cluster profile")
    return default[0].rstrip("*")


def shape_misfit(nodes: int, tasks_per_node: int, profile: ClusterProfile, part: Partition) -> str | None:
    """Why an allocation of nodes x tasks_per_node does not fit the partition, or None."""
    cpus = tasks_per_node * profile.cpus_per_task
    gpus = tasks_per_node if profile.request_gpus else 0
    usable = part.usable()
    if part.max_nodes is not None and nodes > part.max_nodes:
        return f"{nodes} nodes > the partition's MaxNodes={part.max_nodes}"
    if part.max_cpus_per_node is not None and cpus > part.max_cpus_per_node:
        return f"{cpus} CPUs per node > the partition's MaxCPUsPerNode={part.max_cpus_per_node}"
    big = [n for n in usable if n.cpus >= cpus and n.gpus >= gpus]
    if len(big) >= nodes:
        return None
    most_cpus = max((n.cpus for n in usable), default=0)
    most_gpus = max((n.gpus for n in usable), default=0)
    need = f"{nodes} node(s) with {tasks_per_node} tasks x {profile.cpus_per_task} CPUs" + (
        f" and {gpus} GPUs" if gpus else "")
    return (f"needs {need}; partition {part.name!r} has {len(usable)} usable node(s) of at most "
            f"{most_cpus} CPUs" + (f" and {most_gpus} GPUs" if gpus else "") + f", {len(big)} big enough")


def check_plan_fits(jobs, profile: ClusterProfile, describe, run=subprocess.run) -> Partition | None:
    """Raise CapacityError naming every configuration whose job shape the partition cannot hold.
    Returns the partition checked, or None where no SLURM client is installed (nothing to ask)."""
    if shutil.which("sinfo") is None and run is subprocess.run:
        return None
    part = query_partition(profile.partition, run)
    problems = []
    for job in jobs:
        why = shape_misfit(job.shape.nodes, job.shape.tasks_per_node, profile, part)
        if why:
            problems += [f"  {describe(c)}: {why}" for c in job.configs]
    if problems:
        raise CapacityError(f"{len(problems)} configuration(s) cannot run on partition {part.name!r}; "
                            f"nothing was submitted:\n" + "\n".join(problems))
    return part
