"""Comm layer on gloo: layouts, conjugate pairs (adjoint identities), ledger events."""
import pytest

import comm_tasks as ct

pytestmark = pytest.mark.gloo


@pytest.mark.parametrize("world", [2, 4])
def test_all_to_all_moves_the_right_elements(rank_pool, world):
    assert all(rank_pool(world).run(ct.all_to_all_layout, 2, 1))
    assert all(rank_pool(world).run(ct.all_to_all_layout, 1, 2))


@pytest.mark.parametrize("name", sorted(ct.PAIRS))
@pytest.mark.parametrize("world", [2, 4])
def test_backward_is_the_adjoint_of_forward(rank_pool, world, name):
    res = rank_pool(world).run(ct.adjoint_case, name)
    fwd, bwd = sum(r["fwd"] for r in res), sum(r["bwd"] for r in res)
    if name == "gather":   # the gathered output is one replicated tensor: its product counts once
        fwd = res[0]["fwd"]
    assert fwd == pytest.approx(bwd, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_records_one_event_per_direction(rank_pool, world):
    res = rank_pool(world).run(ct.adjoint_case, "gather_from_seq")
    ops = [(op, phase) for op, phase, _, _ in res[0]["events"]]
    assert ops == [("all_gather", "fwd"), ("reduce_scatter", "bwd")]
    _, _, payload, wire = res[0]["events"][0]
    assert wire == payload * (world - 1) // world


@pytest.mark.parametrize("dims", [(2, 1), (1, 3)])
@pytest.mark.parametrize("world", [2, 4])
def test_list_style_all_to_all_equals_single(rank_pool, world, dims):
    # --a2a list (the reference code's tensor_split + list all_to_all + cat): same values, same ledger.
    for r in rank_pool(world).run(ct.a2a_styles_case, *dims):
        assert r["equal"]
        single, listed = r["events"]
        assert single == listed and [e[:2] for e in single] == [("all_to_all", "fwd"), ("all_to_all", "bwd")]


def test_unknown_a2a_style_is_rejected():
    from dspbench.methods.comm import layer as comm
    with pytest.raises(ValueError, match="a2a style must be one of"):
        comm.set_a2a_style("ring")


def test_world_size_one_records_nothing():
    import torch
    from dspbench.methods.comm import layer as comm
    from dspbench.methods.comm.ledger import Ledger
    x = torch.randn(2, 4, 4, 3, requires_grad=True)
    with Ledger() as led:
        y = comm.all_to_all(x, 2, 1, None, "t")
        comm.gather_from_seq(y, 1, None, "t").sum().backward()
    assert led.events == [] and torch.equal(y, x)


# ---------------------------------------------------------------- the one-comm-layer contract
def _uses_c10d(path) -> list[str]:
    """Lines of `path` that import torch.distributed or reach it as an attribute (comments and
    docstrings do not count: the AST has none)."""
    import ast
    hits = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute) and node.attr == "distributed":
            names = ["torch.distributed"] if isinstance(node.value, ast.Name) and node.value.id == "torch" else []
        if any(n == "torch.distributed" or n.startswith("torch.distributed.") for n in names):
            hits.append(f"{path}:{node.lineno}")
    return hits


def test_only_the_comm_layer_touches_torch_distributed():
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    files = [p for d in ("bench", "methods", "models", "slurm", "reports", "examples") for p in (root / d).rglob("*.py")]
    assert len(files) > 50
    # the recorded layer, its asynchronous band, its unrecorded band, its DTensor band (torch_cp:
    # torch issues the calls) and its tracing band (a fake world for rank_trace)
    layer = {"methods/comm/layer.py", "methods/comm/async_ops.py", "methods/comm/p2p.py", "methods/comm/raw.py", "methods/comm/dtensor.py",
             "methods/comm/fake_world.py"}
    hits = [h for p in files if p.relative_to(root).as_posix() not in layer for h in _uses_c10d(p)]
    assert hits == [], "collectives must go through methods/comm/ (ledger): " + ", ".join(hits)
    assert _uses_c10d(root / "methods" / "comm" / "layer.py"), "the check itself finds the comm layer's imports"
