"""A stand-in for Dao-AILab flash-attn's private interface, in its two 2.x signatures, computing on
CPU with dspbench's fp32 reference kernel. A mock, because flash-attn cannot run without CUDA:
it tests the adapter's wiring (layout, arguments by name, return shapes), not flash-attn's numerics.
"""
import sys
import types

import torch

from dspbench.methods.attn_kernels import _reference_backward, _reference_forward


def _bhld(t):
    assert t.dim() == 4 and t.stride(-1) == 1, "flash-attn takes contiguous (B, L, H, D)"
    return t.transpose(1, 2)


def _fwd(q, k, v, scale):
    out, lse = _reference_forward(_bhld(q), _bhld(k), _bhld(v), scale)
    return out.transpose(1, 2).contiguous(), lse


def _bwd(dout, q, k, v, out, lse, dq, dk, dv, scale):
    grads = _reference_backward(_bhld(dout), _bhld(q), _bhld(k), _bhld(v), _bhld(out), lse, scale)
    for dst, g in zip((dq, dk, dv), grads):
        dst.copy_(g.transpose(1, 2))


# 2.6 and later: window_size_left/right and softcap; forward returns 4 tensors
def fwd_new(q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right, softcap,
            alibi_slopes, return_softmax):
    out, lse = _fwd(q, k, v, softmax_scale)
    return out, lse, None, None


def bwd_new(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal, window_size_left,
            window_size_right, softcap, alibi_slopes, deterministic, rng_state=None):
    _bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, softmax_scale)
    return dq, dk, dv, None


# up to 2.5: window_size as a pair; forward returns 8 tensors
def fwd_old(q, k, v, dropout_p, softmax_scale, causal, window_size, alibi_slopes, return_softmax):
    out, lse = _fwd(q, k, v, softmax_scale)
    return out, q, k, v, out, lse, None, None


def bwd_old(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal, window_size,
            alibi_slopes, deterministic, rng_state=None):
    _bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, softmax_scale)
    return dq, dk, dv, None


def fwd_unknown(q, k, v, dropout_p, softmax_scale, causal, sink_tokens, return_softmax):
    raise AssertionError("never called: the adapter cannot fill sink_tokens")


def install(monkeypatch, generation: str) -> None:
    """Make `import flash_attn.flash_attn_interface` give the fake of that generation."""
    from dspbench.methods import flash_attn_kernels as fa
    fwd, bwd = {"new": (fwd_new, bwd_new), "old": (fwd_old, bwd_old), "unknown": (fwd_unknown, bwd_new)}[generation]
    fwd.__name__, bwd.__name__ = "_flash_attn_forward", "_flash_attn_backward"
    pkg, iface = types.ModuleType("flash_attn"), types.ModuleType("flash_attn.flash_attn_interface")
    iface._flash_attn_forward, iface._flash_attn_backward = fwd, bwd
    pkg.flash_attn_interface = iface
    monkeypatch.setitem(sys.modules, "flash_attn", pkg)
    monkeypatch.setitem(sys.modules, "flash_attn.flash_attn_interface", iface)
    fa._interface.cache_clear()
    fa._supported.cache_clear()
