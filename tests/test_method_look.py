"""A method is one file: its label, colour, order and Table 3 row live on its MethodSpec (`report`),
its records carry them (`method_meta`), and a report draws it so with no table of ours naming it.

A throwaway method is added the two ways docs/adding-a-method.md shows, a built-in (one module,
one BUILTIN line) and a plugin (one module, one entry point), and a report of its records is drawn
with the method registry out of reach, as reports see it.
"""
import random
import sys
import textwrap

import pytest

pytest.importorskip("pandas")
pytest.importorskip("seaborn")

import dspbench.methods as methods  # noqa: E402
from dspbench.methods import Look  # noqa: E402
from dspbench.micro.synth_records import CPU_ENV, make_record  # noqa: E402
from dspbench.records.config import RunConfig  # noqa: E402
from dspbench.records.io import append_record  # noqa: E402
from dspbench.reports import meta  # noqa: E402
from dspbench.reports.report import build_report  # noqa: E402

# DSP's code under another name and look: the report must tell them apart by what the spec declares.
SOURCE = textwrap.dedent('''
    from dataclasses import replace
    from dspbench.methods import Look, Table3, dsp
    METHOD = replace(dsp.METHOD, name="{name}",
                     report=Look(label="{label}", colour="{colour}", order=15, table3=Table3("2M/N", 2, per_n=True)))
''')


def write_method(folder, name: str, label: str, colour: str) -> None:
    (folder / f"{name}.py").write_text(SOURCE.format(name=name, label=label, colour=colour))


def report_of(tmp_path, name: str) -> tuple[str, str]:
    """(index.md, the throughput figure's SVG) of a small synthetic sweep of `name` beside DSP."""
    rng, results = random.Random(0), tmp_path / "results"
    for method in (name, "dsp"):
        for gpus in (2, 4):
            cfg = RunConfig(method=method, model="stdit-tiny", gpus=gpus, sp=gpus, frames=16, spatial=16,
                            backend="gloo", iters=3)
            append_record(results / "records.jsonl", make_record(cfg, rng, flops_per_s=25e9, bytes_per_s=1.5e9,
                                                                 env=CPU_ENV))
    build_report(results, jobs=1)
    out = results / "report"
    return (out / "index.md").read_text(), (out / "figures" / "throughput.svg").read_text()


@pytest.fixture
def reports_without_the_registry(monkeypatch):
    """Reports as they are drawn: records, no method registry (reports may not import methods)."""
    monkeypatch.setattr(meta, "registry", None)
    monkeypatch.setattr(meta, "_LEARNT", {})


@pytest.fixture
def forget_module():
    names = []
    yield names.append
    for n in names:
        sys.modules.pop(n, None)


def test_a_built_in_method_is_one_file_and_one_registry_line(tmp_path, monkeypatch, forget_module,
                                                              reports_without_the_registry):
    name, label, colour = "throwaway_builtin", "Throwaway (built in)", "#5a1e8c"
    write_method(tmp_path, name, label, colour)                               # methods/<name>.py
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(tmp_path)])
    monkeypatch.setattr(methods, "BUILTIN", (*methods.BUILTIN, name))         # its BUILTIN line
    forget_module(f"dspbench.methods.{name}")
    assert name in methods.available() and methods.get_method(name).report.label == label
    md, svg = report_of(tmp_path, name)
    assert f"| {label} | 2M/N | 1.00 M |" in md and colour in svg           # Table 3's row, its colour
    assert f"- methods: DSP, {label}\n" in md, "order 15 lists it after DSP (10)"


def test_a_plugin_is_one_file_and_one_entry_point(tmp_path, monkeypatch, forget_module,
                                                   reports_without_the_registry):
    name, label, colour = "throwaway_plugin", "Throwaway (plugged in)", "#1e8c5a"
    write_method(tmp_path, name, label, colour)
    dist = tmp_path / "throwaway_plugin-0.1.dist-info"     # what pip install leaves: an entry point
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{methods.ENTRY_POINT_GROUP}]\n{name} = {name}:METHOD\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_module(name)
    assert name in methods.available() and name not in methods.BUILTIN
    md, svg = report_of(tmp_path, name)
    assert f"| {label} | 2M/N | 1.00 M |" in md and colour in svg


def test_a_record_without_a_look_gets_the_registry_s_or_its_name_and_a_palette_colour(monkeypatch):
    monkeypatch.setattr(meta, "_LEARNT", {})
    monkeypatch.setattr(meta, "registry", None)
    assert meta.label("ulysses") == "ulysses" and meta.colour("ulysses") in meta.PALETTE
    assert meta.order(["ulysses", "dsp"]) == ["dsp", "ulysses"]                    # alphabetical
    monkeypatch.setattr(meta, "_LEARNT", {})
    monkeypatch.setattr(meta, "registry", methods.method_meta)                    # as bench/cli.py wires it
    assert meta.label("ulysses") == "Ulysses" and meta.colour("ulysses") == methods.get_method("ulysses").report.colour
    assert meta.order(["ulysses", "dsp", "single"]) == ["dsp", "ulysses", "single"]
    assert meta.table3("ulysses")[0] == "4M/N" and meta.table3("ulysses")[1](4) == 1.0


def test_a_look_travels_in_the_record_as_json():
    look = Look(label="X", colour="#000000", order=1.5)
    assert look.as_record() == {"label": "X", "colour": "#000000", "order": 1.5, "table3": None}
    assert Look().as_record() == {"label": None, "colour": None, "order": None, "table3": None}
