"""The kernels one rank of an N-rank run executes, read off the method's own sharding.

A rank's compute is not 1/N of the model's: Ulysses runs attention at full length on heads / N,
a ring runs N chunk pairs of length L / N and merges their log-sum-exps, DSP runs each phase at
its own local shape, padding adds its pads, Megatron narrows its GEMMs. Rather than model each of
these, the method's real `parallelize` (methods/<name>.py, the code `run` executes) is applied to
the model built on the meta device, inside a fake process group of the run's SP x CFG world
(torch's `fake` backend: collectives return at once, nothing moves), and rank 0's forward (and
backward, in training) is traced op by op with a dispatch mode. Every aten op that launches a
kernel becomes a `Kernel`: its op, its arguments' shapes, strides and dtypes (enough to replay it
on a real device: bench/gpu/replay.py), its FLOPs and the bytes it reads and writes. Collectives
are kept apart (`collectives`): bench/cost/comm.py prices them from the ledger's formulas.

Blocks repeat, so the trace builds the model at depth 1 and 2 (and single-stream depth 1 and 2)
and extrapolates linearly to the real depth: exact for identical blocks, and a 40-layer model
traces in the time of two layers. Attention reaches the trace as the flash kernel a GPU runs
(`aten._scaled_dot_product_flash_attention`, forward and backward), not as the math decomposition
the meta device would otherwise take.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm"})
ATTN_FWD = frozenset({"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"})
ATTN_BWD = frozenset({f"{op}_backward" for op in ATTN_FWD})
CONV_OPS = frozenset({"convolution", "convolution_backward"})
BWD_FLOPS_PER_FWD = 2.5   # flash backward: 5 matmuls of the forward's 2 (flash-attention's benchmark convention)


@dataclass(frozen=True)
class Kernel:
    """One launched kernel of a rank, as a replayable signature. `kind`: gemm, attention, conv or
    memory; `args`: per positional argument, ('t', shape, stride, dtype) for a tensor, ('l', (...))
    for a list of them, ('v', value) otherwise; `attn`: (batch x heads, q length, k length, head dim,
    causal, pass) for attention; `gemm`: (batch, m, n, k)."""
    op: str
    kind: str
    args: tuple
    flops: float
    bytes: float
    attn: tuple | None = None
    gemm: tuple | None = None
    overload: str = ""        # the aten overload to replay, e.g. aten.mm.default
    kwargs: tuple = ()        # ((name, spec), ...) as args

    @property
    def dtype(self) -> str:
        for a in self.args:
            if a[0] == "t":
                return a[3]
        return "float32"


@dataclass(frozen=True)
class RankKernels:
    """{Kernel: calls} of one model call (forward, or forward + backward in training) of one rank,
    and the collectives it issued {op name: calls} (priced elsewhere)."""
    kernels: tuple            # ((Kernel, calls), ...)
    collectives: tuple        # ((op, calls), ...)

    def items(self):
        return self.kernels

    @property
    def count(self) -> float:
        return sum(n for _, n in self.kernels)


def _spec(a):
    import torch
    if isinstance(a, torch.Tensor):
        return ("t", tuple(a.shape), tuple(a.stride()), str(a.dtype).replace("torch.", ""))
    if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
        return ("l", tuple(_spec(x) for x in a))
    if isinstance(a, (list, tuple)):
        return ("v", tuple(a))
    if isinstance(a, (int, float, bool, str)) or a is None:
        return ("v", a)
    if isinstance(a, torch.dtype):
        return ("dtype", str(a).replace("torch.", ""))
    if isinstance(a, torch.device):
        return ("device",)                      # replay puts everything on its own device
    if isinstance(a, (torch.layout, torch.memory_format)):
        return ("attr", str(a).replace("torch.", ""))
    return ("v", repr(a))


def _nbytes(t) -> int:
    import torch
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _tensors(xs):
    import torch
    for x in xs:
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from _tensors(x)


def classify(func, args, kwargs, out) -> Kernel | None:
    """A Kernel for one dispatched aten op, None for a view."""
    from dataclasses import replace as _replace
    k = _classify(func.__name__.split(".")[0], args, out)
    if k is None:
        return None
    return _replace(k, overload=str(func), kwargs=tuple((n, _spec(v)) for n, v in sorted((kwargs or {}).items())))


def _classify(name: str, args, out) -> Kernel | None:
    from dspbench.cost.curve import VIEW_OPS
    if name in VIEW_OPS:
        return None
    moved = float(sum(_nbytes(t) for t in _tensors([*args, *(out if isinstance(out, (tuple, list)) else [out])])))
    spec = tuple(_spec(a) for a in args)
    if name in GEMM_OPS:
        a, b = args[-2], args[-1]
        batch = a.shape[0] if a.dim() == 3 else 1
        m, k, n = a.shape[-2] if a.dim() >= 2 else 1, a.shape[-1], b.shape[-1]
        return Kernel(name, "gemm", spec, 2.0 * batch * m * n * k, moved, gemm=(batch, m, n, k))
    if name in ATTN_FWD or name in ATTN_BWD:
        bwd = name in ATTN_BWD
        q, k = (args[1], args[2]) if bwd else (args[0], args[1])
        B, H, Lq, D = q.shape
        fwd_flops = 4.0 * B * H * Lq * k.shape[-2] * D
        return Kernel(name, "attention", spec, fwd_flops * (BWD_FLOPS_PER_FWD if bwd else 1.0), moved,
                      attn=(B * H, Lq, k.shape[-2], D, False, "bwd" if bwd else "fwd"))
    if name in CONV_OPS:
        return Kernel(name, "conv", spec, _conv_flops(name, args), moved)
    return Kernel(name, "memory", spec, 0.0, moved)


def _conv_flops(name: str, args) -> float:
    """2 x output elements x (in channels / groups) x kernel volume; the backward twice that (input and weight)."""
    import math
    if name == "convolution":
        x, w = args[0], args[1]
        stride, transposed = args[3], args[6]
        out_sp = [math.ceil(s / st) for s, st in zip(x.shape[2:], stride)] if not transposed else list(x.shape[2:])
        return 2.0 * x.shape[0] * w.shape[0] * math.prod(out_sp) * math.prod(w.shape[1:])
    grad, x, w = args[0], args[1], args[2]
    return 4.0 * grad.shape[0] * w.shape[0] * math.prod(grad.shape[2:]) * math.prod(w.shape[1:])


def trace_ops(fn) -> tuple[dict, dict]:
    """Run fn under a dispatch mode; -> ({Kernel: calls}, {collective: calls})."""
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    import torch
    kernels, colls = {}, {}

    class _FlashOnMeta(TorchFunctionMode):   # SDPA as a GPU runs it: one flash kernel, differentiable
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is F.scaled_dot_product_attention and args[0].device.type == "meta" and not kwargs.get("attn_mask"):
                return torch.ops.aten._scaled_dot_product_flash_attention(
                    *args[:3], 0.0, bool(kwargs.get("is_causal", False)), False, scale=kwargs.get("scale"))[0]
            return func(*args, **kwargs)

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            ns, name = func.namespace, func.__name__.split(".")[0]
            if ns == "c10d" or ns == "_c10d_functional":
                colls[name] = colls.get(name, 0) + 1
                return out
            k = classify(func, args, kwargs, out)
            if k is not None:
                kernels[k] = kernels.get(k, 0) + 1
            return out

    with _FlashOnMeta(), _Record():
        fn()
    return kernels, colls


def _one_call(cfg, mcfg) -> tuple[dict, dict]:
    """Trace one model call of rank 0 of cfg's SP x CFG world at mcfg (whatever its depth)."""
    import torch
    from dspbench.methods import build_dims, get_method
    from dspbench.methods.comm.fake_world import fake_world
    from dspbench.models import Shape, build_model
    from dspbench.models.dtypes import TORCH_DTYPES
    from dspbench.models.inputs import make_inputs
    sp, halves = int(cfg.sp), cfg.cfg_degree
    with fake_world(sp * halves):
        dtype = TORCH_DTYPES[cfg.dtype]
        dims = build_dims(sp, cfg.shard, halves, cfg.ulysses_degree)
        with torch.device("meta"):
            model = get_method_apply(traced_spec(cfg.method), build_model(mcfg).to(dtype), dims, cfg.pad)
        batch = cfg.batch if halves == 2 else cfg.model_batch   # CFG parallel: one pass per rank
        x, t, y = (torch.empty(v.shape, dtype=v.dtype, device="meta") for v in
                   make_inputs(mcfg, Shape(batch, 1, 1), dtype=dtype, device="meta")[:3])
        x = torch.empty(*x.shape[:2], cfg.frames * mcfg.patch[0], *Shape(batch, cfg.frames, cfg.spatial).latent_hw(mcfg.patch),
                        dtype=dtype, device="meta")
        # tensors the model makes from extents (positional tables) are made on the meta device too
        with torch.device("meta"):
            if cfg.mode == "train":
                model.train()
                return trace_ops(lambda: model(x, t, y).float().square().mean().backward())
            model.eval()
            with torch.no_grad():
                return trace_ops(lambda: model(x, t, y))


