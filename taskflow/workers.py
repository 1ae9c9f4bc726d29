"""A batch job's chunks of records, run: :func:`process_chunk` (in this process, or wherever a pool
runs it), and a pool of spawned processes on this machine (:class:`WorkerPool`).  The other pools
take the same chunks and answer them alike: Ray actors (:class:`taskflow.ray_workers.RayPool`,
``backend="ray"``) and a server (:class:`taskflow.endpoint_pool.EndpointPool`,
``taskflow TASK --endpoint URL``).

Each worker builds its own pipeline from a picklable spec (``Taskflow.spec``) and runs
:func:`process_chunk` on the chunks it is sent.  The pool is managed here rather than by
``multiprocessing.Pool``: the parent never blocks on a pipe, so a worker that dies
(``kill -9``, out of memory) or hangs is seen; its chunk is re-run once on a fresh worker,
and a second failure stops the job with a :class:`~taskflow.errors.WorkerError`.  Workers
are shut down with a sentinel and a bounded join, never by SIGTERM into Paddle; one that
does not exit is killed (SIGKILL) and reported.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
import traceback
from typing import Any, Iterable, Iterator, Sequence

from .errors import WorkerError
from .readers import Record
from .runner import Runner, chunks
from .signals import default_sigterm, sigterm_held, without_paddle_signal_handlers

__all__ = ["process_chunk", "iter_chunks", "WorkerPool", "refuse_in_worker_bootstrap", "calling_line",
           "EXIT_UNGUARDED_MAIN"]

logger = logging.getLogger("taskflow")

# A worker process that finds itself re-importing a script that starts a job exits with this code.
EXIT_UNGUARDED_MAIN = 86

# ------------------------------------------------------------------ processing

def process_chunk(task, records: Sequence[Record], source: str) -> list[tuple[Record, Any, str | None]]:
    """``(record, result, error)`` for each record, in order; bad items get an error, not an exception
    (the runner checks and runs them, as for any call; a bad one is named by file and line)."""
    readable = [record for record in records if record.error is None]
    good, results = Runner(task).check(
        [record.item for record in readable], offset=None, on_error="skip",
        where=lambda position, exc: f"{source}:{readable[position].line}: {exc}")
    Runner(task).run_checked(good, results)
    answered = {position for position, _ in good}
    outcome = iter([(record, results[k], None) if k in answered else (record, None, results[k])
                    for k, record in enumerate(readable)])
    return [(record, None, record.error) if record.error is not None else next(outcome) for record in records]


iter_chunks = chunks     # a job's chunks are cut as every stream's are


# ------------------------------------------------------------------ worker processes

def _worker_main(spec, threads: int, tasks, results, stop) -> None:
    """A worker process: build the pipeline from ``spec`` (a :class:`taskflow.pipeline.PipelineSpec`),
    then answer chunks until a ``None`` sentinel."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the parent decides
    with sigterm_held():  # a SIGTERM while Paddle loads would hang in its handler; it ends the worker after
        try:
            task = spec.build_task(default_threads=threads)
            without_paddle_signal_handlers()
        except BaseException:
            with contextlib.suppress(OSError):
                results.send(("failed", traceback.format_exc(limit=-4)))
            return
        default_sigterm()
    results.send(("ready", os.getpid()))
    while True:
        try:
            message = tasks.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if message is None or stop.value:
            return
        chunk_id, records, source = message
        try:
            answer = ("done", chunk_id, process_chunk(task, records, source))
        except Exception:
            answer = ("error", chunk_id, traceback.format_exc(limit=-6))
        default_sigterm()  # again: Paddle may install its handler when the predictor first runs
        try:
            results.send(answer)
        except OSError:
            return  # the parent is gone


_CLOSE = object()


