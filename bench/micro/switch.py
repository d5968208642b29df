"""Micro-benchmark of DSP's switch: (B, T/N, S, C) -> (B, T, S/N, C) by one all-to-all.

Four variants, timed on every rank of a gloo group this module spawns itself:
  a  the DSP switch as implemented: comm.all_to_all(x, scatter_dim=2, gather_dim=1) (no_grad);
  b  the reference switch (VideoSys/OpenDiT): tensor_split, list all_to_all, torch.cat;
  c  a raw all_to_all_single on preallocated contiguous buffers of the same bytes (the wire);
  d  one contiguous copy of the local shard in the permuted order (the one copy DSP needs).
Goals: a/b <= 0.7 (the switch beats the reference) and a/(c+d) <= 1.15 (it costs little more
than the wire plus one copy).

Timing: each op is timed alone, `barrier; t0 = perf_counter(); op; t = perf_counter() - t0`, on
every rank. There is no trailing barrier (its latency would be added to every variant and pull
the ratios toward 1); instead the per-iteration times are max-reduced over ranks after each round,
outside the timed region, so an iteration costs what its slowest rank paid: an all-to-all cannot
finish on any rank before the last rank has entered it, and the leading barrier starts all ranks
together. Each iteration runs the four variants in an order rotated per iteration, and each round
visits every payload size, so machine noise hits all variants and sizes alike. A round's value is
the median over its iterations; the table gives the median over rounds with the p10-p90 spread,
and the ratios are formed per round (paired) before taking their median and spread.

    python -m dspbench.micro.switch --world 4 --sizes-mib 4 16 64 --json results/switch.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch  # imported before the ranks fork, so no rank pays for it

from dspbench.methods.comm import layer as comm, raw as comm_raw
from dspbench.micro.noise import LoadMonitor, noisy_reasons, relative_spread
from dspbench.run.ranks import run_ranks

VARIANTS = ("a", "b", "c", "d")
LABELS = {
    "a": "DSP switch: comm.all_to_all(x, 2, 1) under no_grad",
    "b": "reference: tensor_split + list all_to_all + torch.cat (VideoSys)",
    "c": "raw all_to_all_single on preallocated contiguous buffers, same bytes",
    "d": "one contiguous copy of the local shard in the permuted order",
}
GOALS = {"a/b": 0.7, "a/(c+d)": 1.15}
TAG = "switch_bench"  # ledger tag of variant a (nothing records unless a Ledger is open; none is here)
S_DIM, T_DIM = 2, 1


# ---------------------------------------------------------------- shapes and statistics
def local_shape(payload_bytes: float, world: int, frames: int, hidden: int, batch: int = 1) -> tuple:
    """(B, T/N, S, C) fp32 of about `payload_bytes`, with S the nearest positive multiple of N."""
    if frames % world:
        raise ValueError(f"frames {frames} not divisible by world {world}")
    t_local = frames // world
    per_s = batch * t_local * hidden * 4
    s = max(world, round(payload_bytes / per_s / world) * world)
    return (batch, t_local, s, hidden)


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _summary(xs: list[float]) -> dict:
    return {"median": _quantile(xs, 0.5), "p10": _quantile(xs, 0.1), "p90": _quantile(xs, 0.9), "samples": list(xs)}


# ---------------------------------------------------------------- rank side
def _ops(x, group, bufs: dict):
    n = comm.size(group)

    def a():
        with torch.no_grad():
            return comm.all_to_all(x, S_DIM, T_DIM, group, TAG)

    def b():
        return comm_raw.ref_all_to_all(x, S_DIM, T_DIM, group)

    def c():
        return comm_raw.raw_all_to_all_single_(bufs["recv"], bufs["send"], group)

    def d():
        return x.unflatten(S_DIM, (n, x.shape[S_DIM] // n)).movedim(S_DIM, 0).contiguous()

    return {"a": a, "b": b, "c": c, "d": d}


def verify(x, group) -> dict:
    """Run (a) and (b) once on `x`; every rank must get the same (B, T, S/N, C) tensor from both."""
    n = comm.size(group)
    with torch.no_grad():
        out_a = comm.all_to_all(x, S_DIM, T_DIM, group, TAG)
    out_b = comm_raw.ref_all_to_all(x, S_DIM, T_DIM, group)
    b_, t_, s_, c_ = x.shape
    want = (b_, t_ * n, s_ // n, c_)
    ok = tuple(out_a.shape) == want and tuple(out_b.shape) == want and torch.equal(out_a, out_b)
    # The slice of the rank's own shard must land at its own T block (a check of b too).
    r = comm.rank(group)
    own = x[:, :, r * (s_ // n):(r + 1) * (s_ // n)]
    ok = ok and torch.equal(out_a[:, r * t_:(r + 1) * t_], own)
    bad = comm.all_reduce_max_(torch.tensor([0.0 if ok else 1.0]), group)
    return {"a_equals_b": bool(bad.item() == 0.0), "out_shape": list(out_a.shape),
            "a_out_is_view": out_a._base is not None, "a_out_contiguous": out_a.is_contiguous()}


def _rank_bench(cfg: dict) -> dict:
    group = None
    n = comm.size(group)
    rank = comm.rank(group)
    gen = torch.Generator().manual_seed(1234 + rank)
    cases = []
    for mib in cfg["sizes_mib"]:
        shape = local_shape(mib * 2**20, n, cfg["frames"], cfg["hidden"], cfg["batch"])
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        bufs = {"send": x.flatten().clone(), "recv": torch.zeros(x.numel(), dtype=x.dtype)}
        cases.append({"mib": mib, "shape": shape, "x": x, "ops": _ops(x, group, bufs),
                      "verify": verify(x, group), "rounds": {v: [] for v in VARIANTS}})
    for case in cases:  # warm-up: first-touch of buffers, gloo connections, allocator
        for _ in range(cfg["warmup"]):
            for v in VARIANTS:
                comm.barrier(group)
                out = case["ops"][v]()
                del out
    step = 0
    for _ in range(cfg["repeats"]):
        for case in cases:
            times = torch.zeros(cfg["iters"], len(VARIANTS), dtype=torch.float64)
            for i in range(cfg["iters"]):
                k = step % len(VARIANTS)
                step += 1
                for j in list(range(k, len(VARIANTS))) + list(range(k)):
                    op = case["ops"][VARIANTS[j]]
                    comm.barrier(group)
                    t0 = time.perf_counter()
                    out = op()
                    times[i, j] = time.perf_counter() - t0
                    del out
            comm.all_reduce_max_(times, group)  # per-iteration slowest rank
            med = times.quantile(0.5, dim=0)
            for j, v in enumerate(VARIANTS):
                case["rounds"][v].append(float(med[j]))
    out = []
    for case in cases:
        r = case["rounds"]
        ratios = {
            "a/b": [a / b for a, b in zip(r["a"], r["b"])],
            "a/(c+d)": [a / (c + d) for a, c, d in zip(r["a"], r["c"], r["d"])],
            "c/b": [c / b for c, b in zip(r["c"], r["b"])],
        }
        ratio_sum = {k: _summary(v) for k, v in ratios.items()}
        out.append({
            "payload_mib": case["mib"],
            "payload_bytes": case["x"].numel() * 4,
            "local_shape": list(case["shape"]),
            "verify": case["verify"],
            "variants_s": {v: _summary(r[v]) for v in VARIANTS},
            "ratios": ratio_sum,
            "goals_met": {k: ratio_sum[k]["median"] <= g for k, g in GOALS.items()},
        })
    return {"rank": rank, "sizes": out}


def run(world: int = 4, sizes_mib=(4, 16, 64), repeats: int = 9, iters: int = 5, warmup: int = 2,
        frames: int = 64, hidden: int = 1152, batch: int = 1,
        timeout_s: float = 1800) -> dict:
    """Spawn `world` gloo ranks, benchmark, return rank 0's results (identical on every rank)."""
    if world < 2:
        raise ValueError("world must be >= 2")
    cfg = dict(sizes_mib=[float(s) for s in sizes_mib], repeats=repeats, iters=iters, warmup=warmup,
               frames=frames, hidden=hidden, batch=batch, timeout_s=timeout_s)
    for mib in cfg["sizes_mib"]:
        local_shape(mib * 2**20, world, frames, hidden, batch)  # fail early on bad shapes
    with LoadMonitor(world, threads_per_rank=1) as mon:
        results = run_ranks(_rank_bench, world, cfg, threads=1, timeout_s=timeout_s)
    sizes = results[0]["sizes"]
    noisy = noisy_reasons(mon.conditions(), {f"{k} at {s['payload_mib']:g} MiB": relative_spread(s["ratios"][k])
                                             for s in sizes for k in GOALS})
    return {
        "world": world, "backend": "gloo", "device": "cpu", "threads_per_rank": 1,
        "dtype": "float32", "frames": frames, "hidden": hidden, "batch": batch,
        "repeats": repeats, "iters": iters, "warmup": warmup,
        "torch": torch.__version__, "cpus": os.cpu_count(),
        "variants": LABELS, "goals": GOALS,
        "timing": "per op: barrier, perf_counter, op (no trailing barrier); per-iteration max over ranks; "
                  "round value = median over iters; reported median and p10-p90 over rounds; "
                  "ratios paired per round",
        "sizes": sizes,
        "conditions": mon.conditions(), "noisy": noisy, "goals_judged": not noisy,
    }


