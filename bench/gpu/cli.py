"""The gpu stage's command, `dspbench replay` (bench/gpu/replay.py); the handler imports torch lazily."""
from __future__ import annotations

import argparse
import sys

from dspbench.facts.args import add_run_args


def add_replay_args(p: argparse.ArgumentParser) -> None:
    add_run_args(p, by_profile=True)
    g = p.add_argument_group("replay")
    g.add_argument("--device", default=None, help="where to run the kernels: cuda (default where present) or cpu")
    from dspbench.records.argtypes import at_least_0, count
    g.add_argument("--reps", type=count, default=5, help="timed calls per kernel (after one warm-up); the median is kept")
    g.add_argument("--limit", type=at_least_0, default=0,
                   help="replay only the N kernels with the most predicted time (0: all)")
    p.set_defaults(out="results/replay")


def cmd_replay(args) -> int:
    import os
    import socket
    from pathlib import Path
    from dspbench.cost.hardware import fill_device_defaults, load_profile, prices_by_kernel
    from dspbench.facts.args import config_from_args
    from dspbench.facts.build import unsupported_reason, validate
    from dspbench.records.io import append_record
    from dspbench.gpu.replay import replay, summary_record
    if not args.hardware:
        raise ValueError("replay needs --hardware PROFILE: the GPU profile whose rate table prices the same kernels")
    if args.reps < 1 or args.limit < 0:
        raise ValueError("--reps must be >= 1 and --limit >= 0")
    profile = load_profile(args.hardware)
    if not prices_by_kernel(profile):
        raise ValueError(f"--hardware {profile.name}: not a GPU datasheet profile with a kernel rate table")
    fill_device_defaults(args, profile)
    cfg = config_from_args(args)
    validate(cfg)   # unknown names and static errors: exit 2 (a method that cannot run this: 3, below)
    if cfg.sp == "auto":
        raise ValueError("--sp auto: replay needs the degree whose rank it runs")
    reason = unsupported_reason(__import__("dataclasses").replace(cfg, launcher="env"))
    if reason:
        print(f"dspbench replay: unsupported: {reason}", file=sys.stderr)
        return 3
    device = args.device or ("cuda" if _cuda() else "cpu")
    path = Path(args.records_file or Path(args.out) / f"replay-{socket.gethostname()}-{os.getpid()}.jsonl")
    bar = (lambda i, n: print(f"\rreplay: kernel {i}/{n}", end="", file=sys.stderr, flush=True))
    recs = replay(cfg, profile, device, args.reps, args.limit, bar)
    print(file=sys.stderr)
    total = sum(1 for r in recs if r["source"] == "predicted")
    from dspbench.cost.model import predict
    summ = summary_record(recs, cfg, profile, _all_kernels(cfg) - total, predict(cfg, profile).comm_total_s)
    summ["device"] = _device_name(device)
    for r in recs + [summ]:
        append_record(path, r)
    ratio = summ["measured_over_predicted"]
    print(f"replay {cfg.method} {cfg.model} T={cfg.frames} S={cfg.spatial} sp={cfg.sp} ({cfg.mode}) on {summ['device']}: "
          f"{summ['kernels_replayed']} kernels, one model call measured {summ['measured_s_per_call']:.4g} s "
          f"(measured-replay) against {summ['predicted_s_per_call']:.4g} s predicted on {profile.name}"
          + (f" (measured / predicted {ratio:.2f})" if ratio else "")
          + f"; collectives not replayed: {summ['comm_s_per_step']:.4g} s per step predicted")
    print(f"{len(recs) + 1} records appended to {path}", file=sys.stderr)
    return 0


def _all_kernels(cfg) -> int:
    from dspbench.cost.rank_trace import rank_kernels
    return len(rank_kernels(cfg).kernels)


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def _device_name(device: str) -> str:
    import torch
    return torch.cuda.get_device_name(0) if device.startswith("cuda") else f"cpu ({torch.get_num_threads()} threads)"


COMMANDS = {
    "replay": ("run on this device the kernels one rank of an N-GPU run executes, timed, beside their prediction",
               add_replay_args, cmd_replay),
}
