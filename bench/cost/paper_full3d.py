"""Predicted tables for today's video DiTs (full3d, Wan 2.1's 14B class): where each method wins
and by how much, beside the stdit tables of bench/cost/paper.py (status `predicted`, not measured).

Latent shapes (assumed, stated in the tables): 81 frames through Wan's VAE (4x temporal, 8x8
spatial) and patch 1x2x2 give T = 21 latent frames of 52 x 30 tokens at 480p (832 x 480: S = 1560)
and 80 x 45 at 720p (1280 x 720: S = 3600). T = 21 divides no SP degree, so every embedded method
shards the flattened tokens of each frame (shard S), as xDiT splits the sequence. Where the degree
does not divide S (1560 at SP 16) the methods pad it (methods/padding.py, `--pad auto`): the cells
say the padded share of the tokens, which every rank computes and moves on.
"""
from __future__ import annotations

from dspbench.cost.autosp import resolved
from dspbench.cost.hardware import load_profile
from dspbench.cost.predict import predicted_record
from dspbench.records.config import RunConfig

SHAPES = {"480p": (21, 1560), "720p": (21, 3600)}
METHODS = ("dsp", "ulysses", "ring", "usp", "allgather_kv", "megatron_sp", "megatron_lm")
MODELS = ("full3d-14b", "full3d-joint-14b")
TRAIN = dict(dtype="bf16", grad_ckpt=True, backend="nccl", mode="train", shard="S", zero=2)
SAMPLE_STEPS = 50   # assumption: Wan 2.1's default T2V sampler steps
CFG_BATCH = 2       # assumption: classifier-free guidance as a batch of 2 (cond + uncond): cfg=True
# CFG parallelism (xDiT, VideoSys): cond and uncond on two halves of the GPUs, SP = GPUs / 2 inside each
CFG_PARALLEL_METHODS = ("ulysses", "usp", "ring", "allgather_kv")


def _fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def _pad(r) -> str:
    """The padding's share of the tokens, where there is one (records' pad_token_share)."""
    share = r.get("pad_token_share")
    return f", pad {share * 100:.1f}%" if share else ""


def _cell(r, reason) -> str:
    if r["samples_per_s"]:
        pad = _pad(r)
        return f"{r['sp']} / {_fmt(r['samples_per_s'])}" + (f" ({pad[2:]})" if pad else "")
    why = str(reason or r.get("error") or r["status"])
    # resolved() lists every degree's reason; DSP's is the same at each: not applicable.
    for needle, short in (("not applicable", "n/a"), ("predicted OOM", "no fit"), ("heads=", "heads % SP"),
                          ("spatial tokens S=", "S % SP")):
        if needle in why:
            return short
    return r["status"]


def training(emit, profile: str = "h100-ib") -> list[str]:
    prof = load_profile(profile)
    out = [f"## Today's video DiTs, training: Wan 2.1 14B class (full3d), bf16, ZeRO-2, checkpointing, {profile}; "
           "each method at its minimum SP (rest DP)", "",
           "Cells: SP / samples/s (global). n/a: the method cannot apply (DSP: no sequence dim along which every "
           "attention is local); no fit: no SP degree fits memory. Best: the fastest method and its lead over the runner-up.", "",
           "| model | video | T x S | GPUs | " + " | ".join(METHODS) + " | best |", "|" + "---|" * (5 + len(METHODS))]
    for model in MODELS:
        for video, (T, S) in SHAPES.items():
            for gpus in (8, 16, 32, 64):
                cells, rates = [], {}
                for m in METHODS:
                    cfg, reason = resolved(RunConfig(method=m, model=model, frames=T, spatial=S, gpus=gpus, sp="auto",
                                                     **TRAIN), prof)
                    r = emit(predicted_record(cfg, prof))
                    rates[m] = r["samples_per_s"]
                    cells.append(_cell(r, reason))
                out.append(f"| {model} | {video} | {T} x {S} | {gpus} | " + " | ".join(cells) + f" | {_best(rates)} |")
    return out


def inference(emit, profile: str = "h100-ib") -> list[str]:
    prof = load_profile(profile)
    out = [f"## Today's video DiTs, inference: one video, {SAMPLE_STEPS} sampling steps, CFG batch {CFG_BATCH} "
           f"(assumed), bf16, {profile}, SP = GPUs (8: one NVLink node; 16: two nodes over InfiniBand)", "",
           "Cells: seconds per video (of which exposed communication; pad: the padded share of the tokens, "
           "S = 1560 padded to 1568 at SP 16); n/a as above; heads % SP: the method splits heads and 40 do "
           "not divide by 16. cfgp+X: CFG parallel, the cond and uncond passes on two halves of the GPUs running X "
           "at SP = GPUs / 2 (batch 1 per call), the noise prediction exchanged with the peer GPU once per step "
           "(at 16 GPUs the pair crosses nodes).", "",
           "| model | video | T x S | GPUs | " + " | ".join(METHODS + _CFGP) + " | best |",
           "|" + "---|" * (5 + len(METHODS) + len(_CFGP))]
    for model in MODELS:
        for video, (T, S) in SHAPES.items():
            for gpus in (8, 16):
                out.append(_inference_row(emit, prof, model, video, T, S, gpus))
    return out


