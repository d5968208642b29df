"""The emulated-cluster command: a clean exit where namespaces cannot be made."""
from __future__ import annotations

from dspbench.cli import main
from dspbench.netns import burst_bytes, netns_unavailable


def test_emulate_without_namespaces_exits_cleanly(capsys):
    assert main(["emulate", "--no-netns"]) == 0
    err = capsys.readouterr().err
    assert "cannot build the emulated cluster" in err and "Nothing was set up" in err


def test_no_netns_env_is_reported(monkeypatch, capsys):
    monkeypatch.setenv("DSPBENCH_NO_NETNS", "1")
    assert "DSPBENCH_NO_NETNS" in netns_unavailable()
    assert main(["emulate", "--check-only"]) == 0
    assert "cannot build" in capsys.readouterr().err


def test_token_bucket_burst():
    assert burst_bytes("200mbit") == 80_000
    assert burst_bytes("10gbit") == 1_250_000
