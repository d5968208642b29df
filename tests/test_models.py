"""Model contract: shapes, analytic parameter counts and FLOPs against brute force, no distributed imports."""
import ast
import pathlib

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from dspbench.models import MODELS, Shape, build_model, get_config, make_inputs
from dspbench.models.params import flops_per_sample, param_count

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_analytic_param_count_equals_the_module(name):
    cfg = get_config(name)
    with torch.device("meta"):
        model = build_model(cfg)
    assert param_count(cfg) == sum(p.numel() for p in model.parameters())


def test_paper_sizes():
    assert 0.70e9 < param_count(get_config("stdit-xl")) < 0.80e9     # "about 0.7B" (STDiT-XL/2)
    assert 2.8e9 < param_count(get_config("stdit-3b")) < 3.3e9
    cfg = get_config("stdit-xl")
    assert (cfg.depth, cfg.hidden, cfg.heads, cfg.mlp_ratio, cfg.patch, cfg.caption_channels) == (
        28, 1152, 16, 4.0, (1, 2, 2), 4096)


@pytest.mark.parametrize("name", ["stdit-tiny", "stdit3-tiny"])
@pytest.mark.parametrize("shape", [Shape(1, 4, 16), Shape(2, 3, 12)])
def test_analytic_flops_equal_counted_flops(name, shape):
    cfg = get_config(name)
    model = build_model(cfg)
    x, t, y, _ = make_inputs(cfg, shape)
    # The math SDPA backend decomposes attention into counted matmuls.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        model(x, t, y)
    assert fc.get_total_flops() == shape.batch * flops_per_sample(cfg, shape)


@pytest.mark.parametrize("name", ["stdit-tiny", "stdit3-tiny"])
def test_output_shape_and_extents_from_shapes(name):
    cfg = get_config(name)
    model = build_model(cfg)
    for shape in (Shape(2, 4, 16), Shape(1, 3, 6)):
        x, t, y, target = make_inputs(cfg, shape)
        out = model(x, t, y)
        assert out.shape == target.shape == (shape.batch, cfg.out_channels, shape.frames, *x.shape[-2:])


def test_checkpointing_does_not_change_results():
    cfg = get_config("stdit-tiny")
    torch.manual_seed(0)
    a = build_model(cfg)
    b = build_model(cfg.with_(grad_ckpt=True))
    b.load_state_dict(a.state_dict())
    x, t, y, _ = make_inputs(cfg, Shape(1, 4, 16))
    for m in (a, b):
        m(x, t, y).square().mean().backward()
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-7, msg=n)


def test_unknown_model_lists_known_ones():
    with pytest.raises(KeyError, match="stdit-tiny"):
        get_config("stdit-huge")


def test_models_import_nothing_distributed():
    forbidden = ("torch.distributed", "dspbench.methods", "dspbench.bench", "dspbench.slurm")
    for path in (ROOT / "models").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
                assert node.level <= 1, f"{path.name} imports outside models/: {names}"
            for n in names:
                assert not n.startswith(forbidden), f"{path.name} imports {n}"
