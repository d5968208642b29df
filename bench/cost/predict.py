"""`dspbench predict`: a run's record, with the cost model's numbers instead of measured ones.

The record has every field a `dspbench run` record has (bench/run/harness.py build_record, the
worker's metrics), status `predicted` (or `oom` / `unsupported` with a reason), plus
predicted_comm_time_s, predicted_compute_time_s, predicted_optimizer_time_s,
predicted_peak_mem_bytes, predicted_mem (bytes by part), hardware_profile and zero_stage, and the
interval fields (INTERVAL_FIELDS: step_time_low_s/high_s from a calibrated profile's spread;
ratio_to_dsp with its low/high: this method's step / DSP's at the same configuration).
"""
from __future__ import annotations

import functools
import json
import sys
from dataclasses import replace
from pathlib import Path

from dspbench.cost.autosp import resolved
from dspbench.facts.build import Outcome, build_record, per_video, unsupported_reason, validate
from dspbench.records.config import RunConfig, flops_factors
from dspbench.cost.model import predict
from dspbench.cost.hardware import Profile, available_profiles, fill_device_defaults, load_profile, with_stack
from dspbench.methods import get_method, stack as stacks
from dspbench.cost.interval import knobs, ratio_interval, step_interval, with_assumed_spread
from dspbench.methods.comm.ledger import untag
from dspbench.models import Shape, get_config
from dspbench.models.params import flops_per_sample


DEFAULT_PROFILE = "h100-ib"     # predict without --hardware


@functools.lru_cache(maxsize=None)
def _environ(device: str) -> dict:
    from dspbench.records.environ import environ
    return environ([{"hostname": "predicted", "device": device}])


def device_label(profile: Profile) -> str:
    d = profile.device
    return d if d.lower().startswith(("cpu", "nvidia")) else f"NVIDIA {d}"


def predicted_record(cfg: RunConfig, profile: Profile, compiled: bool = False, vae: str | None = None) -> dict:
    """compiled: the host costs of torch.compile (profiles with a device curve); vae: the decode's
    variant in sample mode's whole-pipeline stages (bench/cost/pipeline.py)."""
    validate(cfg)
    zero = cfg.zero
    cfg, reason = resolved(cfg, profile)
    reason = reason or why_unsupported(cfg, profile.stack)
    extra = {"hardware_profile": profile.name, "zero_stage": zero, "predicted_comm_time_s": None,
             "predicted_compute_time_s": None, "predicted_optimizer_time_s": None,
             "predicted_peak_mem_bytes": None, "predicted_mem": None, "step_times_s": None,
             "peak_mem_bytes_per_rank": None, "comm_tagged": None, "comm_time_s": None,
             "comm_formula_match": None, "comm_symmetric": None, "flops_per_step": None,
             "mem_base_bytes_per_rank": None, "peak_mem_reset": None, "mem_peak_step": None, "rss_run_bytes": None, "mem_run_bytes": None, "mem_model": None,
             "placement": None, "phases_s": None, "compiled": compiled, "predicted_stages_s": None,
             "predicted_end_to_end_s": None, "pipeline": None, "predicted_breakdown": None, "s_per_video": None, "s_per_sample_step": None,
             **dict.fromkeys(INTERVAL_FIELDS)}
    if reason:
        rec = build_record(cfg if cfg.sp != "auto" else _sp1(cfg), Outcome("unsupported", reason), "predicted")
        return {**rec, **extra, "sp": cfg.sp if cfg.sp != "auto" else None, "environ": _environ(device_label(profile))}
    p = predict(cfg, profile, compiled)
    status = "predicted" if p.fits else "oom"
    error = None if p.fits else p.oom_reason(cfg, profile.name)
    rec = build_record(cfg, Outcome(status, error), "predicted")
    rec.update(extra)
    rec.update({"environ": _environ(device_label(profile)), "predicted_comm_time_s": p.comm_total_s,
                "predicted_compute_time_s": p.compute_s, "predicted_optimizer_time_s": p.optimizer_s,
                "predicted_engine_host_time_s": p.engine_host_s,
                "predicted_peak_mem_bytes": p.mem["peak"], "predicted_mem": p.mem, "mem_model": p.mem,
                "comm": p.comm_wire, "comm_wire_bytes": sum(p.comm_wire.values()),
                "comm_time_s": untag(p.comm_s), "placement": _placement(cfg, profile)})
    if p.fits:
        rec.update(throughput(cfg, p.step_s, profile))
        rec["peak_mem_bytes"] = p.mem["peak"]
        rec.update(intervals(cfg, profile, compiled))
        if cfg.mode == "sample":   # the whole pipeline; step_time_median_s stays the DiT's denoising alone
            rec.update(pipeline_fields(cfg, profile, p.step_s, vae, rec))
        from dspbench.cost.explain import breakdown
        rec["predicted_breakdown"] = breakdown(cfg, profile, compiled, rec) or None
    return rec


