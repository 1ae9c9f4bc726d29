"""Taskflow on Ray: past one machine.

A batch job with ``backend="ray"`` (the CLI's ``--backend ray``) runs its chunks on Ray actors
(:class:`taskflow.ray_workers.RayPool`) and keeps everything else of a job.  For pipelines of one's
own on Ray Data, :func:`map_batches` here builds one Taskflow per Ray actor (its predictor stays
warm across batches).
Needs ``pip install 'taskflow-nlp[ray]'``.

    >>> import ray, taskflow.ray                                    # doctest: +SKIP
    >>> taskflow.ray.init_local()          # or ray.init(address=...) for a cluster   # doctest: +SKIP
    >>> ds = ray.data.read_text("reviews.txt")                      # doctest: +SKIP
    >>> out = taskflow.ray.map_batches(ds, "sentiment_analysis", concurrency=4,
    ...                                on_error="skip")             # doctest: +SKIP
    >>> out.write_json("results/")                                  # doctest: +SKIP

``init_local`` starts a Ray on this machine that listens on 127.0.0.1 only (a plain ``ray.init()``
listens on every interface, and Ray's ports take work from anyone who reaches them), and leaves
none of its processes behind if this one is killed.

or, with Ray's own API::

    ds.map_batches(taskflow.ray.TaskflowPredictor, fn_constructor_args=("sentiment_analysis",),
                   concurrency=4, batch_size=256, batch_format="numpy")   # Ray's rows per call
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Sequence

import numpy as np

from .errors import InvalidInputError
from .runner import ITEM_ERRORS, check_on_error
from .ray_connect import import_ray as _ray
from .ray_connect import init_local_ray

__all__ = ["TaskflowPredictor", "map_batches", "init_local"]


def init_local(**options: Any):
    """Start Ray on this machine, listening on 127.0.0.1 only, whose processes end when this one
    ends (even killed); ``options`` go to ``ray.init`` (``num_cpus=``, ``include_dashboard=``...).
    Returns ``ray.init``'s context."""
    return init_local_ray(_ray(), **options)


def _column(values: list[Any]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


class TaskflowPredictor:
    """A callable class for ``Dataset.map_batches``: one Taskflow per actor.

    Input columns pass through; each result field becomes a column (a result
    field with the same name as an input column, such as ``text``, replaces it).
    A bad row (an empty text...) stops the dataset with its
    :class:`~taskflow.errors.InvalidInputError` (``on_error="raise"``), or with
    ``on_error="skip"`` gets its message in an ``error`` column (and its type in
    ``error_type``) and no result, while every other row is answered; with
    ``"skip"`` every row has both columns (``None`` where it was answered).
    """

    def __init__(self, task: str, *, fields: Sequence[str] | None = None, on_error: str = "raise", **options: Any):
        from .pipeline import Taskflow

        self.on_error = check_on_error(on_error)
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
        try:
            results = list(self.flow(items, on_error=self.on_error))
        except ITEM_ERRORS as exc:
            # The index in the message counts from the start of a batch Ray cut, so the row is named by its values.
            where = (f" ({_shown({f: batch[f][exc.index] for f in self.fields})})"
                     if isinstance(exc.index, int) and 0 <= exc.index < size else "")
            raise type(exc)(f"a row of the dataset{where}: {exc}; map_batches(..., on_error='skip') answers every "
                            "other row and gives this one an error column instead", exc.index) from None
        out = dict(batch)
        if self.on_error == "skip":
            bad = [_is_error_record(r) for r in results]
            out["error"] = _column([r["error"] if b else None for r, b in zip(results, bad)])
            out["error_type"] = _column([r["error_type"] if b else None for r, b in zip(results, bad)])
            results = [None if b else r for r, b in zip(results, bad)]
        keys = list(dict.fromkeys(k for r in results if r is not None
                                  for k in (r if isinstance(r, dict) else {"result": r})))
        for key in keys:
            kept = batch.get(key)   # a row without a result keeps its input in a column a result field replaces
            out[key] = _column([(None if kept is None else _plain(kept[i])) if r is None
                                else r.get(key) if isinstance(r, dict) else r for i, r in enumerate(results)])
        return out


def _is_error_record(result: Any) -> bool:
    return isinstance(result, dict) and set(result) == {"error", "error_type", "index"}


def _shown(row: dict[str, Any]) -> str:
    return ", ".join(f"{name}={_plain(value)!r:.80}" for name, value in row.items())


def _plain(value: Any) -> Any:
    # Ray hands numpy scalars (np.str_ and friends); tasks expect Python values.
    return value.item() if isinstance(value, np.generic) else value


def map_batches(dataset, task: str, *, fields: Sequence[str] | None = None, on_error: str = "raise",
                ray_batch_size: int = 256, concurrency: int = 1, num_cpus: float | None = None, num_gpus: float = 0,
                **options: Any):
    """``dataset.map_batches`` with one Taskflow per actor; returns the lazy mapped dataset.

    ``on_error="skip"`` answers every row but a bad one (an empty text...), which gets an
    ``error`` and an ``error_type`` column instead (see :class:`TaskflowPredictor`); with
    ``"raise"`` (the default) the first bad row stops the dataset.

    ``concurrency`` is the number of actors; each uses ``num_cpus`` CPUs (default: 1, or less
    where the actors would otherwise hold every CPU and starve Ray's readers) and one Paddle thread
    a CPU, or ``num_gpus`` GPUs (then pass ``device="gpu"``).
    ``ray_batch_size`` is how many rows Ray hands an actor per call; ``options`` go to
    ``Taskflow`` (so ``batch_size`` is the model's: units per forward pass).
    """
    check_on_error(on_error)
    ray = _ray()
    if num_cpus is None and not num_gpus:
        # Leave a CPU to Ray's own read and write tasks: actors holding every CPU starve them (a deadlock).
        total = ray.cluster_resources().get("CPU", 1) if ray.is_initialized() else os.cpu_count() or 1
        num_cpus = min(1.0, max(0.1, (total - 1) / concurrency)) if total > 1 else 0.5
    cpus = num_cpus if num_cpus is not None else 0
    if options.get("num_threads") is None:
        options["num_threads"] = max(1, int(cpus or 1))
    mapped = dataset.map_batches(
        TaskflowPredictor,
        fn_constructor_args=(task,),
        fn_constructor_kwargs={"fields": fields, "on_error": on_error, **options},
        batch_size=ray_batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency),
        num_cpus=cpus,
        num_gpus=num_gpus,
    )
    # A bad row's InvalidInputError reaches the caller as itself (Ray's RayTaskError that is also an
    # InvalidInputError), not wrapped in a UserCodeException: a setting of this dataset's DataContext,
    # which its datasets share from the read on, not of Ray's current one.
    with contextlib.suppress(AttributeError):
        mapped.context.raise_original_map_exception = True
    return mapped
