"""The rendezvous port of one configuration in a sweep job: chosen by task 0, read by every other task.

Why not a port every task computes alone: a hash of the configuration into 20000-59999 collided with
ports the node had in use (rank 0's TCPStore failed with EADDRINUSE, and the configuration got an
`error` record for a reason that had nothing to do with it). Most of that range is Linux's ephemeral
range (32768-60999), where srun's I/O sockets, slurmd's RPCs and every client connection take their
local ports. So task 0, which runs on MASTER_ADDR's node, walks candidates below that range (a hash of
the configuration's log path picks where to start, so concurrent jobs start apart), takes the first it
can bind, and writes it beside the configuration's logs (on the shared results directory); the other
tasks wait for that file. A port taken between the probe and rank 0's bind still fails the rank, and
its record says so.
"""
from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

from dspbench.records.io import write_atomic

PORT_LOW, PORT_HIGH = 20000, 32768     # [low, high): below Linux's default ephemeral range
PROBES = 64                            # candidates task 0 tries before it gives up and takes the first


def candidates(key: str, n: int = PROBES) -> list[int]:
    """n distinct ports in [PORT_LOW, PORT_HIGH), starting at a hash of key."""
    span = PORT_HIGH - PORT_LOW
    start = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % span
    return [PORT_LOW + (start + i) % span for i in range(min(n, span))]


def is_free(port: int) -> bool:
    """Whether a listening socket can bind it now, as rank 0's TCPStore will (SO_REUSEADDR, so a
    connection lingering in TIME_WAIT does not count as busy)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def choose(key: str) -> int:
    """Task 0: the first free candidate (the first one if none is: rank 0 then fails and says why)."""
    ports = candidates(key)
    return next((p for p in ports if is_free(p)), ports[0])


def publish(path: Path, port: int) -> None:
    """Task 0: the port, for the other tasks (never half a number: records.io.write_atomic)."""
    write_atomic(path, str(port))


def wait_published(path: Path, timeout_s: float, poll_s: float = 0.2, stop=lambda: False) -> int | None:
    """Other tasks: the port task 0 published, or None after timeout_s (or once stop() says so)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            pass
        if stop() or time.monotonic() > deadline:
            return None
        time.sleep(poll_s)
