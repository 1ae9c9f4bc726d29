"""Batch jobs over files: streaming, order, resume, error records, worker processes.

The CLI's ``taskflow TASK --input ... --output ...`` and
``Taskflow.predict_file`` both run :func:`run_file`.  Memory stays flat in
the file's size: records are read (:mod:`taskflow.readers`), processed and
written a chunk at a time, with at most two chunks per worker in flight.

Every input record ends in exactly one place: the output (``{"line": N, ...}``)
or the errors file (``--on-error skip``), or the job stops at it.  Before the
output is renamed into place the job checks that the records read equal the
records written plus those skipped, and that it read every line of the input.

Output is written to ``<output>.partial`` and renamed into place when the job
ends; after every chunk a small checkpoint (``<output>.partial.ckpt``) records
how many input records are done and how many bytes of the output and error
files are valid, so ``resume=True`` continues an interrupted job exactly where
it stopped, byte for byte.

Worker processes (``workers=N``) are spawned, each building its own pipeline,
and managed here rather than by ``multiprocessing.Pool``: the parent never
blocks on a pipe, so a worker that dies (``kill -9``, out of memory) or hangs is
seen; its chunk is re-run once on a fresh worker, and a second failure stops
the job with a :class:`~taskflow.errors.WorkerError` and a resumable state.
Workers are shut down with a sentinel and a bounded join, never by SIGTERM
into Paddle; one that does not exit is killed (SIGKILL) and reported.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import logging
import multiprocessing
import os
import queue
import re
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from .errors import InputTypeError, InvalidInputError, JobError, OutputWriteError, WorkerError
from .readers import (
    DEFAULT_MAX_RECORD_BYTES, InputFile, Record, count_lines, count_records, error_record, output_record,
)

__all__ = ["Record", "run_file", "JobSummary", "process_chunk", "iter_chunks", "read_records"]

ON_ERROR = ("raise", "skip")
CHECKPOINT_FORMAT = 2  # output records carry "line" (format 1 had bare results)
logger = logging.getLogger("taskflow")
_LOCATION = re.compile(r"^.*?:\d+: ")  # the "file:line: " that starts a bad record's message

# A worker process that finds itself re-importing a script that starts a job exits with this code.
EXIT_UNGUARDED_MAIN = 86


def read_records(path: str | os.PathLike, fields: Sequence[str] = ("text",), **options: Any) -> Iterator[Record]:
    """Records of a .txt, .jsonl, .csv or .tsv file, lazily (see :mod:`taskflow.readers`)."""
    with InputFile(path, fields, **options) as source:
        yield from source


# ------------------------------------------------------------------ processing

def process_chunk(task, records: Sequence[Record], source: str) -> list[tuple[Record, Any, str | None]]:
    """``(record, result, error)`` for each record, in order; bad items get an error, not an exception."""
    outcomes: list[tuple[Record, Any, str | None]] = []
    good: list[tuple[int, Any]] = []
    for position, record in enumerate(records):
        if record.error is not None:
            outcomes.append((record, None, record.error))
            continue
        try:
            checked = task.check_item(record.item, None)
        except (InvalidInputError, InputTypeError) as exc:
            outcomes.append((record, None, f"{source}:{record.line}: {exc}"))
            continue
        outcomes.append((record, None, None))
        good.append((position, checked))
    if good:
        results = task.run_items([item for _, item in good])
        for (position, _), result in zip(good, results):
            outcomes[position] = (outcomes[position][0], result, None)
    return outcomes


def iter_chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to ``size`` items from any iterable, lazily."""
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# ------------------------------------------------------------------ worker processes

