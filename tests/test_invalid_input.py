"""Every subcommand, every option, driven with values it must refuse: the wrong type, negative, zero,
an unknown name, a missing file, an empty file, a malformed value. Each must exit 2 with a one-line
reason naming the option, no traceback, and nothing written (the working folder and the output
folder stay as they were). Values are generated with Hypothesis (property-based testing); each
option's classes come from the table below, and a completeness check fails when an option of any
subcommand is in neither the table nor ANY_VALUE (so a new option is classified before it lands).

Seconds per option: a value wrongly accepted runs the command on a tiny configuration."""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from importlib import import_module

from dspbench.cli import _gather, main

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "gpu-h200"       # committed records (report, compare, calibrate --from-records)

# ---------------------------------------------------------------- how each subcommand is called validly
# A valid call per subcommand (OUT: the output folder, TMP: a scratch folder); the option under test
# is appended, so the last value given wins where the base names it too.
BASE = {
    "run": ["run", "--model", "stdit-tiny", "--frames", "2", "--spatial", "4", "--gpus", "1", "--iters", "1",
            "--warmup", "0", "--out", "OUT"],
    "predict": ["predict", "--model", "stdit-tiny", "--hardware", "h100-ib", "--out", "OUT"],
    "replay": ["replay", "--model", "stdit-tiny", "--frames", "2", "--spatial", "4", "--hardware", "h100-ib",
               "--device", "cpu", "--dtype", "fp32", "--limit", "1", "--reps", "1", "--out", "OUT"],
    "plan": ["plan", "--model", "stdit-tiny", "--gpus", "2", "--hardware", "h100-ib", "--methods", "dsp,ulysses"],
    "calibrate": ["calibrate", "--from-records", str(RECORDS), "--output", "OUT/p.toml"],
    "emulate": ["emulate", "--check-only", "--no-netns", "--out", "OUT"],
    "report": ["report", str(RECORDS), "--out", "OUT"],
    "compare": ["compare", "dsp", "ulysses", "--by", "method", "--results", str(RECORDS)],
    "sweep": ["sweep", "cpu_smoke", "--dry-run", "--results", "OUT"],
    "evidence": ["evidence", "add", str(ROOT / "results" / "published" / "sources" / "xdit-flux.toml"), "--check"],
    "demo": ["demo", "--out", "OUT", "--world", "1", "--iters", "1"],
    "bench-switch": ["bench-switch", "--world", "2", "--iters", "1", "--repeats", "1", "--sizes-mib", "0.01"],
    "bench-ledger": ["bench-ledger", "--world", "2", "--rounds", "1", "--methods", "dsp"],
}
PASSTHROUGH_PARSERS = {"bench-ledger": "dspbench.micro.ledger", "bench-switch": "dspbench.micro.switch"}

# ---------------------------------------------------------------- what each option must refuse
INT, FLOAT, NAME, FILE, DIR, LIST = "int", "float", "name", "file", "dir", "list"
# option -> (kind, classes); "cmd:--flag" overrides "--flag" for one subcommand.
# kinds: int/float (wrong type, plus the classes listed), name (unknown name), file (missing, empty),
# dir (missing), list (malformed or unknown item)
COUNT = (INT, ("negative", "zero"))             # a count: at least 1
AT_LEAST_0 = (INT, ("negative",))               # 0 has a stated meaning (seed, threads: cores / ranks, ...)
SECONDS = (FLOAT, ("negative", "zero"))
OPTIONS = {
    "--model": (NAME, ()), "--method": (NAME, ()), "--hardware": (NAME, ()), "--base": (NAME, ()),
    "--cluster": (NAME, ()),
    "--frames": COUNT, "--spatial": COUNT, "--batch": COUNT, "--gpus": COUNT, "--sp": COUNT, "--iters": COUNT,
    "--sample-steps": COUNT, "--timeout": SECONDS, "--warmup": AT_LEAST_0, "--seed": AT_LEAST_0,
    "--repeat": AT_LEAST_0, "--threads": AT_LEAST_0, "--mem-budget-mib": AT_LEAST_0,
    "--ulysses-degree": AT_LEAST_0, "--reps": COUNT, "--limit": AT_LEAST_0, "--top": COUNT, "--repeats": COUNT,
    "--batch-per-gpu": COUNT, "--world": COUNT, "--jobs": COUNT, "--gpus-per-node": AT_LEAST_0,
    "--nics-per-node": AT_LEAST_0, "--overlap-repeats": COUNT, "--cpu-ranks-per-host": AT_LEAST_0, "--compute-iters": COUNT,
    "--method-iters": COUNT, "--method-repeats": COUNT, "--depth": AT_LEAST_0, "--ranks": COUNT,
    "calibrate:--sp": AT_LEAST_0,     # 0: --gpus
    "--rounds": COUNT, "--hidden": COUNT, "--sizes-mib": SECONDS,
    "--video": (LIST, ()), "--model-set": (LIST, ()), "--buckets": (LIST, ()), "--bucket-file": (FILE, ()),
    "--sizes": (LIST, ()), "--ops": (LIST, ()), "--gemm-widths": (LIST, ()), "--methods": (LIST, ()),
    "--method-sp": (LIST, ()), "--what-if": (LIST, ()), "--what-if-grid": (LIST, ()), "--rate": (LIST, ()),
    "--settings": (LIST, ()), "--subnet": (LIST, ()), "--stack": (LIST, ()),
    "--from-records": (DIR, ()), "--from-nccl-tests": (FILE, ()),
    "compare:--results": (DIR, ()),
}
# Options any value of which is valid, and why (the option's type and the tests of its command cover it).
ANY_VALUE = {
    "--out": "an output folder: made where it is not",
    "--records-file": "an output file: made where it is not",
    "--outcome-prefix": "an output prefix",
    "--output": "an output file", "--name": "any profile name", "--emit-sweep": "an output file",
    "--report": "an output folder", "--nccl-tests-out": "an output folder", "--ns-prefix": "any prefix",
    "sweep:--results": "an output folder", "bench-switch:--json": "an output file (or stdout)", "--device": "cuda or cpu, checked by torch when the replay starts",
}