def traced_spec(method: str):
    """The spec whose `parallelize` the trace runs: a method that needs a library (ring-flash-attn,
    DeepSpeed) is traced as its `trace_as`, the same algorithm in our code, so what a prediction
    counts never depends on what is installed here (the target's stack is declared, not imported)."""
    from dspbench.methods import get_method
    spec = get_method(method)
    return get_method(spec.trace_as) if spec.trace_as else spec


def get_method_apply(spec, model, dims, pad):
    return spec.apply(model, dims, pad)


def _extrapolate(base: dict, steps: list[tuple[dict, int]]) -> dict:
    """base + sum (variant - base) x extra depth, per kernel (counts may go to zero, never below)."""
    out = dict(base)
    for variant, extra in steps:
        for k in set(base) | set(variant):
            out[k] = out.get(k, 0) + (variant.get(k, 0) - base.get(k, 0)) * extra
    return {k: n for k, n in out.items() if n > 0}


@functools.lru_cache(maxsize=512)
def rank_kernels(cfg) -> RankKernels:
    """The kernels of one model call (train: forward + backward) of rank 0 of cfg (numeric sp).
    Activation checkpointing per block is its mechanism, counted: the backward recomputes every
    block's forward once (the trace runs without it: checkpoint's recompute check does not hold
    under a tracing mode on the meta device)."""
    from dspbench.models import get_config
    mcfg = get_config(cfg.model)
    if cfg.grad_ckpt and cfg.mode == "train":    # the run without checkpointing (cached) + one forward of the blocks
        plain = rank_kernels(replace(cfg, grad_ckpt=False))
        fwd, fwd_colls = _by_depth(replace(cfg, mode="infer", grad_ckpt=False), mcfg, blocks_only=True)
        kernels, colls = _plus(dict(plain.kernels), fwd), _plus(dict(plain.collectives), fwd_colls)
    else:
        kernels, colls = _by_depth(cfg, mcfg)
    # a total order (ties broken by the kernel itself): sums over it are the same float in every process
    order = sorted(kernels.items(), key=lambda kv: (-kv[0].flops * kv[1], repr(kv[0])))
    return RankKernels(tuple(order), tuple(sorted(colls.items())))


