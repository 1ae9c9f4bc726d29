"""Taskflow on Ray: past one machine.

A batch job with ``backend="ray"`` (the CLI's ``--backend ray``) runs its chunks on Ray actors
(:class:`RayPool`) and keeps everything else of a job.  For pipelines of one's own on Ray Data,
:func:`map_batches` builds one Taskflow per Ray actor (its predictor stays warm across batches).
Needs ``pip install 'taskflow-nlp[ray]'``.

    >>> import ray, taskflow.ray                                    # doctest: +SKIP
    >>> ds = ray.data.read_text("reviews.txt")                      # doctest: +SKIP
    >>> out = taskflow.ray.map_batches(ds, "sentiment_analysis", concurrency=4)  # doctest: +SKIP
    >>> out.write_json("results/")                                  # doctest: +SKIP

or, with Ray's own API::

    ds.map_batches(taskflow.ray.TaskflowPredictor, fn_constructor_args=("sentiment_analysis",),
                   concurrency=4, batch_size=256, batch_format="numpy")   # Ray's rows per call
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Sequence

import numpy as np

from .errors import InvalidInputError

__all__ = ["TaskflowPredictor", "map_batches", "RayPool"]


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ImportError("the Ray backend needs Ray Data: pip install 'taskflow-nlp[ray]'") from exc
    return ray


def _column(values: list[Any]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


class TaskflowPredictor:
    """A callable class for ``Dataset.map_batches``: one Taskflow per actor.

    Input columns pass through; each result field becomes a column (a result
    field with the same name as an input column, such as ``text``, replaces it).
    """

    def __init__(self, task: str, *, fields: Sequence[str] | None = None, **options: Any):
        from .pipeline import Taskflow

        self.flow = Taskflow(task, **options)
        self.fields = tuple(fields or self.flow.task.input_fields)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [f for f in self.fields if f not in batch]
        if missing:
            raise InvalidInputError(f"the dataset has no column {missing}; it has {list(batch)}; pass fields=[...]")
        size = len(batch[self.fields[0]])
        if len(self.fields) == 1:
            items = [_plain(v) for v in batch[self.fields[0]]]
        else:
            items = [{f: _plain(batch[f][i]) for f in self.fields} for i in range(size)]
        results = self.flow(items)
        out = dict(batch)
        keys = list(dict.fromkeys(k for r in results for k in (r if isinstance(r, dict) else {"result": r})))
        for key in keys:
            out[key] = _column([r.get(key) if isinstance(r, dict) else r for r in results])
        return out


def _plain(value: Any) -> Any:
    # Ray hands numpy scalars (np.str_ and friends); tasks expect Python values.
    return value.item() if isinstance(value, np.generic) else value


def map_batches(dataset, task: str, *, fields: Sequence[str] | None = None, ray_batch_size: int = 256,
                concurrency: int = 1, num_cpus: float | None = None, num_gpus: float = 0, **options: Any):
    """``dataset.map_batches`` with one Taskflow per actor; returns the lazy mapped dataset.

    ``concurrency`` is the number of actors; each uses ``num_cpus`` CPUs (default: 1, or less
    where the actors would otherwise hold every CPU and starve Ray's readers) and one Paddle thread
    a CPU, or ``num_gpus`` GPUs (then pass ``device="gpu"``).
    ``ray_batch_size`` is how many rows Ray hands an actor per call; ``options`` go to
    ``Taskflow`` (so ``batch_size`` is the model's: units per forward pass).
    """
    ray = _ray()
    if num_cpus is None and not num_gpus:
        # Leave a CPU to Ray's own read and write tasks: actors holding every CPU starve them (a deadlock).
        total = ray.cluster_resources().get("CPU", 1) if ray.is_initialized() else os.cpu_count() or 1
        num_cpus = min(1.0, max(0.1, (total - 1) / concurrency)) if total > 1 else 0.5
    cpus = num_cpus if num_cpus is not None else 0
    if options.get("num_threads") is None:
        options["num_threads"] = max(1, int(cpus or 1))
    return dataset.map_batches(
        TaskflowPredictor,
        fn_constructor_args=(task,),
        fn_constructor_kwargs={"fields": fields, **options},
        batch_size=ray_batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=cpus,
        num_gpus=num_gpus,
    )


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
        ray = _ray()
        self.ray, self.source, self.started = ray, source, not ray.is_initialized()
        if self.started:
            # A local instance unless an address is given; no dashboard, nothing listening beyond loopback.
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        self.chunk_timeout, self.startup_timeout = chunk_timeout, startup_timeout
        # Each actor takes its share of the cluster's CPUs (no more than a node has), and as many Paddle
        # threads; more actors than CPUs share them, as local workers beyond the cores do, rather than
        # wait for CPUs that never come free.
        largest = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=1)
        share = ray.cluster_resources().get("CPU", 1) / workers
        cpus = min(int(largest), int(share)) if share >= 1 else share
        runner = ray.remote(num_cpus=cpus, max_restarts=1, max_task_retries=1)(_ChunkRunner)
        self.actors = [runner.remote(spec, max(1, int(cpus))) for _ in range(workers)]

    def map(self, chunks):
        """Outcomes of each chunk, in order (see :func:`taskflow.workers.process_chunk`); two chunks in
        flight per actor, sent round robin."""
        import collections

        self.pending = pending = collections.deque()
        for number, chunk in enumerate(chunks):
            actor = self.actors[number % len(self.actors)]
            pending.append((number, chunk, actor.run.remote(chunk, self.source)))
            if len(pending) >= 2 * len(self.actors):
                yield self._answer(*pending.popleft())
        while pending:
            yield self._answer(*pending.popleft())

    def _answer(self, number: int, chunk, ref):
        from .errors import WorkerError

        first = number < len(self.actors)     # its actor starts (loads the model) before answering
        timeout = None if self.chunk_timeout is None else self.chunk_timeout + (self.startup_timeout if first else 0)
        lines = f"lines {chunk[0].line}-{chunk[-1].line} of {self.source}"
        try:
            return self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.GetTimeoutError:
            raise WorkerError(f"a Ray actor gave no answer for the records at {lines} in {timeout:g} s; the records "
                              "before them are saved: rerun with --resume (resume=True)") from None
        except self.ray.exceptions.RayError as exc:
            raise WorkerError(f"a Ray actor failed on the records at {lines}:\n{str(exc).rstrip()}\nThe records "
                              "before them are saved; rerun with --resume (resume=True) once the cause is fixed") from None

    def close(self) -> list[str]:
        self.abort()
        return []

    def abort(self) -> None:
        # Chunks still queued are cancelled first: an actor killed with them queued has Ray retry them (and say so).
        for _, _, ref in getattr(self, "pending", ()):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        self.actors = []
        if self.started:
            self.ray.shutdown()
            self.started = False


class _ChunkRunner:
    """One Ray actor of a job: its pipeline, then chunks of records."""

    def __init__(self, spec, threads: int):
        self.task = spec.build_task(default_threads=threads)

    def run(self, records, source: str):
        from .workers import process_chunk

        return process_chunk(self.task, records, source)
