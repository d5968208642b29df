"""`dspbench calibrate`: measure collectives and compute, fit the alpha-beta model, write a profile.

Launchers: `local` forks the ranks here with a file:// rendezvous (as bench/launch.py's local
launcher); `env` makes this process RANK of WORLD_SIZE (env://), for the emulated cluster, torchrun
or srun. Rank 0 prints the nccl-tests-style table and writes the profile (TOML) and the raw
measurements (JSON beside it).
Fit per op: t = alpha * steps(op, n) + wire_bytes / busbw, least squares over the sizes.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from .cost_comm import steps
from .hardware import dumps

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s: str) -> int:
    s = s.strip().upper().removesuffix("B")
    return int(float(s[:-1]) * _UNITS[s[-1]]) if s and s[-1] in _UNITS else int(s)


def _init_and_run(opts: dict, rank: int, world: int, init_method: str):
    import torch
    from .calib_bench import calibrate_rank
    from .methods import comm
    torch.set_num_threads(opts["threads"] or max(1, (os.cpu_count() or 1) // world))
    comm.init(opts["backend"], rank, world, init_method=init_method, timeout_s=opts["timeout_s"])
    try:
        return calibrate_rank(opts)
    finally:
        comm.destroy()


def _child(opts, rank, world, init_method, conn):
    from .launch import _die_with_parent
    _die_with_parent()
    try:
        conn.send(("ok", _init_and_run(opts, rank, world, init_method)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"rank {rank}: {type(e).__name__}: {e}\n{traceback.format_exc()}"))
        os._exit(1)


def launch_local(opts: dict) -> dict:
    world, ctx = opts["gpus"], mp.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="dspbench-calib-") as tmp:
        pipes, procs = [], []
        for rank in range(world):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(opts, rank, world, f"file://{tmp}/rdzv", child), daemon=True)
            p.start()
            child.close()
            pipes.append(parent)
            procs.append(p)
        try:
            return _collect(pipes, procs, time.monotonic() + opts["timeout_s"])
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(timeout=10)


def _collect(pipes, procs, deadline) -> dict:
    result, pending = None, set(range(len(procs)))
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"calibration timed out (ranks {sorted(pending)} unfinished)")
        for r in sorted(pending):
            if pipes[r].poll(0.05):
                status, value = pipes[r].recv()
                if status != "ok":
                    raise RuntimeError(value)
                result = value if r == 0 else result
                pending.discard(r)
            elif not procs[r].is_alive() and not pipes[r].poll():
                raise RuntimeError(f"rank {r} exited with code {procs[r].exitcode} without reporting")
    return result


# ---------------------------------------------------------------- fit, table, profile
def fit(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """{op: (alpha_s per step, busbw bytes/s)} by least squares of time on wire bytes per op."""
    out = {}
    for op in sorted({r["op"] for r in rows}):
        pts = [(r["wire_bytes"], r["time_s"]) for r in rows if r["op"] == op]
        k = steps(op, rows[0]["ranks"])
        n = len(pts)
        mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
        var = sum((x - mx) ** 2 for x, _ in pts)
        slope = sum((x - mx) * (y - my) for x, y in pts) / var if var else my / max(mx, 1)
        icpt = my - slope * mx
        if icpt < 0 or slope <= 0:       # no usable latency term: fit through the origin
            icpt, slope = 0.0, sum(y for _, y in pts) / sum(x for x, _ in pts)
        out[op] = (icpt / k, 1.0 / slope)
    return out


def table(rows: list[dict]) -> str:
    head = f"{'op':<15}{'size(B)':>12}{'count':>11}{'time(us)':>12}{'algbw(GB/s)':>13}{'busbw(GB/s)':>13}"
    lines = [head]
    for r in rows:
        lines.append(f"{r['op']:<15}{r['size']:>12}{r['count']:>11}{r['time_s'] * 1e6:>12.1f}"
                     f"{r['algbw_GBps']:>13.4f}{r['busbw_GBps']:>13.4f}")
    return "\n".join(lines)


def profile_dict(name: str, result: dict, gpus_per_node: int, device: str, memory_gb: float) -> dict:
    fitted = fit(result["collectives"])
    comp = result["compute"]
    link = {"alpha_s": min(a for a, _ in fitted.values()), "bw_GBps": max(b for _, b in fitted.values()) / 1e9,
            "efficiency": 1.0, "alpha_s_op": {op: a for op, (a, _) in fitted.items()},
            "busbw_GBps": {op: b / 1e9 for op, (_, b) in fitted.items()}}
    where = (f"measured by dspbench calibrate on {socket.gethostname()}, {result['world']} ranks, "
             f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    return {
        "name": name, "description": f"calibrated: {result['world']} ranks", "kind": "calibrated",
        "device": {"name": device, "memory_gb": memory_gb, "gpus_per_node": gpus_per_node,
                   "usable_memory_fraction": 0.9, "reserved_gb": 0.5},
        "compute": {"flops_per_s": {comp["dtype"]: comp["flops_per_s"]}, "optimizer_Bps": comp["optimizer_Bps"]},
        "link": {"intra": link, "inter": link},
        "overlap": {"ring": False},
        "sources": {"link": f"{where}: least-squares alpha-beta fit per op over sizes "
                            f"{sorted({r['size'] for r in result['collectives']})}",
                    "compute": f"{where}: {comp['model']} forward+backward at shard {comp['shape']} "
                               f"{comp['dtype']}, all ranks at once (slowest rank)",
                    "device.memory_gb": "host memory / ranks (os.sysconf)",
                    "overlap.ring": "assumption: gloo's P2P progress competes with compute for the CPU cores"},
    }


def _memory_gb(world: int) -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9 / max(world, 1)


def cmd_calibrate(args) -> int:
    opts = {k: getattr(args, k) for k in ("gpus", "backend", "iters", "warmup", "model", "frames", "spatial",
                                         "batch", "sp", "dtype", "compute_iters", "timeout_s", "threads")}
    opts["sizes"] = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    opts["ops"] = [o.strip() for o in args.ops.split(",") if o.strip()]
    if args.launcher == "local":
        result = launch_local(opts)
        gpn = args.gpus_per_node or args.gpus
    else:
        rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
        if world != args.gpus:
            raise ValueError(f"--gpus {args.gpus} but WORLD_SIZE={world}")
        result = _init_and_run(opts, rank, world, "env://")
        gpn = args.gpus_per_node or 1
        if rank != 0:
            return 0
    from .environ import cpu_name
    device = "cpu: " + cpu_name() if args.backend == "gloo" else "cuda"
    prof = profile_dict(args.name, result, gpn, device, _memory_gb(args.gpus if args.launcher == "local" else 1))
    out = Path(args.output or f"results/profiles/{args.name}.toml")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(prof, "Written by `dspbench calibrate`; raw measurements in the .json beside it."))
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps({**result, "profile": str(out)}, sort_keys=True))
    else:
        print(table(result["collectives"]))
        c = result["compute"]
        print(f"compute: {c['model']} shard {c['shape']} {c['dtype']}: fwd+bwd {c['fwd_bwd_s'] * 1e3:.1f} ms, "
              f"{c['flops_per_s'] / 1e9:.2f} GFLOP/s per rank; AdamW {c['optimizer_s'] * 1e3:.1f} ms")
        print(f"profile written to {out}")
    return 0
