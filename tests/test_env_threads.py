"""`--threads N` under an external launcher (env, slurm): this rank's torch uses N threads even when
the launcher sets no OMP_NUM_THREADS (it used to be ignored there, so srun-launched ranks on a
shared machine each took every core; a 4-rank step ran 20x slower than under the local launcher)."""
import torch

from dspbench.records.config import RunConfig
from dspbench.run.launch import launch_env


def test_explicit_threads_win_under_the_env_launcher(monkeypatch):
    for k, v in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29977"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        cfg = RunConfig(method="single", model="stdit-tiny", frames=2, spatial=4, gpus=1, sp=1, launcher="env",
                        threads=1, warmup=0, iters=1, check=False)
        assert launch_env(cfg).status == "ok"
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
