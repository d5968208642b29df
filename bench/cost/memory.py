"""Memory per rank: parameters, gradients, optimizer states (ZeRO 0-3), activations, comm buffers.

Static (bytes per parameter this rank keeps; P_local = replicated + sharded / sp):
- weights: dtype bytes; gradients: dtype bytes; optimizer: AdamW m and v in fp32 (8 B), plus an
  fp32 master copy (4 B) when the model is bf16/fp16 (bench/run/steps.py MasterWeights).
- ZeRO shards over the ranks that replicate a parameter: SP-replicated parameters are replicated
  over the whole world (the reference code averages their gradients over it), method-sharded ones
  (Megatron-SP's TP weights) over DP. Stage 1: optimizer; 2: + gradients; 3: + weights.
Activations (train), elements per token per block x hidden x dtype bytes, Korthikanti et al. 2022
("Reducing Activation Recomputation", Table 2) without dropout masks and with flash attention (no
L^2 scores), plus the adaLN modulate and gate inputs of a DiT block:
- self-attention 8 (norm in, modulated in, q, k, v, attention out, gate in, residual),
- cross-attention 5, MLP 3 + 2 * mlp_hidden / hidden (norm in, modulated in, fc1 in, GELU in/out,
  gate in); per block of the layout (stdit: 2 self-attentions; axial3d: 3; full3d: one over T*S,
  no cross-attention with joint text; a single-stream block as one self-attention and one MLP,
  tests/test_mmdit.py).
Every method keeps 1/sp of the tokens' activations (Megatron-SP's tensor-parallel regions hold 1/sp
of the channels), except those its spec lists as `unsharded_saved`: Megatron-SP's gathered linear
inputs, kept full length for the weight gradients (Megatron-LM re-gathers them in the backward
instead; Korthikanti's Table 2 assumes that). Measured on 2 and 4 ranks (tests/test_memory_saved.py),
the saved tensors of Megatron-SP exceed DSP's by exactly this term. Checkpointing keeps each block's
input and one block's activations during its recompute. Inference (no autograd) keeps only what is
live inside one block at its widest, the MLP: the block's input, its modulated norm, fc1's output and
the activation's output (2 + 2 x mlp_hidden / hidden), or the attention's input, modulated input, q,
k, v and output (6) if wider; plus the residual stream outside the block (1). On CPU, measured with
the live-heap probe of `run`, a forward of stdit and full3d models came to 11 hidden-units per token
at mlp ratio 4, as this says (tests/test_memory_infer.py); the training count (24-32) is 2-3x that.
Comm buffers: the largest transient of the method's SP collectives (send + receive buffers) on
top of the activations; the gradient all-reduce's flat buffer comes after the activations are
freed, so the peak is static + max(activations + comm buffers, gradient buffer).
"""
from __future__ import annotations

from dspbench.models.config import ModelConfig, Shape
from dspbench.models.params import param_count
from dspbench.models.dtypes import dtype_size
from dspbench.records.engine import BUCKET_ELEMS

SELF_ATTN, CROSS_ATTN = 8, 5
IO_ELEMS = 4            # embedder output, final-layer input, their gradients (per token, x hidden)
ATTN_LIVE = 6           # inference: an attention's input, modulated input, q, k, v, output
RESIDUAL_LIVE = 1       # inference: the residual stream outside the block being computed


def mlp_elems(cfg: ModelConfig) -> float:
    return 3 + 2 * cfg.mlp_hidden / cfg.hidden


def block_elems(cfg: ModelConfig) -> float:
    """Saved activation elements per token per block (the layout's blocks averaged), in units of hidden."""
    return (cfg.n_self_attn * SELF_ATTN + cfg.n_cross_attn * CROSS_ATTN) / cfg.n_blocks + mlp_elems(cfg)


def infer_elems(cfg: ModelConfig) -> float:
    """Live elements per token during a forward without autograd, in units of hidden (module docstring)."""
    return max(ATTN_LIVE, 2 + 2 * cfg.mlp_hidden / cfg.hidden) + RESIDUAL_LIVE


def n_blocks(cfg: ModelConfig) -> int:
    return cfg.n_blocks


