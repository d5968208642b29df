"""`dspbench replay`: one rank of an N-GPU run, kernel by kernel, on the one device at hand.

The cost model prices a rank by the kernels the method's own sharding gives it
(bench/cost/rank_trace.py: Ulysses' full-length attention on heads / N, the ring's N chunk pairs and
LSE merges, DSP's phases at their local shapes, CFG parallel's half batch, the pads). Replay runs
exactly those kernels: each distinct one (its aten overload, argument shapes, strides and dtypes)
on fresh tensors of that layout, timed with CUDA events (on a CPU: the wall clock, so the same code
path runs in tests), its median over `--reps` calls after one warm-up. Each kernel gives two records
that share a `kernel_key`: `source = "measured-replay"` (seconds measured per call) and
`source = "predicted"` (the same kernel priced by bench/cost/kernel_price.py on the profile's rate
table, with the rate's source). Collectives are not replayed: one GPU cannot run them; a summary
record prices them from the profile (or calibrated nccl-tests tables) and says so.

Tensor contents are random normals (integer and boolean tensors zero, which every index a kernel
takes accepts): a kernel's time does not depend on its values, except where data decides the work
(none of the traced ops does).
"""
from __future__ import annotations

import hashlib
import json
import statistics
import time

from dspbench.cost.kernel_price import price_kernel, resolve_attn_kernel
from dspbench.cost.kernel_rates import load_rate_table
from dspbench.cost.rank_trace import rank_kernels


