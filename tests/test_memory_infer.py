"""The memory model's inference term against a measured forward: without autograd, a DiT keeps only
what is live inside one block (bench/cost/memory.py infer_elems), measured here on CPU with the
live-heap probe `run` uses (bench/run/measure.py LivePeak), one process, fp32."""
from __future__ import annotations

import pytest
import torch

from dspbench.cost.memory import activation_bytes, block_elems, infer_elems
from dspbench.models import Shape, build_model, get_config
from dspbench.models.inputs import make_inputs
from dspbench.run import measure

pytestmark = pytest.mark.skipif(measure.live_heap_bytes() is None, reason="needs glibc mallinfo2")

# (model, batch x T x S, overrides): a hidden-unit (B x T x S x C x 4 B) of 4-16 MiB, far above what
# the heap does besides; MLP ratios 4, 2 and 1 (where the attention is widest). Sequences of at most
# 1024 tokens: CPU attention's own buffers grow with the sequence (at 8192 tokens of full attention
# they added half as much again), flash attention's on a GPU do not.
CASES = [("full3d-tiny", (8, 4, 256), {"hidden": 128, "heads": 4}),
         ("full3d-tiny", (8, 4, 256), {"hidden": 128, "heads": 4, "mlp_ratio": 1.0}),
         ("axial3d-tiny", (1, 16, 1024), {"hidden": 128, "heads": 4}),
         ("stdit-tiny", (2, 16, 1024), {"hidden": 128, "heads": 4}),
         ("stdit-tiny", (1, 16, 1024), {"hidden": 128, "heads": 4, "mlp_ratio": 2.0})]


def forward_live_bytes(cfg, shape: Shape) -> int:
    """The least of two measured forwards after a warm one: a process's first forwards also allocate
    what it keeps (16.5 hidden-units, then 11.0 on every later one, full3d at ratio 4)."""
    model = build_model(cfg).eval()
    x, t, y, _ = make_inputs(cfg, shape)
    peaks = []
    with torch.no_grad():
        model(x, t, y)
        for _ in range(2):
            base = measure.live_heap_bytes()
            with measure.LivePeak() as live:
                model(x, t, y)
            peaks.append(live.peak - base)
    return min(peaks)


@pytest.mark.parametrize("model,shape,over", CASES)
def test_a_forward_keeps_one_blocks_working_set(model, shape, over):
    cfg, shape = get_config(model, **over), Shape(*shape)
    predicted = activation_bytes(cfg, shape, 1, "fp32", "infer")
    measured = forward_live_bytes(cfg, shape)
    assert 0.95 * predicted <= measured <= 1.15 * predicted, (measured / predicted, infer_elems(cfg))
    # the training count (what autograd saves per block) is 2-3x what a forward holds
    assert block_elems(cfg) > 2 * infer_elems(cfg) - 2


def test_the_working_set_is_the_widest_phase():
    assert infer_elems(get_config("full3d-tiny")) == 2 + 2 * 4 + 1        # the MLP at ratio 4
    assert infer_elems(get_config("full3d-tiny", mlp_ratio=1.0)) == 6 + 1  # the attention, wider than a 1x MLP
    shape = Shape(2, 8, 64)
    assert activation_bytes(get_config("full3d-tiny"), shape, 4, "bf16", "sample") == \
        activation_bytes(get_config("full3d-tiny"), shape, 1, "bf16", "sample") / 4
