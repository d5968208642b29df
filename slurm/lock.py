"""One sweep at a time per results directory: an exclusive flock(2) on `<results>/.sweep.lock`.

Held while a sweep plans and runs (local, debug) or plans and submits (slurm; the jobs themselves
write only their own records files). The kernel drops the lock when its holder dies, kill -9
included, so a crash never leaves a stale lock. The file says who holds it (host, pid, command,
since) for the message a second sweep prints.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

LOCK = ".sweep.lock"


class SweepLocked(ValueError):
    """Another sweep holds the results directory (a usage error: exit 2)."""


def holder(path: Path) -> str:
    try:
        h = json.loads(Path(path).read_text())
        return f"pid {h['pid']} on {h['host']} since {h['since']} ({h['command']})"
    except (OSError, ValueError, KeyError):
        return "an unknown process"


@contextmanager
def results_lock(root: Path, wait: bool = False):
    """Exclusive for the duration of the block; SweepLocked at once unless `wait`."""
    root = Path(root)
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = holder(path)
            if not wait:
                raise SweepLocked(f"results directory {root} is in use by another sweep: {who}; "
                                  "wait for it, or pass --wait to queue behind it") from None
            print(f"waiting for the sweep holding {root}: {who}", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:300],
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        yield
    except BaseException:
        if created and [p.name for p in root.iterdir()] == [LOCK]:   # a spec error: leave no empty folder
            path.unlink()
            root.rmdir()
        raise
    finally:
        os.close(fd)    # releases the lock
