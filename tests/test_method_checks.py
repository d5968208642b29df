"""A method's refusal names the method refused: reasons land in records and the sweep's plan, where a
reader tells methods apart by them (megatron_lm once reported "megatron_sp splits attention heads")."""
import pytest

from dspbench.methods import BUILTIN, Dims, get_method
from dspbench.models import Shape, get_config

HEAD_SPLITTERS = [m for m in BUILTIN if m not in ("single", "dsp", "ring", "allgather_kv", "ring_flash", "torch_cp",
                                                   "usp")]


@pytest.mark.parametrize("name", HEAD_SPLITTERS)
def test_a_head_splitting_method_names_itself_when_heads_do_not_divide(name):
    # 4 heads each; dsp_hybrid splits heads only inside full attention, which stdit has none of
    cfg = get_config("full3d-tiny" if name == "dsp_hybrid" else "stdit-tiny")
    reason = get_method(name).check(cfg, Shape(1, 8, 16), Dims(sp=8))
    assert reason is not None and "heads=4" in reason, reason
    assert reason.startswith(name), reason
