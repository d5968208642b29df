"""Explicit padding of sequence dims the SP degree does not divide, with the padded keys masked.

The one place padding lives (every method goes through it; `--pad never` bypasses it):
- `padded_extents` / `padded_shape`: which dims a method pads (`MethodSpec.pads`: the dims it
  shards, DSP its entry dim T and its switch target) and to what: the next multiple of the degree.
  The formulas (`spec.comm_bytes`, `spec.plan`) take the padded shape: the ledger moves padded M.
- `check`: the method's own check on the padded shape, or why padding cannot help (a method whose
  attention is a library's that takes no key mask; axial3d's H or W, whose split a `Shape` cannot
  describe).
- `install(model, spec, dims)`: a `PadPlan` on the parallelized model (`model.pad_plan`). Where the
  grid enters the blocks it appends zero tokens up to the padded extents (before the method's
  split); where it leaves it drops them (after the method's gather). Every self-attention's inner
  attention gets `kmask=KeyMask` for its keys as they arrive there, and each method's inner passes
  on the mask of the keys it actually attends to (gathered by an all-to-all or all-gather, a ring's
  block from peer p), down to `LocalAttention` or the ring's block kernels, which drop the padded
  keys (attention over a subset of keys is attention with those keys masked: exact, and no kernel
  needs a mask argument).

Nothing reduces over the sequence inside the blocks (norms, adaLN, MLP and cross-attention are per
token), so padded tokens reach real ones only as keys: masked, the real tokens' outputs and every
gradient equal the unpadded model's. Padded queries compute values that the exit drops.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import torch
import torch.nn.functional as F

from dspbench.models.config import Shape
from dspbench.methods.comm import layer as comm
from dspbench.methods.common import attentions
from dspbench.methods.comm.ledger import BUS_FACTOR

PAD_MODES = ("never", "auto")


def round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def padded_extents(spec, cfg, extents: dict[str, int], dims) -> dict[str, tuple[int, int]]:
    """{seq dim name: (real, padded)} for a grid of `extents` under `spec` at `dims`."""
    names = spec.pads(cfg, extents, dims) if dims.sp > 1 else ()
    return {d: (e, round_up(e, dims.sp) if d in names else e) for d, e in extents.items()}


def padded_shape(spec, cfg, shape: Shape, dims) -> Shape:
    """The shape the method runs (and the formulas count): T and S padded where it pads them."""
    ext = padded_extents(spec, cfg, cfg.seq_extents(shape), dims)
    frames = ext["T"][1]
    spatial = ext["S"][1] if "S" in ext else shape.spatial   # axial3d pads T only (see pad_reason)
    return shape if (frames, spatial) == (shape.frames, shape.spatial) else Shape(shape.batch, frames, spatial)


def pad_reason(spec, cfg, shape: Shape, dims) -> str | None:
    """Why padding cannot make this shape run under `spec`, or None (nothing to pad, or it can)."""
    ext = padded_extents(spec, cfg, cfg.seq_extents(shape), dims)
    grown = [d for d, (real, pad) in ext.items() if real != pad]
    if not grown:
        return None
    if spec.no_key_mask:
        return f"{spec.name} cannot pad {'/'.join(grown)}: {spec.no_key_mask}"
    if set(grown) & {"H", "W"}:
        return (f"padding {cfg.layout}'s token {'/'.join(sorted(set(grown) & {'H', 'W'}))} is not supported "
                "(a shape is T x S; its H' x W' split is derived): pick H' and W' that the SP degree divides")
    return None


def check(spec, cfg, shape: Shape, dims, pad: str = "auto") -> str | None:
    """The method's check under padding mode `pad`: `never` is the method's own check, word for
    word; `auto` pads what it must and checks the padded shape (heads still have to divide)."""
    if pad not in PAD_MODES:
        raise ValueError(f"pad must be one of {PAD_MODES}, got {pad!r}")
    strict = spec.check(cfg, shape, dims)
    if strict is None or pad == "never" or dims.sp == 1:
        return strict
    return pad_reason(spec, cfg, shape, dims) or spec.check(cfg, padded_shape(spec, cfg, shape, dims), dims)


def waste(spec, cfg, shape: Shape, dims, dtype="fp32", mode: str = "train") -> dict:
    """What padding costs at this configuration (analytic): the padded extents; the share of the
    tokens that are pads (of per-token compute: linears, norms, MLP); of attention's score work
    (queries x keys: tokens x length, summed over the stack's kinds; dropping padded keys, as the
    kernels here do, spends less); of the step's SP wire bytes (the formula on the padded shape
    against the same formula on the real one)."""
    pshape = padded_shape(spec, cfg, shape, dims)
    ext = padded_extents(spec, cfg, cfg.seq_extents(shape), dims)
    attn_real = shape.tokens * sum(cfg.attn_lengths(shape))
    attn_pad = pshape.tokens * sum(cfg.attn_lengths(pshape))
    padded_bytes = _bus_bytes(spec, cfg, shape, dims, dtype, mode)
    real_bytes = _bus_bytes(replace(spec, pads=_no_pads), cfg, shape, dims, dtype, mode)
    return {"padded": {d: p for d, (_, p) in ext.items()},
            "pad_token_share": 1 - shape.tokens / pshape.tokens,
            "pad_attn_share": 1 - attn_real / attn_pad if attn_pad else 0.0,
            "pad_comm_share": 1 - real_bytes / padded_bytes if padded_bytes else 0.0}


def _no_pads(cfg, extents, dims) -> tuple[str, ...]:
    return ()


def _bus_bytes(spec, cfg, shape, dims, dtype, mode) -> float:
    """The step's wire bytes, as a float (an unpadded shape's shards need not be whole bytes)."""
    return sum(o.count * o.payload * (1 if o.op == "send_recv" else BUS_FACTOR[o.op](o.group_size(dims)))
               for _, o in spec.plan(cfg, shape, dims, dtype, mode))


# ---------------------------------------------------------------- runtime: the plan on the model
@dataclass(frozen=True)
class KeyMask:
    """Which keys at hand are real. `grid` is the bool mask over the attended dims' whole padded
    extents (in the seam's flatten order); `shard` the grid dim split over the SP group (None: the
    keys are whole); `held` the SP ranks whose shards are at hand, in order; `sp_ranks` the SP
    group's world ranks in SP order (groups need not be consecutive ranks, e.g. CFG sub-groups)."""
    grid: torch.Tensor
    shard: int | None
    n: int
    held: tuple[int, ...]
    sp_ranks: tuple[int, ...] = ()

    def real(self, device=None) -> torch.Tensor | None:
        """Indices of the real keys among those at hand (None: all are real). Built on the CPU and
        moved once, so selecting them never waits on the device (a bool mask index would)."""
        if self.shard is None:
            m = self.grid.flatten()
        else:
            parts = self.grid.chunk(self.n, self.shard)
            m = torch.cat([parts[h].flatten() for h in self.held])
        if bool(m.all()):
            return None
        idx = m.nonzero().flatten()
        return idx if device is None else idx.to(device)

    def _held_by(self, world_rank: int) -> tuple[int, ...]:
        """What a member of a sub-group of the SP group holds: the same pattern, offset by the SP
        distance (Ulysses and ring sub-groups of USP's mesh, the SP group itself)."""
        shift = self.sp_ranks.index(world_rank) - self.sp_ranks.index(comm.world_rank())
        return tuple(h + shift for h in self.held)

    def _with(self, held: tuple[int, ...]) -> "KeyMask":
        return KeyMask(self.grid, self.shard, self.n, held, self.sp_ranks)

    def gathered(self, group) -> "KeyMask":
        """After gathering the key dim over `group` (all-to-all, all-gather): every member's keys,
        in group order."""
        if self.shard is None:
            return self
        return self._with(tuple(h for w in comm.group_ranks(group) for h in self._held_by(w)))

    def from_peer(self, group, step: int) -> "KeyMask":
        """The keys a ring over `group` holds at `step`: those of the member `step` places back."""
        if self.shard is None:
            return self
        members = comm.group_ranks(group)
        return self._with(self._held_by(members[(comm.rank(group) - step) % len(members)]))