_CFGP = tuple(f"cfgp+{m}" for m in CFG_PARALLEL_METHODS)


def _inference_row(emit, prof, model, video, T, S, gpus) -> str:
    cells, rates = [], {}
    runs = [(m, m, gpus, False) for m in METHODS] + [(f"cfgp+{m}", m, gpus // 2, True) for m in CFG_PARALLEL_METHODS]
    for name, m, sp, cfg_parallel in runs:
        cfg = RunConfig(method=m, model=model, frames=T, spatial=S, batch=1, cfg=True, gpus=gpus, sp=sp,
                        cfg_parallel=cfg_parallel, mode="sample", sample_steps=SAMPLE_STEPS, dtype="bf16",
                        backend="nccl", shard="S")
        r = emit(predicted_record(cfg, prof))
        t = r["step_time_median_s"] if r["samples_per_s"] else None
        rates[name] = 1 / t if t else None
        cells.append(f"{t:.1f} ({_fmt(r['predicted_comm_time_s'], '.1f')} comm{_pad(r)})" if t else _cell(r, None))
    return f"| {model} | {video} | {T} x {S} | {gpus} | " + " | ".join(cells) + f" | {_best(rates)} |"


def _best(rates: dict) -> str:
    """The fastest method and its lead over the runner-up, or 'tie' when all are within 1%."""
    ranked = sorted(((v, m) for m, v in rates.items() if v), reverse=True)
    if len(ranked) < 2:
        return ranked[0][1] if ranked else "-"
    if ranked[0][0] / ranked[-1][0] < 1.01:
        return "tie (within 1%)"
    return f"{ranked[0][1]} ({ranked[0][0] / ranked[1][0]:.2f}x {ranked[1][1]})"


DISCUSSION = """
## Today's video DiTs (full3d, Wan 2.1 14B class): where each method wins, and where DSP stops

- **DSP does not apply.** Every block attends over all T x H' x W' tokens at once, so there is no
  sequence dim to hold the shard on while attention runs (`dsp` check: "not applicable: no sequence
  dim along which every attention is local"). `dsp_hybrid` (DSP's switches where attention is local
  along a dim, Ulysses inside full attention) is Ulysses here, byte for byte; it differs only on
  models that keep some factorized blocks (`hybrid3d`).
- **Training at the minimum SP, the methods tie within 1-2%.** With ZeRO-2 (DeepSpeed's engine
  shards gradients and optimizer states) and checkpointing, the 14B class fits on 8 GPUs at SP 2
  (480p) and SP 4 (720p; Megatron-SP and Megatron-LM SP at SP 2, as they also shard the weights;
  the re-gathering Megatron-LM SP runs within 1% of Megatron-SP here), and at SP 1-2 from 16
  GPUs up; communication is then a few percent of a step dominated by O(L^2) attention over
  33k-76k tokens.
- **Inference inside one node (SP 8): Ring leads by 2-4%**, since its K/V hops hide under the long
  attention (the profile's overlap), Ulysses and USP (here 8 x 1) expose 1.8-4 s of all-to-alls per
  video, all-gather KV 7-15 s, Megatron-SP 13-45 s (its 8M per layer; Megatron-LM SP is the same
  without a backward).
- **Across two nodes (SP 16) USP wins by ~1.6x over Ring at 720p**: Ulysses cannot split 40 heads
  16 ways, USP runs 8 (NVLink) x 2 (InfiniBand ring), and the pure ring and all-gather KV pay
  InfiniBand on every hop. At 480p S = 1560 does not divide by 16: padded to 1568 (0.5% of the
  tokens are pads, masked as keys; methods/padding.py), USP runs 24.8 s per video (23.1 joint),
  3.0-3.2x Ring and all-gather KV, which pay InfiniBand on every hop as at 720p.
- **Where padding costs what at Wan's shapes** (`padding.waste`): sharding S, 480p pads 0.5% of
  the tokens at SP 16 and none at SP 2-8; 720p (S = 3600) none up to SP 16. Sharding T instead
  (21 frames) would pad 12.5% at SP 8 (24 frames) and 34% at SP 16 (32): the per-token compute
  and the activation bytes grow by those shares and attention's query x key work by 23% and 57%,
  which is why every embedded method here shards S.
- **Joint text (MMDiT-style) is ~7% faster per video than cross-attention** at this size: it drops
  the cross-attention's q and output projections over every video token and adds only 512 keys to
  each attention; its communication adds one text-output all-gather of B x 512 x C per attention for
  the head-splitting methods and nothing for Ring and all-gather KV.
"""
