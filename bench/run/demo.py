"""A quick look: every method on stdit-tiny at one world size, side by side."""
from __future__ import annotations

from dspbench.records.config import RunConfig
from dspbench.records.io import default_records_file
from dspbench.run.harness import run_config

METHODS = ("single", "dsp", "ulysses", "ring", "megatron_sp")


def demo(out: str, world: int = 4, iters: int = 5) -> int:
    path = default_records_file(out)
    rows = []
    for method in METHODS:
        gpus = 1 if method == "single" else world
        cfg = RunConfig(method=method, model="stdit-tiny", frames=16, spatial=64, gpus=gpus,
                        sp=gpus, mode="train", iters=iters, check=True)
        rows.append(run_config(cfg, path))
    print(table(rows))
    print(f"\nrecords: {path}\nCPU/gloo timings show relative cost on this machine, not GPU performance.")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def table(rows: list[dict]) -> str:
    head = "| method | ranks | status | step ms (p10-p90) | samples/s | comm MiB/rank/step | oracle max err |"
    out = [head, "|" + "---|" * 7]
    for r in rows:
        if r["status"] != "ok":
            out.append(f"| {r['method']} | {r['world_size']} | {r['status']} | {r['error']} | | | |")
            continue
        err = r["oracle_max_abs_err"] or 0.0
        out.append(f"| {r['method']} | {r['world_size']} | ok | {r['step_time_median_s'] * 1e3:.1f} "
                   f"({r['step_time_p10_s'] * 1e3:.1f}-{r['step_time_p90_s'] * 1e3:.1f}) | {r['samples_per_s']:.2f} | "
                   f"{r['comm_wire_bytes'] / 2**20:.2f} | {err:.1e} |")
    return "\n".join(out)
