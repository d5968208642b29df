"""The sequence dim an embedded method shards when `--shard` is not given: the one whose padding
wastes least at this SP degree (methods/padding.py pads it; ties keep T, RunConfig's default).

Full3d at SP 16 with T = 21 latent frames: shard T pads T to 32, a third of the tokens pads,
while S = 3600 divides; so S is chosen, and the record's `shard_auto` says which and why
("shard S (T 21 would pad to 32 at SP 16; S 3600 divides)"), which the run and predict summaries
print. A method that shards its own way (DSP) pads alike under every choice: T stays.
"""
from __future__ import annotations

from dataclasses import replace

from dspbench.methods import Dims, get_method, padding
from dspbench.models import Shape, get_config
from dspbench.records.config import RunConfig


def with_chosen_shard(cfg: RunConfig) -> RunConfig:
    """`cfg` with the shard that pads least and, where the choice mattered, why (`shard_auto`)."""
    shard, why = choose_shard(cfg)
    return replace(cfg, shard=shard, shard_auto=why)


def choose_shard(cfg: RunConfig) -> tuple[str, str]:
    """(dim, why): among the model's sequence dims the method can shard at this SP degree, the one
    whose padded grid holds fewest tokens; T on a tie. `why` is "" where T is kept with nothing to
    explain: T pads nothing, every dim pads alike (the method ignores the shard), or the degree is
    not known yet (sp auto: T)."""
    default = RunConfig.shard
    if cfg.sp == "auto" or int(cfg.sp) == 1:
        return default, ""
    try:
        mcfg, spec = get_config(cfg.model), get_method(cfg.method)
    except (KeyError, TypeError, ValueError):   # an unknown name: validate() says so, with its own message
        return default, ""
    shape = Shape(cfg.model_batch, cfg.frames, cfg.spatial)
    extents = mcfg.seq_extents(shape)
    padded = {d: _padded(spec, mcfg, shape, cfg, d) for d in extents}
    tokens = {d: p.tokens for d, p in padded.items() if p is not None}
    if not tokens:              # no dim runs: the default's `unsupported` reason will say why
        return default, ""
    if default in tokens and len(set(tokens.values())) == 1:
        return default, ""      # the shard changes no padding (DSP shards its own way): nothing chosen
    best = min(tokens, key=tokens.get)
    if default in tokens and tokens[default] == tokens[best]:
        best = default
    if best == default and tokens[default] == shape.tokens:
        return default, ""      # T divides: the default wastes nothing
    return best, f"shard {best} ({_why(best, extents, padded, int(cfg.sp))})"


def _padded(spec, mcfg, shape: Shape, cfg: RunConfig, dim: str) -> Shape | None:
    """The grid the method runs sharding `dim` (padded as --pad allows), or None where it cannot."""
    dims = Dims(sp=int(cfg.sp), shard=dim, cfg=cfg.cfg_degree, ulysses=cfg.ulysses_degree)
    if spec.check_pad(mcfg, shape, dims, cfg.pad):
        return None
    return padding.padded_shape(spec, mcfg, shape, dims)


def _why(best: str, extents: dict[str, int], padded: dict, sp: int) -> str:
    """Each dim's real extent and what sharding it would pad it to, the chosen one last."""
    def grown(d: str) -> int:
        return padding.round_up(extents[d], sp)
    parts = []
    for d in sorted(extents, key=lambda d: d == best):
        real = extents[d]
        if padded[d] is None:
            parts.append(f"{d} {real} cannot be sharded")
        elif real % sp == 0:
            parts.append(f"{d} {real} divides")
        else:
            parts.append(f"{d} {real} {'pads' if d == best else 'would pad'} to {grown(d)}")
    parts[0] += f" at SP {sp}"
    return "; ".join(parts)


def shard_note(rec: dict) -> str:
    """The summaries' line on the chosen shard ("" where --shard was given or nothing was chosen)."""
    return f"\n{rec['shard_auto']}" if rec.get("shard_auto") else ""
