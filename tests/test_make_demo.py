"""`make demo` prints the sweep's summary once (issue 42): its recipe run against a stand-in dspbench
that answers each command as the real one does (a local sweep ends with its status, slurm/cli.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

STAND_IN = """#!/bin/sh
case "$1 $2" in
  "sweep status") echo "SUMMARY of $3" ;;
  sweep*) echo "ran $2"; echo "SUMMARY of $2" ;;
  report*) echo "report of $2" ;;
esac
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_make_demo_prints_the_summary_once(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "dspbench").write_text(STAND_IN)
    (venv / "bin" / "dspbench").chmod(0o755)
    (venv / ".installed").touch()      # newer than pyproject.toml: make creates no venv
    out = subprocess.run(["make", "-s", "demo", f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("SUMMARY") == 1 and "ran cpu_smoke" in out.stdout and "report of" in out.stdout

