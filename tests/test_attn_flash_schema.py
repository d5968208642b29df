"""The CUDA flash path of the ring's block kernels, checked on CPU against the ops' schemas.

No GPU here, so the two aten ops are replaced (a mock, and only because CUDA cannot run): the forward
by one that returns what the CUDA kernel returns for dense input (out, lse, cum_seq_q=None,
cum_seq_k=None, max_q, max_k, rng_state, unused, debug mask), the backward by a recorder that binds
its arguments to the real backward op's schema and then computes with the CPU kernel. The check:
every argument has the schema's type, and the forward's cum_seq/max/rng outputs come back to the
backward as the very same objects (a defined cum_seq tensor, even an empty one, sends the CUDA
backward down its varlen path).
"""
import torch

from dspbench.methods import attn_kernels
from test_attn_kernels import ring_simulated, whole

aten = torch.ops.aten
FWD, BWD = aten._scaled_dot_product_flash_attention.default, aten._scaled_dot_product_flash_attention_backward.default
# Forward output -> backward argument (PyTorch's derivatives.yaml hands them over in this order).
HANDED = {"cum_seq_q": "cum_seq_q", "cum_seq_k": "cum_seq_k", "max_q": "max_q", "max_k": "max_k",
          "rng_state": "philox_seed", "unused": "philox_offset"}
TYPES = {"Tensor": (torch.Tensor, type(None)),   # None is an undefined tensor, as the forward returns it
         "SymInt": (int,), "int": (int,), "float": (float,), "bool": (bool,),
         "float?": (float, type(None)), "Optional[float]": (float, type(None))}


def fake_forward(q, k, v, dropout_p, is_causal, return_debug_mask, *, scale=None):
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, scale=scale)
    rng_state, unused = torch.zeros(2, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
    res = (out, lse, None, None, q.shape[-2], k.shape[-2], rng_state, unused, torch.empty(0))
    forwards.append(dict(zip([r.name for r in FWD._schema.returns], res)))
    return res


def recording_backward(*args, **kwargs):
    names = [a.name for a in BWD._schema.arguments]
    positional = [a for a in BWD._schema.arguments if not a.kwarg_only]
    assert len(args) == len(positional), f"{len(args)} positional arguments, the schema has {len(positional)}"
    assert set(kwargs) <= set(names[len(positional):]), kwargs
    bound = {**dict(zip(names, args)), **kwargs}
    for a in BWD._schema.arguments:
        if a.name in bound:
            assert isinstance(bound[a.name], TYPES[str(a.type)]), (a.name, str(a.type), type(bound[a.name]))
    backwards.append(bound)
    b = bound
    return aten._scaled_dot_product_flash_attention_for_cpu_backward(
        b["grad_out"], b["query"], b["key"], b["value"], b["out"], b["logsumexp"], b["dropout_p"], b["is_causal"],
        scale=b["scale"])


forwards: list[dict] = []
backwards: list[dict] = []


class FakeAten:   # the CPU kernels stay real: the fakes use them
    _scaled_dot_product_flash_attention = staticmethod(fake_forward)
    _scaled_dot_product_flash_attention_backward = staticmethod(recording_backward)
    _scaled_dot_product_flash_attention_for_cpu = aten._scaled_dot_product_flash_attention_for_cpu
    _scaled_dot_product_flash_attention_for_cpu_backward = aten._scaled_dot_product_flash_attention_for_cpu_backward


def test_cuda_flash_backward_gets_exactly_what_its_forward_returned(monkeypatch):
    assert [r.name for r in FWD._schema.returns][2:8] == list(HANDED)   # the installed torch's schema
    monkeypatch.setattr(attn_kernels, "aten", FakeAten)
    monkeypatch.setattr(attn_kernels, "_cuda_flash", lambda q: True)
    forwards.clear(), backwards.clear()
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 32, 16, generator=g) for _ in range(3))
    got, ref = ring_simulated(q, k, v, 4), whole(q, k, v)
    assert len(forwards) == len(backwards) == 4
    for fwd, bwd in zip(forwards, backwards):
        for out_name, arg_name in HANDED.items():
            assert bwd[arg_name] is fwd[out_name], f"{arg_name} is not the forward's {out_name}"
        assert bwd["cum_seq_q"] is None and bwd["cum_seq_k"] is None   # dense: no varlen path
        assert bwd["dropout_p"] == 0.0 and bwd["is_causal"] is False
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
        assert (a.float() - b).abs().max().item() <= 2e-5, name
