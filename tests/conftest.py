"""Test-wide fixtures: an isolated cache and home, no network beyond loopback, tiny models, a timeout per test."""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))

from make_tiny_models import TINY_BUILDERS  # noqa: E402

DEFAULT_TIMEOUT_S = 900  # per test; a hang fails that test instead of the whole run (tests may set less)

_session_env = pytest.MonkeyPatch()
_session_root: Path | None = None


def pytest_configure(config):
    """Point PPNLP_HOME and HOME at a temporary directory before anything is collected or built.

    A function-scoped fixture is too late: module- and session-scoped fixtures (a
    Taskflow shared by a module's tests) are built before it runs, and so are
    processes a test starts (worker processes, Ray's workers), which inherit the
    environment.  HOME too, because Paddle (``~/.cache/paddle``) and Ray (``~/.ray``)
    write there.  No test touches the user's home.
    """
    global _session_root
    if not config.pluginmanager.hasplugin("timeout"):  # so @pytest.mark.timeout stays valid (a no-op) without it
        config.addinivalue_line("markers", "timeout(seconds): fail the test after that long (pytest-timeout)")
    _session_root = Path(tempfile.mkdtemp(prefix="taskflow-tests-"))
    for name in ("home", "ppnlp_home"):
        (_session_root / name).mkdir()
    _session_env.setenv("HOME", str(_session_root / "home"))
    _session_env.setenv("PPNLP_HOME", str(_session_root / "ppnlp_home"))
    _session_env.delenv("PPNLP_OFFLINE", raising=False)
    _session_env.delenv("PPNLP_ENDPOINT", raising=False)


def pytest_unconfigure(config):
    _session_env.undo()
    if _session_root is not None:
        shutil.rmtree(_session_root, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("timeout"):
        return  # pytest-timeout comes with the test extra; without it, no default
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT_S))


@pytest.fixture(scope="session")
def shared_home() -> Path:
    """One cache for the session, so static exports are made once."""
    return _session_root / "ppnlp_home"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, shared_home):
    # Again per test, undoing whatever a test before changed.
    monkeypatch.setenv("PPNLP_HOME", str(shared_home))
    monkeypatch.setenv("HOME", str(_session_root / "home"))
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


@pytest.fixture
def interrupt_on_call(monkeypatch):
    """``with interrupt_on_call(task, n) as sizes:`` a job run inside is stopped as by Ctrl-C: the
    task's ``run_items`` raises KeyboardInterrupt on its n-th call (a chunk), the sizes of its calls
    listed in ``sizes``; the real ``run_items`` is back after the block."""

    @contextlib.contextmanager
    def interrupted(task, n: int):
        real, sizes = task.run_items, []

        def run_items(items):
            sizes.append(len(items))
            if len(sizes) == n:
                raise KeyboardInterrupt
            return real(items)

        monkeypatch.setattr(task, "run_items", run_items)
        try:
            with pytest.raises(KeyboardInterrupt):
                yield sizes
        finally:
            monkeypatch.setattr(task, "run_items", real)

    return interrupted


@pytest.fixture(scope="session")
def benchmark_script():
    """``benchmark_script("soak_serve")``: a script of benchmarks/ imported as a module, to test its
    pure helpers (benchmarks/ is no package)."""
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    return load
