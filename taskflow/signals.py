"""SIGTERM and SIGHUP for batch jobs and streaming runs, where Paddle installs C++ handlers behind Python's back.

Paddle's handlers print a "FatalError" dump on SIGTERM and can deadlock the process.
A job (:mod:`taskflow.jobs`) and the CLI's streaming runs turn SIGTERM and SIGHUP (the
terminal closed, a login ended) into a :class:`~taskflow.errors.JobError`, so they stop
like on Ctrl-C, with their state kept and one message saying what is left; a worker process
(:mod:`taskflow.workers`) just dies by the default action.  Paddle is imported with these
signals held, so one that comes meanwhile is dealt with by us, after.
"""

from __future__ import annotations

import contextlib
import signal
import threading

from .errors import JobError

__all__ = ["sigterm_stops_the_job", "sigterm_held", "default_sigterm", "without_paddle_signal_handlers",
           "stop_deferred", "RESUME_HINT"]

# The signals that stop a job cleanly: SIGTERM (kill, systemd, a container stopping), SIGHUP (the terminal
# or ssh session that ran it went away).  Where a signal is missing (not POSIX), it is left out.
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
RESUME_HINT = "what was done is saved: rerun with --resume (resume=True) to continue"

# What the innermost run in progress leaves when a stop signal ends it (the handler's message says it);
# pushed and popped by sigterm_stops_the_job, in the main thread only, where Python runs signal handlers.
_left: list[str] = []
# While > 0, a stop signal is noted and acted on when the count drops back to 0 (see stop_deferred).
_deferred = [0]
_pending: list[int] = []


def default_sigterm() -> None:
    """SIGTERM's default action (the process ends), wherever Paddle put its handler."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stopped(signum: int) -> JobError:
    left = _left[-1] if _left else RESUME_HINT
    return JobError(f"stopped by {signal.Signals(signum).name}" + (f"; {left}" if left else ""))


def _stop_on_signal(signum, frame):
    if _deferred[0]:
        _pending.append(signum)   # acted on as soon as the line being written is whole
        return
    for each in _STOP_SIGNALS:    # once: the cleanup that follows is short and must finish
        signal.signal(each, signal.SIG_IGN)
    raise _stopped(signum)


@contextlib.contextmanager
def stop_deferred():
    """Hold back a stop signal while results are written: it is acted on just after, so what was
    written ends in a whole line.  (A write to a pipe nobody reads blocks, and the stop waits with it.)"""
    _deferred[0] += 1
    try:
        yield
    except BaseException:
        _deferred[0] -= 1
        if not _deferred[0]:
            _pending.clear()   # the write failed (a closed pipe): that error is what is said
        raise
    _deferred[0] -= 1
    if not _deferred[0] and _pending:
        signum = _pending[0]
        _pending.clear()
        _stop_on_signal(signum, None)


@contextlib.contextmanager
def sigterm_stops_the_job(own_process: bool = False, left: str = RESUME_HINT, paddle: bool = True):
    """While a job or a streaming run goes on in the main thread, SIGTERM and SIGHUP raise
    :class:`JobError` there ("stopped by SIGTERM; " + ``left``, what the stop leaves), so it stops
    like on Ctrl-C (workers shut down, state kept, temporary files removed) instead of meeting
    Paddle's C++ handler, which prints a "FatalError" dump and can deadlock, or SIGHUP's default
    action, which ends the process without a word.  A handler the caller installed (``nohup``'s
    ignored SIGHUP, say) is left alone.

    Paddle installs its handler when it is imported, behind Python's back; so Paddle is imported
    first, and ours re-asserted when this is entered again (the CLI enters it before it builds the
    pipeline, the job once more; the innermost ``left`` is said).  ``own_process=True`` (the CLI,
    whose process this is) also removes Paddle's other crash handlers.  A SIGTERM during Paddle's
    import itself still meets Paddle's handler: it arrives on a thread Python cannot mask (e.g. a
    BLAS thread started with numpy).  ``paddle=False``: a run that never imports Paddle (a batch
    job a server answers) does not import it here either."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with sigterm_held() as release:
        if paddle and own_process:
            without_paddle_signal_handlers()
        elif paddle:
            _import_paddle()
        before = {}
        for signum in _STOP_SIGNALS:
            current = signal.getsignal(signum)
            if current in (signal.SIG_DFL, None, _stop_on_signal):
                before[signum] = current
                signal.signal(signum, _stop_on_signal)
        _left.append(left)
        try:
            release()  # a signal that came meanwhile is raised here, by our handler
            yield
        finally:
            _left.pop()
            for signum, current in before.items():
                signal.signal(signum, current if current is not None else signal.SIG_DFL)


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
    """Keep SIGTERM and SIGHUP pending (blocked) until ``release()`` or the end: a SIGTERM that arrives
    while Paddle is imported would otherwise meet Paddle's handler, which hangs the process for good."""
    if not hasattr(signal, "pthread_sigmask"):
        yield lambda: None
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set(_STOP_SIGNALS))

    def release():
        signal.pthread_sigmask(signal.SIG_SETMASK, before)

    try:
        yield release
    finally:
        release()
