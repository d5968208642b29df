"""The sbatch script of a multi-node GPU job (4 nodes x 8 GPUs) as submitted by `dspbench sweep
--executor slurm`, rendered without submitting and compared with tests/golden/sbatch_4x8_gpu.sbatch.
Needs submitit, not a cluster. Regenerate with DSPBENCH_UPDATE_GOLDEN=1 and review the diff."""
import os
import sys
import textwrap
from pathlib import Path

import pytest

from dspbench.slurm.execute import make_executor
from dspbench.slurm.plan import Shape
from dspbench.slurm.spec import load_cluster_profile

pytestmark = pytest.mark.slurm
GOLDEN = Path(__file__).parent / "golden" / "sbatch_4x8_gpu.sbatch"


def test_sbatch_script_of_a_multi_node_gpu_job_matches_the_golden_file(tmp_path, monkeypatch):
    submitit = pytest.importorskip("submitit")
    # Render without submitting: no cluster needed, only submitit's check that srun exists.
    monkeypatch.setattr(submitit.slurm.slurm.SlurmExecutor, "affinity", classmethod(lambda cls: 2))
    (tmp_path / "gpu.toml").write_text(textwrap.dedent("""
        partition = "gpu"
        account = "proj42"
        qos = "high"
        constraint = "h100"
        gpus_per_node = 8
        cpus_per_task = 12
        mem = "0"
        time_min = 120
        signal_delay_s = 300
        setup = ["module load cuda/12.4 nccl"]
        [env]
        NCCL_DEBUG = "WARN"
        """))
    profile = load_cluster_profile(str(tmp_path / "gpu.toml"), tmp_path)
    folder = tmp_path / "results" / "submitit" / "%j"
    ex = make_executor(folder, profile, Shape(nodes=4, tasks_per_node=8), "dspbench-paper")
    text = ex._executor._make_submission_file_text(ex._executor._submitit_command_str, "uid")
    text = text.replace(str(folder.parent), "<RESULTS>/submitit").replace(sys.executable, "<PYTHON>")
    if os.environ.get("DSPBENCH_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()