def _options() -> list[tuple[str, str, argparse.Action]]:
    """(subcommand, flag, action) for every visible option that takes a value, of every subcommand."""
    commands, passthrough = _gather()
    out = []
    for name, (_, add_args, _) in commands.items():
        p = argparse.ArgumentParser()
        add_args(p)
        out += [(name, a.option_strings[-1], a) for a in _value_actions(p)]
    for name in passthrough:      # the micro-benchmarks parse their own flags
        parser = import_module(PASSTHROUGH_PARSERS[name]).parser()
        out += [(name, a.option_strings[-1], a) for a in _value_actions(parser)]
    return out


def _value_actions(p: argparse.ArgumentParser):
    for a in p._actions:
        if not a.option_strings or a.help == argparse.SUPPRESS or a.nargs == 0:
            continue
        if isinstance(a, (argparse._HelpAction, argparse.BooleanOptionalAction)):
            continue
        yield a


def _kind(cmd: str, flag: str, action) -> tuple[str, tuple] | None:
    if f"{cmd}:{flag}" in OPTIONS:
        return OPTIONS[f"{cmd}:{flag}"]
    if f"{cmd}:{flag}" in ANY_VALUE or flag in ANY_VALUE:
        return None
    if action.choices:
        return (NAME, ())
    return OPTIONS.get(flag, ("unclassified", ()))


CASES = [(c, f, k) for c, f, a in _options() for k in [_kind(c, f, a)] if k is not None and c in BASE]


def test_every_option_of_every_subcommand_is_classified():
    missing = [f"{c} {f}" for c, f, k in CASES if k[0] == "unclassified"]
    assert missing == [], "options with no invalid-value class (add them to OPTIONS or ANY_VALUE): " + ", ".join(missing)
    commands, passthrough = _gather()
    assert set(commands) | set(passthrough) - {"models", "methods"} <= set(BASE) | {"models", "methods"}


# ---------------------------------------------------------------- the values
_word = st.text(alphabet=string.ascii_lowercase + "-_", min_size=3, max_size=12)


def _bad_values(kind: str, classes: tuple, cmd: str, flag: str):
    """A strategy of (class, value) this option must refuse."""
    options = []
    if kind in (INT, FLOAT):
        options.append(st.tuples(st.just("type"), st.sampled_from(["x", "1.5x", "two", "--", "1e", ""]) if kind == FLOAT
                                 else st.sampled_from(["x", "1.5", "two", "0x1", "1e3"])))
        if "negative" in classes:
            options.append(st.tuples(st.just("negative"), st.integers(-10**6, -1).map(str)))
        if "zero" in classes:
            options.append(st.tuples(st.just("zero"), st.sampled_from(["0", "-0"] + (["0.0"] if kind == FLOAT else []))))
    elif kind == NAME:
        options.append(st.tuples(st.just("name"), _word.map(lambda w: "no-such-" + w)))
    elif kind == FILE:
        options.append(st.tuples(st.just("missing"), _word.map(lambda w: f"TMP/missing-{w}.txt")))
        options.append(st.tuples(st.just("empty"), st.just("TMP/empty.txt")))
    elif kind == DIR:
        options.append(st.tuples(st.just("missing"), _word.map(lambda w: f"TMP/missing-{w}")))
    elif kind == LIST:
        options.append(st.tuples(st.just("malformed"), st.sampled_from(MALFORMED.get(flag, ["no-such-item", ",", "=", "x:y:z"]))))
    return st.one_of(*options)