def param_split(spec, cfg: ModelConfig, sp: int) -> tuple[int, int]:
    """(replicated, this rank's share of method-sharded) parameters."""
    sharded = spec.sharded_params(cfg)
    return param_count(cfg) - sharded, sharded // sp


def static_bytes(spec, cfg, sp: int, dp: int, dtype: str, mode: str, zero: int) -> dict[str, float]:
    b = dtype_size(dtype)
    repl, shard = param_split(spec, cfg, sp)
    local = repl + shard
    zeroed = repl / (sp * dp) + shard / dp          # this rank's share when ZeRO partitions
    share = lambda stage: zeroed if zero >= stage else local
    if mode != "train":
        return {"weights": share(3) * b, "grads": 0.0, "optimizer": 0.0}
    return {"weights": share(3) * b, "grads": share(2) * b, "optimizer": share(1) * opt_state_bytes(dtype, zero)}


def opt_state_bytes(dtype: str, zero: int) -> int:
    """AdamW m and v in fp32, plus an fp32 master copy for a low-precision model, or under
    DeepSpeed's ZeRO (its optimizer keeps an fp32 copy of its partition even of an fp32 model)."""
    return 12 if (zero or dtype != "fp32") else 8


def activation_bytes(cfg: ModelConfig, shape: Shape, sp: int, dtype: str, mode: str) -> float:
    b, C = dtype_size(dtype), cfg.hidden
    # Joint text (full3d): the text stream is replicated, whole on every rank (counted like tokens:
    # an upper bound, text tokens skip the MLP).
    tokens = shape.batch * shape.tokens / sp + (shape.batch * cfg.text_len if cfg.joint else 0)
    if mode != "train":
        return infer_elems(cfg) * C * b * tokens
    per_block = block_elems(cfg) * C * b * tokens
    io = IO_ELEMS * C * b * tokens
    if cfg.grad_ckpt:
        return n_blocks(cfg) * C * b * tokens + per_block + io
    return n_blocks(cfg) * per_block + io


def unsharded_bytes(spec, cfg: ModelConfig, shape: Shape, sp: int, dtype: str, mode: str) -> float:
    """What the method's full-length saved activations add over their 1/sp shares (training only;
    with checkpointing, one block's worth during its recompute)."""
    count = spec.unsharded_saved(cfg)
    if not count or sp == 1 or mode != "train":
        return 0.0
    if cfg.grad_ckpt:
        count = count / n_blocks(cfg)
    return count * cfg.hidden * dtype_size(dtype) * shape.batch * shape.tokens * (1 - 1 / sp)


def comm_buffer_bytes(plan, zero: int = 0, dtype: str = "fp32") -> float:
    """Largest transient of one SP collective: its send and receive buffers (grad syncs excluded);
    under ZeRO plus the engine's gradient bucket, alive through the backward."""
    sizes = [2 * o.payload for _, o in plan if o.count and o.group == "sp" and o.op != "all_reduce"]
    bucket = BUCKET_ELEMS * dtype_size(dtype) if zero else 0
    return float(max(sizes, default=0) + bucket)


def grad_buffer_bytes(plan) -> float:
    # the hand-rolled gradient syncs' flat buffer; the ZeRO engine's buckets (tags zero_*) are
    # comm_buffer_bytes' bucket
    return float(max((o.payload for _, o in plan if o.op == "all_reduce" and not o.tag.startswith("zero_")),
                     default=0))


def memory(spec, cfg: ModelConfig, shape: Shape, sp: int, dp: int, dtype: str, mode: str, plan,
           zero: int = 0) -> dict[str, float]:
    """Bytes per rank by part, and the predicted peak."""
    st = static_bytes(spec, cfg, sp, dp, dtype, mode, zero)
    act = activation_bytes(cfg, shape, sp, dtype, mode) + unsharded_bytes(spec, cfg, shape, sp, dtype, mode)
    buf = comm_buffer_bytes(plan, zero if mode == "train" else 0, dtype)
    grad_buf = grad_buffer_bytes(plan) if mode == "train" else 0.0
    static = sum(st.values())
    return {**st, "activations": act, "comm_buffers": buf, "grad_buffer": grad_buf,
            "peak": static + max(act + buf, grad_buf)}