def _by_depth(cfg, mcfg, blocks_only: bool = False) -> tuple[dict, dict]:
    """({Kernel: calls}, {collective: calls}) at mcfg's depths from traces at depth 1 and 2 (module
    docstring); blocks_only: the blocks' share alone (what a per-block checkpoint recomputes)."""
    single = getattr(mcfg, "single_depth", 0)
    base_cfg = replace(mcfg, depth=1, grad_ckpt=False, **({"single_depth": 1} if single else {}))
    base = _one_call(cfg, base_cfg)
    steps = [(_one_call(cfg, replace(base_cfg, depth=2)), mcfg.depth - 1)]
    if single:
        steps.append((_one_call(cfg, replace(base_cfg, single_depth=2)), single - 1))
    if blocks_only:   # each variant minus the base is one block; the real model has depth (+ single) of them
        steps = [(s, n + 1) for s, n in steps]
        return (_extrapolate({}, [(_minus(s[0], base[0]), n) for s, n in steps]),
                _extrapolate({}, [(_minus(s[1], base[1]), n) for s, n in steps]))
    return (_extrapolate(base[0], [(k, n) for (k, _), n in steps]),
            _extrapolate(base[1], [(c, n) for (_, c), n in steps]))


def _minus(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) - b.get(k, 0) for k in set(a) | set(b)}


def _plus(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}
