"""The whole sampling pipeline, priced: text encoding, the denoising steps, the VAE decode.

`predict --mode sample` priced only the denoising steps; a user's latency also holds the text
encoder (once per prompt, twice with CFG's negative prompt) and the VAE decode (once per video),
which SP does not shrink unless they are parallelised. Each stage here has its FLOPs, its seconds
and, for the VAE, its variant:
- `text_encode`: 2 x encoder parameters x text tokens per prompt (a transformer encoder's GEMMs),
  at the profile's rate; the encoder by the model's layout (TEXT_ENCODERS);
- `vae_decode`: the VAE decoder of models/vae.py (Wan 2.1's causal 3-D structure for full3d, Stable
  Diffusion's 2-D one frame by frame for OpenSora 1.0's STDiT) on the video's latents: its FLOPs
  counted on the meta device, at the curve's `conv_peak_fraction` of peak (0.14 measured on an H200
  at 480p: results/gpu-h200/vae.json), else the profile's `[compute] conv_peak_fraction` (the
  Hopper datasheet profiles state that measurement), else the profile's efficiency; `tiled` decodes
  each window of the pipeline's tiling on its own (models/vae.py Tiling: the preset's [sampling]
  decode_tile / decode_stride as its source pipeline tiles, e.g. HunyuanVideo's 5 latent frames by
  32 x 32 at strides 3 and 24, else spatial 32 x 32 at 24), so it adds the overlaps' work and runs
  smaller kernels; the variant a preset's pipeline runs is its [sampling] decode (decode_of),
  `patch_parallel` is the decode over the SP group as methods/vae_patch.py runs it (xDiT's parallel
  VAE: latent rows split, halo rows exchanged before every spatial convolution, the middle
  attention's K and V all-gathered, the video's slabs all-gathered at the end): the rank with the
  most rows computes its slab and its queries against every key (the halo adds no work), and since
  every exchange waits for the neighbours, the decode takes that compute plus the most any rank
  communicates (a rank inside the group: two halos), each op of methods/vae_patch_plan.py's plan
  (the bytes the ledger is tested equal to) priced on the tiers the SP group crosses;
- `denoise`: the step model's prediction for the configuration (all sampling steps).
"""
from __future__ import annotations

from dataclasses import replace

from dspbench.cost.comm import plan_times
from dspbench.cost.hardware import prices_by_kernel
from dspbench.cost.stage_kernels import decode_seconds, text_encode_seconds
from dspbench.methods.comm.ledger import wire_bytes
from dspbench.methods.dims import Dims
from dspbench.methods.vae_patch_plan import plan, rank_flops
from dspbench.models.dtypes import dtype_size
from dspbench.models.vae import SD_VAE, WAN21_VAE, Tiling, VAEConfig, decoder_flops, decoder_params, tiling_flops

# encoder parameters (the encoder stack only): T5 v1.1 XXL 4.76B (OpenSora, Latte, CogVideoX),
# umT5-XXL 5.7B (Wan 2.1); sources in docs/gpu-evidence.md. Step-Video's Step-LLM has no published
# size: priced as the 8B LLM encoder of HunyuanVideo, its nearest published kin (text encoding is
# under 1% of a video's seconds either way).
TEXT_ENCODERS = {"t5-xxl": 4.76e9, "umt5-xxl": 5.7e9, "llava-llama-3-8b": 8.03e9, "step-llm": 8.03e9}
LAYOUT_PIPELINE = {"stdit": ("t5-xxl", SD_VAE), "stdit3": ("t5-xxl", WAN21_VAE),
                   "full3d": ("umt5-xxl", WAN21_VAE), "axial3d": ("t5-xxl", WAN21_VAE),
                   "hybrid3d": ("t5-xxl", WAN21_VAE)}
VAE_VARIANTS = ("single", "tiled", "patch_parallel")
DEFAULT_TILING = Tiling()      # `--vae tiled` on a model whose [sampling] states no tiling


