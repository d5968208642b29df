"""A method's refusal names the method refused: reasons land in records and the sweep's plan, where a
reader tells methods apart by them (megatron_lm once reported "megatron_sp splits attention heads")."""
import pytest

from dspbench.methods import Dims, available, get_method
from dspbench.models import Shape, get_config

# by what each method declares (MethodSpec.splits_heads), so a new method needs no list here
HEAD_SPLITTERS = [m for m in available() if get_method(m).splits_heads]


def test_the_declared_head_splitters_are_the_ones_refusing_indivisible_heads():
    """`splits_heads` is what the check does: a method that declares none accepts 4 heads on 8 ranks
    (or refuses for another reason than the heads); else the parametrisation below would miss it."""
    assert len(HEAD_SPLITTERS) >= 6      # ulysses and its variants, megatron_sp and _lm, dsp_hybrid
    for name in available():
        cfg = get_config("full3d-tiny")
        reason = get_method(name).check(cfg, Shape(1, 8, 16), Dims(sp=8)) or ""
        assert ("heads=4" in reason) == get_method(name).splits_heads, (name, reason)


@pytest.mark.parametrize("name", HEAD_SPLITTERS)
def test_a_head_splitting_method_names_itself_when_heads_do_not_divide(name):
    # 4 heads; full attention, where dsp_hybrid splits heads too (its axial attentions switch instead)
    cfg = get_config("full3d-tiny")
    reason = get_method(name).check(cfg, Shape(1, 8, 16), Dims(sp=8))
    assert reason is not None and "heads=4" in reason, reason
    assert reason.startswith(name), reason
