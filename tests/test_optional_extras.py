"""Commands that need no optional extra run without it, and those that do say which extra to install
(issue 42): `sweep --dry-run` plans without submitit, `compare` exits 2 naming pandas and [reports],
never a ModuleNotFoundError traceback. Each runs in a fresh interpreter where every extra's modules
are unimportable (None in sys.modules, as when the package is not installed)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the modules of pyproject.toml's reports, slurm, deepspeed and gpu extras
EXTRAS = ("pandas", "seaborn", "matplotlib", "orjson", "submitit", "deepspeed", "ring_flash_attn", "flash_attn",
          "transformers")


def dspbench_without_extras(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    code = ("import sys\n"
            f"for m in {EXTRAS!r}: sys.modules[m] = None\n"
            "from dspbench.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_sweep_dry_run_plans_without_the_slurm_extra(tmp_path):
    p = dspbench_without_extras("sweep", "cpu_smoke", "--dry-run", "--results", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "to run: 16" in p.stdout
    assert not (tmp_path / "r").exists()      # a dry run writes nothing


def test_compare_without_the_reports_extra_names_it_in_one_line(tmp_path):
    p = dspbench_without_extras("compare", str(ROOT / "results" / "cfg-parallel"), str(ROOT / "results" / "emulated"),
                                cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("dspbench compare: error: needs pandas, which is not installed "
                        "(pip install 'dspbench[reports]')\n")


def test_a_module_no_extra_brings_keeps_its_traceback():
    from dspbench.cli import missing_extra
    assert missing_extra(ModuleNotFoundError("no", name="nosuchmodule")) is None
    assert missing_extra(ModuleNotFoundError("no", name="submitit.helpers")) == (
        "needs submitit, which is not installed (pip install 'dspbench[slurm]')")
    # ring-flash-attn is in [test] and [gpu]: the extra for use is named
    assert "dspbench[gpu]" in missing_extra(ModuleNotFoundError("no", name="ring_flash_attn"))
