"""The comm layer's DTensor band: torch's own context parallel (`torch_cp`), recorded in the ledger.

torch.distributed.tensor.experimental's context parallel runs SDPA on DTensors sharded along the
sequence; its collectives are functional collectives (`_c10d_functional.*`) that torch issues
itself, from DTensor's sharding propagation (CPU: K and V redistributed to replicated, two
all-gathers) or from its ring handlers (CUDA: one all-gather of K and V, and in the backward the
dK, dV accumulators passed on by `permute_tensor`). `_Recorder`, a dispatch mode active around
the attention's forward and its backward, puts each one in the ledger with its real bytes:
all-gather (payload = output), all-to-all with equal splits (payload = input) and, for unequal
splits (a permutation), `send_recv` with the bytes sent to other ranks. Times are not taken (the
collectives are asynchronous until DTensor waits on them): timed ledgers show them without time.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.autograd import Function
from torch.utils._python_dispatch import TorchDispatchMode

from dspbench.methods.comm import ledger
from dspbench.methods.comm.layer import nbytes, phase, rank, size

# DTensor's redistribution issues the legacy namespace's ops, its ring handlers the new one's (by
# name: the namespaces are filled only once torch.distributed is loaded).
_NAMESPACES = ("_c10d_functional", "c10d_functional")
MIN_TORCH = (2, 7)   # torch.distributed.tensor.experimental._context_parallel with its module wrapper


def context_parallel_error() -> str | None:
    """Why torch's context parallel is missing here, or None; without importing it (DTensor's import
    takes seconds, and `check` runs before any rank starts)."""
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < MIN_TORCH:
        return f"torch {torch.__version__} < {'.'.join(map(str, MIN_TORCH))}"
    if not torch.distributed.is_available():
        return "this torch is built without torch.distributed"
    return None


class _Recorder(TorchDispatchMode):
    def __init__(self, group, tags: dict[str, str]):
        super().__init__()
        self.n, self.me, self.tags = size(group), rank(group), tags

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # Modes run before tensor subclasses: step aside for DTensor ops, so DTensor desugars them
        # into plain ops and collectives, which come back here (as CommDebugMode does).
        from torch.distributed.tensor import DTensor
        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented
        out = func(*args, **(kwargs or {}))
        if isinstance(func, torch._ops.HigherOrderOperator):   # no schema name; never a collective
            return out
        namespace, _, name = func.name().partition("::")
        if namespace not in _NAMESPACES:
            return out
        name = name.split(".")[0]
        if name == "all_gather_into_tensor":
            self._record("all_gather", nbytes(args[0]) * args[1])
        elif name == "all_to_all_single":
            x, in_splits = args[0], args[2]
            if len(set(in_splits)) <= 1:
                self._record("all_to_all", nbytes(x))
            else:   # a permutation (permute_tensor): what leaves this rank
                row = nbytes(x) // max(1, x.shape[0])
                self._record("send_recv", row * (sum(in_splits) - in_splits[self.me]))
        elif any(w in name for w in ("reduce", "coalesced", "broadcast", "gather", "scatter")):
            raise NotImplementedError(f"torch_cp issued {func.name()}: not in its formula, extend the recorder")
        return out

    def _record(self, op: str, payload: int) -> None:
        if self.n > 1:
            ledger.record(op, phase(), self.n, payload, self.tags[op])


class _RecordedAttention(Function):
    """forward: the context-parallel attention under the recorder; backward: its backward under
    the recorder too (the autograd engine would otherwise run it outside any mode we hold)."""

    @staticmethod
    def forward(ctx, q, k, v, attn, recorder_args):
        leaves = [t.detach().requires_grad_(t.requires_grad) for t in (q, k, v)]
        with torch.enable_grad(), _Recorder(*recorder_args):
            out = attn(*leaves)
        ctx.leaves, ctx.out, ctx.recorder_args = leaves, out, recorder_args
        return out.detach()

    @staticmethod
    def backward(ctx, dout):
        with _Recorder(*ctx.recorder_args):
            torch.autograd.backward(ctx.out, dout)
        return tuple(t.grad for t in ctx.leaves) + (None, None)


class _SDPA(nn.Module):
    """The module torch's context parallel wraps: SDPA on (B', H, L, D), sequence dim 2."""

    def forward(self, q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v)


class TorchContextParallelAttention(nn.Module):
    """Drop-in for LocalAttention: q, k, v (B', L/N, H, D) -> (B', L/N, H, D), each rank holding
    its contiguous shard of the sequence (no load balancing: attention is not causal here)."""

    def __init__(self, group, tags: dict[str, str]):
        super().__init__()
        self.group, self.recorder_args, self.attn = group, (group, tags), None

    def _build(self, device_type: str) -> None:
        """The mesh needs the device type: built at the first call, where the tensors are."""
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.tensor.experimental import _context_parallel as cp
        cp._cp_options.enable_load_balance = False     # its backward refuses load balance without causal
        cp._enable_context_parallel_dispatcher()        # DTensor SDPA -> CP's ring handlers (CUDA kernels)
        # traced on the meta device (bench/cost/rank_trace): the mesh lives on the CPU
        mesh = DeviceMesh.from_group(self.group, "cpu" if device_type == "meta" else device_type)
        style = cp._ContextParallel(seq_dim=2, attention_type=cp._ContextParallel.AttentionType.SDPA)
        self.attn = style._apply(_SDPA(), mesh)

    def forward(self, q, k, v):
        if self.attn is None:
            self._build(q.device.type)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            out = _RecordedAttention.apply(q, k, v, self.attn, self.recorder_args)
        else:
            with _Recorder(*self.recorder_args):
                out = self.attn(q, k, v)
        return out.transpose(1, 2)
