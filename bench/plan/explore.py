"""The plans behind `plan --report`'s figures, each point a whole plan (lean: the axes the cost
model does not price apart at their first value):
- frontier: each method's best score at a quarter, half, once, twice and four times the GPUs
  (whole nodes only);
- crossover: the winning method over the inter-node bandwidth (1/16 to 4x the profile's) and the
  sequence length (T from a quarter to twice the request's; of every bucket's with `--buckets`), the
  rest of the request unchanged."""
from __future__ import annotations

from dataclasses import replace

from dspbench.cost.hardware import Profile
from dspbench.plan import whatif
from dspbench.plan.axes import Request
from dspbench.plan.build import plan

GPU_FACTORS = (0.25, 0.5, 1, 2, 4)
BW_FACTORS = (1 / 16, 1 / 4, 1, 4)
FRAME_FACTORS = (0.25, 0.5, 1, 2)


def _best(request: Request, profile: Profile) -> dict | None:
    """{method: (score, description, rank)} of one lean plan (a twin's: its row's); None when nothing fits."""
    from dspbench.plan.rank import describe
    try:
        doc = plan(replace(request, lean=True), profile)
    except ValueError:
        return None
    return {m: (doc["rows"][i - 1]["score"], describe(doc["rows"][i - 1]), i) for m, i in doc["best_per_method"].items()}


def frontier(request: Request, profile: Profile) -> list[dict]:
    g, node = request.base.gpus, profile.gpus_per_node
    counts = sorted({int(g * f) for f in GPU_FACTORS if g * f >= 1 and (g * f) % 1 == 0
                     and (g * f <= node or (g * f) % node == 0)})
    rows = []
    for n in counts:
        best = _best(replace(request, base=replace(request.base, gpus=n)), profile) or {}
        rows += [{"gpus": n, "method": m, "score": s, "config": d} for m, (s, d, _) in best.items()]
    return rows


def crossover(request: Request, profile: Profile) -> list[dict]:
    bw = profile.inter.bw_GBps
    rows = []
    for fb in BW_FACTORS:
        edited = whatif.apply(profile, [("link.inter.bw_GBps", bw * fb)])
        for ft in FRAME_FACTORS:
            frames = max(1, int(request.base.frames * ft))
            best = _best(_longer(request, ft, frames), edited)
            win = max(best.items(), key=lambda kv: kv[1][0]) if best else None
            rows.append({"inter_GBps": bw * fb, "frames": frames, "tokens": frames * request.base.spatial,
                         "winner": win[0] if win else None, "score": win[1][0] if win else None,
                         "config": win[1][1] if win else "nothing fits",
                         "runner_up_ratio": _runner_up(best, win)})
    return rows


def _longer(request: Request, ft: float, frames: int) -> Request:
    """The request with T scaled by `ft`: a bucketed one's every bucket (its own T is not priced)."""
    buckets = tuple((max(1, int(t * ft)), s, w) for t, s, w in request.buckets)
    return replace(request, base=replace(request.base, frames=frames), buckets=buckets)


def _runner_up(best: dict | None, win) -> float | None:
    """The winner's lead over the best row that is not its own (its twins run what it runs)."""
    others = sorted((s for m, (s, _, i) in (best or {}).items() if win and i != win[1][2]), reverse=True)
    return win[1][0] / others[0] if others else None


def explore(request: Request, profile: Profile) -> dict:
    return {"frontier": frontier(request, profile), "crossover": crossover(request, profile),
            "gpu_factors": list(GPU_FACTORS), "bw_factors": list(BW_FACTORS), "frame_factors": list(FRAME_FACTORS),
            "note": "each point is a whole plan (lean: the variants the cost model prices alike, at the first only)"}