class _Worker:
    """One worker process and the two threads that talk to it.

    The parent's main thread never touches the pipes: a sender thread feeds the
    task pipe (so a worker that stops reading cannot block the parent) and a
    receiver thread turns results, and the end of the pipe when the process
    dies, into events on the pool's queue.
    """

    def __init__(self, ctx, spec, threads: int, slot: int, stop, events: queue.SimpleQueue):
        task_reader, task_writer = ctx.Pipe(duplex=False)
        result_reader, result_writer = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_worker_main, args=(spec, threads, task_reader, result_writer, stop),
                                   name=f"taskflow-worker-{slot}", daemon=True)
        try:
            with _no_missing_main_file():
                self.process.start()
        except BaseException:  # e.g. SIGTERM while spawning: leave no child behind
            if self.process.pid is not None:
                self.process.kill()
                self.process.join(10)
            raise
        finally:
            # Only the child holds these ends now, so its death is an EOF (or EPIPE) on ours.
            task_reader.close()
            result_writer.close()
        self.slot = slot
        self.ready = False
        self.retired = False
        self.failure: str | None = None      # the traceback a worker sends when it cannot build the pipeline
        self.in_flight: collections.deque[int] = collections.deque()
        self.since = time.monotonic()       # start of what it is doing now: starting up, or the head chunk
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._send, args=(task_writer,), daemon=True, name=f"{self.process.name}-send").start()
        threading.Thread(target=self._receive, args=(result_reader, events), daemon=True,
                         name=f"{self.process.name}-receive").start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def _send(self, conn) -> None:
        try:
            while True:
                message = self.outbox.get()
                if message is _CLOSE:
                    break
                conn.send(message)
        except OSError:
            pass  # the worker is gone; the receiver reports it
        finally:
            conn.close()

    def _receive(self, conn, events: queue.SimpleQueue) -> None:
        try:
            while True:
                events.put((self, conn.recv()))
        except (EOFError, OSError):
            events.put((self, ("eof",)))
        finally:
            conn.close()

    def send(self, message) -> None:
        self.outbox.put(message)

    def describe_exit(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def kill(self) -> None:
        """SIGKILL (never SIGTERM: Paddle's handler may deadlock), then reap."""
        self.retired = True
        self.outbox.put(_CLOSE)
        if self.process.is_alive():
            with contextlib.suppress(OSError):
                self.process.kill()
        self.process.join(10)


@contextlib.contextmanager
def _no_missing_main_file():
    """Spawned children re-run the parent's ``__main__`` from its file; a script read from stdin
    (``python - <<EOF``) names a file that does not exist (``<stdin>``), and every child would die
    trying.  Our workers need nothing from ``__main__``, so hide such a name while spawning."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or getattr(main, "__spec__", None) is not None or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def calling_line() -> str:
    """``file:line`` of the outermost ``__main__`` frame calling us (the user's script), if any."""
    frame, found = sys._getframe(1), ""
    while frame is not None:
        if frame.f_globals.get("__name__") in ("__main__", "__mp_main__"):
            found = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return found


def refuse_in_worker_bootstrap() -> None:
    """A spawned child re-imports the parent's ``__main__`` script; if that script starts a job at
    its top level, the child would start workers of its own, without end.  Stop the child here,
    with one line and a distinct exit code the parent turns into a clear error."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        sys.stderr.write(f"taskflow: a worker process re-imported {calling_line() or 'the main script'}, which starts "
                         "a job at its top level; not starting another one here\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_UNGUARDED_MAIN)


class WorkerPool:
    """N spawned workers running chunks in order, with bounded prefetch and fault handling."""

    def __init__(self, spec, workers: int, *, source: str, chunk_timeout: float | None,
                 startup_timeout: float, shutdown_timeout: float, call_site: str = ""):
        # Unless the caller chose: N processes x threads each <= cores (oversubscribing only adds switching).
        self.threads = max(1, (os.cpu_count() or 1) // workers)
        self.spec, self.source, self.call_site = spec, source, call_site
        self.chunk_timeout, self.startup_timeout, self.shutdown_timeout = chunk_timeout, startup_timeout, shutdown_timeout
        self.ctx = multiprocessing.get_context("spawn")
        self.stop = self.ctx.RawValue(ctypes.c_bool, False)  # lock-free: a killed worker cannot leave it held
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.faults: list[str] = []
        self.restarted: set[int] = set()  # slots whose worker was killed while starting, and started again
        self.workers: list[_Worker] = []
        try:
            for slot in range(workers):
                self.workers.append(_Worker(self.ctx, self.spec, self.threads, slot, self.stop, self.events))
        except BaseException:
            self.abort()
            raise

    # ------------------------------------------------------------ running
    def map(self, chunks: Iterable[list[Record]]) -> Iterator[list]:
        """Outcomes of each chunk, in order (see :func:`process_chunk`)."""
        chunks = iter(chunks)
        sent: dict[int, list[Record]] = {}
        done: dict[int, list] = {}
        retried: set[int] = set()
        next_id = next_out = 0
        exhausted = False
        while True:
            while not exhausted:  # keep every worker at two chunks (one running, one queued)
                worker = min(self.workers, key=lambda w: len(w.in_flight))
                if len(worker.in_flight) >= 2:
                    break
                chunk = next(chunks, None)
                if chunk is None:
                    exhausted = True
                    break
                sent[next_id] = chunk
                self._assign(worker, next_id, chunk)
                next_id += 1
            while next_out in done:
                sent.pop(next_out)
                yield done.pop(next_out)
                next_out += 1
            if exhausted and next_out == next_id:
                return
            try:
                worker, message = self.events.get(timeout=self._wait_time())
            except queue.Empty:
                self._check_deadlines(sent, retried)
                continue
            if worker.retired:
                continue  # an answer or EOF from a worker already replaced
            kind = message[0]
            if kind == "ready":
                worker.ready, worker.since = True, time.monotonic()
            elif kind == "failed":
                worker.failure = message[1]
            elif kind == "done":
                chunk_id = message[1]
                if not worker.in_flight or worker.in_flight[0] != chunk_id:
                    raise WorkerError(f"worker process {worker.pid} answered chunk {chunk_id} out of turn")
                worker.in_flight.popleft()
                worker.since = time.monotonic()
                done[chunk_id] = message[2]
            elif kind == "error":
                records = sent[message[1]]
                raise WorkerError(
                    f"a worker process failed on the records at lines {records[0].line}-{records[-1].line} of "
                    f"{self.source}:\n{message[2].rstrip()}\nThe records before them are saved; rerun with --resume "
                    "(resume=True) once the cause is fixed"
                )
            elif kind == "eof":
                worker.process.join(5)
                self._replace(worker, worker.describe_exit(), sent, retried)

    def _assign(self, worker: _Worker, chunk_id: int, chunk: list[Record]) -> None:
        if not worker.in_flight:
            worker.since = time.monotonic()
        worker.in_flight.append(chunk_id)
        worker.send((chunk_id, chunk, self.source))

    def _limit(self, worker: _Worker) -> float | None:
        if not worker.ready:
            return self.startup_timeout
        return self.chunk_timeout if worker.in_flight else None

    def _wait_time(self) -> float:
        now, wait = time.monotonic(), 1.0
        for worker in self.workers:
            limit = self._limit(worker)
            if limit is not None:
                wait = min(wait, worker.since + limit - now)
        return max(0.01, wait)

    def _check_deadlines(self, sent: dict, retried: set) -> None:
        now = time.monotonic()
        for worker in list(self.workers):
            limit = self._limit(worker)
            if limit is not None and now - worker.since > limit:
                doing = "start" if not worker.ready else "answer"
                worker.kill()
                self._replace(worker, f"did not {doing} within {limit:g} s (hung); it was killed (SIGKILL)", sent, retried)

    def _replace(self, worker: _Worker, what: str, sent: dict, retried: set) -> None:
        """A worker is gone: re-run what it held on a fresh one, or stop the job."""
        worker.kill()
        if not worker.ready:
            # Killed by a signal while starting (the OOM killer, an admin): once per slot, start another.
            # Any other exit at start-up (the model cannot load, an unguarded script) would only repeat.
            code = worker.process.exitcode
            if not (code is not None and code < 0 and worker.slot not in self.restarted):
                raise WorkerError(self._startup_failure(worker, what))
            self.restarted.add(worker.slot)
        lines = ""
        if worker.in_flight:
            head = sent[worker.in_flight[0]]
            lines = f"the records at lines {head[0].line}-{head[-1].line} of {self.source}"
            if worker.in_flight[0] in retried:
                raise WorkerError(
                    f"a worker process {what} while running {lines}, after another one failed on the same "
                    "records; stopping. The records before them are saved: "
                    "rerun with --resume (resume=True); if those records crash the model, fix or remove them, "
                    "and if the process ran out of memory, use fewer --workers or a smaller --batch-size"
                )
            retried.add(worker.in_flight[0])
        when = f" while running {lines}; they were re-run on a new worker" if lines else (
            "; replaced it" if worker.ready else " while starting; started another")
        self.faults.append(f"worker process {worker.pid} {what}{when}")
        logger.warning(self.faults[-1])
        self.workers.remove(worker)
        fresh = _Worker(self.ctx, self.spec, self.threads, worker.slot, self.stop, self.events)
        self.workers.append(fresh)
        for chunk_id in worker.in_flight:
            self._assign(fresh, chunk_id, sent[chunk_id])

    def _startup_failure(self, worker: _Worker, what: str) -> str:
        if worker.process.exitcode == EXIT_UNGUARDED_MAIN:
            where = self.call_site or getattr(sys.modules.get("__main__"), "__file__", None) or "your script"
            return (
                f"worker processes could not start: each one re-imports your script, and its top level starts "
                f"this job again ({where}). Put the code that runs the job under "
                "`if __name__ == \"__main__\":` (multiprocessing's spawn start method needs that guard), "
                "or use workers=1"
            )
        if worker.failure:
            return f"a worker process could not build the pipeline:\n{worker.failure.rstrip()}"
        return (f"a worker process {what} before it was ready; its error, if any, is printed above "
                "(is the machine short of memory? try fewer --workers)")

    # ------------------------------------------------------------ shutting down
    def close(self) -> list[str]:
        """Cooperative shutdown: a sentinel to each worker, a bounded wait, SIGKILL for any that is stuck.
        Returns the worker faults of the whole job (replacements and kills), for the summary."""
        for worker in self.workers:
            worker.send(None)
            worker.outbox.put(_CLOSE)
        deadline = time.monotonic() + self.shutdown_timeout
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            if worker.process.is_alive():
                worker.kill()
                self.faults.append(f"worker process {worker.pid} did not exit within {self.shutdown_timeout:g} s "
                                   "of being asked to; it was killed (SIGKILL)")
                logger.warning(self.faults[-1])
            worker.retired = True
        self.workers = []
        return self.faults

    def abort(self) -> None:
        """The job is stopping early: idle workers exit at once; busy ones, whose work is no longer wanted, are killed."""
        self.stop.value = True
        for worker in self.workers:
            worker.send(None)
            worker.outbox.put(_CLOSE)
        deadline = time.monotonic() + 1.0
        for worker in self.workers:
            worker.process.join(max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            worker.kill()
        self.workers = []
