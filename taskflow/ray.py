"""Taskflow on Ray Data: past one machine.

One Taskflow is built per Ray actor (its predictor stays warm across
batches); Ray's own readers and writers split and gather the data, so there is
no hand-written sharding here.  Needs ``pip install 'taskflow-nlp[ray]'``.

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
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .errors import InvalidInputError

__all__ = ["TaskflowPredictor", "map_batches", "read_dataset", "run_file"]


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

    ``concurrency`` is the number of actors; each uses ``num_cpus`` CPUs (default 1,
    and as many Paddle threads) or ``num_gpus`` GPUs (then pass ``device="gpu"``).
    ``ray_batch_size`` is how many rows Ray hands an actor per call; ``options`` go to
    ``Taskflow`` (so ``batch_size`` is the model's: units per forward pass).
    """
    ray = _ray()
    cpus = num_cpus if num_cpus is not None else (0 if num_gpus else 1)
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


def read_dataset(path: str | os.PathLike):
    """A Ray dataset from a .txt (column ``text``), .jsonl, .csv or .tsv file, with Ray's readers."""
    ray = _ray()
    path = str(path)
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return ray.data.read_json(path, lines=True) if suffix != ".json" else ray.data.read_json(path)
    if suffix == ".csv":
        return ray.data.read_csv(path)
    if suffix == ".tsv":
        import pyarrow.csv

        return ray.data.read_csv(path, parse_options=pyarrow.csv.ParseOptions(delimiter="\t"))
    return ray.data.read_text(path)


@contextlib.contextmanager
def _ordered():
    """Keep rows in input order for this job, restoring Ray's setting afterwards."""
    context = _ray().data.DataContext.get_current()
    previous = context.execution_options.preserve_order
    context.execution_options.preserve_order = True
    try:
        yield
    finally:
        context.execution_options.preserve_order = previous


def run_file(task: str, input_path: str | os.PathLike, output_dir: str | os.PathLike, *,
             fields: Sequence[str] | None = None, address: str | None = None, concurrency: int = 1,
             ray_batch_size: int = 256, **options: Any) -> None:
    """The CLI's ``--backend ray``: read with Ray, map with Taskflow actors, ``write_json`` into ``output_dir``.
    ``options`` (``batch_size`` included) go to each actor's ``Taskflow``."""
    ray = _ray()
    if not ray.is_initialized():
        # A local instance unless an address is given; no dashboard, nothing listening beyond loopback.
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    # Leave one CPU to Ray's read and write tasks: actors holding every CPU starve them (a deadlock).
    total = ray.cluster_resources().get("CPU", 1)
    cpus = min(1.0, max(0.1, (total - 1) / concurrency)) if total > 1 else 0.5
    if options.get("num_threads") is None:
        options["num_threads"] = 1
    with _ordered():
        dataset = read_dataset(input_path)
        mapped = map_batches(dataset, task, fields=fields, concurrency=concurrency, num_cpus=cpus,
                             ray_batch_size=ray_batch_size, **options)
        mapped.write_json(str(output_dir))