def _default_sigterm() -> None:
    # Paddle installs a C++ SIGTERM handler that prints a "FatalError" dump and can deadlock;
    # a worker asked to stop by SIGTERM (an admin, a container runtime) should just stop.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _worker_main(spec, threads: int, tasks, results, stop) -> None:
    """A worker process: build the pipeline from ``spec`` (a :class:`taskflow.pipeline.PipelineSpec`),
    then answer chunks until a ``None`` sentinel."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the parent decides
    with _sigterm_held():  # a SIGTERM while Paddle loads would hang in its handler; it ends the worker after
        try:
            task = spec.build_task(default_threads=threads)
            _without_paddle_signal_handlers()
        except BaseException:
            with contextlib.suppress(OSError):
                results.send(("failed", traceback.format_exc(limit=-4)))
            return
        _default_sigterm()
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
        _default_sigterm()  # again: Paddle may install its handler when the predictor first runs
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


def _calling_line() -> str:
    """``file:line`` of the outermost ``__main__`` frame calling us (the user's script), if any."""
    frame, found = sys._getframe(1), ""
    while frame is not None:
        if frame.f_globals.get("__name__") in ("__main__", "__mp_main__"):
            found = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return found


def _refuse_in_worker_bootstrap() -> None:
    """A spawned child re-imports the parent's ``__main__`` script; if that script starts a job at
    its top level, the child would start workers of its own, without end.  Stop the child here,
    with one line and a distinct exit code the parent turns into a clear error."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        sys.stderr.write(f"taskflow: a worker process re-imported {_calling_line() or 'the main script'}, which starts "
                         "a job at its top level; not starting another one here\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_UNGUARDED_MAIN)


class _WorkerPool:
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
    with _sigterm_held() as release:
        if own_process:
            _without_paddle_signal_handlers()
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


def _without_paddle_signal_handlers() -> None:
    """Import Paddle (if installed) and remove the C++ signal handlers it installs, behind Python's back,
    on import: on SIGTERM they print a "FatalError" dump and can hang the process for good."""
    paddle = _import_paddle()
    disable = getattr(paddle, "disable_signal_handler", None)
    if disable is not None:
        disable()


@contextlib.contextmanager
def _sigterm_held():
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


# ------------------------------------------------------------------ the job

@dataclass
class JobSummary:
    input: str
    output: str
    read: int = 0           # records read by this run
    processed: int = 0      # results written by this run
    skipped: int = 0        # records written to the errors file by this run
    resumed_from: int = 0   # records already done by an earlier run
    errors_file: str | None = None
    messages: list[str] = field(default_factory=list)
    worker_faults: list[str] = field(default_factory=list)  # workers that died, hung or had to be killed
    # Why records were skipped, with their counts (the messages without their "file:line: ").
    skip_reasons: collections.Counter = field(default_factory=collections.Counter)

    def skipped_message(self, errors_path) -> str:
        """One line on the skipped records; a cause shared by all of them is said once, not per line."""
        if not self.skip_reasons:
            return f"the records an earlier run skipped are in {errors_path}"
        if len(self.skip_reasons) == 1:
            (reason, _), = self.skip_reasons.items()
            if not self.processed:
                return (f"every record ({self.skipped}) failed the same way: {reason}; "
                        f"nothing was processed (the records are in {errors_path})")
            return f"{self.skipped} bad record(s) skipped, all because: {reason}; see {errors_path}"
        reason, count = self.skip_reasons.most_common(1)[0]
        return f"{self.skipped} bad record(s) skipped ({count} because: {reason}); see {errors_path}"


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


class _Checkpointed:
    """The output and error files of a job, with their checkpoint."""

    def __init__(self, output: Path, errors: Path, identity: dict, resume: bool):
        self.output, self.errors = output, errors
        self.out_tmp = output.with_name(output.name + ".partial")
        self.err_tmp = errors.with_name(errors.name + ".partial")
        self.ckpt = output.with_name(output.name + ".partial.ckpt")
        self.identity = identity
        self.done, out_bytes, err_bytes = 0, 0, 0
        if resume and self.ckpt.exists():
            try:
                state = json.loads(self.ckpt.read_text(encoding="utf-8"))
                saved = {k: state.get(k) for k in identity}
                done, out_bytes, err_bytes = int(state["done"]), int(state["out_bytes"]), int(state["err_bytes"])
            except (ValueError, KeyError, TypeError) as exc:
                raise JobError(f"cannot resume {output}: its checkpoint {self.ckpt} is damaged ({exc}); "
                               "run without --resume to start over") from None
            if saved != identity:
                diff = ", ".join(f"{k}: {saved[k]!r} then, {identity[k]!r} now" for k in identity if saved[k] != identity[k])
                raise JobError(f"cannot resume {output}: its checkpoint was made with other settings ({diff}); "
                               "run with the same ones, or without --resume to start over")
            for path, size in ((self.out_tmp, out_bytes), (self.err_tmp, err_bytes)):
                if size and (not path.exists() or path.stat().st_size < size):
                    raise JobError(f"cannot resume {output}: {path} is shorter than its checkpoint says "
                                   f"({size} bytes); run without --resume to start over")
            self.done = done
        self.out = self.err = None
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            self.out = self._open(self.out_tmp, out_bytes)
            self.err = self._open(self.err_tmp, err_bytes)
            if not self.done:
                self._save(0, 0, 0)  # resumable from the start; an older job's checkpoint no longer applies
        except OSError as exc:
            self.close()
            raise OutputWriteError(f"cannot write the output {output}: {exc.strerror or exc} ({exc.filename}); "
                                   "choose a writable --output") from exc

    @staticmethod
    def _open(path: Path, valid_bytes: int):
        # Bytes past the checkpoint belong to a chunk that was not finished: drop them.
        handle = open(path, "r+b" if valid_bytes and path.exists() else "w+b")
        handle.truncate(valid_bytes)
        handle.seek(valid_bytes)
        return handle

    def state(self) -> tuple[int, int, int]:
        return self.done, self.out.tell(), self.err.tell()

    def write(self, records: list[dict], errors: list[dict], done: int) -> None:
        try:
            for record in records:
                self.out.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            for error in errors:
                self.err.write((json.dumps(error, ensure_ascii=False) + "\n").encode("utf-8"))
            for handle in (self.out, self.err):
                handle.flush()
                os.fsync(handle.fileno())
            self._save(done, self.out.tell(), self.err.tell())
        except OSError as exc:
            raise OutputWriteError(
                f"cannot write {exc.filename or self.out_tmp}: {exc.strerror or exc}; the job stopped after "
                f"{self.done} record(s), which are saved. Free space (or fix the permissions) and rerun with "
                "--resume (resume=True)"
            ) from exc

    def _save(self, done: int, out_bytes: int, err_bytes: int) -> None:
        _atomic_write(self.ckpt, json.dumps({**self.identity, "done": done, "out_bytes": out_bytes, "err_bytes": err_bytes}))
        self.done = done

    def rewind(self, state: tuple[int, int, int]) -> None:
        """Make an earlier checkpoint the current one (what was written after it is dropped on resume)."""
        self._save(*state)

    def finish(self) -> bool:
        """Move the files into place; True when an errors file was written."""
        self.out.close()
        self.err.close()
        return self.complete(self.output, self.errors)

    @staticmethod
    def complete(output: Path, errors: Path) -> bool:
        """Rename the finished files into place, the checkpoint last (so a job stopped in here is
        finished by ``resume=True``); True when an errors file was written."""
        out_tmp = output.with_name(output.name + ".partial")
        err_tmp = errors.with_name(errors.name + ".partial")
        try:
            if out_tmp.exists():
                os.replace(out_tmp, output)
            if not err_tmp.exists():
                has_errors = errors.exists()  # moved into place by the run that was stopped in here
            elif err_tmp.stat().st_size:
                has_errors = True
                os.replace(err_tmp, errors)
            else:
                has_errors = False
                err_tmp.unlink()
                errors.unlink(missing_ok=True)  # an older run's errors do not describe this output
            output.with_name(output.name + ".partial.ckpt").unlink(missing_ok=True)
        except OSError as exc:
            raise OutputWriteError(f"cannot move the finished output {output} into place: {exc}") from exc
        return has_errors

    def close(self) -> None:
        for handle in (self.out, self.err):
            if handle is not None:
                with contextlib.suppress(OSError):  # a full disk fails the flush too; the checkpoint is what counts
                    handle.close()


def run_file(
    task,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    fields: Sequence[str] | None = None,
    chunk_size: int | None = None,
    workers: int = 1,
    worker_spec=None,
    resume: bool = False,
    on_error: str = "raise",
    errors_path: str | os.PathLike | None = None,
    progress: bool | None = None,
    encoding: str = "utf-8",
    id_fields: Sequence[str] | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    chunk_timeout: float | None = 600.0,
    startup_timeout: float = 300.0,
    shutdown_timeout: float = 10.0,
) -> JobSummary:
    """Run ``task`` over a file into JSON lines, in input order.

    Each output line is the task's result with the input's ``line`` number and
    its other fields (``id_fields``: only those; see :func:`taskflow.readers.output_record`).
    ``on_error="raise"`` stops at the first bad record (naming file and line;
    what was done so far is kept for ``resume=True``); ``"skip"`` writes each
    bad record to ``errors_path`` (default ``<output>.errors.jsonl``) and goes on.
    ``workers=N`` (N > 1) runs N spawned processes, each building its pipeline from
    ``worker_spec`` (``Taskflow.spec``: the jobs layer knows tasks, not how pipelines are made);
    one that gives no answer for ``chunk_timeout`` seconds is taken as hung.
    """
    _refuse_in_worker_bootstrap()
    call_site = _calling_line()
    if on_error not in ON_ERROR:
        raise InvalidInputError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise InvalidInputError(f"workers must be a positive int, got {workers!r}")
    if workers > 1 and worker_spec is None:
        raise InvalidInputError("workers > 1 needs worker_spec (Taskflow.spec), to rebuild the pipeline in each "
                                "process; use Taskflow.predict_file")
    for name, value in (("chunk_timeout", chunk_timeout), ("startup_timeout", startup_timeout),
                        ("shutdown_timeout", shutdown_timeout)):
        if value is not None and (not isinstance(value, (int, float)) or value <= 0):
            raise InvalidInputError(f"{name} must be a positive number of seconds, got {value!r}")
    input_path, output_path = Path(input_path), Path(output_path)
    errors_path = Path(errors_path) if errors_path else output_path.with_name(output_path.name + ".errors.jsonl")
    fields = tuple(fields or task.input_fields)
    id_fields = None if id_fields is None else tuple(id_fields)
    chunk_size = chunk_size or max(64, task.batch_size * 8)
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidInputError(f"chunk_size must be a positive int, got {chunk_size!r}")
    summary = JobSummary(str(input_path), str(output_path))

    source = InputFile(input_path, fields, encoding=encoding, carry=id_fields, max_record_bytes=max_record_bytes)
    try:
        if output_path.exists() and output_path.resolve() == input_path.resolve():
            raise InvalidInputError(f"--output {output_path} is the input file; choose another path")
        if output_path.is_dir():
            raise InvalidInputError(f"--output {output_path} is a directory; name a file, e.g. {output_path / 'out.jsonl'}")
        if resume and output_path.exists():
            checkpoint = output_path.with_name(output_path.name + ".partial.ckpt")
            if checkpoint.exists() and not output_path.with_name(output_path.name + ".partial").exists():
                _Checkpointed.complete(output_path, errors_path)  # a job stopped while moving its files into place
            if not checkpoint.exists():
                summary.messages.append(f"{output_path} is complete; nothing to resume")
                return summary
        identity = {"format": CHECKPOINT_FORMAT, "input": str(input_path.resolve()), "fields": list(fields),
                    "encoding": source.encoding, "id_fields": None if id_fields is None else list(id_fields)}
        # From the first checkpoint on, SIGTERM stops the job cleanly (a stop inside finish() is finished by resume).
        with sigterm_stops_the_job():
            files = _Checkpointed(output_path, errors_path, identity, resume)
            try:
                _run(task, source, files, summary, chunk_size=chunk_size, workers=workers, on_error=on_error,
                     progress=progress, pool_options=dict(
                         spec=worker_spec, workers=workers, source=str(input_path), chunk_timeout=chunk_timeout,
                         startup_timeout=startup_timeout, shutdown_timeout=shutdown_timeout, call_site=call_site))
                if files.finish():
                    summary.errors_file = str(errors_path)
                    summary.messages.append(summary.skipped_message(errors_path))
            finally:
                files.close()
    finally:
        source.close()
    for message in summary.messages:
        logger.warning(message)
    return summary


def _run(task, source: InputFile, files: _Checkpointed, summary: JobSummary, *, chunk_size: int, workers: int,
         on_error: str, progress: bool | None, pool_options: dict) -> None:
    """Read, process and write every record; check that all are accounted for."""
    from tqdm.auto import tqdm

    summary.resumed_from = files.done
    if source.skip(files.done) != files.done:
        raise JobError(f"cannot resume: {source.source} now holds fewer records than the {files.done} its checkpoint "
                       "says are done; is it the same file? Run without --resume to start over")
    show = progress if progress is not None else None
    total = count_records(source.path) if show is not False else None
    pool = _WorkerPool(pool_options.pop("spec"), pool_options.pop("workers"), **pool_options) if workers > 1 else None
    try:
        chunks = iter_chunks(source, chunk_size)
        outcomes = pool.map(chunks) if pool else (process_chunk(task, c, source.source) for c in chunks)
        unterminated_at = None  # the checkpoint before a last line without a newline: the file may be growing
        with tqdm(total=total, initial=files.done, unit="items", dynamic_ncols=True,
                  disable=None if show is None else not show) as bar:
            for chunk in outcomes:
                if chunk[-1][0].terminated:
                    _write_outcomes(chunk, files, summary, on_error)
                else:
                    _write_outcomes(chunk[:-1], files, summary, on_error)
                    unterminated_at = files.state()
                    _write_outcomes(chunk[-1:], files, summary, on_error)
                bar.update(len(chunk))
        summary.read = source.records
        _check_accounting(source, files, summary, unterminated_at)
        if pool:
            summary.worker_faults = pool.close()
            pool = None
    finally:
        if pool:
            pool.abort()


def _write_outcomes(outcomes: list, files: _Checkpointed, summary: JobSummary, on_error: str) -> None:
    records, errors = [], []
    for record, result, error in outcomes:
        if error is None:
            records.append(output_record(record, result))
        elif on_error == "raise":
            files.write(records, [], files.done + len(records))  # all before it were good
            summary.processed += len(records)
            raise InvalidInputError(
                f"{error}. Fix the line and rerun with --resume (resume=True) to continue, or use --on-error skip"
            )
        else:
            errors.append(error_record(record, error))
            summary.skip_reasons[_LOCATION.sub("", str(error), count=1)] += 1
    files.write(records, errors, files.done + len(outcomes))
    summary.processed += len(records)
    summary.skipped += len(errors)


def _check_accounting(source: InputFile, files: _Checkpointed, summary: JobSummary, unterminated_at) -> None:
    """Before the output goes into place: every record read is written or skipped, and every line was read."""
    if summary.read != summary.processed + summary.skipped or files.done != summary.resumed_from + summary.read:
        raise JobError(f"internal check failed: read {summary.read} record(s) but wrote {summary.processed} and "
                       f"skipped {summary.skipped}; the output is left as {files.out_tmp}; please report this")
    size = source.path.stat().st_size
    if size != source.offset:
        if unterminated_at is not None:
            files.rewind(unterminated_at)  # that last line was read before it was complete: do it again
        raise JobError(
            f"{source.source} changed while the job read it ({source.offset:,} bytes read, it now has {size:,}); "
            "the records read so far are saved: rerun with --resume (resume=True) to process the rest"
        )
    header = 1 if source.format in ("csv", "tsv") and source.lines else 0
    lines = count_lines(source.path, source.offset)
    if lines != source.lines or files.done != lines - header:
        raise JobError(f"internal check failed: {source.source} has {lines} line(s) but {files.done} record(s) were "
                       f"accounted for; the output is left as {files.out_tmp}; please report this")