# ---------------------------------------------------------------- report
def format_table(res: dict) -> str:
    ms = 1e3
    lines = [
        f"DSP switch micro-benchmark: world {res['world']}, gloo on CPU ({res['cpus']} cores, "
        f"1 thread/rank), x = (B, T/N, S, C) fp32, B={res['batch']} T={res['frames']} C={res['hidden']}, "
        f"{res['repeats']} rounds x {res['iters']} iters",
    ]
    lines += [f"  {v}: {LABELS[v]}" for v in VARIANTS]
    lines.append("  times: ms, slowest rank per iteration; median over rounds [p10-p90]")
    lines.append(f"  goals: a/b <= {GOALS['a/b']:.2f}, a/(c+d) <= {GOALS['a/(c+d)']:.2f}"
                 "   (c/b: the floor of a/b, a switch costing the wire alone)")
    head = (f"{'MiB/rank':>8} {'local shape':>18} {'a==b':>5} | " + " | ".join(f"{v:^21}" for v in VARIANTS)
            + f" | {'a/b':^18} | {'a/(c+d)':^18} | {'c/b':^18}")
    lines += [head, "-" * len(head)]
    for s in res["sizes"]:
        cells = []
        for v in VARIANTS:
            t = s["variants_s"][v]
            cells.append(f"{t['median'] * ms:7.2f} [{t['p10'] * ms:.1f}-{t['p90'] * ms:.1f}]".rjust(21))
        rat = []
        for k in ("a/b", "a/(c+d)", "c/b"):
            q = s["ratios"][k]
            mark = "" if k not in GOALS else (" ok" if s["goals_met"][k] else " X")
            rat.append(f"{q['median']:.3f} [{q['p10']:.2f}-{q['p90']:.2f}]{mark}".rjust(18))
        shape = "x".join(map(str, s["local_shape"]))
        lines.append(f"{s['payload_bytes'] / 2**20:8.2f} {shape:>18} {'yes' if s['verify']['a_equals_b'] else 'NO':>5} | "
                     + " | ".join(cells) + " | " + " | ".join(rat))
    c = res["conditions"]
    lines.append(f"conditions: load {c['loadavg_1m_before']:.1f} before, {c['loadavg_1m_after']:.1f} after, on "
                 f"{c['cores']} cores; {c['ranks']} ranks x {c['threads_per_rank']} thread(s); other processes took "
                 f"{c['competing_cores'] if c['competing_cores'] is not None else 'n/a'} cores on average")
    if res["noisy"]:
        lines.append("NOISY, goals not judged: " + "; ".join(res["noisy"]))
        return "\n".join(lines)
    met = {k: all(s["goals_met"][k] for s in res["sizes"]) for k in GOALS}
    lines.append("goals (median ratio, every size): "
                 + ", ".join(f"{k} <= {g}: {'met' if met[k] else 'MISSED'}" for k, g in GOALS.items()))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    from dspbench.records.argtypes import at_least_0, count, positive
    p = argparse.ArgumentParser(prog="dspbench bench-switch", description=__doc__.split("\n")[0])
    p.add_argument("--world", type=count, default=4, help="ranks to spawn (gloo, CPU)")
    p.add_argument("--sizes-mib", type=positive, nargs="+", default=[4, 16, 64], help="payload per rank, MiB")
    p.add_argument("--repeats", type=count, default=9, help="rounds (the spread is over rounds)")
    p.add_argument("--iters", type=count, default=5, help="iterations per variant per size per round")
    p.add_argument("--warmup", type=at_least_0, default=2, help="untimed iterations per variant per size")
    p.add_argument("--frames", type=count, default=64, help="T, divisible by --world")
    p.add_argument("--hidden", type=count, default=1152, help="C (STDiT-XL: 1152)")
    p.add_argument("--batch", type=count, default=1, help="B")
    p.add_argument("--timeout", type=positive, default=1800, help="seconds for the whole run")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                   help="also write the results as JSON to PATH (stdout when no PATH)")
    return p


def main(argv=None) -> dict:
    a = parser().parse_args(argv)
    res = run(a.world, a.sizes_mib, a.repeats, a.iters, a.warmup, a.frames, a.hidden, a.batch,
              a.timeout)
    print(format_table(res), flush=True)
    if a.json == "-":
        print(json.dumps(res, indent=1))
    elif a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    if not all(s["verify"]["a_equals_b"] for s in res["sizes"]):
        print("ERROR: the DSP switch and the reference switch disagree", file=sys.stderr)
    return res


if __name__ == "__main__":
    main()
