"""What hardware and software a record ran on, from its `environ` (keys read tolerantly).

The record schema lists environ's contents but not its key names, so each fact is looked up
under the names a writer is likely to use (first hit wins); docs/reports.md lists them.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd

KEYS = {
    "devices": ("device_names", "devices", "gpu_names", "device_name", "gpu"),
    "cpu": ("cpu", "cpu_model", "processor"),
    "hosts": ("hostnames", "hostname", "hosts", "host"),
    "torch": ("torch", "torch_version"),
    "cuda": ("cuda", "cuda_version"),
    "nccl": ("nccl", "nccl_version"),
    "python": ("python", "python_version"),
    "dspbench": ("dspbench", "dspbench_version", "version"),
    "git_sha": ("git_sha", "git", "sha", "commit"),
    "git_dirty": ("git_dirty", "dirty"),
    "threads": ("threads", "torch_threads", "num_threads"),
}


def get(env, fact: str):
    if not isinstance(env, dict):
        return None
    for k in KEYS[fact]:
        if env.get(k) not in (None, "", []):
            return env[k]
    return None


def _names(v) -> list[str]:
    if v is None:
        return []
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]


def hardware_label(env, backend=None) -> str:
    """'NVIDIA H800 (nccl)', or 'CPU: <model> (gloo)' when no accelerator is named."""
    names = _names(get(env, "devices"))
    devices = [d for d in names if not d.lower().startswith(("cpu", "none", "unknown"))]
    suffix = f" ({backend})" if isinstance(backend, str) and backend != "?" else ""
    if devices:
        return " + ".join(sorted(set(devices))) + suffix
    # the harness names a CPU device "cpu: <model>"; failed runs may say "unknown"
    cpus = [d.split(":", 1)[1].strip() for d in names if d.lower().startswith("cpu:")]
    cpu = get(env, "cpu") or (cpus[0] if cpus else None)
    return f"CPU: {cpu}{suffix}" if cpu else f"CPU{suffix}"


def software_label(env) -> str:
    if isinstance(env, dict) and env.get("hostnames") == ["published"]:   # a cited number: its source's software
        return f"as published: {env.get('software') or 'unstated'}"
    parts = []
    for fact in ("dspbench", "torch", "cuda", "nccl", "python"):
        v = get(env, fact)
        if v:
            parts.append(f"{fact} {v}")
    sha = get(env, "git_sha")
    if sha:
        parts.append(f"git {str(sha)[:10]}{' (dirty)' if get(env, 'git_dirty') else ''}")
    return ", ".join(parts) or "unknown (records carry no environ)"


def environment_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct (hardware, software): how many runs, hosts, statuses."""
    rows = Counter()
    hosts: dict[tuple, set] = {}
    hw = runs["hardware"] if "hardware" in runs else [hardware_label(e, b) for e, b in
                                                       zip(runs["environ"], runs["backend"])]
    for env, h, status, src in zip(runs["environ"], hw, runs["status"], runs["source"]):
        kind = src if status in ("ok", "predicted") else f"{src}: failed runs"
        key = (h, software_label(env), kind)
        rows[key] += 1
        hosts.setdefault(key, set()).update(_names(get(env, "hosts")))
    data = [{"hardware": h, "software": s, "numbers": k, "runs": n,
             "hosts": ", ".join(sorted(hosts[(h, s, k)])[:4]) + (" ..." if len(hosts[(h, s, k)]) > 4 else "")}
            for (h, s, k), n in sorted(rows.items())]
    return pd.DataFrame(data, columns=["hardware", "software", "numbers", "runs", "hosts"])
