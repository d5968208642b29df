"""All communication of dspbench, and the only file that calls torch.distributed (c10d).

Three bands, as in Megatron-LM's mappings.py:
1. private helpers: one collective each, one ledger event each, world size 1 short-circuits,
   outputs allocated like their input (so gloo on CPU and NCCL on CUDA both work);
2. autograd pairs whose backward is the conjugate collective;
3. one-line public wrappers whose docstrings name both directions.
Exchanges posted without waiting (ring P2P, an overlapped all-to-all) are its asynchronous band,
methods/comm/async_ops.py.
"""
from __future__ import annotations

import threading

import torch
import torch.distributed as dist
from torch.autograd import Function

from dspbench.methods.comm import ledger

Group = dist.ProcessGroup | None


# ---------------------------------------------------------------- process groups (set-up only)
def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def init(backend: str, rank: int, world_size: int, init_method: str | None = None, store=None, timeout_s: float = 300):
    from datetime import timedelta
    kw = dict(backend=backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=timeout_s))
    kw.update({"store": store} if store is not None else {"init_method": init_method or "env://"})
    dist.init_process_group(**kw)


def init_fake(world_size: int, rank: int = 0) -> None:
    """The fake process group: collectives return at once (outputs uninitialised), for byte tests."""
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)


def destroy() -> None:
    if is_initialized():
        dist.destroy_process_group()


def new_group(ranks: list[int]):
    return dist.new_group(ranks)


def world_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def rank(group: Group) -> int:
    return dist.get_rank(group) if is_initialized() else 0


def size(group: Group) -> int:
    return dist.get_world_size(group) if is_initialized() else 1


def group_ranks(group: Group) -> list[int]:
    """World ranks of `group`'s members in group-rank order (set-up metadata, no collective)."""
    if not is_initialized():
        return [0]
    return dist.get_process_group_ranks(group) if group is not None else list(range(world_size()))


def barrier(group: Group = None) -> None:
    if is_initialized() and size(group) > 1:
        dist.barrier(group=group)


def all_gather_object(obj) -> list:
    """Small Python metadata from every rank of the world (harness bookkeeping, not in the ledger)."""
    if not is_initialized() or world_size() == 1:
        return [obj]
    out = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def backend_name() -> str:
    return dist.get_backend() if is_initialized() else "none"


def phase() -> str:
    # Inside the autograd engine (a backward, or a checkpoint's recompute) traffic is backward traffic.
    return "bwd" if torch._C._current_graph_task_id() != -1 else "fwd"


def stopwatch(group: Group, device: torch.device) -> ledger.Stopwatch:
    def sync(before: bool):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if before:
            barrier(group)
    return ledger.Stopwatch(sync)


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def on_meta(t: torch.Tensor) -> bool:
    """A meta tensor: the cost model's trace of one rank in a fake process group (bench/cost/rank_trace.py),
    where point-to-point swaps post nothing (the fake backend has no meta P2P; nothing would move anyway)."""
    return t.device.type == "meta"


# ---------------------------------------------------------------- band 1: private helpers
_SEND_SCRATCH = threading.local()   # .bufs: dtype -> flat CPU buffer, reused by _send_buffer


def _send_buffer(view: torch.Tensor) -> torch.Tensor:
    """`view` as a contiguous tensor that only feeds a blocking collective: itself if contiguous,
    else one copy, on CPU into a per-thread scratch grown and never shrunk: glibc serves blocks
    over its mmap threshold from fresh pages, and faulting in a fresh send buffer per switch cost
    as much as the copy and the wire together (bench/micro/switch.py, 64 MiB/rank). The
    collective has returned before the scratch is reused (no async_op). CUDA's allocator recycles."""
    if view.is_contiguous() or view.device.type != "cpu":
        return view.contiguous()
    bufs = _SEND_SCRATCH.__dict__.setdefault("bufs", {})
    buf = bufs.get(view.dtype)
    if buf is None or buf.numel() < view.numel():
        with torch.inference_mode(False):   # a normal tensor, usable in and out of inference mode
            buf = bufs[view.dtype] = torch.empty(view.numel(), dtype=view.dtype)
    with torch.no_grad():
        return buf[: view.numel()].view(view.shape).copy_(view)


A2A_STYLES = ("single", "list")
_A2A = {"style": "single"}   # per process: a run's `--a2a`, set once by the worker


def set_a2a_style(style: str) -> str:
    """How blocking all-to-alls go on the wire (returns the previous style): `single`, one contiguous
    all_to_all_single; `list`, the reference code's (`list_all_to_all`). Same bytes, same event."""
    if style not in A2A_STYLES:
        raise ValueError(f"a2a style must be one of {A2A_STYLES}, got {style!r}")
    prev, _A2A["style"] = _A2A["style"], style
    return prev