def pipeline_fields(cfg: RunConfig, profile: Profile, denoise_s: float, vae: str | None, rec: dict) -> dict:
    from dspbench.cost.pipeline import stage_seconds
    stages = stage_seconds(cfg, get_config(cfg.model), profile, denoise_s, vae)
    sec = stages["seconds"]
    out = {"predicted_stages_s": {k: sec[k] for k in ("text_encode", "denoise", "vae_decode")},
           "predicted_end_to_end_s": sec["total"],
           "pipeline": {k: stages[k] for k in ("flops", "text_encoder", "vae_variant", "vae_tiling", "latents",
                                                 "vae_comm_bytes", "vae_kernels")}}
    if rec.get("step_time_low_s") is not None:    # the denoising interval carries over; the rest is fixed
        fixed = sec["total"] - denoise_s
        out["pipeline"]["end_to_end_interval_s"] = [fixed + rec["step_time_low_s"], fixed + rec["step_time_high_s"]]
    return out


def _placement(cfg: RunConfig, profile: Profile) -> dict:
    """The placement the model priced: ranks node-major, profile.gpus_per_node per node (names are
    the model's, 'node0', ..., not hosts)."""
    from dspbench.methods.dims import Dims
    g = profile.gpus_per_node
    return Dims(sp=int(cfg.sp), dp=cfg.dp, cfg=cfg.cfg_degree).placement([f"node{r // g}" for r in range(cfg.gpus)])


INTERVAL_FIELDS = ("step_time_low_s", "step_time_high_s", "ratio_to_dsp", "ratio_to_dsp_low", "ratio_to_dsp_high",
                   "interval_source")


def intervals(cfg: RunConfig, profile: Profile, compiled: bool = False) -> dict:
    """Step time's interval from the calibration's measured spread, or on a datasheet profile from its
    assumptions' stated ranges (bench/cost/interval.py; `interval_source` says which; a calibrated
    profile without a spread: none), and this step / DSP's at the same configuration with its interval."""
    step = lambda prof: predict(cfg, prof, compiled).step_s
    out = dict.fromkeys(INTERVAL_FIELDS)
    if profile.kind == "datasheet":     # its efficiencies are assumptions: their stated ranges, as `plan` uses
        profile, out["interval_source"] = with_assumed_spread(profile)
    elif knobs(profile):
        out["interval_source"] = f"measured: calibration spread of {profile.name}"
    iv = step_interval(step, profile)
    if iv:
        out["step_time_low_s"], out["step_time_high_s"] = iv
    dsp = replace(cfg, method="dsp") if cfg.method != "dsp" else None
    if dsp is None or why_unsupported(dsp, profile.stack):
        return out
    dsp_step = lambda prof: predict(dsp, prof, compiled).step_s
    out["ratio_to_dsp"] = step(profile) / dsp_step(profile)
    r = ratio_interval(step, dsp_step, profile)
    if r:
        out["ratio_to_dsp_low"], out["ratio_to_dsp_high"] = r
    return out


def _sp1(cfg: RunConfig, sp=1, launcher=None) -> RunConfig:
    return replace(cfg, sp=sp, launcher=launcher or cfg.launcher)


def why_unsupported(cfg: RunConfig, stack: tuple[str, ...]) -> str | None:
    """Why cfg (numeric sp) cannot run on the profile's cluster: the method's constraints, the
    degrees and the packages it needs against the cluster's declared `stack`, not this machine's
    devices or libraries (a local nccl run would check CUDA here; launcher env)."""
    return unsupported_reason(_sp1(cfg, cfg.sp, "env"), stack)


def stack_error(cfg: RunConfig, profile: Profile, methods: tuple[str, ...] | None = None) -> str | None:
    """One line when the request itself names what the declared stack cannot run: `predict`'s
    --method or --zero, `plan`'s --methods (`methods`). Candidates a plan enumerates are pruned instead."""
    asked = [(f"--methods {m}" if methods is not None else f"--method {m}", get_method(m).requires)
             for m in (methods if methods is not None else (cfg.method,))]
    if methods is None and cfg.zero:   # plan enumerates ZeRO stages itself
        asked.append((f"--zero {cfg.zero}", stacks.ZERO_REQUIRES))
    for flag, requires in asked:
        for package in stacks.missing_from(requires, profile.stack):
            return (f"{flag} needs {package} ({stacks.PACKAGES[package].what}), not in the stack priced: "
                    f"{stacks.label(profile.stack)}, {profile.stack_source} (--stack adds it)")
    return None


