"""One benchmark on one rank, inside an initialised process group: set up, check, warm up, time."""
from __future__ import annotations

import os
import time

import torch

from dspbench.records import environ
from dspbench.run import measure
from dspbench.records.config import RunConfig, guidance, sampler_for
from dspbench.methods import build_dims, get_method
from dspbench.methods.comm import layer as comm
from dspbench.methods.comm.external import engine_ledger
from dspbench.methods.comm.ledger import Ledger, untag
from dspbench.methods.spec import sample_comm_bytes
from dspbench.models import Shape, build_model, get_config
from dspbench.methods.padding import padded_shape
from dspbench.run.oracle import cfg_parallel_errors, check_shape, oracle_errors, within_tolerance
from dspbench.run.progress import Progress
from dspbench.models.dtypes import TORCH_DTYPES
from dspbench.run.steps import DataStream, make_optimizer, make_step
from dspbench.run.zero import init_deepspeed_comm, zero_engine
from dspbench.cost.comm import engine_comm
from dspbench.cost.memory import memory
from dspbench.methods.attn_kernels import describe as describe_kernels


class OracleMismatch(RuntimeError):
    pass


def device_for(cfg: RunConfig) -> torch.device:
    if cfg.backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", comm.world_rank() % max(torch.cuda.device_count(), 1)))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def run_rank(cfg: RunConfig, progress: bool = False, beat=lambda step: None,
             joined_s: float | None = None) -> dict | None:
    """Every rank runs this; rank 0 returns the metrics, the others None.

    `beat(step)` is called as each step starts, so a launcher can tell which rank stalled.
    `joined_s`: how long this rank took to join the process group (the rendezvous), for `phases_s`.
    """
    clock = measure.PhaseClock({"rendezvous": joined_s} if joined_s is not None else {})
    device, dtype = device_for(cfg), TORCH_DTYPES[cfg.dtype]
    mcfg = get_config(cfg.model, grad_ckpt=cfg.grad_ckpt)
    shape, spec = Shape(cfg.batch, cfg.frames, cfg.spatial), get_method(cfg.method)
    comm.set_a2a_style(cfg.a2a)   # before the oracle: it checks the transfer the run times
    dims = build_dims(int(cfg.sp), cfg.shard, cfg.cfg_degree, cfg.ulysses_degree)
    oracle = _oracle(cfg, spec, mcfg, shape, dims, device, dtype) if cfg.check else None
    clock.lap("oracle")
    if cfg.zero:   # import DeepSpeed before the baseline: its modules are not the run's memory
        init_deepspeed_comm()
    measure.reset_peak_memory(device)
    base_mem = measure.current_memory_bytes(device)   # before the model: what the run itself adds
    base_live = measure.live_heap_bytes() if device.type == "cpu" else None

    torch.manual_seed(cfg.seed)
    model = spec.apply(build_model(mcfg).to(device=device, dtype=dtype), dims, cfg.pad)
    engine = zero_engine(model, dims, cfg.zero, cfg.dtype, cfg.batch) if cfg.zero else None
    optimizer = make_optimizer(model, cfg.dtype) if cfg.mode == "train" and not engine else None
    step = make_step(cfg.mode, model, dims, optimizer, cfg.sample_steps, mcfg.in_channels, engine,
                     guidance(cfg), sampler_for(mcfg.layout))
    data = DataStream(mcfg, cfg, comm.rank(dims.dp_group), cfg.warmup + cfg.iters + 2, device, dtype)
    clock.lap("build")

    bar = Progress(cfg.warmup + cfg.iters, enabled=progress and comm.world_rank() == 0)
    losses = []
    for i in bar.phase("warm-up", range(cfg.warmup)):
        beat(i)
        losses.append(step(data[i]))
    clock.lap("warmup")
    inject_fault(cfg.inject_fault)
    peak_reset = measure.reset_peak_memory(device)   # the timed steps' peak, not the warm-up's
    times = []
    for i in bar.phase("timed", range(cfg.warmup, cfg.warmup + cfg.iters)):
        beat(i)
        comm.barrier()
        with measure.StepTimer(device) as timer:
            loss = step(data[i])
        times.append(timer.elapsed)
        losses.append(loss)
        bar.show_step_time(timer.elapsed)
    bar.close()
    clock.lap("timed")
    # A separate instrumented step: bytes and per-op times (a barrier before each op perturbs it).
    beat(cfg.warmup + cfg.iters)
    with Ledger(timed=True) as led, engine_ledger() as eng:   # eng: ZeRO's own collectives (--zero 1|2)
        step(data[cfg.warmup + cfg.iters])
    clock.lap("ledger_step")
    mem = _live_peak(step, data[cfg.warmup + cfg.iters + 1], device, beat, cfg.warmup + cfg.iters + 1)
    clock.lap("memory_step")
    # CPU: the live peak over the heap's live bytes before the model; the resident peak over the RSS then
    mem.update(base=base_live if mem["rss"] is not None else base_mem, base_rss=base_mem, reset=peak_reset)
    metrics = _collect(cfg, spec, mcfg, shape, dims, device, times, losses, led, oracle, mem, eng)
    clock.lap("collect")
    if metrics is not None:
        metrics["phases_s"] = clock.phases
    return metrics


