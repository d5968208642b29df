"""Analytic parameter counts and forward FLOPs (tested against brute-force counts and the trace)."""
from __future__ import annotations

from dspbench.models.config import ModelConfig, Shape
from dspbench.models.modulation import vectors


def _linear(i: int, o: int) -> int:
    return i * o + o


def _adaln(cfg: ModelConfig, n: int, width: int) -> int:
    """A block's modulation: linear (its own projection of the timestep) or a learned table."""
    return _linear(cfg.time_width, n * width) if cfg.modulation == "linear" else n * width


def _text_out(cfg: ModelConfig, i: int) -> bool:
    """Whether block `i` of the stack updates the text (all but the last: keys and values only)."""
    return cfg.joint and i < cfg.stack_depth - 1


def joint_block_params(cfg: ModelConfig, i: int) -> dict[str, int]:
    """One of the `depth` joint blocks (models/full3d.py, models/mmdit.py), by part."""
    C, F, Ct, Ft, out = cfg.hidden, cfg.mlp_hidden, cfg.text_width, cfg.text_mlp_hidden, _text_out(cfg, i)
    if cfg.text_stream == "expert":   # the text goes through the block's own q, k, v and output
        text_attn = 0
    else:                             # text_qkv and text_proj; the last block's text_kv alone
        text_attn = _linear(Ct, 3 * C) + _linear(C, Ct) if out else _linear(Ct, 2 * C)
    parts = {"self_attn": _linear(C, 3 * C) + _linear(C, C) + text_attn, "mlp": _linear(C, F) + _linear(F, C),
             "modulation": _adaln(cfg, vectors(2, cfg.adaln_shift), C)}
    if cfg.text_stream != "attention":    # the text stream's own modulation (and, dual, MLP)
        parts["modulation"] += _adaln(cfg, vectors(2, cfg.adaln_shift) if out else vectors(1, cfg.adaln_shift, 2), Ct)
        parts["text_mlp"] = _linear(Ct, Ft) + _linear(Ft, Ct) if out and cfg.text_stream == "dual" else 0
    return parts


def single_block_params(cfg: ModelConfig) -> int:
    """A single-stream block (models/single_stream.py): the two fused linears and its modulation."""
    C, F = cfg.hidden, cfg.mlp_hidden
    return _linear(C, 3 * C + F) + _linear(C + F, C) + _adaln(cfg, vectors(1, cfg.adaln_shift), C)


def block_params(cfg: ModelConfig) -> dict[str, int]:
    """Parameters of the block stack by part."""
    if cfg.joint:
        out: dict[str, int] = {"cross_attn": 0, "single": cfg.single_depth * single_block_params(cfg)}
        for i in range(cfg.depth):
            for k, v in joint_block_params(cfg, i).items():
                out[k] = out.get(k, 0) + v
        return out
    C, F = cfg.hidden, cfg.mlp_hidden
    self_attn = _linear(C, 3 * C) + _linear(C, C)
    cross = _linear(C, C) + _linear(C, 2 * C) + _linear(C, C)
    return {"self_attn": cfg.n_self_attn * self_attn, "cross_attn": cfg.n_cross_attn * cross,
            "mlp": cfg.n_blocks * (_linear(C, F) + _linear(F, C)),
            "modulation": cfg.n_blocks * _adaln(cfg, vectors(2, cfg.adaln_shift), C)}


def param_breakdown(cfg: ModelConfig) -> dict[str, int]:
    C, pv, tw, Ct = cfg.hidden, cfg.patch_volume, cfg.time_width, cfg.text_width
    table = cfg.modulation == "table"
    embed = {
        "x_embedder": cfg.in_channels * pv * C + C,
        "t_embedder": _linear(cfg.freq_dim, tw) + _linear(tw, tw),
        "t_block": _linear(C, 6 * C) if table else 0,
        "y_embedder": _linear(cfg.caption_channels, Ct) + _linear(Ct, Ct),
        "final_layer": (2 * C if table else _linear(tw, 2 * C)) + _linear(C, pv * cfg.out_channels),
    }
    return {**embed, **block_params(cfg)}


def param_count(cfg: ModelConfig) -> int:
    return sum(param_breakdown(cfg).values())


def _mm(tokens: int, i: int, o: int) -> int:
    return 2 * tokens * i * o


