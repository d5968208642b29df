"""A sweep job's rendezvous port (slurm/ports.py): below the ephemeral range, free when task 0 chose
it, the same on every task. A hashed port inside the ephemeral range once failed a CI run: rank 0's
TCPStore got EADDRINUSE and a healthy configuration was recorded as an error."""
from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from dspbench.slurm import ports
from dspbench.slurm.job import Task


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def _task(tmp_path: Path, rank: int) -> Task:
    return Task("7", rank, "127.0.0.1", tmp_path / "records" / "7.jsonl", tmp_path / "logs", False)


def test_candidates_stay_below_the_ephemeral_range_and_depend_on_the_key():
    a, b = ports.candidates("logs/1/attempt0/x.port"), ports.candidates("logs/1/attempt1/x.port")
    assert a == ports.candidates("logs/1/attempt0/x.port") and a != b
    assert len(set(a)) == len(a) == ports.PROBES
    assert all(ports.PORT_LOW <= p < ports.PORT_HIGH <= _ephemeral_low() for p in a + b)


def test_task_zero_skips_a_port_in_use_and_every_task_reads_its_choice(tmp_path):
    (tmp_path / "logs").mkdir()
    busy = ports.candidates(str(tmp_path / "logs" / "rid.port"))[0]
    with socket.socket() as holder:          # something else on the node listens on the first candidate
        holder.bind(("", busy))
        holder.listen()
        assert not ports.is_free(busy)
        other = {}
        reader = threading.Thread(target=lambda: other.update(port=_task(tmp_path, 1).port("rid")))
        reader.start()                       # task 1 may ask first: it waits for task 0's choice
        time.sleep(0.3)
        chosen = _task(tmp_path, 0).port("rid")
        reader.join(timeout=10)
    assert chosen != busy and chosen in ports.candidates(str(tmp_path / "logs" / "rid.port"))
    assert other["port"] == chosen
    with socket.socket() as s:               # and rank 0 can listen on it
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", chosen))


def test_a_task_whose_task_zero_never_publishes_gives_up(tmp_path):
    start = time.monotonic()
    assert ports.wait_published(tmp_path / "none.port", timeout_s=0.5, poll_s=0.05) is None
    assert 0.5 <= time.monotonic() - start < 5
    stopping = time.monotonic() + 0.2
    assert ports.wait_published(tmp_path / "none.port", 60, 0.05, stop=lambda: time.monotonic() > stopping) is None
    (tmp_path / "torn.port").write_text("")          # a half-written file is never read as a port
    assert ports.wait_published(tmp_path / "torn.port", timeout_s=0.2, poll_s=0.05) is None