def _live_peak(step, batch, device, beat, index: int) -> dict:
    """GPU: the allocator's peak over the steps above. CPU: the peak of live heap bytes over one more
    step, untimed (measure.LivePeak), beside the resident peak of the timed steps."""
    timed_peak = measure.peak_memory_bytes(device)   # CUDA: allocated bytes; CPU: resident bytes
    if device.type == "cuda" or measure.live_heap_bytes() is None:
        how = ("the timed steps: the CUDA allocator's peak of allocated bytes" if device.type == "cuda" else
               "the timed steps: CPU resident peak, with what the allocator kept (no glibc mallinfo2 here)")
        return {"peak": timed_peak, "rss": None, "how": how}
    beat(index)
    with measure.LivePeak() as live:
        step(batch)
    return {"peak": live.peak, "rss": timed_peak, "how": measure.LIVE_PEAK}


ORACLE_PARTS = ("output", "grads", "input_grad")   # oracle_max_abs_err is their max


def _oracle(cfg, spec, mcfg, shape, dims, device, dtype) -> dict:
    ocfg, oshape = check_shape(mcfg, shape, dims.sp)
    if dims.cfg == 2:   # the whole sampling loop, both passes, against one device's batch-of-2 CFG
        errs = cfg_parallel_errors(spec, ocfg, oshape, dims, cfg.sample_steps, sampler_for(mcfg.layout),
                                   seed=cfg.seed, device=device, dtype=dtype, pad=cfg.pad)
        return _checked({**errs, "shape": [oshape.batch, oshape.frames, oshape.spatial], "depth": ocfg.depth}, cfg,
                        ledger=True)
    # A method that cannot train here (MethodSpec.check_run) is checked forward only, in infer/sample.
    backward = cfg.mode == "train" or spec.check_run(cfg.dtype, "train", cfg.backend) is None
    errs = oracle_errors(spec, ocfg, oshape, dims, seed=cfg.seed, device=device, dtype=dtype, backward=backward,
                         pad=cfg.pad)
    errs["shape"] = [oshape.batch, oshape.frames, oshape.spatial]
    errs["depth"] = ocfg.depth
    return _checked(errs, cfg)


def _checked(errs: dict, cfg: RunConfig, ledger: bool = False) -> dict:
    """`ledger`: the check's bytes must equal its formula too (the CFG exchange, counted or skipped)."""
    if not within_tolerance(errs, cfg.dtype) or (ledger and errs["ledger"] != errs["formula"]):
        raise OracleMismatch(f"oracle check failed: output err {errs['output']:.3g}, grad err "
                             f"{errs['grads']} ({errs['worst_param']}), input grad err {errs['input_grad']}; "
                             f"ledger == formula: {errs['ledger'] == errs['formula']}")
    return {k: errs[k] for k in (*ORACLE_PARTS, "shape", "depth")}