def throughput(cfg: RunConfig, step: float, profile: Profile) -> dict:
    """The record's rate fields of a predicted step: samples/s, tokens/s, FLOPs, MFU/HFU."""
    per_sample = flops_per_sample(get_config(cfg.model), Shape(1, cfg.frames, cfg.spatial))
    model_x, hw_x = flops_factors(cfg)
    flops, hw = per_sample * model_x * cfg.global_batch, per_sample * hw_x * cfg.global_batch
    peak = profile.peak_flops.get(cfg.dtype)
    samples = cfg.global_batch / step
    return {"step_time_median_s": step, "step_time_p10_s": step, "step_time_p90_s": step,
            "step_times_s": [step], "samples_per_s": samples, "tokens_per_s": samples * cfg.frames * cfg.spatial,
            "flops_per_step": flops, "hardware_flops_per_step": hw,
            "mfu": flops / step / (cfg.gpus * peak) if peak else None,
            "hfu": hw / step / (cfg.gpus * peak) if peak else None, "device_peak_flops": peak, **per_video(cfg, step)}


# ---------------------------------------------------------------- command (arguments: bench/cost/cli.py)
def cmd_predict(args) -> int:
    from dspbench.facts.args import config_from_args
    from dspbench.records.io import default_records_file
    from dspbench.records.io import append_record, result_line
    if not args.hardware:   # a prediction is for some GPU: the common one, said so
        args.hardware = DEFAULT_PROFILE
        print(f"hardware {DEFAULT_PROFILE}: the default (--hardware PROFILE to change: "
              f"{', '.join(available_profiles())}, or a calibrated .toml)", file=sys.stderr)
    profile = load_profile(args.hardware)
    if args.stack is not None:   # the target's software, declared: nothing here is imported to find it
        profile = with_stack(profile, stacks.parse(args.stack))
    filled = fill_device_defaults(args, profile)
    if filled:
        print(f"{', '.join(filled)}: the default on {profile.name} ({profile.device}); --dtype/--backend to change",
              file=sys.stderr)
    cfg = config_from_args(args)
    path = Path(args.records_file) if args.records_file else default_records_file(args.out)
    buckets = bucket_args(args, cfg.model)
    validate(cfg)
    if why := stack_error(cfg, profile):   # asked for explicitly: an error, not an `unsupported` record
        raise ValueError(why)
    if buckets:
        return predict_mix(cfg, profile, buckets, path, shard_given=args.shard is not None)
    rec = predicted_record(cfg, profile, args.compiled, args.vae)
    append_record(path, rec)
    if args.json:   # stdout is exactly one JSON document (json.load works); the RESULT line goes to stderr
        print(json.dumps(rec, sort_keys=True, default=str))
        print(result_line(rec), file=sys.stderr)
    else:
        print(summary(rec))
        if getattr(args, "explain", False):
            from dspbench.cost.explain import lines
            print("\n".join(lines(rec.get("predicted_breakdown") or {})))
        print(f"record appended to {path}", file=sys.stderr)
        print(result_line(rec))
    return {"predicted": 0, "unsupported": 3}.get(rec["status"], 1)


def bucket_args(args, model: str) -> list[tuple[int, int, float]]:
    """--buckets (T x S as given) or --bucket-file (videos, converted through `model`'s own VAE and patch)."""
    from functools import partial
    from dspbench.models.registry import video_to_tokens
    from dspbench.records.buckets import parse_flag, read_bucket_file
    if args.buckets and args.bucket_file:
        raise ValueError("give --buckets or --bucket-file, not both")
    try:
        if args.bucket_file:
            return read_bucket_file(Path(args.bucket_file), partial(video_to_tokens, model))
        return parse_flag(args.buckets) if args.buckets else []
    except OSError as e:
        raise ValueError(f"--bucket-file: {e.strerror}: {args.bucket_file}") from None
    except ValueError as e:
        raise ValueError(f"{'--bucket-file' if args.bucket_file else '--buckets'}: {e}") from None