def kernel_key(k) -> str:
    blob = json.dumps([k.overload or k.op, k.args, k.kwargs], default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _materialize(spec, device):
    import torch
    tag = spec[0]
    if tag == "t":
        _, shape, stride, dtype = spec
        dt = getattr(torch, dtype)
        # the storage the layout spans, filled, then viewed with the traced strides (broadcast views too)
        span = 1 + sum((n - 1) * st for n, st in zip(shape, stride) if n > 0) if all(shape) else 0
        flat = torch.empty(span, dtype=dt, device=device)
        flat.normal_() if dt.is_floating_point else flat.zero_()
        return flat.as_strided(shape, stride)
    if tag == "l":
        return [_materialize(s, device) for s in spec[1]]
    if tag == "dtype":
        return getattr(torch, spec[1])
    if tag == "device":
        return torch.device(device)
    if tag == "attr":
        return getattr(torch, spec[1])
    return spec[1]


def _overload(name: str):
    import torch
    ns, op, ov = name.split(".")
    return getattr(getattr(getattr(torch.ops, ns), op), ov)


# CUDA's flash kernels have a CPU twin with the same shapes (the CPU rehearsal of the same code path)
CPU_TWINS = {"aten._scaled_dot_product_flash_attention.default": "aten._scaled_dot_product_flash_attention_for_cpu.default",
             "aten._scaled_dot_product_flash_attention_backward.default":
                 "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"}


def _call(k, device: str):
    """(fn, args, kwargs) rebuilding kernel k on device; on a CPU, a CUDA-only flash kernel is its CPU twin."""
    args = [_materialize(a, device) for a in k.args]
    kwargs = {n: _materialize(s, device) for n, s in k.kwargs}
    name = k.overload
    if not device.startswith("cuda") and name in CPU_TWINS:
        name = CPU_TWINS[name]
        if k.attn[-1] == "fwd":           # (q, k, v, dropout_p, is_causal, *, scale)
            args, kwargs = args[:5], {"scale": kwargs.get("scale")}
        else:                              # (dout, q, k, v, out, lse, dropout_p, is_causal, *, scale)
            args, kwargs = args[:6] + [args[10], args[11]], {"scale": kwargs.get("scale")}
    return _overload(name), args, kwargs


def time_kernel(k, device: str, reps: int) -> float:
    """Median seconds of one call of kernel k on device (CUDA events on a GPU). An in-place op traced on
    a broadcast view (stride 0, which a real run writes only after materialising) runs on a contiguous
    tensor of the same shape: the same elements written."""
    import torch
    fn, args, kwargs = _call(k, device)
    try:
        fn(*args, **kwargs)                  # warm-up: autotuning, workspace allocation
    except RuntimeError as e:
        if "more than one element" not in str(e):
            raise
        args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]
        fn(*args, **kwargs)
    times = []
    cuda = device.startswith("cuda")
    for _ in range(reps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args, **kwargs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn(*args, **kwargs)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def replay(cfg, profile, device: str, reps: int = 5, limit: int = 0, progress=None) -> list[dict]:
    """Records of every kernel of rank 0 of cfg: measured-replay and predicted, paired by kernel_key.
    limit: replay only the `limit` kernels that take the most predicted time (0: all); the rest are
    left out and counted in the summary."""
    table = load_rate_table(profile.sku)
    impl = resolve_attn_kernel(cfg.attn_impl, table, cfg.method)
    rk = rank_kernels(cfg)
    priced = [(k, n, *price_kernel(k, table, profile.hbm_Bps, impl)) for k, n in rk.items()]
    priced.sort(key=lambda r: -r[1] * r[2])
    chosen = priced[:limit] if limit else priced
    base = {"method": cfg.method, "model": cfg.model, "frames": cfg.frames, "spatial": cfg.spatial, "sp": cfg.sp,
            "gpus": cfg.gpus, "mode": cfg.mode, "dtype": cfg.dtype, "batch": cfg.batch, "attn_kernel": impl,
            "cfg": cfg.cfg, "cfg_parallel": cfg.cfg_parallel, "hardware_profile": profile.name}
    out = []
    for i, (k, n, pred_s, bound, rate) in enumerate(chosen):
        key = kernel_key(k)
        shape = {"kind": k.kind, "op": k.overload, "calls_per_model_call": n, "flops": k.flops, "bytes": k.bytes,
                 "attn": list(k.attn) if k.attn else None, "gemm": list(k.gemm) if k.gemm else None}
        out.append({**base, **shape, "kernel_key": key, "source": "predicted", "seconds_per_call": pred_s,
                    "bound": bound, "rate_source": rate.label() if rate else None})
        try:
            measured, error = time_kernel(k, device, reps), None
        except Exception as e:    # noqa: BLE001 - a kernel that cannot be rebuilt is reported, not fatal
            measured, error = None, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        out.append({**base, **shape, "kernel_key": key, "source": "measured-replay", "seconds_per_call": measured,
                    "device": device, "reps": reps, "error": error})
        if progress:
            progress(i + 1, len(chosen))
    return out


def summary_record(recs: list[dict], cfg, profile, left_out: int, comm_s: float | None) -> dict:
    """One record per replay: predicted and measured seconds of one model call over the replayed kernels."""
    pred = {r["kernel_key"]: r for r in recs if r["source"] == "predicted"}
    meas = {r["kernel_key"]: r for r in recs if r["source"] == "measured-replay" and r["seconds_per_call"] is not None}
    both = [k for k in pred if k in meas]
    p = sum(pred[k]["seconds_per_call"] * pred[k]["calls_per_model_call"] for k in both)
    m = sum(meas[k]["seconds_per_call"] * meas[k]["calls_per_model_call"] for k in both)
    return {"source": "measured-replay-summary", "method": cfg.method, "model": cfg.model, "frames": cfg.frames,
            "spatial": cfg.spatial, "sp": cfg.sp, "mode": cfg.mode, "hardware_profile": profile.name,
            "kernels_replayed": len(both), "kernels_failed": len(pred) - len(both), "kernels_left_out": left_out,
            "predicted_s_per_call": p, "measured_s_per_call": m, "measured_over_predicted": m / p if p else None,
            "comm_s_per_step": comm_s,
            "comm_source": f"predicted from {profile.name} (collectives are not replayed on one device)"}