def _collect(cfg, spec, mcfg, shape, dims, device, times, losses, led, oracle, mem, eng) -> dict | None:
    per_rank = comm.all_gather_object({
        "times": times, "peak_mem": mem["peak"], "base_mem": mem["base"], "rss": mem["rss"],
        "base_rss": mem["base_rss"],
        "losses": [None if l is None else float(l) for l in losses],
        "dp_rank": comm.rank(dims.dp_group), "sp_rank": comm.rank(dims.sp_group),
        "comm": led.totals(), "engine_comm": eng.totals(), **environ.local_facts(device),
    })
    if comm.world_rank() != 0:
        return None
    step_times = [max(r["times"][i] for r in per_rank) for i in range(len(times))]
    # CFG: every model call sees cond + uncond, twice the batch; ZeRO: the engine reduces gradients.
    fshape = Shape(cfg.model_batch, cfg.frames, cfg.spatial)
    if cfg.mode == "sample":   # K forward passes per step, and the CFG exchange per pass under cfg_parallel
        formula = sample_comm_bytes(spec, mcfg, fshape, dims, TORCH_DTYPES[cfg.dtype], cfg.sample_steps)
    else:
        formula = spec.comm_bytes(mcfg, fshape, dims, TORCH_DTYPES[cfg.dtype],
                                  "train" if cfg.mode == "train" else "infer", engine=cfg.zero > 0)
    tagged = led.totals()
    model = memory(spec, mcfg, padded_shape(spec, mcfg, fshape, dims), dims.sp, dims.dp, cfg.dtype, cfg.mode,
                   spec.plan(mcfg, fshape, dims, cfg.dtype, "train" if cfg.mode == "train" else "infer",
                             engine=cfg.zero > 0), cfg.zero)
    return {
        # the memory model for this very configuration, beside what the run added to each rank
        "mem_model": model, "mem_run_bytes": max(r["peak_mem"] - r["base_mem"] for r in per_rank),
        **_engine_fields(cfg, spec, mcfg, dims, eng, per_rank),
        "mem_base_bytes_per_rank": [r["base_mem"] for r in per_rank], "peak_mem_reset": mem["reset"],
        "mem_peak_step": mem["how"],
        # CPU: the timed steps' resident peak over the resident size before the model, as measured before
        "rss_run_bytes": (None if per_rank[0]["rss"] is None
                          else max(r["rss"] - r["base_rss"] for r in per_rank)),
        "attn_kernel": describe_kernels(device, TORCH_DTYPES[cfg.dtype], mcfg.heads, mcfg.hidden // mcfg.heads),
        "step_times_s": step_times, **measure.summarize(step_times),
        "peak_mem_bytes_per_rank": [r["peak_mem"] for r in per_rank],
        "losses": _dp_mean_losses(per_rank) if cfg.mode == "train" else None,
        "comm_tagged": tagged, "comm": untag(tagged), "comm_wire_bytes": led.wire_total,
        "comm_time_s": led.times(), "comm_formula": formula, "comm_formula_match": tagged == formula,
        "comm_symmetric": all(r["comm"] == tagged for r in per_rank),   # every rank moved the same bytes
        "oracle_max_abs_err": (None if oracle is None
                               else max(oracle[k] for k in ORACLE_PARTS if oracle[k] is not None)),
        "oracle_errors": oracle,
        "environ": environ.environ(per_rank),
        "placement": dims.placement([r["hostname"] for r in per_rank]),   # each rank's node, groups' spans
        "device_name": per_rank[0]["device"],
    }


def _engine_fields(cfg, spec, mcfg, dims, eng, per_rank) -> dict:
    """Under --zero 1|2: DeepSpeed's own collectives as its engine ledger recorded them (rank 0's),
    beside the formula (cost/comm.py engine_ops) and whether every rank recorded exactly that."""
    if not cfg.zero:
        return {"engine_comm": None, "engine_comm_formula": None, "engine_comm_formula_match": None,
                "engine_comm_time_s": None}
    formula = engine_comm(spec, mcfg, dims, TORCH_DTYPES[cfg.dtype].itemsize, cfg.zero)
    return {"engine_comm": eng.totals(), "engine_comm_formula": formula,
            "engine_comm_formula_match": all(r["engine_comm"] == formula for r in per_rank),
            "engine_comm_time_s": eng.times()}


def _dp_mean_losses(per_rank: list[dict]) -> list[float]:
    """The global-batch loss per step: mean over DP replicas (SP ranks of a replica agree)."""
    firsts = [r["losses"] for r in per_rank if r["sp_rank"] == 0]
    return [sum(ls[i] for ls in firsts) / len(firsts) for i in range(len(firsts[0]))]


def inject_fault(spec: str) -> None:
    """Tests only: `KIND@RANK` makes that rank raise, hang, run out of memory or exit mid-run, or be
    slow (SLOW_S seconds late, then fine: a run that takes a known minimum time)."""
    if not spec:
        return
    kind, _, rank = spec.partition("@")
    if comm.world_rank() != int(rank or 0):
        return
    if kind == "raise":
        raise RuntimeError("injected fault")
    if kind == "oom":
        raise MemoryError("injected out-of-memory")
    if kind == "exit":
        os._exit(3)
    if kind == "hang":
        time.sleep(10 ** 6)
    if kind == "slow":
        time.sleep(SLOW_S)
        return
    raise ValueError(f"unknown fault kind {kind!r} (raise|hang|oom|exit|slow)")


SLOW_S = 5.0