def predict_mix(cfg: RunConfig, profile: Profile, buckets, path: Path, shard_given: bool = True) -> int:
    """One predicted record per bucket (appended), then the mix: samples/s over it at this SP, the
    padding waste, and each bucket's best SP degree among the divisors of the GPUs (not recorded).
    Without --shard each bucket at each degree shards the dim that pads it least (facts/shard.py)."""
    from dataclasses import replace
    from dspbench.facts.shard import with_chosen_shard
    from dspbench.records.buckets import mix
    from dspbench.records.io import append_record
    rows, recs = [], []
    for t, s, w in buckets:
        for sp in [d for d in range(1, cfg.gpus + 1) if cfg.gpus % d == 0]:
            point = replace(cfg, frames=t, spatial=s, bucket_weight=w, sp=sp)
            rec = predicted_record(point if shard_given else with_chosen_shard(point), profile)
            if rec["status"] == "predicted":
                rows.append(rec)
            if cfg.sp in (sp, str(sp)) or (cfg.sp == "auto" and rec.get("sp_auto")):
                recs.append(rec)
                append_record(path, rec)
                print(summary(rec))
    m = mix(rows)
    here = m["per_sp"].get(int(cfg.sp) if cfg.sp != "auto" else None, {})
    best = ", ".join(f"{t}x{s}: {m['best_sp'].get((t, s)) or '-'}" for t, s, _ in buckets)
    rate = here.get("samples_per_s")
    print(f"mix of {len(buckets)} buckets ({cfg.method} {cfg.model} gpus={cfg.gpus} sp={cfg.sp} on {profile.name}, "
          f"predicted): {'-' if rate is None else f'{rate:.3g}'} samples/s over the mix; padding waste "
          f"{(here.get('pad_token_share') or 0) * 100:.1f}% of tokens; best SP per bucket: {best}")
    print(f"{len(recs)} records appended to {path}", file=sys.stderr)
    return 0 if rate is not None else 3


def summary(rec: dict) -> str:
    from dspbench.facts.defaults import priced_line
    from dspbench.facts.shard import shard_note
    return _summary(rec) + shard_note(rec) + "\n" + priced_line(rec)


def _summary(rec: dict) -> str:
    head = f"{rec['method']} {rec['model']} T={rec['frames']} S={rec['spatial']} gpus={rec['world_size']} sp={rec['sp']}"
    if rec["status"] == "unsupported":
        return f"{head}: unsupported: {rec['error']}"
    mem = f"peak {rec['predicted_peak_mem_bytes'] / 2**30:.2f} GiB/rank"
    if rec["status"] != "predicted":
        return f"{head}: {rec['status']}: {rec['error']}"
    line = (f"{head} on {rec['hardware_profile']}: step {rec['step_time_median_s'] * 1e3:.1f} ms = compute "
            f"{rec['predicted_compute_time_s'] * 1e3:.1f} + optimizer {rec['predicted_optimizer_time_s'] * 1e3:.1f}"
            f" + comm {rec['predicted_comm_time_s'] * 1e3:.1f} ms; {rec['samples_per_s']:.3g} samples/s; {mem}; "
            f"comm {rec['comm_wire_bytes'] / 2**20:.2f} MiB/rank/step")
    st = rec.get("predicted_stages_s")
    if st:
        line += (f"\nwhole pipeline (predicted): text encode {st['text_encode']:.2f} s + denoise {st['denoise']:.2f} s "
                 f"(the DiT alone, all steps) + VAE decode {st['vae_decode']:.2f} s ({rec['pipeline']['vae_variant']}) "
                 f"= {rec['predicted_end_to_end_s']:.2f} s per video")
        iv = rec["pipeline"].get("end_to_end_interval_s")
        line += f" [{iv[0]:.2f}-{iv[1]:.2f}]" if iv else ""
        tiling = rec["pipeline"].get("vae_tiling")
        if tiling:     # what the tiled decode priced and whose tiling it is
            tiles = (rec["pipeline"].get("vae_kernels") or {}).get("tiles")
            line += (f"\nVAE tiling: windows of {'x'.join(map(str, tiling['tile']))} latents (frames x rows x columns; "
                     f"0: not tiled) at strides {'x'.join(map(str, tiling['stride']))}"
                     + (f", {tiling['extra_frames']} extra frame(s) each" if tiling["extra_frames"] else "")
                     + (f", {tiles} decoder calls" if tiles else "") + f": {tiling['source']}")
    if rec.get("step_time_low_s") is not None:
        line += (f"\ninterval: step {rec['step_time_low_s'] * 1e3:.1f}-{rec['step_time_high_s'] * 1e3:.1f} ms "
                 f"({rec['interval_source']})")
    return line
