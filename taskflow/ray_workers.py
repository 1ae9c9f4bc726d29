"""The ``backend="ray"`` of a batch job: its chunks of records run by Ray actors (:class:`RayPool`),
each with its own pipeline, answered in input order as the local pool answers them.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import sys
import threading

from .errors import OptionError, WorkerError
from .ray_connect import connect, import_ray, reap
from .workers import process_chunk

__all__ = ["RayPool"]

logger = logging.getLogger("taskflow")


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
        # shutdown_timeout and call_site are taskflow.workers.WorkerPool's (the job passes both pools the
        # same options): Ray stops its own actors, and starts them from no script of the caller's.
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
        one is killed) or the cluster at ``address``: :func:`taskflow.ray_connect.connect`.  Ray
        puts signal handlers of its own in place: the job's (SIGTERM stops it, saved) are put back."""
        in_main = threading.current_thread() is threading.main_thread()
        stops = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
        handlers = {sig: signal.getsignal(sig) for sig in stops} if in_main else {}
        try:
            self.session_dir = connect(self.ray, address)
            self.started = True
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
            reap(self.session_dir)   # what Ray's shutdown left running
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

