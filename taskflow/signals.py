"""SIGTERM for batch jobs, where Paddle installs C++ handlers behind Python's back.

Paddle's handlers print a "FatalError" dump on SIGTERM and can deadlock the process.
A job (:mod:`taskflow.jobs`) turns SIGTERM into a :class:`~taskflow.errors.JobError`
so it stops like on Ctrl-C, with its state kept; a worker process
(:mod:`taskflow.workers`) just dies by the default action.  Paddle is imported with
SIGTERM held, so a signal that comes meanwhile is dealt with by us, after.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from .errors import JobError

__all__ = ["sigterm_stops_the_job", "sigterm_held", "default_sigterm", "without_paddle_signal_handlers"]


def default_sigterm() -> None:
    """SIGTERM's default action (the process ends), wherever Paddle put its handler."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_on_sigterm(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup that follows is short and must finish
    raise JobError("stopped by SIGTERM; what was done is saved: rerun with --resume (resume=True) to continue")


@contextlib.contextmanager
def sigterm_stops_the_job(own_process: bool = False):
    """While a job runs in the main thread, SIGTERM raises :class:`JobError` there, so the job
    stops like on Ctrl-C (workers shut down, state kept) instead of meeting Paddle's C++ handler,
    which prints a "FatalError" dump and can deadlock.  A handler the caller installed is left alone.

    Paddle installs its handler when it is imported, behind Python's back; so Paddle is imported
    first, and ours re-asserted when this is entered again (the CLI enters it before it builds the
    pipeline, the job once more).  ``own_process=True`` (the CLI, whose process this is) also removes
    Paddle's other crash handlers.  A SIGTERM during Paddle's import itself still meets Paddle's
    handler: it arrives on a thread Python cannot mask (e.g. a BLAS thread started with numpy)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with sigterm_held() as release:
        if own_process:
            without_paddle_signal_handlers()
        else:
            _import_paddle()
        current = signal.getsignal(signal.SIGTERM)
        ours = current in (signal.SIG_DFL, None, _stop_on_sigterm)
        if ours:
            signal.signal(signal.SIGTERM, _stop_on_sigterm)
        try:
            release()  # a SIGTERM that came meanwhile is raised here, by our handler
            yield
        finally:
            if ours:
                signal.signal(signal.SIGTERM, current if current is not None else signal.SIG_DFL)


def _import_paddle():
    """Paddle, imported the way taskflow.predictor does (quietly), or None where it is not installed."""
    from .errors import PaddleNotInstalledError
    from .predictor import import_paddle

    try:
        return import_paddle()
    except (ImportError, PaddleNotInstalledError):
        return None


def without_paddle_signal_handlers() -> None:
    """Import Paddle (if installed) and remove the C++ signal handlers it installs, behind Python's back,
    on import: on SIGTERM they print a "FatalError" dump and can hang the process for good."""
    paddle = _import_paddle()
    disable = getattr(paddle, "disable_signal_handler", None)
    if disable is not None:
        disable()


@contextlib.contextmanager
def sigterm_held():
    """Keep SIGTERM pending (blocked) until ``release()`` or the end: a SIGTERM that arrives while
    Paddle is imported would otherwise meet Paddle's handler, which hangs the process for good."""
    if not hasattr(signal, "pthread_sigmask"):
        yield lambda: None
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def release():
        signal.pthread_sigmask(signal.SIG_SETMASK, before)

    try:
        yield release
    finally:
        release()