def _adaln_mm(cfg: ModelConfig, n: int, width: int) -> int:
    """A block's projection of the timestep (modulation linear: one token); a table costs none."""
    return _mm(1, cfg.time_width, n * width) if cfg.modulation == "linear" else 0


def _mlp(tokens: int, i: int, f: int) -> int:
    return _mm(tokens, i, f) + _mm(tokens, f, i)


def joint_block_flops(cfg: ModelConfig, i: int, N: int) -> int:
    """Block `i` of the `depth` joint ones: video projections and MLP, the joint attention (Ly more
    keys; Ly more queries where the text continues), the text's projections, MLP and modulation."""
    C, F, Ct, Ft, Ly, out = cfg.hidden, cfg.mlp_hidden, cfg.text_width, cfg.text_mlp_hidden, cfg.text_len, _text_out(cfg, i)
    f = _mm(N, C, 3 * C) + _mm(N, C, C) + 4 * (N + (Ly if out else 0)) * (N + Ly) * C + _mlp(N, C, F)
    f += _adaln_mm(cfg, vectors(2, cfg.adaln_shift), C)
    if cfg.text_stream == "expert":   # the shared q, k, v run whole on the text (keys, values used)
        f += _mm(Ly, C, 3 * C) + (_mm(Ly, C, C) + _mlp(Ly, C, F) if out else 0)
    else:
        f += _mm(Ly, Ct, 3 * C) + _mm(Ly, C, Ct) if out else _mm(Ly, Ct, 2 * C)
    if cfg.text_stream == "dual" and out:
        f += _mlp(Ly, Ct, Ft)
    if cfg.text_stream != "attention":
        f += _adaln_mm(cfg, vectors(2, cfg.adaln_shift) if out else vectors(1, cfg.adaln_shift, 2), Ct)
    return f


def single_block_flops(cfg: ModelConfig, i: int, N: int) -> int:
    """Single-stream block `i`: the fused linear over video and text, the joint attention, the fused
    output linear (on the text too where it continues)."""
    C, F, Ly = cfg.hidden, cfg.mlp_hidden, cfg.text_len
    q = N + (Ly if _text_out(cfg, i) else 0)
    return (_mm(N + Ly, C, 3 * C + F) + 4 * q * (N + Ly) * C + _mm(q, C + F, C)
            + _adaln_mm(cfg, vectors(1, cfg.adaln_shift), C))


def flops_per_sample(cfg: ModelConfig, shape: Shape) -> int:
    """Forward FLOPs of one sample (multiply-add = 2 FLOPs; matmuls, convolutions and attention).

    Training is 3x this (backward = 2x forward); activation checkpointing adds one more forward.
    Element-wise work (norms, activations, modulation) is not counted, as in MFU conventions.
    """
    C, F, Ly, tw, Ct = cfg.hidden, cfg.mlp_hidden, cfg.text_len, cfg.time_width, cfg.text_width
    N = shape.frames * shape.spatial
    if cfg.joint:
        blocks = (sum(joint_block_flops(cfg, i, N) for i in range(cfg.depth))
                  + sum(single_block_flops(cfg, i, N) for i in range(cfg.depth, cfg.stack_depth)))
    else:   # depth attentions of each kind (over S, T; H', W', T; all T*S tokens for full3d)
        self_attn = lambda L: _mm(N, C, 3 * C) + _mm(N, C, C) + 4 * N * L * C
        cross = _mm(N, C, C) + _mm(Ly, C, 2 * C) + 4 * N * Ly * C + _mm(N, C, C)
        blocks = (cfg.depth * sum(self_attn(L) for L in cfg.attn_lengths(shape)) + cfg.n_cross_attn * cross
                  + cfg.n_blocks * (_mlp(N, C, F) + _adaln_mm(cfg, vectors(2, cfg.adaln_shift), C)))
    table = cfg.modulation == "table"
    embed = (_mm(N, cfg.in_channels * cfg.patch_volume, C) + _mm(1, cfg.freq_dim, tw) + _mm(1, tw, tw)
             + (_mm(1, C, 6 * C) if table else 0) + _mm(Ly, cfg.caption_channels, Ct) + _mm(Ly, Ct, Ct))
    final = _mm(N, C, cfg.patch_volume * cfg.out_channels) + (0 if table else _mm(1, tw, 2 * C))
    return embed + blocks + final
