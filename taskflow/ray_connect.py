"""Reaching Ray: a Ray started on this machine, held to 127.0.0.1 and reaped with this process
(:func:`init_local_ray`), or a cluster at an address (:func:`connect`, one clear error within
seconds where nothing answers).  Batch jobs (:mod:`taskflow.ray_workers`), ``taskflow serve
--backend ray`` (:mod:`taskflow.serve_ray`) and Ray Data pipelines (:mod:`taskflow.ray`) connect
through it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys

from .errors import JobError

__all__ = ["import_ray", "init_local_ray", "connect", "starts_local", "reap", "LOOPBACK"]

logger = logging.getLogger("taskflow")


def import_ray():
    """Ray (with Ray Data), or an ImportError saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError("the Ray backend needs Ray Data: pip install 'taskflow-nlp[ray]'") from exc
    return ray


LOOPBACK = "127.0.0.1"


def init_local_ray(ray=None, **options):
    """Start a Ray instance on this machine that listens on 127.0.0.1 only, with a reaper that ends
    its processes when this one ends, even killed; returns ``ray.init``'s context.

    Ray's ports take work from anyone who reaches them, unauthenticated.  Its servers (GCS, raylet,
    object manager, every worker and actor, the agents) listen where the node's IP address says: on
    all interfaces for the machine's network address, on loopback for 127.0.0.1.  Given 127.0.0.1,
    ``ray.init`` swaps in the network address (so that other machines could join) unless Ray runs as
    single-machine only, as it does on macOS and Windows; for the call, that is what it is told.  A
    Ray that still took another address is shut down, never run.  ``options`` go to ``ray.init``.
    """
    ray = ray or import_ray()
    constants = sys.modules.get("ray._private.ray_constants")
    saved = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if saved is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        context = ray.init(address="local", _node_ip_address=LOOPBACK, **options)
    finally:
        if saved is not None:
            constants.ENABLE_RAY_CLUSTER = saved
    node_ip = context.address_info.get("node_ip_address")
    if node_ip != LOOPBACK:
        ray.shutdown()
        raise JobError(f"a local Ray took the node IP address {node_ip!r}, not {LOOPBACK}, so it would listen "
                       "beyond this machine; it was stopped. This version of Ray cannot be held to loopback here: "
                       "give --address (address=) a Ray cluster you run behind a firewall")
    _start_reaper(ray, context.address_info.get("session_dir"))
    return context


# The reaper of a local Ray (run as ``python -I -S -c _REAPER SESSION_DIR DRIVER_PID EXECUTABLES...``).
# Ray ties its GCS and raylet to the process that started it (they die with it), but the raylet's
# agents notice its death only later, and after a SIGKILL or SIGHUP of that process they keep running
# (and listening) for a minute or more.  The reaper reads its stdin, a pipe whose other end only the
# driver holds: at its end (the driver closed it, or died) it kills every process that still has a
# file of the session open and runs one of the session's executables (so a ``tail -f`` of a log is
# spared), other than the driver.  It runs under setsid (a process group of its own), so a terminal's SIGHUP to the
# driver's group does not end it first.
_REAPER = r"""
import os, signal, sys, time
session, driver, executables = sys.argv[1] + os.sep, int(sys.argv[2]), sys.argv[3:]
sys.stdin.buffer.read()

def of_session(pid):
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
        if not any(exe == e or exe.startswith(e + os.sep) for e in executables):
            return False
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(session):
                return True
        except OSError:
            pass
    return False

for _ in range(10):
    found = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in (os.getpid(), driver)
             and of_session(n)]
    if not found:
        break
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.2)
"""


_reapers: dict[str, subprocess.Popen] = {}   # session dir -> its reaper, whose stdin pipe must stay open


def _start_reaper(ray, session_dir: str | None) -> None:
    """The reaper of a local Ray's session (see ``_REAPER``), where /proc shows processes' files."""
    if not session_dir or not sys.executable or not os.path.isdir("/proc/self/fd"):
        return
    executables = {os.path.realpath(sys.executable), os.path.realpath(os.path.dirname(ray.__file__))}
    try:
        _reapers[session_dir] = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER, os.path.realpath(session_dir), str(os.getpid()),
             *sorted(executables)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        logger.warning("the local Ray runs without its reaper (%s): if this process is killed, some of Ray's "
                       "processes may outlive it", exc)


def reap(session_dir: str | None) -> None:
    """After ``ray.shutdown()``: the reaper ends what is left of the session, and exits."""
    reaper = _reapers.pop(session_dir, None) if session_dir else None
    if reaper is not None:
        with contextlib.suppress(OSError):
            reaper.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            reaper.wait(10)


def _probe(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers at a ``host:port`` (or ``ray://host:port``) address, or None if something
    does.  Ray's own connection retries for many minutes at an address where nothing listens."""
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit():
        return None    # "auto" and the like: Ray finds the address, and answers quickly when it finds none
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except socket.timeout:
        return f"nothing answered within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__


@contextlib.contextmanager
def _bounded_connect():
    """Ray tries to reach a cluster's GCS 20 times, each try up to about 40 s when something answers
    there that is not a Ray GCS: here, once (unless RAY_gcs_server_port_wait_time_s says otherwise)."""
    name = "RAY_gcs_server_port_wait_time_s"
    if name in os.environ:
        yield
        return
    os.environ[name] = "1"
    try:
        yield
    finally:
        os.environ.pop(name, None)


def starts_local(address: str | None) -> bool:
    """Whether :func:`connect` starts a Ray on this machine for ``address`` (None with no
    $RAY_ADDRESS, or "local") rather than joining a cluster."""
    return address == "local" or (address is None and not os.environ.get("RAY_ADDRESS"))


def connect(ray, address: str | None) -> str | None:
    """A local Ray (:func:`init_local_ray`, when :func:`starts_local`) or the cluster at ``address``
    (or $RAY_ADDRESS), with neither a dashboard nor the workers' logs on this process's streams;
    the local Ray's session folder (for :func:`reap`), else None.  A failure is one
    :class:`~taskflow.errors.JobError`, within seconds: an address where nothing answers is found out at once."""
    local = starts_local(address)
    where = "a local Ray" if local else f"the Ray cluster at {address or os.environ['RAY_ADDRESS']!r}"
    fix = "give --address a running cluster's address (or auto), or leave it out to start a local Ray"
    options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        if local:
            return init_local_ray(ray, **options).address_info.get("session_dir")
        reason = _probe(address or os.environ["RAY_ADDRESS"])
        if reason is not None:
            raise JobError(f"cannot reach {where}: {reason}; is the cluster running, and is that its address "
                           f"(host:port of its head, as `ray start --head` printed it)? {fix}")
        with _bounded_connect():
            ray.init(address=address, **options)
        return None
    except JobError:
        raise
    except Exception as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise JobError(f"cannot start or reach {where}: {reason}; {fix}") from None

