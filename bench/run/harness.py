"""`run_config(cfg)`: one configuration end to end, ending in exactly one appended record.

Steps: validate -> method constraints (unsupported: no ranks started) -> launch the ranks ->
derive throughput/MFU -> record (appended atomically, printed as a <RESULT> line by the CLI).
"""
from __future__ import annotations

import os
import sys

from dspbench.cost.autosp import resolved
from dspbench.cost.hardware import device_peak
from dspbench.facts.build import Outcome, build_record, unsupported_reason, validate
from dspbench.records.config import RunConfig
from dspbench.records.io import append_record
from dspbench.run.launch import launch_env, launch_local


def run_config(cfg: RunConfig, records_file: str | os.PathLike | None = None, progress: bool = False,
               hardware: str | None = None, outcome_prefix: str | None = None) -> dict:
    """Run one configuration with its launcher; append the record (rank 0 only) and return it.

    `sp="auto"` is resolved first from the `hardware` profile (bench/cost/autosp.py: the minimum SP
    degree that fits memory); unresolvable, the run is `unsupported` with the reason.
    """
    validate(cfg)
    cfg, reason = resolved(cfg, hardware)
    reason = reason or unsupported_reason(cfg)
    if reason:
        outcome = Outcome("unsupported", reason)
    elif cfg.launcher == "local":
        outcome = launch_local(cfg, progress)
    else:
        outcome = launch_env(cfg, progress, outcome_prefix)
        if os.environ.get("RANK", "0") != "0":   # one record per run: rank 0 writes it
            if outcome.status != "ok":
                print(f"dspbench run: {outcome.status}: {outcome.error}", file=sys.stderr)
            return {}
    rec = build_record(cfg, over_budget(cfg, with_peak(cfg, outcome)))
    if records_file is not None:
        append_record(records_file, rec)
    return rec


def with_peak(cfg: RunConfig, outcome: Outcome) -> Outcome:
    """The measured device's dense peak for the run's dtype, from the device table (bench/cost/
    devices.toml), for the record's MFU and HFU."""
    if outcome.metrics and "device_name" in outcome.metrics:
        outcome.metrics["device_peak_flops"] = device_peak(outcome.metrics["device_name"], cfg.dtype)
    return outcome


def over_budget(cfg: RunConfig, outcome: Outcome) -> Outcome:
    """An emulated memory budget (`--mem-budget-mib`) is enforced on what the run measured: a run
    whose ranks added more than the budget (peak minus the process before the model) is `oom`, with
    its measurements kept, as a device of that size would have failed it."""
    used = (outcome.metrics or {}).get("mem_run_bytes")
    if outcome.status != "ok" or not cfg.mem_budget_mib or used is None or used <= cfg.mem_budget_mib * 2**20:
        return outcome
    return Outcome("oom", f"measured {used / 2**20:.1f} MiB added per rank > the emulated budget of "
                          f"{cfg.mem_budget_mib} MiB", outcome.metrics)
