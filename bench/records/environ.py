"""What a record says about where it ran: software versions, devices, hosts, the source tree."""
from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

SOURCE = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state() -> dict:
    sha = _git("rev-parse", "HEAD")
    dirty = None if sha is None else bool(_git("status", "--porcelain", "--untracked-files=no"))
    return {"git_sha": sha, "git_dirty": dirty}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu: {cpu_name()}"


def local_facts(device: torch.device) -> dict:
    """This rank's host and device (gathered over ranks by the worker)."""
    return {"hostname": socket.gethostname(), "device": device_name(device)}


def environ(per_rank: list[dict]) -> dict:
    from dspbench import __version__
    nccl = None
    if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a build without NCCL
            nccl = None
    return {
        **git_state(),
        "dspbench": __version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "devices": sorted({r["device"] for r in per_rank}),
        "hostnames": sorted({r["hostname"] for r in per_rank}),
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
