"""Figures: the right axes, units and colours; files written; skipped gracefully without data."""
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("seaborn")
import matplotlib.colors as mcolors  # noqa: E402

from dspbench.reports import figures, figures_cost  # noqa: E402
from dspbench.reports.report import analyse  # noqa: E402
from dspbench.methods import available, get_method  # noqa: E402
from dspbench.reports.meta import PALETTE  # noqa: E402
from dspbench.reports.style import colour  # noqa: E402


def look(m: str) -> str:
    """The colour a method declares (MethodSpec.report), which its figures must use."""
    return get_method(m).report.colour

SAMPLE = Path(__file__).parent / "data" / "sample_results" / "cpu-small"


@pytest.fixture(scope="module")
def a():
    return analyse(SAMPLE)


def _labels(fig):
    return [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes if ax.get_visible()]


def _line_colours(fig) -> set[str]:
    return {mcolors.to_hex(line.get_color()) for ax in fig.axes for line in ax.get_lines()}


def test_throughput_axes_units_palette_and_files(a, tmp_path):
    fig, notes = figures.plot_throughput(a.best)
    assert _labels(fig) == [("GPUs (world size)", "throughput (samples/s)")] * 2   # T=16 and T=32
    assert [ax.get_title() for ax in fig.axes] == ["T=16 S=64", "T=32 S=64"]
    assert {mcolors.to_hex(look(m)) for m in ("dsp", "ulysses", "ring", "megatron_sp")} <= _line_colours(fig)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["DSP", "Ulysses", "Ring Attention", "Megatron-SP", "single device"]
    paths = figures.save(fig, tmp_path, "throughput")
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = paths["svg"].read_text()
    assert "throughput (samples/s)" in svg and "GPUs (world size)" in svg      # text kept as text


def test_speedup_bars(a):
    fig, _ = figures.plot_speedup(a.speedups)
    (ax,) = fig.axes
    assert ax.get_ylabel() == "DSP / baseline (samples/s)" and ax.get_xlabel() == "configuration"
    assert any(getattr(c, "errorbar", None) for c in ax.containers)     # 2 repeats: min-max bars
    bars = {mcolors.to_hex(p.get_facecolor()) for p in ax.patches}
    assert bars == {mcolors.to_hex(look(m)) for m in ("ulysses", "ring", "megatron_sp")}
    drawn = [p for p in ax.patches if p.get_height() == p.get_height()]      # NaN: no bar
    assert len(drawn) == 11          # 4 configurations x 3 baselines, less Megatron-SP's oom


def test_one_repeat_draws_no_error_bars_and_decades_go_log(a):
    fig, _ = figures.plot_speedup(a.speedups.assign(n_repeats=1))
    assert not any(getattr(c, "errorbar", None) for c in fig.axes[0].containers)   # n=1: none
    slow = a.best.assign(**{c: a.best[c].where(a.best["gpus"] > 1, 0.01)
                            for c in ("samples_per_s", "samples_per_s_min", "samples_per_s_max")})
    fig, _ = figures.plot_throughput(slow)     # one point 100x below the rest must not flatten them
    assert {ax.get_yscale() for ax in fig.axes if ax.get_visible()} == {"log"}


def test_comm_volume_stacks_op_phases(a):
    fig, _ = figures_cost.plot_comm_volume(a.runs)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 4
    assert all(l == ("method", "sent per rank per layer (MiB)") for l in _labels(fig))
    ticks = axes[0].get_xticklabels()
    assert [t.get_text() for t in ticks] == ["DSP", "Ulysses", "Ring Attention", "Megatron-SP"]
    assert mcolors.to_hex(ticks[0].get_color()) == look("dsp").lower()
    # SP=2, T=16: DSP sends 0.5 MiB per layer forward and as much backward (the bars stack to 1 MiB)
    heights = [p.get_height() + p.get_y() for p in axes[0].patches if p.get_x() < 0.5 and p.get_height() > 0]
    assert max(heights) == pytest.approx(1.0)
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"all_to_all.fwd", "all_to_all.bwd", "send_recv.bwd", "reduce_scatter.fwd"} <= legend


def test_scaling_and_memory(a):
    fig, _ = figures.plot_scaling(a.scaling)
    assert [ax.get_title() for ax in fig.axes] == ["strong scaling (fixed T and S)", "weak scaling (fixed tokens per GPU)"]
    assert _labels(fig) == [("GPUs (world size)", "efficiency (% of linear, tokens/s/GPU)")] * 2
    fig, _ = figures_cost.plot_memory(a.best)
    assert _labels(fig) == [("configuration", "peak memory per rank (GiB)")] * 2   # 7 configurations: 6 + 1
    bars = {mcolors.to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches if p.get_height() > 0}
    assert bars == {mcolors.to_hex(look(m)) for m in ("dsp", "ulysses", "ring", "megatron_sp", "single")}


def test_figures_skip_when_data_cannot_support_them(a):
    one_gpu = a.best[a.best["gpus"] == 4]
    assert figures.plot_throughput(one_gpu) == (None, "throughput vs GPUs: skipped, the sweep has a single GPU count.")
    assert figures.plot_speedup(a.speedups.iloc[0:0])[0] is None
    assert figures.plot_scaling(a.scaling.iloc[0:0])[0] is None
    assert figures_cost.plot_comm_volume(a.runs[a.runs["sp"] == 1])[0] is None
    assert figures_cost.plot_memory(a.best.assign(mem_per_rank_bytes=float("nan")))[0] is None


def test_a_method_without_a_colour_gets_a_stable_palette_colour_no_method_declares():
    declared = {get_method(m).report.colour for m in available()}
    # stable across processes and runs (a checksum of the name, not hash()): pinned, not compared with itself
    assert colour("my_plugin") == "#6699CC" and colour("another_plugin") in PALETTE
    assert not declared & set(PALETTE), "a fallback colour would be mistaken for a declared one"
