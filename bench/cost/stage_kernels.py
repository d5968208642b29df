"""The pipeline's stages that SP does not shrink, priced kernel by kernel on the GPU's rate table.

- VAE decode: models/vae.py's decoder traced on the meta device (bench/cost/rank_trace.py's
  dispatch mode) at the latents it decodes, each convolution at the table's conv rate for the
  decode's dtype, every norm, activation, upsampling copy and residual add by its bytes at HBM
  speed. `single` decodes the whole video at once; `tiled` decodes each window of the pipeline's
  tiling (models/vae.py Tiling, tile_shapes: the preset's [sampling] decode_tile and decode_stride,
  or the default) whole, so the overlaps are decoded twice, as diffusers' tiled decoders do.
- text encoder: a transformer encoder's GEMMs, 2 x parameters x tokens per prompt, at the table's
  GEMM rate for GEMMs of its width (ENCODER_WIDTH: T5-XXL, umT5-XXL and Llama-3-8B are all 4096 wide,
  FFN 4x: the GEMM a token row meets is tokens x 4096 x 16384).
"""
from __future__ import annotations

import functools
from collections import Counter

from dspbench.cost.kernel_price import price_kernel, resolve_attn_kernel
from dspbench.cost.kernel_rates import load_rate_table

ENCODER_WIDTH = 4096


@functools.lru_cache(maxsize=64)
def decoder_kernels(vae, T: int, H: int, W: int, dtype: str) -> tuple:
    """((Kernel, calls), ...) of one decode of T x H' x W' latents."""
    import torch
    from dspbench.cost.rank_trace import trace_ops
    from dspbench.models.dtypes import TORCH_DTYPES
    from dspbench.models.vae import VAEDecoder
    with torch.device("meta"):
        model = VAEDecoder(vae).to(TORCH_DTYPES[dtype])
        z = torch.empty(1, vae.z_channels, T, H, W, dtype=TORCH_DTYPES[dtype])
    with torch.no_grad():
        kernels, _ = trace_ops(lambda: model(z))
    return tuple(kernels.items())


def decode_seconds(profile, vae, T: int, H: int, W: int, dtype: str, variant: str, tiling,
                   attn_impl: str = "auto") -> dict:
    """{'seconds', 'flops', 'conv_s', 'memory_s', 'tiles', 'sources'} of one video's decode (its middle
    attention, where it has one, at the run's attention implementation)."""
    from dspbench.models.vae import tile_shapes
    table = load_rate_table(profile.sku)
    impl = resolve_attn_kernel(attn_impl, table, "vae")
    grid = tile_shapes(T, H, W, tiling) if variant == "tiled" else [(T, H, W)]
    out = {"seconds": 0.0, "flops": 0.0, "conv_s": 0.0, "memory_s": 0.0, "tiles": len(grid), "sources": {}}
    for (t, h, w), windows in Counter(grid).items():
        for k, n in decoder_kernels(vae, t, h, w, dtype):
            n *= windows
            s, bound, rate = price_kernel(k, table, profile.hbm_Bps, impl)
            out["seconds"] += s * n
            out["flops"] += k.flops * n
            out["conv_s" if k.kind == "conv" else "memory_s"] += s * n
            if rate is not None:
                out["sources"][rate.label()] = out["sources"].get(rate.label(), 0.0) + s * n
    return out


def text_encode_seconds(profile, flops: float, tokens: int, dtype: str) -> tuple[float, str]:
    """(seconds, source) of a text encoder's forward of `flops` over `tokens` tokens."""
    table = load_rate_table(profile.sku)
    sat, half = table.gemm(dtype)
    per_gemm = 2.0 * tokens * ENCODER_WIDTH * 4 * ENCODER_WIDTH
    rate = sat.value * per_gemm / (per_gemm + half) if half else sat.value
    return flops / rate, sat.label()
