"""Analytic parameter counts and forward FLOPs (tested against brute-force counts)."""
from __future__ import annotations

from dspbench.models.config import ModelConfig, Shape


def _linear(i: int, o: int) -> int:
    return i * o + o


def block_params(cfg: ModelConfig) -> dict[str, int]:
    """Parameters of one block by part, for the layout's block type(s) over the whole depth."""
    C, F = cfg.hidden, cfg.mlp_hidden
    self_attn = _linear(C, 3 * C) + _linear(C, C)
    cross = _linear(C, C) + _linear(C, 2 * C) + _linear(C, C)
    mlp = _linear(C, F) + _linear(F, C)
    n_self, n_blocks = cfg.n_self_attn, cfg.n_blocks   # depth self-attentions of each kind
    # joint text: its own q, k, v and output projections; the last block's keys and values only.
    text = cfg.n_text_out * (_linear(C, 3 * C) + _linear(C, C)) + (_linear(C, 2 * C) if cfg.joint else 0)
    return {"self_attn": n_self * self_attn + text, "cross_attn": cfg.n_cross_attn * cross,
            "mlp": n_blocks * mlp, "modulation": n_blocks * 6 * C}


def param_breakdown(cfg: ModelConfig) -> dict[str, int]:
    C, pv = cfg.hidden, cfg.patch_volume
    embed = {
        "x_embedder": cfg.in_channels * pv * C + C,
        "t_embedder": _linear(cfg.freq_dim, C) + _linear(C, C),
        "t_block": _linear(C, 6 * C),
        "y_embedder": _linear(cfg.caption_channels, C) + _linear(C, C),
        "final_layer": 2 * C + _linear(C, pv * cfg.out_channels),
    }
    return {**embed, **block_params(cfg)}


def param_count(cfg: ModelConfig) -> int:
    return sum(param_breakdown(cfg).values())


def flops_per_sample(cfg: ModelConfig, shape: Shape) -> int:
    """Forward FLOPs of one sample (multiply-add = 2 FLOPs; matmuls, convolutions and attention).

    Training is 3x this (backward = 2x forward); activation checkpointing adds one more forward.
    Element-wise work (norms, activations, modulation) is not counted, as in MFU conventions.
    """
    C, F, T, S, Ly = cfg.hidden, cfg.mlp_hidden, shape.frames, shape.spatial, cfg.text_len
    N = T * S
    mm = lambda tokens, i, o: 2 * tokens * i * o
    self_attn = lambda L: mm(N, C, 3 * C) + mm(N, C, C) + 4 * N * L * C
    cross = mm(N, C, C) + mm(Ly, C, 2 * C) + 4 * N * Ly * C + mm(N, C, C)
    mlp = mm(N, C, F) + mm(N, F, C)
    if cfg.joint:   # Ly more queries, keys and values, the text projections; last block: text K, V only
        text_out = mm(N + Ly, C, 3 * C) + mm(N + Ly, C, C) + 4 * (N + Ly) ** 2 * C
        attn = cfg.n_text_out * text_out + self_attn(N + Ly) + mm(Ly, C, 2 * C)
    else:           # depth attentions of each kind (over S, T; H', W', T; all T*S tokens for full3d)
        attn = cfg.depth * sum(self_attn(L) for L in cfg.attn_lengths(shape))
    blocks = attn + cfg.n_blocks * mlp + cfg.n_cross_attn * cross
    embed = (mm(N, cfg.in_channels * cfg.patch_volume, C)
             + mm(1, cfg.freq_dim, C) + mm(1, C, C) + mm(1, C, 6 * C)
             + mm(Ly, cfg.caption_channels, C) + mm(Ly, C, C))
    final = mm(N, C, cfg.patch_volume * cfg.out_channels)
    return embed + blocks + final
