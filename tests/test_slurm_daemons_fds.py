"""The SLURM scripts hold a lock on fd 9 (local_cluster.sh) or fd 8 (multinode.sh) while they start
daemons; a daemon that inherits it holds the lock for its whole life, and the next `down` waits
180 s and fails ("another multinode.sh is running": munged started by `up --nodes 2` kept fd 8).
Every daemon launch closes both. Static: read from the scripts, no cluster needed."""
from __future__ import annotations

import re
from pathlib import Path

SLURM = Path(__file__).resolve().parents[1] / "slurm"
# a daemon as the command word: a statement's start, or after `runuser ... --`, `setsid`, `in_node K`
DAEMONS = re.compile(r"(?:^|-- |setsid |in_node \S+ )(munged|mariadbd|slurmdbd|slurmctld|slurmd)(?= )")


def statements(path: Path) -> list[str]:
    """The script's statements, backslash continuations joined."""
    text = path.read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines()]


def launches(path: Path) -> list[str]:
    out = []
    for st in statements(path):
        if DAEMONS.search(st):
            out.append(st)
    return out


def test_every_daemon_launch_closes_both_lock_fds():
    found = {p.name: launches(p) for p in (SLURM / "local_cluster.sh", SLURM / "multinode.sh")}
    names = {DAEMONS.search(s).group(1) for ls in found.values() for s in ls}
    assert names == {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"}, found     # the scan sees them all
    for script, sts in found.items():
        for st in sts:
            closes = {fd for fd in ("8", "9") if f"{fd}>&-" in st}
            shared = "munged" in st        # started by either script: must close both locks
            need = {"8", "9"} if shared or script == "multinode.sh" else {"9"}
            assert need <= closes, f"{script}: a daemon launch keeps a lock fd open: {st}"
