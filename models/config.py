"""Model configurations: the dataclass is the schema, flavors live in a dict in code."""
from __future__ import annotations

from dataclasses import dataclass, replace

# Sequence dims of each layout's block activation (see ModelConfig.seq_dims).
_SEQ_DIMS = {"stdit": {"T": 1, "S": 2}, "stdit3": {"T": 1, "S": 2}, "axial3d": {"T": 1, "H": 2, "W": 3}}


@dataclass(frozen=True)
class ModelConfig:
    layout: str = "stdit"          # stdit (spatial+temporal in one block) | stdit3 (alternating blocks)
                                   # | axial3d (T, H, W attention in one block; models/axial.py)
    depth: int = 2                 # stdit, axial3d: blocks; stdit3: spatial/temporal block *pairs*
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

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def mlp_hidden(self) -> int:
        return int(self.hidden * self.mlp_ratio)

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
    def n_blocks(self) -> int:
        """Blocks in the stack; each has one cross-attention and one MLP."""
        return 2 * self.depth if self.layout == "stdit3" else self.depth

    @property
    def n_self_attn(self) -> int:
        """Self-attentions in the stack: `depth` over each sequence dim, every layout."""
        return len(self.seq_dims) * self.depth

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


def get_config(name: str, **overrides) -> ModelConfig:
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    cfg = MODELS[name].with_(**overrides)
    cfg.validate()
    return cfg
