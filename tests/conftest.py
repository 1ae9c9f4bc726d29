"""Test-wide fixtures: an isolated cache, no network beyond loopback, tiny models."""

from __future__ import annotations

import ipaddress
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

from make_tiny_models import TINY_BUILDERS  # noqa: E402


@pytest.fixture(scope="session")
def shared_home(tmp_path_factory) -> Path:
    """One cache for the session, so static exports are made once."""
    return tmp_path_factory.mktemp("ppnlp_home")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, shared_home):
    monkeypatch.setenv("PPNLP_HOME", str(shared_home))
    monkeypatch.delenv("PPNLP_OFFLINE", raising=False)
    monkeypatch.delenv("PPNLP_ENDPOINT", raising=False)


def _is_loopback(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _no_external_network(monkeypatch):
    """Tests may talk to servers they start on 127.0.0.1, and to nothing else."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded(real):
        def connect(self, address):
            if not _is_loopback(address):
                raise ConnectionRefusedError(f"test tried to reach {address!r}: only loopback is allowed")
            return real(self, address)
        return connect

    monkeypatch.setattr(socket.socket, "connect", guarded(real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(real_connect_ex))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """Tiny random-weight packages, one per task, built by tests/fixtures/make_tiny_models.py."""
    root = tmp_path_factory.mktemp("tiny_models")
    return {task: build(root / task) for task, build in TINY_BUILDERS.items()}


@pytest.fixture(scope="session")
def tiny_sentiment(tiny_models) -> Path:
    return tiny_models["sentiment_analysis"]