def list_all_to_all(x: torch.Tensor, scatter_dim: int, gather_dim: int, group: Group) -> torch.Tensor:
    """Unrecorded. As VideoSys/OpenDiT: tensor_split `scatter_dim` into n chunks (each copied
    contiguous), list all_to_all, torch.cat of the received chunks along `gather_dim`."""
    inputs = [t.contiguous() for t in torch.tensor_split(x, size(group), scatter_dim)]
    outputs = [torch.empty_like(inputs[0]) for _ in inputs]
    dist.all_to_all(outputs, inputs, group=group)
    return torch.cat(outputs, dim=gather_dim)


def all_to_all_no_grad(x: torch.Tensor, scatter_dim: int, gather_dim: int, group: Group, tag: str) -> torch.Tensor:
    """Split `scatter_dim` into n chunks, send chunk j to rank j, concatenate received along `gather_dim`."""
    n = size(group)
    if n == 1:
        return x
    if _A2A["style"] == "list":   # the reference's transfer, recorded here like ours
        with stopwatch(group, x.device) as w:
            out = list_all_to_all(x, scatter_dim, gather_dim, group)
        ledger.record("all_to_all", phase(), n, nbytes(x), tag, w.elapsed)
        return out
    # (.., d_s, ..) -> (n, .., d_s/n, ..): the one copy into a contiguous send buffer.
    send = _send_buffer(x.unflatten(scatter_dim, (n, x.shape[scatter_dim] // n)).movedim(scatter_dim, 0))
    recv = torch.empty_like(send)
    with stopwatch(group, x.device) as w:
        dist.all_to_all_single(recv, send, group=group)
    ledger.record("all_to_all", phase(), n, nbytes(send), tag, w.elapsed)
    # recv[j] came from rank j and holds its slice of the gather dim: put j outermost on that dim.
    # A view when everything left of gather_dim has extent 1 (e.g. B = 1), else one more copy.
    return recv.movedim(0, gather_dim).flatten(gather_dim, gather_dim + 1)


def _all_gather(x: torch.Tensor, dim: int, group: Group, tag: str) -> torch.Tensor:
    n = size(group)
    if n == 1:
        return x
    send = x.movedim(dim, 0).contiguous()
    out = torch.empty((n * send.shape[0],) + send.shape[1:], dtype=x.dtype, device=x.device)
    with stopwatch(group, x.device) as w:
        dist.all_gather_single(out, send, group=group)
    ledger.record("all_gather", phase(), n, nbytes(out), tag, w.elapsed)
    return out.movedim(0, dim)


def _reduce_scatter(x: torch.Tensor, dim: int, group: Group, tag: str) -> torch.Tensor:
    n = size(group)
    if n == 1:
        return x
    send = x.movedim(dim, 0).contiguous()
    out = torch.empty((send.shape[0] // n,) + send.shape[1:], dtype=x.dtype, device=x.device)
    with stopwatch(group, x.device) as w:
        dist.reduce_scatter_single(out, send, group=group)
    ledger.record("reduce_scatter", phase(), n, nbytes(send), tag, w.elapsed)
    return out.movedim(0, dim)


def _all_reduce(x: torch.Tensor, group: Group, tag: str) -> torch.Tensor:
    n = size(group)
    if n == 1:
        return x
    out = x.contiguous().clone()
    with stopwatch(group, x.device) as w:
        dist.all_reduce(out, group=group)
    ledger.record("all_reduce", phase(), n, nbytes(out), tag, w.elapsed)
    return out


def _chunk(x: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    n = size(group)
    return x if n == 1 else x.chunk(n, dim)[rank(group)]


# ---------------------------------------------------------------- band 2: conjugate autograd pairs
class _AllToAll(Function):
    @staticmethod
    def forward(ctx, x, scatter_dim, gather_dim, group, tag):
        ctx.args = (scatter_dim, gather_dim, group, tag)
        return all_to_all_no_grad(x, scatter_dim, gather_dim, group, tag)

    @staticmethod
    def backward(ctx, g):
        s, gd, group, tag = ctx.args
        return all_to_all_no_grad(g, gd, s, group, tag), None, None, None, None


def _conjugate(name: str, forward_op, backward_op) -> type[Function]:
    """An autograd Function that runs `forward_op(x, dim, group, tag)` and, on the gradient, its
    conjugate `backward_op` (all-gather <-> reduce-scatter along the same dim)."""
    def forward(ctx, x, dim, group, tag):
        ctx.args = (dim, group, tag)
        return forward_op(x, dim, group, tag)

    def backward(ctx, g):
        return backward_op(g, *ctx.args), None, None, None
    return type(name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


_GatherFromSeq = _conjugate("_GatherFromSeq", _all_gather, _reduce_scatter)
_ReduceScatterToSeq = _conjugate("_ReduceScatterToSeq", _reduce_scatter, _all_gather)


class _SumReplicated(Function):
    @staticmethod
    def forward(ctx, x, group, tag):
        ctx.args = (group, tag)
        return _all_reduce(x, group, tag)

    @staticmethod
    def backward(ctx, g):
        # The output is replicated, so each rank holds a partial gradient of it: their sum is the
        # gradient of every rank's summand.
        group, tag = ctx.args
        return _all_reduce(g, group, tag), None, None


class _Split(Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.args = (x.shape, dim, group)
        return _chunk(x, dim, group).clone()

    @staticmethod
    def backward(ctx, g):
        shape, dim, group = ctx.args
        # The input was replicated: this rank's gradient is its own chunk, zeros elsewhere. The
        # replicated-gradient all-reduce later sums the ranks' partial gradients once, in one place.
        full = g.new_zeros(shape)
        _chunk(full, dim, group).copy_(g)
        return full, None, None


class _GatherOutput(Function):
    @staticmethod
    def forward(ctx, x, dim, group, tag):
        ctx.args = (dim, group)
        return _all_gather(x, dim, group, tag)

    @staticmethod
    def backward(ctx, g):
        dim, group = ctx.args
        # Every rank holds the same full output gradient (replicated loss): keep its own chunk.
        return _chunk(g, dim, group).contiguous(), None, None, None


class _GatherLinearRegather(Function):
    """Megatron-LM's column-parallel linear under sequence parallelism: all-gather the sequence shard,
    apply the linear, and keep only the shard for the backward, which gathers it again for the
    weight gradient (one more all-gather) instead of holding the full-length input."""

    @staticmethod
    def forward(ctx, x, weight, bias, dim, group, tag, regather_tag):
        ctx.args = (dim, group, tag, regather_tag)
        ctx.save_for_backward(x, weight)
        return torch.nn.functional.linear(_all_gather(x, dim, group, tag), weight, bias)

    @staticmethod
    def backward(ctx, g):
        dim, group, tag, regather_tag = ctx.args
        x, weight = ctx.saved_tensors
        full = _all_gather(x, dim, group, regather_tag)
        g2 = g.reshape(-1, g.shape[-1])
        grad_w = g2.t().matmul(full.reshape(-1, full.shape[-1]))
        grad_x = _reduce_scatter(g.matmul(weight), dim, group, tag)
        return grad_x, grad_w, g2.sum(0), None, None, None, None


# ---------------------------------------------------------------- band 3: public wrappers
def all_to_all(x, scatter_dim: int, gather_dim: int, group: Group, tag: str):
    """forward: all-to-all, scatter `scatter_dim`, gather `gather_dim`; backward: the same with dims swapped."""
    return _AllToAll.apply(x, scatter_dim, gather_dim, group, tag)


def gather_from_seq(x, dim: int, group: Group, tag: str):
    """forward: all-gather along `dim`; backward: reduce-scatter along `dim` (Megatron-SP's entry to TP)."""
    return _GatherFromSeq.apply(x, dim, group, tag)


def gather_linear_regather(x, weight, bias, dim: int, group: Group, tag: str, regather_tag: str):
    """linear(all-gather of x along `dim`) keeping only x for the backward; backward: all-gather x
    again (`regather_tag`) for the weight gradient, reduce-scatter the input gradient (`tag`)."""
    return _GatherLinearRegather.apply(x, weight, bias, dim, group, tag, regather_tag)


def reduce_scatter_to_seq(x, dim: int, group: Group, tag: str):
    """forward: reduce-scatter along `dim`; backward: all-gather along `dim` (Megatron-SP's exit from TP)."""
    return _ReduceScatterToSeq.apply(x, dim, group, tag)


def sum_replicated(x, group: Group, tag: str):
    """forward: all-reduce (sum of the ranks' partial outputs, whole on every rank); backward: all-reduce
    (Megatron's row-parallel linear on a replicated input: the text stream)."""
    return _SumReplicated.apply(x, group, tag)


def split(x, dim: int, group: Group):
    """forward: keep this rank's chunk of `dim` (no comm); backward: zero-padded chunk (no comm)."""
    return _Split.apply(x, dim, group)


def gather(x, dim: int, group: Group, tag: str):
    """forward: all-gather along `dim`; backward: keep this rank's chunk (no comm)."""
    return _GatherOutput.apply(x, dim, group, tag)


def all_reduce_(buf: torch.Tensor, group: Group, tag: str, average: bool = False, phase: str = "bwd") -> torch.Tensor:
    """In place, no autograd: sum (or mean) of a contiguous buffer over the group.

    Used for gradient synchronisation after the backward, so its traffic counts as `bwd`.
    """
    n = size(group)
    if n == 1:
        return buf
    with stopwatch(group, buf.device) as w:
        dist.all_reduce(buf, group=group)
    ledger.record("all_reduce", phase, n, nbytes(buf), tag, w.elapsed)
    if average:
        buf.div_(n)
    return buf


# ---------------------------------------------------------------- harness utility (unrecorded)
def all_reduce_max_(buf: torch.Tensor, group: Group) -> torch.Tensor:
    """In place elementwise max over the group (e.g. the slowest rank's time per iteration).
    A host tensor on NCCL (timings are host floats) travels through the current CUDA device."""
    if size(group) > 1:
        dev = buf
        if buf.device.type == "cpu" and dist.get_backend(group) == "nccl":
            dev = buf.to(torch.device("cuda", torch.cuda.current_device()))
        dist.all_reduce(dev, op=dist.ReduceOp.MAX, group=group)
        if dev is not buf:
            buf.copy_(dev)
    return buf
