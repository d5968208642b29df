"""The reference code's all-to-all against ours, as the cost model prices `--a2a list`.

The DSP paper's code (and VideoSys, OpenDiT) moves a switch as tensor_split (a contiguous copy per
chunk), a list all_to_all and torch.cat; ours as one copy into a contiguous send buffer and one
all_to_all_single (methods/comm/layer.py). Same bytes on the wire, more copies around it. Here both run
through the comm layer (no ledger is open: nothing is recorded) on a (B, T/N, S, C) activation of
each calibration size, alternating per iteration so the machine's noise hits both alike; the extra
time per payload byte is the median over sizes of (t_list - t_single) / bytes, with its range over
sizes as the calibration's spread. Profiles store it as [compute] a2a_list_extra_s_per_byte.
"""
from __future__ import annotations

import statistics

import torch

from dspbench.calibrate.timing import samples
from dspbench.methods.comm import layer as comm

C = 64                    # channels of the probe's activation; T = 2 N frames, S a multiple of N


def _activation(size: int, n: int, device) -> torch.Tensor:
    frames, per_token = 2 * n, C * 4
    spatial = max(n, size // (2 * per_token) // n * n)        # this rank's (1, 2, S, C) fp32 shard
    return torch.randn(1, 2, spatial, C, device=device)


def bench_a2a_styles(sizes, iters: int, warmup: int, device) -> dict:
    """{'extra_s_per_byte', 'range', 'points': [{size, single_s, list_s}]} on the world group."""
    n, points = comm.world_size(), []
    for size in sizes:
        x = _activation(size, n, device)

        def run(style, x=x):
            prev = comm.set_a2a_style(style)
            try:
                comm.all_to_all(x, 2, 1, None, "calibrate_a2a")
            finally:
                comm.set_a2a_style(prev)
        times = {"single": samples(lambda: run("single"), 0, warmup), "list": samples(lambda: run("list"), 0, warmup)}
        for _ in range(iters):
            for style in ("single", "list"):
                times[style] += samples(lambda s=style: run(s), 1, 0)
        payload = x.numel() * x.element_size()
        t1, t2 = statistics.median(times["single"]), statistics.median(times["list"])
        points.append({"size": payload, "single_s": t1, "list_s": t2, "extra_s_per_byte": (t2 - t1) / payload})
    per_byte = [p["extra_s_per_byte"] for p in points]
    return {"extra_s_per_byte": max(0.0, statistics.median(per_byte)), "range": [min(per_byte), max(per_byte)],
            "points": points}
