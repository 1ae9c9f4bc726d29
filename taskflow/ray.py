"""Taskflow on Ray: past one machine.

A batch job with ``backend="ray"`` (the CLI's ``--backend ray``) runs its chunks on Ray actors
(:class:`taskflow.workers.RayPool`) and keeps everything else of a job.  For pipelines of one's
own on Ray Data, :func:`map_batches` here builds one Taskflow per Ray actor (its predictor stays
warm across batches).
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

import os
from typing import Any, Sequence

import numpy as np

from .errors import InvalidInputError
from .workers import import_ray as _ray

__all__ = ["TaskflowPredictor", "map_batches"]


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
