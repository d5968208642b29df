"""The ring's block kernels and log-sum-exp merge, on one device, against whole attention.

A ring of size N is simulated by splitting K, V into N blocks: forward merges the blocks' partial
results, backward calls the block kernel with the merged out and lse. This is the ring's numerics
without the network, so it also runs on one GPU, and it records how the error grows with N.
"""
import pytest
import torch
import torch.nn.functional as F

from dspbench.methods.attn_kernels import _reference_backward, _reference_forward, block_backward, block_forward
from dspbench.methods.ring import merge_partial

# The CUDA cases are GPU-marked (bench/gpu/check.sh selects `-m gpu`) and skip with a reason elsewhere.
DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")])]


def ring_simulated(q, k, v, n):
    scale = q.shape[-1] ** -0.5
    ks, vs = k.chunk(n, dim=2), v.chunk(n, dim=2)
    out = lse = None
    auxes = []
    for kb, vb in zip(ks, vs):
        o, l, aux = block_forward(q, kb, vb, scale)
        auxes.append(aux)
        out, lse = (o.float(), l) if out is None else merge_partial(out, lse, o, l)
    out = out.to(q.dtype)
    dout = torch.ones_like(out)
    grads = [block_backward(dout, q, kb, vb, out, lse, scale, aux) for kb, vb, aux in zip(ks, vs, auxes)]
    dq = sum(g[0].float() for g in grads)
    dk = torch.cat([g[1] for g in grads], dim=2)
    dv = torch.cat([g[2] for g in grads], dim=2)
    return out, dq, dk, dv


def whole(q, k, v):
    q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v)
    out.backward(torch.ones_like(out))
    return out, q.grad, k.grad, v.grad


# fp32: reordered sums only. bf16: inputs and the per-block outputs are rounded to 8 bits of
# mantissa (2^-8 ~ 4e-3 relative); the error grows slowly with N as more rounded blocks merge.
TOL = {torch.float32: 2e-5, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_ring_blocks_equal_whole_attention(device, dtype, n):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=g).to(device=device, dtype=dtype) for _ in range(3))
    got, ref = ring_simulated(q, k, v, n), whole(q, k, v)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref):
        err = (a.float() - b).abs().max().item() / max(1.0, b.abs().max().item())
        assert err <= TOL[dtype], (name, err)


def test_reference_kernels_match_cpu_kernels():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(3))
    scale = 8 ** -0.5
    o1, l1, _ = block_forward(q, k, v, scale)
    o2, l2 = _reference_forward(q, k, v, scale)
    torch.testing.assert_close(o1, o2, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(l1, l2, rtol=1e-5, atol=1e-6)
    d = torch.randn(o1.shape, generator=g)
    for a, b in zip(block_backward(d, q, k, v, o1, l1, scale), _reference_backward(d, q, k, v, o1, l1, scale)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- the optional flash-attn adapter
@pytest.fixture
def fake_flash_attn(monkeypatch):
    """Install a fake flash-attn (tests/fake_flash_attn.py: a mock, flash-attn needs CUDA); caches reset after."""
    import fake_flash_attn as fake
    from dspbench.methods import flash_attn_kernels as fa
    yield lambda generation: fake.install(monkeypatch, generation)
    monkeypatch.undo()
    fa._interface.cache_clear()
    fa._supported.cache_clear()


@pytest.mark.parametrize("generation", ["new", "old"])
def test_flash_attn_adapter_matches_torch_kernels_for_both_signatures(fake_flash_attn, monkeypatch, generation):
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 64, 32, generator=g) for _ in range(3))   # L != H: a wrong transpose shows
    monkeypatch.setenv("DSPBENCH_ATTN_KERNEL", "torch")
    want = ring_simulated(q, k, v, 4)
    fake_flash_attn(generation)
    monkeypatch.setenv("DSPBENCH_ATTN_KERNEL", "flash_attn")
    got = ring_simulated(q, k, v, 4)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert (a - b).abs().max().item() <= 2e-5, name


def test_flash_attn_choice_is_guarded(fake_flash_attn, monkeypatch):
    from dspbench.methods import flash_attn_kernels as fa
    q = torch.zeros(1, 2, 8, 16, dtype=torch.bfloat16)
    monkeypatch.setenv("DSPBENCH_ATTN_KERNEL", "nope")
    with pytest.raises(ValueError, match="DSPBENCH_ATTN_KERNEL"):
        fa.use_flash_attn(q)
    monkeypatch.setenv("DSPBENCH_ATTN_KERNEL", "auto")
    fake_flash_attn("new")
    assert not fa.use_flash_attn(q)                       # auto: CUDA only
    fake_flash_attn("unknown")
    with pytest.warns(UserWarning, match="sink_tokens"):
        assert not fa._supported()                        # an unknown signature turns it off, once


def test_forcing_flash_attn_without_it_is_a_clear_error(monkeypatch):
    from dspbench.methods import flash_attn_kernels as fa
    if fa._interface() is not None:
        pytest.skip("flash_attn is installed here")
    monkeypatch.setenv("DSPBENCH_ATTN_KERNEL", "flash_attn")
    with pytest.raises(ImportError, match="pip install flash-attn"):
        fa.use_flash_attn(torch.zeros(1, 1, 1, 8))


def test_describe_names_the_kernels_that_run():
    from torch.nn.attention import SDPBackend

    from dspbench.methods.attn_kernels import describe
    got = describe(torch.device("cpu"), torch.float32, heads=4, head_dim=8)
    assert got["sdpa"] in {n.lower() for n in SDPBackend.__members__}   # torch's dispatcher's own answer
    assert got["ring_block"] == "torch flash (CPU)"
