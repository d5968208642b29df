"""Rank-side calibration: collective micro-benchmarks (nccl-tests style) and a compute benchmark.

Every rank runs `calibrate_rank` inside an initialised world; rank 0 returns the measurements.
Per size: warm-up, then `iters` samples, each a barrier and k back-to-back calls (k makes a
sample last about 20 ms: bench/calibrate/timing.py loop_samples, as nccl-tests times a loop), the
slowest rank's time / k (an all-reduce of max); the profile takes the median sample. Sizes are nccl-tests sizes (methods/comm/ledger.py):
the all-to-all / all-reduce input, the all-gather output, the reduce-scatter input, the bytes a
p2p hop sends. algbw = size / t, busbw = wire bytes / t = algbw * BUS_FACTOR(n).
"""
from __future__ import annotations

import os
import resource
import statistics
import time

import torch

from dspbench.methods.comm import async_ops as comm_async, layer as comm, raw as comm_raw
from dspbench.calibrate.timing import loop_samples, samples, timed
from dspbench.methods.comm.ledger import BUS_FACTOR, wire_bytes


def _collective(op: str, size: int, n: int, device, group=None):
    """A zero-argument callable running one `op` of nccl-tests size `size` bytes (fp32 elements)
    in `group` (None: the world) of n ranks."""
    el = max(n, size // 4 // n * n)       # divisible by n, so every rank's chunk is equal
    buf = lambda k: torch.ones(k, dtype=torch.float32, device=device)
    if op == "all_to_all":
        send, recv = buf(el), buf(el)
        return el, lambda: comm_raw.raw_all_to_all_single_(recv, send, group)
    if op == "all_gather":
        out, send = buf(el), buf(el // n)
        return el, lambda: comm_raw.raw_all_gather_(out, send, group)
    if op == "reduce_scatter":
        send, out = buf(el), buf(el // n)
        return el, lambda: comm_raw.raw_reduce_scatter_(out, send, group)
    if op == "all_reduce":
        b = buf(el)
        return el, lambda: comm_raw.raw_all_reduce_(b, group)
    if op == "send_recv":
        ring, t = comm_async.RingExchange(group), buf(el)
        return el, lambda: ring.start([t], "calibrate").wait()
    raise ValueError(f"unknown op {op!r}")


def bench_collectives(ops, sizes, iters: int, warmup: int, device) -> list[dict]:
    n = comm.world_size()
    rows = []
    for op in ops:
        for size in sizes:
            el, fn = _collective(op, size, n, device)
            payload = el * 4
            times, k = loop_samples(fn, iters, warmup)
            t = statistics.median(times)
            wire = wire_bytes(op, payload, n)
            rows.append({"op": op, "size": payload, "count": el, "ranks": n, "time_s": t, "times_s": times,
                         "calls_per_sample": k,
                         "algbw_GBps": payload / t / 1e9, "busbw_GBps": payload * BUS_FACTOR[op](n) / t / 1e9,
                         "wire_bytes": wire})
    return rows


def tier_groups(world: int, per_node: int) -> dict[str, list[list[int]]]:
    """The groups each tier is measured on, ranks node-major (per_node consecutive ranks per node):
    intra, every node's ranks (all nodes at once, as SP groups inside nodes run); inter, one rank
    per node (one flow per node link); span, the whole world across the nodes. A tier the world
    lacks (one node, or one rank per node) is left out."""
    nodes = world // per_node
    tiers = {}
    if per_node > 1:
        tiers["intra"] = [list(range(k * per_node, (k + 1) * per_node)) for k in range(nodes)]
    if nodes > 1:
        tiers["inter"] = [[k * per_node for k in range(nodes)]]
    if nodes > 1 and per_node > 1:
        tiers["span"] = [list(range(world))]
    return tiers


def bench_tiers(ops, sizes, iters: int, warmup: int, device, per_node: int) -> list[dict]:
    """bench_collectives per tier (tier_groups): each row says its tier, group size and ranks per
    node. Ranks outside a tier's groups only join the barriers and the timing reduction."""
    world, me = comm.world_size(), comm.world_rank()
    if per_node < 1 or world % per_node:
        raise ValueError(f"--gpus-per-node {per_node} does not divide the world of {world} ranks")
    rows = []
    for tier, groups in tier_groups(world, per_node).items():
        handles = [comm.new_group(g) if len(g) < world else None for g in groups]   # collective: all ranks
        mine = next(((g, h) for g, h in zip(groups, handles) if me in g), None)
        n = len(groups[0])
        for op in ops:
            for size in sizes:
                el, fn = _collective(op, size, n, device, mine[1]) if mine else (max(n, size // 4 // n * n), None)
                times, k = loop_samples(fn or (lambda: None), iters, warmup)
                t = statistics.median(times)
                payload = el * 4
                rows.append({"tier": tier, "op": op, "size": payload, "count": el, "ranks": n, "calls_per_sample": k,
                             "per_node": min(n, per_node) if tier != "inter" else 1, "time_s": t, "times_s": times,
                             "algbw_GBps": payload / t / 1e9, "busbw_GBps": payload * BUS_FACTOR[op](n) / t / 1e9,
                             "wire_bytes": wire_bytes(op, payload, n)})
    return rows


def bench_overlap(size: int, iters: int, device, ranks_per_host: int = 1, group=None) -> dict:
    """How much of a p2p ring hop hides under computation started after it (as ring attention does).

    Times the hop alone, a matmul chain of about the same duration alone, and the hop started
    before the chain and waited for after it. fraction = (comm + compute - both) / min(comm,
    compute), clamped to [0, 1]: 1 = the shorter one is fully hidden, 0 = they serialise.
    `group`: the ring this rank hops in (None: the world); every rank of the world calls this at
    once, each in its own group (the chain's length and the CPU share are agreed world-wide)."""
    n = comm.world_size()
    el = max(n, size // 4)
    ring, t = comm_async.RingExchange(group), torch.ones(el, dtype=torch.float32, device=device)
    a = torch.randn(256, 256, device=device)
    hop = lambda: ring.start([t], "calibrate").wait()
    comm_s = timed(hop, iters, 1)
    k = [1]

    def chain():
        for _ in range(k[0]):
            a @ a

    for _ in range(2):                                   # size the chain to the hop, twice (timer warm-up)
        est = torch.tensor([max(1, round(k[0] * comm_s / max(timed(chain, 3, 1), 1e-9)))])
        k[0] = int(comm.all_reduce_max_(est, None)[0])   # the same chain length on every rank

    def both():
        pending = ring.start([t], "calibrate")
        chain()
        pending.wait()

    comp_s = timed(chain, iters, 1)
    both_s = timed(both, iters, 1)
    frac = (comm_s + comp_s - both_s) / min(comm_s, comp_s)
    cpu = hop_cpu_fraction(hop, iters, ranks_per_host)
    return {"size": el * 4, "comm_s": comm_s, "compute_s": comp_s, "both_s": both_s,
            "probe_fraction": min(1.0, max(0.0, frac)), "hop_cpu_fraction": cpu,
            "fraction": max(0.0, 1.0 - cpu)}


def ring_overlap(opts: dict, device) -> dict:
    """The ring-overlap probe, repeated, on the world's ring; with --tiers on a world of several
    ranks per node, also on the rings inside each node (every node at once: `by_tier['intra']`).

    Why per tier: a hop inside a node goes over loopback, so its whole time is CPU work (copies,
    the TCP stack) that cannot hide under attention holding the cores; a hop across nodes mostly
    waits for the wire, which can. One world-ring fraction priced intra-node rings (SP inside a
    node, the common placement) as hiding what they cannot (bench/cost/model.py prices each ring
    by the tier its group is on)."""
    per_host = opts.get("cpu_ranks_per_host") or (comm.world_size() if opts["backend"] == "gloo" else 1)
    size, repeats = max(opts["sizes"]), max(1, opts.get("overlap_repeats", 3))
    out = _overlap_summary([bench_overlap(size, opts["iters"], device, per_host) for _ in range(repeats)])
    intra = tier_groups(comm.world_size(), opts["gpus_per_node"]).get("intra") if opts.get("tiers") else None
    if intra and len(intra) * len(intra[0]) == comm.world_size() and len(intra[0]) < comm.world_size():
        handles = [comm.new_group(g) for g in intra]                 # collective: every rank makes every group
        mine = handles[comm.world_rank() // len(intra[0])]
        out["by_tier"] = {"intra": _overlap_summary(
            [bench_overlap(size, opts["iters"], device, per_host, mine) for _ in range(repeats)])}
    return out


def _overlap_summary(probes: list[dict]) -> dict:
    """The first probe's timings, the median CPU-share fraction (what the profile uses) and every repeat's."""
    fr = [p["fraction"] for p in probes]
    return {**probes[0], "fraction": statistics.median(fr), "fractions": fr,
            "probe_fractions": [p["probe_fraction"] for p in probes]}


def hop_cpu_fraction(hop, iters: int, ranks_per_host: int = 1) -> float:
    """The share of a hop's wall time that needs a CPU (first principles for the ring's overlap).

    A hop's time is CPU work (copies, the TCP stack: this process's user + system time, every
    thread) plus waiting for the wire, when the cores are free for the attention the ring hides
    under it. The CPU part cannot hide: the compute holds the cores it needs. On a host whose
    ranks outnumber its cores (ranks_per_host: the emulated cluster), each rank's CPU time is
    stretched by ranks / cores. overlap = 1 - this, per host, per message size."""
    comm.barrier()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(iters):
        hop()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    stretch = max(1.0, ranks_per_host / (os.cpu_count() or 1))
    local = torch.tensor([min(1.0, cpu * stretch / max(t1 - t0, 1e-9))], dtype=torch.float64)
    return float(comm.all_reduce_max_(local, None)[0])     # the busiest rank sets the ring's pace


def bench_compute(model_name: str, batch: int, frames: int, spatial: int, dtype: str, iters: int, device,
                  depth: int = 0) -> dict:
    """Forward+backward of the model on this rank's shard (B, T/sp, S), all ranks at once, and an
    AdamW step: achievable FLOP/s (analytic FLOPs / time) and optimizer bytes/s."""
    from dspbench.cost.model import OPT_BYTES
    from dspbench.models import Shape, build_model, get_config, make_inputs
    from dspbench.models.params import flops_per_sample, param_count
    from dspbench.run.oracle import mse
    from dspbench.models.dtypes import TORCH_DTYPES
    from dspbench.run.steps import make_optimizer
    cfg = get_config(model_name)
    cfg = cfg.with_(depth=depth) if depth else cfg
    shape = Shape(batch, frames, spatial)
    torch.manual_seed(0)
    model = build_model(cfg).to(device=device, dtype=TORCH_DTYPES[dtype])
    x, t, y, target = make_inputs(cfg, shape, dtype=TORCH_DTYPES[dtype], device=device)
    opt = make_optimizer(model, dtype)

    def fwd_bwd():
        opt.zero_grad()
        mse(model(x, t, y), target).backward()

    times = samples(fwd_bwd, iters, 1)
    step_s = statistics.median(times)
    opt_s = timed(opt.step, iters, 1)
    flops = 3 * flops_per_sample(cfg, Shape(1, frames, spatial)) * batch
    params = param_count(cfg)
    return {"model": model_name, "modules": sum(1 for _ in model.modules()), "depth": cfg.depth, "shape": [batch, frames, spatial], "dtype": dtype, "fwd_bwd_s": step_s,
            "fwd_bwd_times_s": times,
            "flops": flops, "flops_per_s": flops / step_s, "optimizer_s": opt_s, "params": params,
            "optimizer_Bps": params * OPT_BYTES[dtype] / opt_s}


def calibrate_rank(opts: dict) -> dict | None:
    """Every rank: collectives (with the ring-overlap probe, repeated, when p2p is among them),
    compute, GEMM rates by width, then a quick re-check of compute (did the machine change under
    us?); rank 0 returns {'collectives', 'overlap', 'compute', 'gemm', 'world'}."""
    from dspbench.calibrate.gemm import bench_gemm
    device = torch.device("cpu") if opts["backend"] == "gloo" else torch.device("cuda", torch.cuda.current_device())
    ops = opts["ops"] if comm.world_size() > 1 else []      # one rank: nothing to measure between ranks
    if opts.get("tiers"):
        rows = bench_tiers(ops, opts["sizes"], opts["iters"], opts["warmup"], device, opts["gpus_per_node"])
    else:
        rows = bench_collectives(ops, opts["sizes"], opts["iters"], opts["warmup"], device)
    overlap = None
    if "send_recv" in ops and opts["sizes"]:
        overlap = ring_overlap(opts, device)
    sp = opts["sp"] or comm.world_size()
    shard = (opts["model"], opts["batch"], max(1, opts["frames"] // sp), opts["spatial"], opts["dtype"])
    compute = bench_compute(*shard, opts["compute_iters"], device, opts.get("depth", 0))
    smaller = _smaller(shard)          # a second shape: FLOP rate and per-module overhead apart
    if smaller:
        compute["small"] = bench_compute(*smaller, opts["compute_iters"], device, opts.get("depth", 0))
    gemm = bench_gemm(opts.get("gemm_widths", ()), comm.world_size(), opts["dtype"], device) if ops else {}
    # a CPU's per-kernel costs, what the cost model prices every method's traced kernels with (calibrate/kernels.py)
    from dspbench.calibrate.kernels import bench_kernels
    # (not in a compute-only re-measure, --ops '': the emulated protocol's per-round compute keeps its terms)
    kernels = (bench_kernels(opts["model"], opts["dtype"], device, opts["compute_iters"])
               if device.type == "cpu" and opts["ops"] else None)
    # the reference code's all-to-all beside ours: what `predict --a2a list` adds (calibrate/a2a_style.py)
    from dspbench.calibrate.a2a_style import bench_a2a_styles
    a2a_styles = (bench_a2a_styles(opts["sizes"], opts["iters"], opts["warmup"], device)
                  if "all_to_all" in ops and opts["sizes"] else None)
    from dspbench.calibrate.methods import bench_methods
    methods = bench_methods(opts.get("method_runs", {}), opts) if ops else {}
    recheck = bench_compute(*shard, 2, device, opts.get("depth", 0))["fwd_bwd_s"]
    compute["recheck_s"] = recheck
    facts = comm.all_gather_object({"compute": compute, "rank": _rank_facts(device)})
    if comm.world_rank() != 0:
        return None
    slowest = min(facts, key=lambda f: f["compute"]["flops_per_s"])["compute"]
    return {"collectives": rows, "overlap": overlap, "compute": slowest, "gemm": gemm, "world": comm.world_size(),
            "methods": methods, "a2a_styles": a2a_styles, "kernels": kernels, "ranks": [f["rank"] for f in facts]}


def _rank_facts(device) -> dict:
    """Where this rank ran, as nccl-tests' devices block lists it (calibrate --nccl-tests-out)."""
    import socket
    from dspbench.records.environ import device_name
    local = (device.index or 0) if device.type == "cuda" else 0
    return {"host": socket.gethostname(), "pid": os.getpid(), "local": local, "bus": f"{device.type}:{local}",
            "device": device_name(device)}


def _smaller(shard: tuple):
    """The compute shard with a third of the frames (or a quarter of the tokens per frame), or None."""
    model, batch, frames, spatial, dtype = shard
    if frames >= 2:
        return model, batch, max(1, frames // 3), spatial, dtype
    return (model, batch, frames, spatial // 4, dtype) if spatial >= 16 else None
