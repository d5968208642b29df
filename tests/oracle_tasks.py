"""Rank-side tasks of the oracle tests: a method against the single-device model, same weights."""
from __future__ import annotations

from dspbench.methods import build_dims, get_method
from dspbench.methods.comm import layer as comm
from dspbench.models import Shape, get_config, make_inputs
from dspbench.run.oracle import oracle_errors

_DIMS: dict = {}


def dims_for(sp: int, shard: str = "T"):
    # new_group is collective: build each mesh once per rank and reuse it across tests.
    if (sp, shard) not in _DIMS:
        _DIMS[(sp, shard)] = build_dims(sp, shard)
    return _DIMS[(sp, shard)]


def oracle_case(method: str, model: str, shape: tuple, sp: int, shard: str = "T", ckpt: bool = False,
                a2a: str = "single", pad: str = "auto", **over):
    cfg = get_config(model, grad_ckpt=ckpt, **over)
    shape = Shape(*shape)
    spec, dims = get_method(method), dims_for(sp, shard)
    reason = spec.check_pad(cfg, shape, dims, pad)
    if reason:
        return {"unsupported": reason}
    prev = comm.set_a2a_style(a2a)   # the pool's ranks outlive the test: put the default back
    try:
        return oracle_errors(spec, cfg, shape, dims, seed=0, pad=pad)
    finally:
        comm.set_a2a_style(prev)


# Tolerance: fp32 with reordered sums (ring's log-sum-exp merge, tensor-parallel partial sums) is
# accurate to a few ulps of the largest value; 2e-6 relative to that scale leaves ~10x headroom
# over what we observe (~3e-7) while still failing on any real indexing or scaling error.
RTOL = 2e-6


def assert_matches_oracle(res, sp=None):
    for r in res:   # every rank checks its own copy (each DP group is its own SP problem)
        assert "unsupported" not in r, r
        assert r["output"] <= RTOL * max(1.0, r["output_scale"]), r["output"]
        assert r["grads"] <= RTOL * max(1.0, r["grad_scale"]), (r["worst_param"], r["grads"])
        assert r["input_grad"] <= RTOL * max(1.0, r["grad_scale"]), r["input_grad"]
        assert r["ledger"] == r["formula"], (r["ledger"], r["formula"])


def low_precision_case(method: str, model: str, shape: tuple, sp: int, dtype_name: str = "bf16"):
    """The method in low precision and the unsharded model in low precision, both against the fp32
    oracle: how much error the parallelisation adds to what the precision costs anyway."""
    import torch
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    cfg, shape = get_config(model), Shape(*shape)
    spec, dims = get_method(method), dims_for(sp)
    reason = spec.check(cfg, shape, dims)
    if reason:
        return {"unsupported": reason}
    par = oracle_errors(spec, cfg, shape, dims, dtype=dtype, ref_dtype=torch.float32)
    one = oracle_errors(get_method("single"), cfg, shape, dims_for(1), dtype=dtype, ref_dtype=torch.float32)
    keys = ("output", "grads", "input_grad")
    return {"method": {k: par[k] for k in keys}, "single": {k: one[k] for k in keys},
            "scale": {"output": par["output_scale"], "grads": par["grad_scale"], "input_grad": par["grad_scale"]}}


def infer_case(method: str, model: str, shape: tuple, sp: int, shard: str = "T") -> dict:
    """Forward only, fp32 (oracle_errors(backward=False), what `run --check` does for a method that
    cannot train here): output error, and the ledger beside the infer formula."""
    from dspbench.run.oracle import within_tolerance
    cfg, shape = get_config(model), Shape(*shape)
    spec, dims = get_method(method), dims_for(sp, shard)
    reason = spec.check(cfg, shape, dims)
    if reason:
        return {"unsupported": reason}
    errs = oracle_errors(spec, cfg, shape, dims, seed=0, backward=False)
    return {**errs, "within_tolerance": within_tolerance(errs, "fp32")}


def train_error(method: str, model: str, shape: tuple, sp: int) -> str:
    """The error a training step raises (type: message), or '' if it runs."""
    try:
        oracle_case(method, model, shape, sp)
    except Exception as e:  # noqa: BLE001 - the test reads the message
        return f"{type(e).__name__}: {e}"
    return ""


def saved_activation_bytes(method: str, model: str, shape: tuple, sp: int, ckpt: bool = False) -> int:
    """Bytes of the tensors autograd saves in one forward of the parallel model (distinct storages,
    parameters excluded): what the memory model's activation term predicts."""
    import torch
    from dspbench.models import build_model
    cfg, shape = get_config(model, grad_ckpt=ckpt), Shape(*shape)
    spec, dims = get_method(method), dims_for(sp)
    torch.manual_seed(0)
    par = spec.parallelize(build_model(cfg), dims)
    x, t, y, _ = make_inputs(cfg, shape, seed=1)
    params = {p.untyped_storage().data_ptr() for p in par.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        par(x.requires_grad_(), t, y)
    return sum(saved.values())
