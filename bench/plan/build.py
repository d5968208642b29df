"""A request -> the plan document: candidates enumerated (axes.py), priced (price.py), ranked
(rank.py). The document is what `--json` prints and `--report` renders; every number is predicted."""
from __future__ import annotations

from dataclasses import replace

from dspbench.cost.hardware import Profile
from dspbench.facts.build import check_names
from dspbench.methods import method_meta
from dspbench.plan.axes import Request, candidates
from dspbench.plan.price import LATENCY_MODES, Pricer, price, price_mix
from dspbench.plan.rank import best_per_method, public, pruned_summary, rank, runner_up, verdict


def check_request(request: Request, profile: Profile) -> None:
    """Errors in the request itself (exit 2 before anything is priced)."""
    base = request.base
    base.validate()
    for m in request.methods:
        check_names(replace(base, method=m))
    g = profile.gpus_per_node
    if base.gpus > g and base.gpus % g:
        raise ValueError(f"--gpus {base.gpus} is not a whole number of {profile.name}'s nodes of {g} GPUs")


def plan(request: Request, profile: Profile) -> dict:
    from dspbench.facts.defaults import priced_line
    """The plan document; a ValueError naming each method's reasons when no candidate fits."""
    check_request(request, profile)
    pricer = Pricer.of(profile)
    priced = [price_mix(c, pricer, request.buckets) if request.buckets else price(c, pricer)
              for c in candidates(request)]
    ranked = rank([p for p in priced if p["status"] == "ranked"])
    pruned = [p for p in priced if p["status"] != "ranked"]
    reasons = pruned_summary(pruned, request.methods)
    if not ranked:
        raise ValueError(f"nothing fits {_workload(request.base, request.buckets)} on {request.base.gpus} x {profile.name}:\n"
                         + "\n".join(f"  {m}: " + "; ".join(rs) for m, rs in reasons.items()))
    base = request.base
    return {"source": "predicted", "generated_by": "dspbench plan", "workload": _workload(base, request.buckets),
            "request": {"model": base.model, "frames": base.frames, "spatial": base.spatial, "mode": base.mode,
                        "gpus": base.gpus, "batch": base.batch, "dtype": base.dtype, "backend": base.backend,
                        "cfg": base.cfg, "sample_steps": base.sample_steps, "mem_budget_mib": base.mem_budget_mib,
                        "methods": list(request.methods), "buckets": [list(b) for b in request.buckets]},
            "priced": priced_line(base),   # the video, steps and guidance, and what were defaults
            # the software priced: what the target declares (a profile's [stack], --stack), never what is here
            "stack": {"packages": list(profile.stack), "declared_by": profile.stack_source},
            "hardware": profile.name, "profile_kind": profile.kind, "gpus_per_node": profile.gpus_per_node,
            "metric": "seconds per video" if base.mode in LATENCY_MODES else "samples/s",
            "interval_source": pricer.interval_source, "method_terms": method_terms(profile, base.mode),
            # what the calibration warned of (a loaded machine, a drift): a plan on it says so on its first screen
            "profile_warnings": list(profile.calibration.get("warnings", [])),
            "candidates": len(priced), "verdict": verdict(ranked), "lead": runner_up(ranked),
            "rows": [public(r) for r in ranked],
            "best_per_method": {m: r["rank"] for m, r in best_per_method(ranked).items()},
            "pruned": [public(p) for p in pruned], "pruned_reasons": reasons,
            # the report draws each method in its own look without importing methods
            "method_meta": {m: method_meta(m) for m in request.methods}}


def method_terms(profile: Profile, mode: str) -> str:
    """Which rows carry each method's own calibrated step residual (bench/calibrate/methods.py)."""
    if profile.kernels:
        return ("none: every method priced from its traced kernels at the profile's measured [kernels] costs "
                "and its collectives per call (bench/cost/cpu_kernels.py); a calibrated residual is reported in "
                "[calibration], not applied")
    if mode != "train":
        return "none: each method's own term is calibrated on training steps, and this is " + mode
    if not profile.method_overhead_s:
        return ("none in this profile: methods differ by their FLOPs and bytes only (`calibrate --methods all "
                "--method-sp ...` measures each one's own work)")
    sps = sorted(profile.method_overhead_s)
    return (f"calibrated at SP {', '.join(map(str, sps))} (each method's measured step residual); rows at other "
            "SP degrees are priced without it")


def _workload(base, buckets: tuple = ()) -> str:
    tail = f", {base.sample_steps} steps{', CFG' if base.cfg else ''}" if base.mode == "sample" else ""
    shape = (f"buckets {', '.join(f'{t}x{s}:{w:g}' for t, s, w in buckets)}" if buckets
             else f"T={base.frames} S={base.spatial}")
    return f"{base.model} {shape} {base.mode} {base.dtype} batch {base.batch}{tail}"

