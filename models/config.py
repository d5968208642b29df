"""Model configurations: the dataclass is the schema, flavors live in a dict in code."""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelConfig:
    layout: str = "stdit"          # stdit (spatial+temporal in one block) | stdit3 (alternating blocks)
    depth: int = 2                 # stdit: blocks; stdit3: spatial/temporal block *pairs*
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

    def validate(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.layout not in ("stdit", "stdit3"):
            raise ValueError(f"unknown layout {self.layout!r} (stdit | stdit3)")

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

    def latent_hw(self, patch: tuple[int, int, int]) -> tuple[int, int]:
        """Latent height and width whose patch grid has `spatial` tokens, as square as possible."""
        a = int(self.spatial ** 0.5)
        while self.spatial % a:
            a -= 1
        return a * patch[1], (self.spatial // a) * patch[2]


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


def get_config(name: str, **overrides) -> ModelConfig:
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    cfg = MODELS[name].with_(**overrides)
    cfg.validate()
    return cfg
