"""full3d: today's video DiTs (Wan 2.x, CogVideoX, HunyuanVideo, Open-Sora 2.0) attend over the
whole T x H' x W' token grid at once.

Blocks keep the grid as (B, T, S, C) (the `stdit` trunk, patch embedding and positions) and their
one self-attention flattens T x S into one sequence of L = T*S tokens. Text enters either by
cross-attention (`text_mode` cross: Wan 2.1) or by joining the self-attention (`joint`): the text
tokens attend and are attended to with the video tokens, and the text stream is updated by that
attention's output. `text_stream` attention (these Full3DBlocks): the text has its own q, k, v and
output projections, the MLP and adaLN table are shared; dual and expert (MMDiT, CogVideoX) are
models/mmdit.py's blocks, and `single_depth` single-stream blocks (models/single_stream.py) follow.
The last block's text output would feed nothing, so there the text gives keys and values only
(SD3's `context_pre_only`): no text queries, no text output projection.

Positions: Wan applies 3-D RoPE to q and k inside attention; here the fixed 3-D sine-cosine
table (2-D over H' x W' plus 1-D over T) is added at the embedding, as for stdit, so any shard of
the grid stays self-describing (a rotary table inside attention would need each shard's global
offsets). RoPE is element-wise: it changes neither the matmul FLOPs nor any communication.
"""
from __future__ import annotations

from torch import nn

from dspbench.models.block import DiTBlock
from dspbench.models.config import ModelConfig
from dspbench.models.dit import S_DIM, T_DIM, SpatialTemporalDiT, STDiT3Block
from dspbench.models.full_attention import FullAttention
from dspbench.models.layers import per_sample
from dspbench.models.mmdit import DualStreamBlock, ExpertBlock
from dspbench.models.single_stream import SingleStreamBlock


class Full3DBlock(DiTBlock):
    """Wan 2.1: x += g*SA(mod(norm x)); x += CA(x, y); x += g*MLP(mod(norm x)).
    joint: x, y += g*JointSA(mod(norm x), mod(norm y)); x += g*MLP(mod(norm x))."""

    def __init__(self, cfg: ModelConfig, last: bool = False):
        self.text = None if not cfg.joint else "kv" if last else "qkv"
        super().__init__(cfg)

    def make_attention(self, cfg: ModelConfig) -> None:
        self.full_attn = FullAttention(cfg.hidden, cfg.heads, self.text)

    def mix(self, x, y, pre, gate):
        if self.text is None:
            return x + per_sample(gate, x) * self.full_attn(pre(x)), y
        o, ot = self.full_attn(pre(x), pre(y))
        return x + per_sample(gate, x) * o, (y if ot is None else y + per_sample(gate, y) * ot)


class Full3DDiT(SpatialTemporalDiT):
    """Latents (B, Cin, T, H, W) -> (B, Cout, T, H, W); blocks over (B, T, S, C), attention over T*S.

    hybrid3d: each of `depth` steps is a spatial block, a temporal block (STDiT3's) and a full block,
    so some attentions are local along a sequence dim and some along none.
    """

    def make_blocks(self, cfg: ModelConfig) -> nn.ModuleList:
        if cfg.layout == "hybrid3d":
            return nn.ModuleList(b for _ in range(cfg.depth)
                                 for b in (STDiT3Block(cfg, S_DIM), STDiT3Block(cfg, T_DIM), Full3DBlock(cfg)))
        last = cfg.stack_depth - 1
        joint = {"attention": Full3DBlock, "dual": DualStreamBlock, "expert": ExpertBlock}[cfg.text_stream]
        return nn.ModuleList([joint(cfg, last=(i == last)) for i in range(cfg.depth)]
                             + [SingleStreamBlock(cfg, last=(i == last)) for i in range(cfg.depth, cfg.stack_depth)])