class PadPlan:
    """Padding of one parallelized model: the extents of the forward in flight, set at entry.

    `fill` (the padded tokens' value) and `mask_keys` are levers for the tests only: a huge fill
    must change nothing, and without the masks the oracle check must fail (tests/test_padding.py).
    """
    fill = 0.0
    mask_keys = True

    def __init__(self, spec, cfg, dims):
        self.spec, self.cfg, self.dims = spec, cfg, dims
        self.rank = comm.rank(dims.sp_group)
        self.sp_ranks = tuple(comm.group_ranks(dims.sp_group)) if dims.sp > 1 else (comm.world_rank(),)
        self.extents: dict[int, tuple[int, int]] = {}   # activation dim -> (real, padded)
        self.shard_dim: int | None = None   # the dim the method split at entry (seen, not assumed)

    def enter(self, x: torch.Tensor) -> torch.Tensor:
        seq = self.cfg.seq_dims
        ext = padded_extents(self.spec, self.cfg, {d: x.shape[i] for d, i in seq.items()}, self.dims)
        self.extents = {seq[d]: v for d, v in ext.items()}
        pads = [0, 0]   # F.pad lists (before, after) from the last dim (channels: none) inwards
        for i in range(x.dim() - 2, 0, -1):
            real, padded = self.extents.get(i, (0, 0))
            pads += [0, padded - real]
        return F.pad(x, pads, value=self.fill) if any(pads) else x

    def entered(self, x: torch.Tensor) -> torch.Tensor:
        """After the method's split: note which dim it split (DSP's is T whatever `dims.shard` says)."""
        split = [i for i, (_, padded) in self.extents.items() if x.shape[i] != padded]
        self.shard_dim = split[0] if split else None
        return x

    def exit(self, x: torch.Tensor) -> torch.Tensor:
        for i, (real, padded) in self.extents.items():
            if real != padded:
                x = x.narrow(i, 0, real)
        return x

    def padded(self) -> bool:
        return any(r != p for r, p in self.extents.values())

    def key_mask(self, axes: tuple[int, ...], length: int) -> KeyMask | None:
        """The mask of `length` keys of an attention over activation dims `axes`, or None (no pads)."""
        if not any(self.extents[a][0] != self.extents[a][1] for a in axes):
            return None
        real = [self.extents[a][0] for a in axes]
        padded = [self.extents[a][1] for a in axes]
        grid = torch.ones(padded, dtype=torch.bool, device="cpu")   # the mask lives on the CPU (KeyMask.real)
        for i, r in enumerate(real):
            grid.narrow(i, r, padded[i] - r).fill_(False)
        whole = grid.numel() == length
        if not whole and (self.shard_dim not in axes or grid.numel() != length * self.dims.sp):
            raise RuntimeError(f"keys of length {length} are neither the whole padded grid {padded} "
                               f"nor its 1/{self.dims.sp} shard on dim {self.shard_dim}")
        if whole:
            return KeyMask(grid, None, 1, ())
        return KeyMask(grid, axes.index(self.shard_dim), self.dims.sp, (self.rank,), self.sp_ranks)


def _with_mask(module, args, kwargs, plan: PadPlan, axes):
    km = plan.key_mask(axes, args[1].shape[1])   # k: (B', L, H, D)
    if km is not None and plan.mask_keys:
        kwargs = {**kwargs, "kmask": km}
    return args, kwargs


def install(model, spec, dims) -> PadPlan:
    """Pad where the grid enters (before the method's split), unpad where it leaves (after its
    gather), and hand every self-attention's inner the mask of its keys."""
    plan = PadPlan(spec, model.cfg, dims)
    model.pad_plan = plan
    model.seq_enter.register_forward_hook(lambda m, a, out: plan.enter(out), prepend=True)
    model.seq_enter.register_forward_hook(lambda m, a, out: plan.entered(out))
    model.seq_exit.register_forward_hook(lambda m, a, out: plan.exit(out))
    for attn in attentions(model):
        attn.inner.register_forward_pre_hook(partial(_with_mask, plan=plan, axes=attn.axes), with_kwargs=True)
    return plan

