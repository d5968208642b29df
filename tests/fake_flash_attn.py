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


# ---------------------------------------------------------------- what ring-flash-attn imports
# ring-flash-attn 0.1.8 imports the dense and the varlen private functions (2.6+ signatures) at
# import time, and its Hugging Face adapter imports transformers. On CPU both are stood in for:
# the dense and varlen kernels by the fp32 reference above (explicit softmax and LSE), transformers
# by an empty module with the one name the adapter reads (no transformers code ever runs here).
def _check_plain(causal, dropout_p, alibi_slopes):
    if causal or dropout_p or alibi_slopes is not None:
        raise NotImplementedError("the CPU stand-in computes plain (non-causal, no dropout) attention only")


def dense_fwd(q, k, v, dropout_p, softmax_scale, causal, window_size_left=-1, window_size_right=-1,
              softcap=0.0, alibi_slopes=None, return_softmax=False):
    _check_plain(causal, dropout_p, alibi_slopes)
    out, lse = _fwd(q, k, v, softmax_scale)
    return out, lse, None, None


def dense_bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal,
              window_size_left=-1, window_size_right=-1, softcap=0.0, alibi_slopes=None, deterministic=False,
              rng_state=None):
    _check_plain(causal, dropout_p, alibi_slopes)
    _bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, softmax_scale)
    return dq, dk, dv, None


def _segments(cu_q, cu_k):
    """(query slice, key slice) of each packed sequence."""
    cq, ck = cu_q.tolist(), cu_k.tolist()
    return [(slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])) for i in range(len(cq) - 1)]


def varlen_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, softmax_scale, causal,
               window_size_left=-1, window_size_right=-1, softcap=0.0, alibi_slopes=None, return_softmax=False,
               block_table=None, leftpad_k=None, seqused_k=None):
    """Packed (total, H, D) input; lse (H, total_q), as flash-attn 2.6+ returns for varlen."""
    _check_plain(causal, dropout_p, alibi_slopes)
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32)
    for sq, sk in _segments(cu_seqlens_q, cu_seqlens_k):
        o, l = _fwd(q[sq][None], k[sk][None], v[sk][None], softmax_scale)
        out[sq], lse[:, sq] = o[0], l[0]
    return out, lse, None, None


def varlen_bwd(dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
               max_seqlen_k, dropout_p, softmax_scale, causal, window_size_left=-1, window_size_right=-1,
               softcap=0.0, alibi_slopes=None, deterministic=False, rng_state=None):
    _check_plain(causal, dropout_p, alibi_slopes)
    for sq, sk in _segments(cu_seqlens_q, cu_seqlens_k):
        grads = [torch.empty_like(t[s][None]) for t, s in ((q, sq), (k, sk), (v, sk))]
        _bwd(dout[sq][None], q[sq][None], k[sk][None], v[sk][None], out[sq][None],
             softmax_lse[:, sq][None].contiguous(), *grads, softmax_scale)
        dq[sq], dk[sk], dv[sk] = grads[0][0], grads[1][0], grads[2][0]
    return dq, dk, dv, None


STAND_IN = ("flash_attn", "flash_attn.flash_attn_interface", "transformers",
            "transformers.modeling_flash_attention_utils")


def import_ring_flash_attn():
    """Import ring_flash_attn against the stand-ins, then take the stand-ins out of sys.modules
    again (ring-flash-attn keeps its own references), so nothing else in this process sees a
    fake flash_attn. Returns the package."""
    if "ring_flash_attn" in sys.modules:
        return sys.modules["ring_flash_attn"]
    iface = types.ModuleType("flash_attn.flash_attn_interface")
    for name, fn in (("_flash_attn_forward", dense_fwd), ("_flash_attn_backward", dense_bwd),
                     ("_flash_attn_varlen_forward", varlen_fwd), ("_flash_attn_varlen_backward", varlen_bwd)):
        setattr(iface, name, fn)
    pkg = types.ModuleType("flash_attn")
    pkg.flash_attn_interface = iface
    tf, tf_utils = types.ModuleType("transformers"), types.ModuleType("transformers.modeling_flash_attention_utils")
    tf_utils.is_flash_attn_greater_or_equal_2_10 = lambda: True
    tf.modeling_flash_attention_utils, tf.__version__ = tf_utils, "0+stand-in"
    saved = {n: sys.modules.get(n) for n in STAND_IN}
    sys.modules.update(zip(STAND_IN, (pkg, iface, tf, tf_utils)))
    try:
        import ring_flash_attn
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
    return ring_flash_attn