MALFORMED = {
    "--video": ["49x480", "0x480x720", "axbxc", "49x480x720x3", "-1x480x720"],
    "--model-set": ["depth", "=2", "depth=two", "no_such_field=1", "depth=-1"],
    "--buckets": ["21", "21x", "0x1560", "21x1560:-1", "axb"],   # "" is no buckets
    "--sizes": ["64Q", "-4M", "0", "", "1,,2"],
    "--ops": ["no_such_op", "all_to_all,bogus", ","],   # "": compute only (emulate's calibration)
    "--gemm-widths": ["x", "-1", "0", "1,,2"],
    "--methods": ["no_such_method", "dsp,no_such_method", ","],   # "": calibrate's and emulate's default
    "--method-sp": ["x", "0", "-2"],
    "--what-if": ["no_such_key=1", "link.inter", "link.inter=fast", "="],
    "--what-if-grid": ["no_such_key=1,2", "link.inter", "link.inter=a,b", "="],
    "--rate": ["fast", "-1mbit", "0mbit", "1gbit,"],
    "--settings": ["no_such_setting", "", "comm,bogus"],
    "--subnet": ["10.0", "300.1.1", "a.b.c", ""],
    "--stack": ["no-such-package", "deepspeed,bogus", "flash_attn_3"],
}


def _argv(cmd: str, flag: str, value: str, tmp: Path) -> list[str]:
    sub = lambda s: s.replace("OUT", str(tmp / "out")).replace("TMP", str(tmp / "in"))   # noqa: E731
    base = [sub(a) for a in BASE[cmd]]
    if cmd == "evidence":    # the option belongs to `evidence add`
        return base + [flag, sub(value)]
    return base + [flag, sub(value)]


def _snapshot(folder: Path) -> set:
    return {(str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*")} if folder.exists() else set()


def _call(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:     # argparse's own refusals
            rc = e.code
    return rc, err.getvalue()


def _names(flag: str) -> tuple[str, ...]:
    bare = flag.lstrip("-")
    return flag, bare, bare.replace("-", "_")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("cmd, flag, kind", CASES, ids=[f"{c} {f}" for c, f, _ in CASES])
def test_an_invalid_value_is_refused_with_its_reason_and_nothing_written(cmd, flag, kind, tmp_path_factory):
    if kind[0] == "unclassified":
        pytest.skip("not classified: test_every_option_of_every_subcommand_is_classified fails for it")

    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(_bad_values(*kind, cmd, flag))
    def check(case):
        cls, value = case
        tmp = tmp_path_factory.mktemp("bad")
        (tmp / "in").mkdir()
        (tmp / "in" / "empty.txt").write_text("")
        before_cwd, before_tmp = _snapshot(Path.cwd() / "results"), _snapshot(tmp)
        rc, err = _call(_argv(cmd, flag, value, tmp))
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert rc == 2, f"{cmd} {flag} {value!r} ({cls}): exit {rc}, expected 2; stderr: {err[-600:]}"
        assert "Traceback" not in err, f"{cmd} {flag} {value!r} ({cls}): a traceback:\n{err[-1500:]}"
        reason = lines[-1] if lines else ""
        assert "error" in reason and any(n in reason for n in _names(flag)), \
            f"{cmd} {flag} {value!r} ({cls}): the last line does not name the option: {reason!r}"
        assert _snapshot(tmp) == before_tmp, f"{cmd} {flag} {value!r} ({cls}): wrote {_snapshot(tmp) - before_tmp}"
        assert _snapshot(Path.cwd() / "results") == before_cwd, f"{cmd} {flag} {value!r} ({cls}): wrote under results/"

    check()


# ---------------------------------------------------------------- the positional arguments
@pytest.mark.parametrize("argv, names", [
    (["sweep", "TMP/missing.toml", "--dry-run"], "missing.toml"),
    (["sweep", "TMP/empty.txt", "--dry-run"], "empty.txt"),
    (["evidence", "add", "TMP/missing.toml", "--check"], "missing.toml"),
    (["evidence", "add", "TMP/empty.txt", "--check"], "empty.txt"),
    (["report", "TMP/missing-dir", "--out", "OUT"], "missing-dir"),
    (["compare", "TMP/missing-a", "TMP/missing-b"], "missing-a"),
    (["compare", "dsp", "no_such_method", "--by", "method", "--results", str(RECORDS)], "no_such_method"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_missing_or_empty_positional_is_refused_naming_it(argv, names, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "empty.txt").write_text("")
    before = _snapshot(tmp_path)
    sub = [a.replace("OUT", str(tmp_path / "out")).replace("TMP", str(tmp_path / "in")) for a in argv]
    rc, err = _call(sub)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and "Traceback" not in err, err[-1500:]
    assert lines and names in lines[-1], lines[-1:]
    assert _snapshot(tmp_path) == before
