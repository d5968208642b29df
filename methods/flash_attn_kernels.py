"""Optional Dao-AILab `flash-attn` kernels for the ring's blocks (the kernels ring-flash-attention
calls), behind the same contract as methods/attn_kernels.py: (B, H, L, D) in, (out, fp32 lse) out,
backward from the ring's merged out and lse.

Chosen by `DSPBENCH_ATTN_KERNEL`: `auto` (default: flash-attn when it imports, on CUDA in
bf16/fp16 with head dim <= 256; torch's own flash kernel otherwise), `flash_attn` (force: an error
if it does not import), `torch` (never). flash-attn's private `_flash_attn_forward/_backward`
changed their signatures across 2.x releases (window_size as a pair or as two ints, softcap, the
number of returned tensors); the call is built from the installed function's signature, and a
signature with an argument this adapter cannot fill turns flash-attn off with one warning rather
than failing mid-run. ring-flash-attention's own ring is the separate method `ring_flash`
(methods/ring_flash.py), its traffic recorded by methods/comm/external.py.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import warnings

import torch

ENV = "DSPBENCH_ATTN_KERNEL"
CHOICES = ("auto", "flash_attn", "torch")


def choice() -> str:
    c = os.environ.get(ENV, "auto")
    if c not in CHOICES:
        raise ValueError(f"{ENV}={c!r}: expected one of {', '.join(CHOICES)}")
    return c


@functools.cache
def _interface():
    """flash_attn.flash_attn_interface, or None where it does not import (CPU machines, no CUDA build)."""
    try:
        return importlib.import_module("flash_attn.flash_attn_interface")
    except Exception:  # noqa: BLE001 - ImportError, or a CUDA/ABI error from its extension
        return None


def use_flash_attn(q: torch.Tensor) -> bool:
    c = choice()
    if c == "torch":
        return False
    if c == "flash_attn":
        if _interface() is None:
            raise ImportError(f"{ENV}=flash_attn but flash_attn does not import (pip install flash-attn)")
        return True
    return (_interface() is not None and q.device.type == "cuda" and q.dtype in (torch.bfloat16, torch.float16)
            and q.shape[-1] <= 256 and _supported())


def _common(scale: float) -> dict:
    return {"dropout_p": 0.0, "softmax_scale": scale, "causal": False, "window_size": (-1, -1),
            "window_size_left": -1, "window_size_right": -1, "softcap": 0.0, "alibi_slopes": None,
            "return_softmax": False, "deterministic": False, "rng_state": None}


TENSORS = ("q", "k", "v", "dout", "out", "softmax_lse", "dq", "dk", "dv")


def _unfillable(fn, names) -> list[str]:
    """Required parameters of fn that none of `names` fills."""
    return [n for n, p in inspect.signature(fn).parameters.items()
            if n not in names and p.default is inspect.Parameter.empty]


def _call(fn, values: dict):
    """fn(**the arguments its signature names); KeyError for a required one we cannot fill."""
    missing = _unfillable(fn, values)
    if missing:
        raise KeyError(f"{fn.__name__} needs {missing}")
    params = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in values.items() if k in params})


@functools.cache
def _supported() -> bool:
    fi = _interface()
    names = set(_common(1.0)) | set(TENSORS)
    for fn in (fi._flash_attn_forward, fi._flash_attn_backward):
        missing = _unfillable(fn, names)
        if missing:
            warnings.warn(f"flash_attn {fn.__name__} takes {missing}, unknown to dspbench: using torch's kernel")
            return False
    return True


def _bshd(t: torch.Tensor) -> torch.Tensor:
    """(B, H, L, D) -> flash-attn's (B, L, H, D), contiguous in the last dim."""
    return t.transpose(1, 2).contiguous()


def block_forward(q, k, v, scale: float):
    res = _call(_interface()._flash_attn_forward, {**_common(scale), "q": _bshd(q), "k": _bshd(k), "v": _bshd(v)})
    # 2.6+: (out, lse, S_dmask, rng_state); up to 2.5: (out, q, k, v, out_padded, lse, S_dmask, rng_state)
    out, lse = (res[0], res[1]) if len(res) == 4 else (res[0], res[5])
    return out.transpose(1, 2), lse.float()


def block_backward(dout, q, k, v, out, lse, scale: float):
    qb, kb, vb = _bshd(q), _bshd(k), _bshd(v)
    dq, dk, dv = torch.empty_like(qb), torch.empty_like(kb), torch.empty_like(vb)
    _call(_interface()._flash_attn_backward, {**_common(scale), "dout": _bshd(dout), "q": qb, "k": kb, "v": vb,
                                              "out": _bshd(out), "softmax_lse": lse.contiguous(),
                                              "dq": dq, "dk": dk, "dv": dv})
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
