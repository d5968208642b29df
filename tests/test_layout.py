"""The tree's rooms and the directions between them (docs/architecture.md), checked on the AST.

Every import of ours is absolute (it names the package it comes from); each stage imports only the
stages below it; and no chain of imports, lazy ones included, leads back to where it started.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"bench": "dspbench", "methods": "dspbench.methods", "models": "dspbench.models",
           "slurm": "dspbench.slurm", "reports": "dspbench.reports"}

# stage -> the stages it may import (itself always allowed). "dspbench" is the root package
# (__version__ only). Reports read records and nothing that runs: only the records' reader and the
# bucket mix's fold (records/buckets.py: plain Python over records, shared with `predict`).
ALLOWED = {
    "models": set(),
    "methods": {"models"},
    "records": {"dspbench"},
    "facts": {"records", "methods", "models"},
    "cost": {"facts", "records", "methods", "models"},
    "run": {"facts", "records", "cost", "methods", "models"},
    "calibrate": {"cost", "run", "facts", "records", "methods", "models"},
    "micro": {"run", "facts", "records", "methods", "models", "reports", "cost.hardware"},   # the device table
    "gpu": {"records", "cost", "facts"},
    "plan": {"cost", "facts", "records", "methods", "models", "slurm", "reports"},
    "slurm": {"facts", "records", "run", "cost", "methods", "models"},
    "reports": {"records.io", "records.buckets"},   # buckets: the mix of a bucketed workload, pure Python
    "cli": {"*"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [FOLDERS[rel.parts[0]], *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}


def imports(path: Path) -> list[tuple[int, str, int]]:
    """(line, imported module, relative level) for every import statement, lazy ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.module or "", node.level))
            out += [(node.lineno, f"{node.module}.{a.name}", node.level) for a in node.names]
    return out


def stage(module: str) -> str:
    parts = module.split(".")
    return "dspbench" if len(parts) == 1 else parts[1]


def allowed(src: str, dst: str) -> bool:
    s, d = stage(src), stage(dst)
    rule = ALLOWED.get(s, set())
    if s == d or "*" in rule:
        return True
    sub = ".".join(dst.split(".")[1:3])        # e.g. "records.io"
    return d in rule or sub in rule


SRC = sources()


def test_every_module_is_in_a_stage():
    loose = [m for m in SRC if m.count(".") == 1 and stage(m) not in ALLOWED and m != "dspbench.cli"]
    assert not loose, f"modules outside any stage package: {loose}"


@pytest.mark.parametrize("module", sorted(SRC))
def test_imports_are_absolute_and_go_down(module):
    bad = []
    for line, name, level in imports(SRC[module]):
        if level:
            bad.append(f"{SRC[module].name}:{line}: relative import (level {level}) of {name!r}")
        elif name.startswith("dspbench") and name in SRC and not allowed(module, name):
            bad.append(f"{SRC[module].name}:{line}: {stage(module)} may not import {name}")
    assert not bad, "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    g = {m: set() for m in SRC}
    for m, path in SRC.items():
        for _, name, _ in imports(path):
            if name in SRC and name != m:
                g[m].add(name)
    return g


def test_no_import_cycles():
    g, state, cycles = _graph(), {}, []

    def visit(m, trail):
        state[m] = "open"
        for n in sorted(g[m]):
            if state.get(n) == "open":
                cycles.append(" -> ".join(trail[trail.index(n):] + [n]))
            elif n not in state:
                visit(n, trail + [n])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    # A package's __init__ re-exporting its own modules is not a cycle a reader has to follow.
    cycles = [c for c in cycles if not _init_reexport(c)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _init_reexport(cycle: str) -> bool:
    mods = cycle.split(" -> ")
    return any(SRC[m].name == "__init__.py" and all(x.startswith(m) for x in mods) for m in mods)


def test_the_direction_checker_catches_a_wrong_way_import():
    """The rules above are not vacuous: the imports they forbid exist as names and are refused."""
    assert not allowed("dspbench.cost.predict", "dspbench.run.harness")
    assert not allowed("dspbench.reports.commvol", "dspbench.methods.spec")
    assert not allowed("dspbench.reports.collect", "dspbench.facts.build")
    assert not allowed("dspbench.models.dit", "dspbench.methods.comm")
    assert not allowed("dspbench.methods.dsp", "dspbench.run.worker")
    assert allowed("dspbench.run.harness", "dspbench.cost.autosp")
    assert allowed("dspbench.reports.collect", "dspbench.records.io")


def test_no_loose_files_in_bench():
    loose = sorted(p.name for p in (ROOT / "bench").iterdir()
                   if p.is_file() and p.name not in ("__init__.py", "cli.py", "gpu_check.sh"))
    assert not loose, f"bench/ holds only packages, cli.py, __init__.py and gpu_check.sh; found {loose}"


def private_imports(path: Path) -> list[str]:
    """`from dspbench.x import _name`: a module reaching into another's internals."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.name}:{n.lineno}: {a.name} from {n.module}" for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("dspbench")
            for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]


def test_no_module_imports_another_ones_private_names():
    bad = [hit for path in SRC.values() for hit in private_imports(path)]
    assert not bad, "make the name public (or move it) instead:\n" + "\n".join(bad)


def test_the_private_import_check_catches_one(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from dspbench.run.launch import root_cause, _hidden\nfrom dspbench import __version__\n")
    assert private_imports(f) == ["m.py:1: _hidden from dspbench.run.launch"]


def test_the_comm_package_is_the_base_of_methods():
    """methods/comm/ (the layer, its bands, the ledger) imports nothing else of ours: every method
    builds on it, and it must stay movable as one piece (torchtitan's distributed/ beside models/)."""
    inside = lambda m: m == "dspbench.methods.comm" or m.startswith("dspbench.methods.comm.")
    comm = {m: p for m, p in SRC.items() if inside(m)}
    assert "dspbench.methods.comm.layer" in comm and "dspbench.methods.comm.ledger" in comm
    bad = [f"{p.name}:{line}: {name}" for m, p in comm.items() for line, name, _ in imports(p)
           if name.startswith("dspbench") and name in SRC and not inside(name)]
    assert not bad, bad