def pipeline_of(model: str, mcfg) -> tuple[str, VAEConfig]:
    """(text encoder, VAE decoder) of a model: a preset or model file names its encoder and its VAE's
    compression (a causal 4x8x8 VAE decodes as Wan 2.1's, a per-frame 8x VAE as Stable Diffusion's),
    and where it describes its decoder ([vae] channels, ...), that decoder; built-ins go by their layout."""
    from dspbench.models.registry import resolve
    entry = resolve(model)
    encoder, vae = LAYOUT_PIPELINE.get(mcfg.layout, ("t5-xxl", WAN21_VAE))
    if entry.path:
        encoder = entry.sampling.get("text_encoder", encoder)
        vae = WAN21_VAE if entry.vae.causal and entry.vae.time == 4 else SD_VAE if entry.vae.time == 1 else vae
        vae = decoder_of(entry.vae, vae)
    return encoder, vae


def decoder_of(v, like: VAEConfig) -> VAEConfig:
    """The decoder a model file describes ([vae] channels, layers_per_block, ...), built like `like`
    (the causal 3-D or per-frame 2-D family its compression picked), with its time doublings in the
    deepest upsamplers, as CogVideoX's and Wan's decoders place them; `like` itself where the file
    gives no decoder. Described decoders are diffusers' (their upsamplers keep the channels)."""
    if not v.channels:
        return like
    ups = len(v.channels) - 1
    doublings = (v.time.bit_length() - 1) if like.time_kernel > 1 else 0
    return replace(like, z_channels=v.latent_channels, base=v.channels[0],
                   mult=tuple(c // v.channels[0] for c in v.channels), res_blocks=v.layers_per_block,
                   time_up=tuple(i < doublings for i in range(ups)), mid_attention=v.mid_attention,
                   upsample_halves=False)


def resident_bytes(cfg, mcfg) -> dict[str, float]:
    """What the rest of the pipeline keeps on every GPU while the DiT denoises: the text encoder's and
    the VAE decoder's weights in the model's dtype. xDiT and diffusers load the whole pipeline onto
    each device (`pipe.to(device)`); CPU offload is not modelled. The decode's own activations come
    after the DiT's are freed and depend on its tiling: not added."""
    encoder, vae = pipeline_of(cfg.model, mcfg)
    b = dtype_size(cfg.dtype)
    return {"text_encoder": TEXT_ENCODERS[encoder] * b, "vae": float(decoder_params(vae) * b)}


def latent_grid(mcfg, frames: int, spatial: int, video: str = "", model: str = "") -> tuple[int, int, int]:
    """(T, H', W') of the VAE latents behind T frames of S tokens: the video's own aspect where the run
    names its video (720 x 1280 through an 8x VAE is 90 x 160, not 120 x 120: a tiled decode's tiles
    follow the rows and columns), else square-ish; the model's patch undone."""
    if video and model:
        from dspbench.models.registry import parse_video, resolve
        try:
            vae = resolve(model).vae
            _, H, W = parse_video(video)
            return frames * mcfg.patch[0], H // vae.height, W // vae.width
        except (KeyError, ValueError):
            pass
    side = round(spatial ** 0.5)
    h, w = (side, spatial // side) if side * (spatial // side) == spatial else (1, spatial)
    ph, pw = mcfg.patch[1], mcfg.patch[2]
    return frames * mcfg.patch[0], h * ph, w * pw


def stage_seconds(cfg, mcfg, profile, denoise_s: float, variant: str | None = None) -> dict:
    """{'text_encode', 'denoise', 'vae_decode', 'total'} seconds of one video, with each stage's FLOPs;
    variant None: the one the model's pipeline runs (decode_of)."""
    variant = variant or decode_of(cfg.model)
    from dspbench.cost.curve import from_table
    if variant not in VAE_VARIANTS:
        raise ValueError(f"vae variant {variant!r}: one of {', '.join(VAE_VARIANTS)}")
    encoder, vae = pipeline_of(cfg.model, mcfg)
    rate = profile.flops(cfg.dtype)
    prompts = 2 if cfg.cfg else 1
    text_flops = 2 * TEXT_ENCODERS[encoder] * mcfg.text_len * prompts * cfg.batch
    T, H, W = latent_grid(mcfg, cfg.frames, cfg.spatial, cfg.video, cfg.model)
    tiling = tiling_of(cfg.model)
    vae_flops = (tiling_flops(vae, T, H, W, tiling) if variant == "tiled" else decoder_flops(vae, T, H, W))
    vae_flops *= cfg.batch
    curve = from_table(profile.curve)
    peak = float(profile.peak_flops.get(cfg.dtype) or rate)
    conv = curve.conv_peak_fraction if curve else profile.conv_peak_fraction
    vae_rate = peak * conv if conv else rate
    vae_s, vae_comm, text_s, detail = vae_flops / vae_rate, None, text_flops / rate, None
    if prices_by_kernel(profile):   # kernel by kernel on the GPU's rate table (cost/stage_kernels.py)
        vae_s, vae_rate, detail = kernel_decode(cfg, vae, profile, (T, H, W), variant, tiling)
        text_s = text_encode_seconds(profile, text_flops, mcfg.text_len, cfg.dtype)[0]
    if variant == "patch_parallel":
        vae_s, vae_comm = patch_parallel(cfg, vae, profile, (T, H, W), vae_rate)
    stages = {"text_encode": text_s, "denoise": denoise_s, "vae_decode": vae_s}
    stages["total"] = sum(stages.values())
    return {"seconds": stages, "flops": {"text_encode": text_flops, "vae_decode": vae_flops},
            "text_encoder": encoder, "vae_variant": variant, "latents": [T, H, W], "vae_comm_bytes": vae_comm,
            "vae_tiling": _tiling_doc(tiling) if variant == "tiled" else None,
            "vae_kernels": detail}


def decode_of(model: str) -> str:
    """The decode variant the model's pipeline runs: its [sampling] decode, else single."""
    return _sampling(model).get("decode", "single")


def tiling_of(model: str) -> Tiling:
    """The model's [sampling] tiling (decode_tile, decode_stride, decode_extra_frames, decode_source),
    else the default's."""
    samp = _sampling(model)
    if "decode_tile" not in samp:
        return DEFAULT_TILING
    return Tiling(tuple(samp["decode_tile"]), tuple(samp["decode_stride"]), int(samp.get("decode_extra_frames", 0)),
                  f"{model} [sampling]: {samp['decode_source']}")


def _sampling(model: str) -> dict:
    from dspbench.models.registry import resolve
    try:
        return dict(resolve(model).sampling)
    except (KeyError, ValueError):
        return {}


def _tiling_doc(t: Tiling) -> dict:
    return {"tile": list(t.tile), "stride": list(t.stride), "extra_frames": t.extra_frames, "source": t.source}


def kernel_decode(cfg, vae: VAEConfig, profile, latents: tuple, variant: str,
                  tiling: Tiling = DEFAULT_TILING) -> tuple[float, float, dict]:
    """(seconds, effective FLOP/s, breakdown) of the decode priced by its kernels; patch_parallel's compute
    is the largest slab's (ceil(H' / sp) rows) at that slab's effective rate (its comm is added by the caller)."""
    T, H, W = latents
    if variant == "patch_parallel":
        d = decode_seconds(profile, vae, T, -(-H // int(cfg.sp)), W, cfg.dtype, "single", tiling, cfg.attn_impl)
    else:
        d = decode_seconds(profile, vae, T, H, W, cfg.dtype, variant, tiling, cfg.attn_impl)
    return d["seconds"] * cfg.batch, d["flops"] / d["seconds"], d


def patch_parallel(cfg, vae: VAEConfig, profile, latents: tuple, vae_rate: float) -> tuple[float, int]:
    """(seconds, wire bytes of the rank that sends the most) of the decode over the SP group
    (module docstring): rank 0 holds the most rows; an end rank and an inside one bound the comm."""
    n, (T, H, W) = int(cfg.sp), latents
    dims = Dims(sp=n, dp=cfg.dp, cfg=cfg.cfg_degree)
    plans = [plan(vae, cfg.batch, T, H, W, n, r, dtype_size(cfg.dtype)) for r in sorted({0, min(1, n - 1)})]
    comm_s = max(sum(plan_times(profile, p, dims).values()) for p in plans)
    sent = max(sum(o.count * wire_bytes(o.op, o.payload, n) for _, o in p) for p in plans)
    return cfg.batch * rank_flops(vae, T, H, W, n, 0) / vae_rate + comm_s, sent
