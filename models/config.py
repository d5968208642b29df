"""Model configurations: the dataclass is the schema, flavors live in a dict in code."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

# Sequence dims of each layout's block activation (see ModelConfig.seq_dims).
_SEQ_DIMS = {"stdit": {"T": 1, "S": 2}, "stdit3": {"T": 1, "S": 2}, "axial3d": {"T": 1, "H": 2, "W": 3},
             "full3d": {"T": 1, "S": 2}, "hybrid3d": {"T": 1, "S": 2}}
# The sequence dims each kind of self-attention spans, in block order (ModelConfig.attn_spans).
_ATTN_SPANS = {"stdit": (("S",), ("T",)), "stdit3": (("S",), ("T",)), "axial3d": (("H",), ("W",), ("T",)),
               "full3d": (("T", "S"),), "hybrid3d": (("S",), ("T",), ("T", "S"))}
TEXT_MODES = ("cross", "joint")
# How a joint block treats the text (models/mmdit.py): its own q, k, v and output only (MLP and
# modulation shared), MMDiT's two streams, or CogVideoX's expert adaLN (every linear shared).
TEXT_STREAMS = ("attention", "dual", "expert")
MODULATIONS = ("table", "linear")


@dataclass(frozen=True)
class ModelConfig:
    layout: str = "stdit"          # stdit (spatial+temporal in one block) | stdit3 (alternating blocks)
                                   # | axial3d (T, H, W attention in one block; models/axial.py)
                                   # | full3d (one attention over all T x S tokens; models/full3d.py)
                                   # | hybrid3d (a spatial, a temporal and a full3d block per depth)
    depth: int = 2                 # stdit, axial3d, full3d: blocks; stdit3: spatial/temporal block *pairs*;
                                   # hybrid3d: (spatial, temporal, full) block triples
    hidden: int = 64
    heads: int = 4
    mlp_ratio: float = 4.0
    in_channels: int = 4           # latent channels (SD VAE)
    patch: tuple[int, int, int] = (1, 2, 2)
    caption_channels: int = 4096   # T5-XXL feature width
    text_len: int = 120            # text tokens per sample
    learn_sigma: bool = True       # output channels = 2 * in_channels
    freq_dim: int = 256            # sinusoidal timestep features
    grad_ckpt: bool = False        # activation checkpointing per block
    mlp_dim: int = 0               # MLP width; 0: hidden * mlp_ratio (Wan publishes widths, not ratios)
    text_mode: str = "cross"       # cross: cross-attention to text (Wan); joint: text tokens join the
                                   # self-attention with their own projections (MMDiT; full3d only)
    # Joint text, full3d (models/mmdit.py, models/single_stream.py); the defaults are the class before them.
    text_stream: str = "attention" # attention: text has its own q, k, v, out only | dual: MMDiT's two
                                   # streams (own MLP and modulation too: SD3, Flux, HunyuanVideo, Mochi)
                                   # | expert: CogVideoX (text shares every linear, own modulation)
    single_depth: int = 0          # single-stream blocks after the `depth` joint ones (HunyuanVideo, Flux)
    text_hidden: int = 0           # text stream width in dual blocks; 0: hidden (Mochi: 1536 beside 3072)
    text_mlp_dim: int = 0          # text MLP width in dual blocks; 0: text width * mlp_ratio
    modulation: str = "table"      # table: one projection of the timestep, a learned table per block
                                   # (PixArt, Wan) | linear: each block projects the timestep (DiT, MMDiT)
    time_dim: int = 0              # timestep embedding width (modulation linear); 0: hidden (CogVideoX: 512)
    adaln_shift: bool = True       # adaLN shifts as well as scales and gates (false: Mochi, 4 vectors not 6)
    temporal_cross: bool = True    # stdit3: temporal blocks cross-attend to the text too (false: Latte's
                                   # temporal blocks have self-attention and MLP only)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def mlp_hidden(self) -> int:
        return self.mlp_dim or int(self.hidden * self.mlp_ratio)

    @property
    def out_channels(self) -> int:
        return self.in_channels * (2 if self.learn_sigma else 1)

    @property
    def patch_volume(self) -> int:
        pt, ph, pw = self.patch
        return pt * ph * pw

    @property
    def seq_dims(self) -> dict[str, int]:
        """Sequence dims of the blocks' activation, name -> dim: (B, T, S, C) or, axial3d, (B, T, H, W, C).

        Literals, because dit.py / axial.py import this module (T_DIM, S_DIM, H_DIM, W_DIM agree).
        """
        return dict(_SEQ_DIMS[self.layout])

    @property
    def attn_spans(self) -> tuple[tuple[str, ...], ...]:
        """The sequence dims each kind of self-attention attends over; `depth` of each in the stack."""
        return _ATTN_SPANS[self.layout]

    @property
    def joint(self) -> bool:
        return self.text_mode == "joint"

    @property
    def text_width(self) -> int:
        return self.text_hidden or self.hidden

    @property
    def text_mlp_hidden(self) -> int:
        return self.text_mlp_dim or int(self.text_width * self.mlp_ratio)

    @property
    def time_width(self) -> int:
        return self.time_dim or self.hidden

    @property
    def stack_depth(self) -> int:
        """Self-attentions of each kind in the stack: the `depth` blocks, then the single-stream ones."""
        return self.depth + self.single_depth

    @property
    def n_blocks(self) -> int:
        """Blocks in the stack; each has one MLP and (text_mode cross) one cross-attention."""
        return {"stdit3": 2, "hybrid3d": 3}.get(self.layout, 1) * self.depth + self.single_depth

    @property
    def n_self_attn(self) -> int:
        """Self-attentions in the stack: `depth` of each kind (one per sequence dim; full3d: one)."""
        return len(self.attn_spans) * self.stack_depth

    @property
    def n_text_out(self) -> int:
        """Joint attentions whose text output continues (all but the last block's: keys, values only)."""
        return self.stack_depth - 1 if self.joint else 0

    @property
    def n_joint_text_out(self) -> int:
        """Of those, the `depth` joint blocks' (the rest are single-stream blocks)."""
        return min(self.depth, self.n_text_out)

    @property
    def n_cross_attn(self) -> int:
        if self.joint:
            return 0
        return self.n_blocks - (self.depth if not self.temporal_cross else 0)   # stdit3 only (validate)

    def attn_lengths(self, shape: "Shape") -> list[int]:
        """Sequence length of each kind of self-attention (the product of the extents it spans)."""
        ext = self.seq_extents(shape)
        return [math.prod(ext[d] for d in span) for span in self.attn_spans]

    def seq_extents(self, shape: "Shape") -> dict[str, int]:
        """Token extent of each sequence dim for a `shape` (axial3d splits S as `Shape.token_hw`)."""
        h, w = shape.token_hw
        every = {"T": shape.frames, "S": shape.spatial, "H": h, "W": w}
        return {name: every[name] for name in self.seq_dims}

    def validate(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.layout not in _SEQ_DIMS:
            raise ValueError(f"unknown layout {self.layout!r} ({' | '.join(_SEQ_DIMS)})")
        if self.text_mode not in TEXT_MODES:
            raise ValueError(f"text_mode must be one of {' | '.join(TEXT_MODES)}, got {self.text_mode!r}")
        if self.joint and self.layout != "full3d":
            raise ValueError(f"text_mode joint needs layout full3d (got {self.layout})")
        if not self.temporal_cross and self.layout != "stdit3":
            raise ValueError(f"temporal_cross false needs layout stdit3 (its temporal blocks), got {self.layout}")
        self._validate_streams()

    def _validate_streams(self) -> None:
        """The joint-text options (models/mmdit.py): each needs joint text, some the linear modulation."""
        if self.text_stream not in TEXT_STREAMS:
            raise ValueError(f"text_stream must be one of {' | '.join(TEXT_STREAMS)}, got {self.text_stream!r}")
        if self.modulation not in MODULATIONS:
            raise ValueError(f"modulation must be one of {' | '.join(MODULATIONS)}, got {self.modulation!r}")
        if min(self.single_depth, self.text_hidden, self.text_mlp_dim, self.time_dim) < 0:
            raise ValueError("single_depth, text_hidden, text_mlp_dim and time_dim must be >= 0")
        new = self.text_stream != "attention" or self.single_depth or self.text_hidden or self.text_mlp_dim
        if new and not self.joint:
            raise ValueError("text_stream, single_depth, text_hidden and text_mlp_dim need text_mode joint")
        if new and self.modulation != "linear":
            raise ValueError("text_stream dual or expert and single_depth need modulation linear "
                             "(each block projects the timestep for its streams)")
        if (self.text_hidden or self.text_mlp_dim) and self.text_stream != "dual":
            raise ValueError("text_hidden and text_mlp_dim need text_stream dual (a text stream of its own)")
        if self.single_depth and self.text_width != self.hidden:
            raise ValueError("single_depth needs text_hidden = hidden (single-stream blocks concatenate the streams)")
        if (self.time_dim or not self.adaln_shift) and self.modulation != "linear":
            raise ValueError("time_dim and adaln_shift false need modulation linear")

    def with_(self, **kw) -> "ModelConfig":
        return replace(self, **kw)


@dataclass(frozen=True)
class Shape:
    """A sample's token grid after patchify: T frames of S tokens, batch B."""
    batch: int
    frames: int      # T
    spatial: int     # S (tokens per frame)

    @property
    def tokens(self) -> int:
        return self.frames * self.spatial

    @property
    def token_hw(self) -> tuple[int, int]:
        """Token rows and columns (H', W') of a frame of `spatial` tokens, as square as possible (H' <= W')."""
        a = int(self.spatial ** 0.5)
        while self.spatial % a:
            a -= 1
        return a, self.spatial // a

    def latent_hw(self, patch: tuple[int, int, int]) -> tuple[int, int]:
        """Latent height and width whose patch grid is `token_hw`."""
        h, w = self.token_hw
        return h * patch[1], w * patch[2]


_SIZES = {
    # tiny: for tests, seconds on one CPU core.
    "tiny": dict(depth=2, hidden=64, heads=4, caption_channels=64, text_len=8),
    # small: for the emulated cluster and CPU benchmarks (compute-bound settings).
    "small": dict(depth=4, hidden=256, heads=8, caption_channels=256, text_len=16),
    # xl: OpenSora v1.0 STDiT-XL/2 (paper v1): depth 28, hidden 1152, 16 heads, MLP ratio 4.
    "xl": dict(depth=28, hidden=1152, heads=16),
    # 3b: scaled for scaling studies (head_dim 128, as in large video DiTs).
    "3b": dict(depth=36, hidden=2048, heads=16),
}

# stdit3 blocks are single-purpose (half the attention of an stdit block), so its depth counts pairs.
MODELS: dict[str, ModelConfig] = {
    f"{layout}-{size}": ModelConfig(layout=layout, **kw)
    for layout in ("stdit", "stdit3")
    for size, kw in _SIZES.items()
}
# axial3d (three sequence dims T, H, W): the same sizes, blocks attend over each dim in turn.
MODELS.update({f"axial3d-{size}": ModelConfig(layout="axial3d", **_SIZES[size]) for size in ("tiny", "small", "xl")})

# full3d: Wan 2.1's two published classes (T2V-1.3B, T2V-14B: dim, heads, layers, ffn_dim; 16 VAE
# channels, no learned sigma, umT5 features of 4096 for 512 text tokens, patch 1x2x2), and tiny.
_WAN = dict(in_channels=16, learn_sigma=False, caption_channels=4096, text_len=512)
_FULL3D = {
    "tiny": dict(depth=2, hidden=64, heads=4, caption_channels=64, text_len=8),
    "1.3b": dict(depth=30, hidden=1536, heads=12, mlp_dim=8960, **_WAN),
    "14b": dict(depth=40, hidden=5120, heads=40, mlp_dim=13824, **_WAN),
}
for _size, _kw in _FULL3D.items():   # joint: the same sizes with MMDiT-style joint text attention
    MODELS[f"full3d-{_size}"] = ModelConfig(layout="full3d", **_kw)
    MODELS[f"full3d-joint-{_size}"] = ModelConfig(layout="full3d", text_mode="joint", **_kw)
# hybrid3d: factorized blocks (spatial, temporal) with a full-attention block after each pair, the
# case where a DSP variant still applies (methods/dsp_hybrid.py); tiny only (a design point, not a
# published model).
MODELS["hybrid3d-tiny"] = ModelConfig(layout="hybrid3d", **_FULL3D["tiny"])
