"""Benchmark: the ledger's cost on a training step (goal: <= 2% of step time).

The same parallel training step is timed with and without an (untimed) ledger open, alternating
on/off every iteration so machine noise hits both alike; per iteration the slowest rank counts.
Prints median step times, the overhead and its p10-p90 over paired rounds.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from dspbench.run.measure import quantile
from dspbench.methods import build_dims, get_method
from dspbench.methods.comm import layer as comm
from dspbench.methods.comm.ledger import Ledger
from dspbench.micro.noise import LoadMonitor, noisy_reasons
from dspbench.models import Shape, build_model, get_config
from dspbench.run.ranks import run_ranks
from dspbench.run.steps import DataStream, make_optimizer, make_step
from dspbench.records.config import RunConfig


def _rank(method: str, model: str, frames: int, spatial: int, rounds: int) -> dict:
    world = comm.world_size()
    cfg = RunConfig(method=method, model=model, frames=frames, spatial=spatial, gpus=world, sp=world)
    mcfg, dims = get_config(model), build_dims(world)
    torch.manual_seed(0)
    net = get_method(method).parallelize(build_model(mcfg), dims)
    step = make_step("train", net, dims, make_optimizer(net, "fp32"))
    data = DataStream(mcfg, cfg, 0, 1, torch.device("cpu"), torch.float32)
    for _ in range(2):
        step(data[0])
    times = {"off": [], "on": []}
    for i in range(2 * rounds):
        mode = ("off", "on")[(i + i // 2) % 2]   # off,on,on,off,...: neither always goes first
        comm.barrier()
        t0 = time.perf_counter()
        if mode == "on":
            with Ledger():
                step(data[0])
        else:
            step(data[0])
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        times[mode].append(comm.all_reduce_max_(elapsed, None).item())
    return times


def record_cost_s(n: int = 200_000) -> float:
    """Seconds per ledger event (record + Event construction), measured in a tight loop."""
    from dspbench.methods.comm import ledger
    with Ledger():
        t0 = time.perf_counter()
        for _ in range(n):
            ledger.record("all_to_all", "fwd", 4, 1 << 20, "switch")
        return (time.perf_counter() - t0) / n


def events_per_step(method: str, model: str, frames: int, spatial: int, world: int) -> int:
    from dspbench.methods import Dims
    plan = get_method(method).plan(get_config(model), Shape(1, frames, spatial), Dims(sp=world), "fp32", "train")
    return sum(op.count for _, op in plan)


def run(methods, model="stdit-tiny", frames=16, spatial=64, world=4, rounds=15) -> list[dict]:
    rows = []
    for m in methods:
        with LoadMonitor(world, threads_per_rank=1) as mon:
            t = run_ranks(_rank, world, m, model, frames, spatial, rounds)[0]
        pairs = [on / off - 1 for on, off in zip(t["on"], t["off"])]
        bound = events_per_step(m, model, frames, spatial, world) * record_cost_s()
        rows.append({"method": m, "off_s": statistics.median(t["off"]), "on_s": statistics.median(t["on"]),
                     "bound": bound / statistics.median(t["off"]),
                     "overhead": statistics.median(t["on"]) / statistics.median(t["off"]) - 1,
                     "paired_p10": quantile(pairs, 0.1), "paired_p90": quantile(pairs, 0.9),
                     "conditions": mon.conditions(), "noisy": noisy_reasons(mon.conditions())})
    return rows


def parser() -> argparse.ArgumentParser:
    from dspbench.records.argtypes import count
    p = argparse.ArgumentParser(prog="dspbench bench-ledger", description=__doc__.splitlines()[0])
    p.add_argument("--methods", nargs="+", default=["dsp", "ulysses", "ring", "megatron_sp"])
    p.add_argument("--model", default="stdit-tiny")
    p.add_argument("--frames", type=count, default=16)
    p.add_argument("--spatial", type=count, default=64)
    p.add_argument("--world", type=count, default=4)
    p.add_argument("--rounds", type=count, default=15)
    p.add_argument("--json", action="store_true")
    return p


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(argv)
    from dspbench.methods import available
    from dspbench.models import get_config
    unknown = [m for m in a.methods if m not in available()]
    if unknown:   # argparse's own refusal: exit 2, one line naming the option
        p.error(f"argument --methods: unknown method(s) {', '.join(map(repr, unknown))} (see `dspbench methods`)")
    try:
        get_config(a.model)
    except KeyError as e:
        p.error(f"argument --model: {e.args[0]}")
    rows = run(a.methods, a.model, a.frames, a.spatial, a.world, a.rounds)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"ledger on vs off, {a.model} T={a.frames} S={a.spatial}, world {a.world} (gloo), train step; goal <= 2%")
    print("| method | step off (ms) | step on (ms) | overhead | paired p10..p90 | bound: events x cost/event | run |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        run_state = "NOISY: " + "; ".join(r["noisy"]) if r["noisy"] else "quiet"
        print(f"| {r['method']} | {r['off_s'] * 1e3:.1f} | {r['on_s'] * 1e3:.1f} | {r['overhead'] * 100:+.2f}% | "
              f"{r['paired_p10'] * 100:+.1f}%..{r['paired_p90'] * 100:+.1f}% | {r['bound'] * 100:.4f}% | {run_state} |")
    print("The bound (ledger events per step x measured cost of one record) holds whatever the noise.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
