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
  at 480p: results/gpu-h200/vae.json) or the profile's efficiency; `tiled` adds the overlaps' work,
  `patch_parallel` divides the decode over the SP group (xDiT's parallel VAE; priced, its halo
  exchange not counted: it is not implemented here);
- `denoise`: the step model's prediction for the configuration (all sampling steps).
"""
from __future__ import annotations

from dspbench.models.vae import SD_VAE, WAN21_VAE, VAEConfig, decoder_flops, tiled_flops

# encoder parameters (the encoder stack only): T5 v1.1 XXL 4.76B (OpenSora, Latte, CogVideoX),
# umT5-XXL 5.7B (Wan 2.1); sources in docs/gpu-evidence.md. Step-Video's Step-LLM has no published
# size: priced as the 8B LLM encoder of HunyuanVideo, its nearest published kin (text encoding is
# under 1% of a video's seconds either way).
TEXT_ENCODERS = {"t5-xxl": 4.76e9, "umt5-xxl": 5.7e9, "llava-llama-3-8b": 8.03e9, "step-llm": 8.03e9}
LAYOUT_PIPELINE = {"stdit": ("t5-xxl", SD_VAE), "stdit3": ("t5-xxl", WAN21_VAE),
                   "full3d": ("umt5-xxl", WAN21_VAE), "axial3d": ("t5-xxl", WAN21_VAE),
                   "hybrid3d": ("t5-xxl", WAN21_VAE)}
VAE_VARIANTS = ("single", "tiled", "patch_parallel")
TILE, OVERLAP = 32, 8          # latent rows per tile and shared (pipelines' defaults are of this order)


def pipeline_of(model: str, mcfg) -> tuple[str, VAEConfig]:
    """(text encoder, VAE decoder) of a model: a preset or model file names its encoder and its VAE's
    compression (a causal 4x8x8 VAE decodes as Wan 2.1's, a per-frame 8x VAE as Stable Diffusion's);
    built-ins go by their layout."""
    from dspbench.models.registry import resolve
    entry = resolve(model)
    encoder, vae = LAYOUT_PIPELINE.get(mcfg.layout, ("t5-xxl", WAN21_VAE))
    if entry.path:
        encoder = entry.sampling.get("text_encoder", encoder)
        vae = WAN21_VAE if entry.vae.causal and entry.vae.time == 4 else SD_VAE if entry.vae.time == 1 else vae
    return encoder, vae


def latent_grid(mcfg, frames: int, spatial: int) -> tuple[int, int, int]:
    """(T, H', W') of the VAE latents behind T frames of S tokens (square-ish: the model's patch undone)."""
    side = round(spatial ** 0.5)
    h, w = (side, spatial // side) if side * (spatial // side) == spatial else (1, spatial)
    ph, pw = mcfg.patch[1], mcfg.patch[2]
    return frames * mcfg.patch[0], h * ph, w * pw


def stage_seconds(cfg, mcfg, profile, denoise_s: float, variant: str = "single") -> dict:
    """{'text_encode', 'denoise', 'vae_decode', 'total'} seconds of one video, with each stage's FLOPs."""
    from dspbench.cost.curve import from_table
    if variant not in VAE_VARIANTS:
        raise ValueError(f"vae variant {variant!r}: one of {', '.join(VAE_VARIANTS)}")
    encoder, vae = pipeline_of(cfg.model, mcfg)
    rate = profile.flops(cfg.dtype)
    prompts = 2 if cfg.cfg else 1
    text_flops = 2 * TEXT_ENCODERS[encoder] * mcfg.text_len * prompts * cfg.batch
    T, H, W = latent_grid(mcfg, cfg.frames, cfg.spatial)
    vae_flops = (tiled_flops(vae, T, H, W, TILE, OVERLAP) if variant == "tiled" else decoder_flops(vae, T, H, W))
    vae_flops *= cfg.batch
    curve = from_table(profile.curve)
    peak = float(profile.peak_flops.get(cfg.dtype) or rate)
    vae_rate = peak * curve.conv_peak_fraction if curve else rate
    ranks = int(cfg.sp) if variant == "patch_parallel" else 1
    stages = {"text_encode": text_flops / rate, "denoise": denoise_s, "vae_decode": vae_flops / vae_rate / ranks}
    stages["total"] = sum(stages.values())
    return {"seconds": stages, "flops": {"text_encode": text_flops, "vae_decode": vae_flops},
            "text_encoder": encoder, "vae_variant": variant, "latents": [T, H, W]}
