"""Where a batch job's chunks of records run, in order: a pool of spawned processes on this machine
(:class:`WorkerPool`), of Ray actors (:class:`RayPool`, ``backend="ray"``), or a server
(:class:`EndpointPool`, ``taskflow TASK --endpoint URL``).

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
import socket
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Iterable, Iterator, Sequence

from .errors import JobError, OptionError, ServerError, WorkerError
from .readers import Record
from .runner import Runner, chunks
from .signals import default_sigterm, sigterm_held, without_paddle_signal_handlers

__all__ = ["process_chunk", "iter_chunks", "WorkerPool", "RayPool", "EndpointPool", "import_ray", "init_local_ray",
           "refuse_in_worker_bootstrap", "calling_line", "EXIT_UNGUARDED_MAIN"]

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


# ------------------------------------------------------------------ Ray actors

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


def _reap(session_dir: str | None) -> None:
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


@contextlib.contextmanager
def _driver_prints_to_stderr():
    """Ray's driver prints what the cluster reports to it ("A worker died or was killed ...") and
    its workers' output to sys.stdout, from threads of its own; a job's stdout carries results only."""
    module = sys.modules.get("ray._private.worker")
    original = getattr(module, "print_to_stdstream", None)
    if original is None:
        yield
        return

    def print_to_stderr(data, *args, **kwargs):
        return original({**data, "is_err": True}, *args, **kwargs)

    module.print_to_stdstream = print_to_stderr
    try:
        yield
    finally:
        if module.print_to_stdstream is print_to_stderr:
            module.print_to_stdstream = original


class RayPool:
    """The ``backend="ray"`` of a batch job (:func:`taskflow.jobs.run_file`): chunks of records run by
    Ray actors, one pipeline each (built from the job's ``Taskflow.spec``), answered in input order.

    Only the model runs on Ray.  Reading, the checkpoint, ``resume``, the errors file and the
    output stay with the job in this process, so a Ray job keeps every rule of a local one (each
    line accounted for, bad records named by line, the output moved into place when complete) and
    writes the same file.  An actor that dies is restarted by Ray and its chunk run again, once;
    a second failure stops the job with a :class:`~taskflow.errors.WorkerError`.
    """

    def __init__(self, spec, workers: int, *, source: str, address: str | None = None,
                 chunk_timeout: float | None = 600.0, startup_timeout: float = 300.0, shutdown_timeout: float = 10.0,
                 call_site: str = ""):
        # shutdown_timeout and call_site are WorkerPool's (the job passes both pools the same options):
        # Ray stops its own actors, and starts them from no script of the caller's.
        ray = import_ray()
        self.ray, self.source, self.started = ray, source, False
        self.chunk_timeout, self.startup_timeout = chunk_timeout, startup_timeout
        self.pending: collections.deque = collections.deque()
        self.faults: list[str] = []
        self.pids: dict[int, int] = {}   # actor slot -> its process now
        self.actors: list = []
        self.session_dir: str | None = None   # of the local Ray this pool started
        self._prints = contextlib.ExitStack()
        try:
            self._prints.enter_context(_driver_prints_to_stderr())
            self._start(spec, workers, address)
        except BaseException:
            self.abort()
            raise

    def _start(self, spec, workers: int, address: str | None) -> None:
        ray, startup_timeout = self.ray, self.startup_timeout
        if ray.is_initialized():
            if address is not None:
                raise OptionError(f"address={address!r} names a Ray cluster, but this process is connected to one "
                                  "already (ray.init was called): pass no address to use it, or call "
                                  "ray.shutdown() first", "address")
        else:
            self._init(address)
        # Each actor takes its share of the cluster's CPUs (no more than a node has), and as many Paddle
        # threads; more actors than CPUs share them, as local workers beyond the cores do, rather than
        # wait for CPUs that never come free.
        largest = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=1)
        share = ray.cluster_resources().get("CPU", 1) / workers
        cpus = min(int(largest), int(share)) if share >= 1 else share
        runner = ray.remote(num_cpus=cpus, max_restarts=1, max_task_retries=1)(_ChunkRunner)
        # The actors read relative paths (task_path, a user_dict) and the PPNLP_* settings as this
        # process does, also on a cluster started elsewhere.
        settings = {name: value for name, value in os.environ.items() if name.startswith("PPNLP_")}
        self.actors = [runner.remote(spec, max(1, int(cpus)), os.getcwd(), settings) for _ in range(workers)]
        try:   # each actor's process, once its pipeline is built: an answer from another is a restart
            self.pids = dict(enumerate(ray.get([actor.pid.remote() for actor in self.actors], timeout=startup_timeout)))
        except ray.exceptions.GetTimeoutError:
            raise WorkerError(f"the Ray actors did not start within {startup_timeout:g} s (is the cluster out of "
                              "memory, or busy?); nothing was run: rerun the job") from None
        except ray.exceptions.RayError as exc:
            raise WorkerError(f"a Ray actor could not build the pipeline:\n{str(exc).rstrip()}") from None

    def _init(self, address: str | None) -> None:
        """A local Ray (listening on 127.0.0.1 only, with a reaper that ends its processes if this
        one is killed: :func:`init_local_ray`), or the cluster at ``address``; a failure is one
        :class:`JobError`, within tens of seconds.  Ray puts signal handlers of its own in place: the
        job's (SIGTERM stops it, saved) are put back."""
        local = address == "local" or (address is None and not os.environ.get("RAY_ADDRESS"))
        where = "a local Ray" if local else f"the Ray cluster at {address or os.environ['RAY_ADDRESS']!r}"
        fix = "give --address a running cluster's address (or auto), or leave it out to start a local Ray"
        if not local:
            reason = _probe(address or os.environ["RAY_ADDRESS"])
            if reason is not None:
                raise JobError(f"cannot reach {where}: {reason}; is the cluster running, and is that its "
                               f"address (host:port of its head, as `ray start --head` printed it)? {fix}")
        in_main = threading.current_thread() is threading.main_thread()
        stops = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
        handlers = {sig: signal.getsignal(sig) for sig in stops} if in_main else {}
        options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        try:
            if local:
                self.session_dir = init_local_ray(self.ray, **options).address_info.get("session_dir")
                self.started = True
            else:
                with _bounded_connect():
                    self.ray.init(address=address, **options)
                self.started = True
        except JobError:
            raise
        except Exception as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise JobError(f"cannot start or reach {where}: {reason}; {fix}") from None
        finally:
            for sig, handler in handlers.items():
                if handler is not None:
                    signal.signal(sig, handler)

    def map(self, chunks):
        """Outcomes of each chunk, in order (see :func:`taskflow.workers.process_chunk`); two chunks in
        flight per actor, sent round robin."""
        pending = self.pending
        for number, chunk in enumerate(chunks):
            actor = self.actors[number % len(self.actors)]
            pending.append((number, chunk, actor.run.remote(chunk, self.source)))
            if len(pending) >= 2 * len(self.actors):
                yield self._answer(*pending.popleft())
        while pending:
            yield self._answer(*pending.popleft())

    def _answer(self, number: int, chunk, ref):
        first = number < len(self.actors)     # its actor starts (loads the model) before answering
        timeout = None if self.chunk_timeout is None else self.chunk_timeout + (self.startup_timeout if first else 0)
        lines = f"lines {chunk[0].line}-{chunk[-1].line} of {self.source}"
        try:
            pid, outcomes = self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.GetTimeoutError:
            raise WorkerError(f"a Ray actor gave no answer for the records at {lines} in {timeout:g} s; the records "
                              "before them are saved: rerun with --resume (resume=True)") from None
        except self.ray.exceptions.RayError as exc:
            raise WorkerError(f"a Ray actor failed on the records at {lines}:\n{str(exc).rstrip()}\nThe records "
                              "before them are saved; rerun with --resume (resume=True) once the cause is fixed") from None
        slot = number % len(self.actors)
        if self.pids[slot] != pid:   # Ray started the actor again, and ran its chunks again
            self.faults.append(f"Ray actor {slot + 1}: its process {self.pids[slot]} ended and Ray started "
                               f"another ({pid}), which ran the records up to {lines} again")
            logger.warning(self.faults[-1])
            self.pids[slot] = pid
        return outcomes

    def close(self) -> list[str]:
        self.abort()
        return self.faults

    def abort(self) -> None:
        # Chunks still queued are cancelled first: an actor killed with them queued has Ray retry them (and say so).
        for _, _, ref in self.pending:
            with contextlib.suppress(Exception):
                self.ray.cancel(ref)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        self.actors = []
        if self.started:
            self.ray.shutdown()
            self.started = False
            _reap(self.session_dir)   # what Ray's shutdown left running
        self._prints.close()   # Ray's driver threads are stopped (or the Ray is the caller's): stdout is theirs again


class _ChunkRunner:
    """One Ray actor of a job: its pipeline, then chunks of records."""

    def __init__(self, spec, threads: int, cwd: str, settings: dict[str, str]):
        if os.path.isdir(cwd):
            os.chdir(cwd)
        os.environ.update(settings)
        self.task = spec.build_task(default_threads=threads)

    def pid(self) -> int:
        return os.getpid()

    def run(self, records, source: str):
        return os.getpid(), process_chunk(self.task, records, source)


class EndpointPool:
    """The chunks of a job run against a server (:func:`taskflow.jobs.run_file` with a
    :class:`taskflow.Client` as its task): each chunk's readable records go to the server in requests
    of at most ``max_inputs`` items (and about 4 MiB of JSON), with the job's call-time ``parameters``
    and ``on_error="skip"``, so a record the server refuses gets its error in its place, named by
    file and line as a local job names it, and the others their results.

    One request at a time, in input order: the server batches and replicates its model, and a
    request that holds one call's items runs as a local job's chunk does.  The client retries a full
    queue (429), a loading or stopping server (503) and a connection that fails; a request still
    unanswered after that (the server gone, a 5xx) stops the job with one :class:`JobError`, the
    records before it saved for ``--resume``.
    """

    MAX_REQUEST_BYTES = 4 << 20      # half the server's default body limit (max_body_bytes, 8 MiB)

    def __init__(self, client, parameters: dict, *, source: str, max_inputs: int):
        self.client, self.parameters, self.source = client, dict(parameters), source
        self.max_inputs = max(1, max_inputs)

    def map(self, chunks: Iterable[list[Record]]) -> Iterator[list]:
        """Outcomes of each chunk, in order (as :func:`process_chunk` gives them)."""
        for chunk in chunks:
            yield self._run(chunk)

    def _run(self, records: Sequence[Record]) -> list[tuple[Record, Any, str | None]]:
        readable = [record for record in records if record.error is None]
        answers: list[Any] = []
        for part in self._requests(readable):
            where = f"the records at lines {part[0].line}-{part[-1].line} of {self.source}"
            try:
                results = self.client([record.item for record in part], on_error="skip", **self.parameters)
            except ServerError as exc:
                raise JobError(f"the server did not answer {where} ({exc}); the records before them are saved: "
                               "rerun with --resume (resume=True) once it answers again") from None
            if not isinstance(results, list) or len(results) != len(part):
                raise JobError(f"{self.client.url} answered {len(results) if isinstance(results, list) else 'no'} "
                               f"result(s) for the {len(part)} of {where}; the records before them are saved")
            answers += results
        answered = iter(answers)
        return [(record, None, record.error) if record.error is not None else self._outcome(record, next(answered))
                for record in records]

    def _requests(self, records: list[Record]) -> Iterator[list[Record]]:
        import json

        part: list[Record] = []
        size = 0
        for record in records:
            # As the client sends it (ASCII escapes): what the server's body limit counts.
            length = len(json.dumps(record.item, default=str)) + 2
            if part and (len(part) == self.max_inputs or size + length > self.MAX_REQUEST_BYTES):
                yield part
                part, size = [], 0
            part.append(record)
            size += length
        if part:
            yield part

    def _outcome(self, record: Record, result: Any) -> tuple[Record, Any, str | None]:
        if isinstance(result, dict) and set(result) == {"error", "error_type", "index"}:
            # The server numbers a bad item by its place in the request ("text #3 ..."); a job names
            # its file and line instead, as a local job does.
            message, index = str(result["error"]), result["index"]
            if isinstance(index, int):
                message = message.replace(f" #{index}", "", 1)
            return record, None, f"{self.source}:{record.line}: {message}"
        return record, result, None

    def close(self) -> list[str]:
        self.abort()
        return []

    def abort(self) -> None:
        pass    # nothing runs here between requests; the client is the caller's
