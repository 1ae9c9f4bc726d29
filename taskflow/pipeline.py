"""``Taskflow``: the one class most users touch."""

from __future__ import annotations

import functools
import os
from typing import Any, Iterable, Iterator, Sequence

from .display import Results
from .errors import OptionError, UnknownModelError
from .model import Model
from .predictor import PredictorOptions
from .registry import get_task_class, task_names
from .packages import available_models

__all__ = ["Taskflow"]


class Taskflow:
    """Run a Chinese NLP task end to end: ``Taskflow(task)(inputs)``.

    Args:
        task: a task name or alias, see :meth:`Taskflow.tasks`.
        model: which of the task's models to run (default: the task's default);
            ``"other_task/name"`` names a model packaged under another task.
        mode: a named preset of a task that maps to a model (e.g. ner's ``fast``).
        device: ``"cpu"`` (default), ``"gpu"`` or ``"gpu:<id>"`` (needs paddlepaddle-gpu).
        batch_size: units per forward pass (default: the task's own).
        precision: ``"fp32"`` or ``"fp16"`` (GPU only).
        num_threads: CPU threads for Paddle Inference (default: all cores).
        static: ``False`` runs the dynamic graph instead of Paddle Inference, for debugging.
        tensorrt: run TensorRT subgraphs (GPU only).
        task_path: directory of your own trained package (overrides ``model``).
        home: cache root (default ``$PPNLP_HOME`` or ``~/.paddlenlp``).
        offline: never use the network (default ``$PPNLP_OFFLINE``).
        **task_options: options of the task itself; unknown names raise ``TypeError``.

    >>> from taskflow import Taskflow
    >>> Taskflow("sentiment_analysis")("这家酒店很干净")   # doctest: +SKIP
    [{'text': '这家酒店很干净', 'label': 'positive', 'score': 0.98}]
    """

    def __init__(
        self,
        task: str,
        *,
        model: str | None = None,
        mode: str | None = None,
        device: str = "cpu",
        batch_size: int | None = None,
        precision: str = "fp32",
        num_threads: int | None = None,
        static: bool = True,
        tensorrt: bool = False,
        task_path: str | os.PathLike | None = None,
        home: str | os.PathLike | None = None,
        offline: bool | None = None,
        **task_options: Any,
    ):
        # Enough to rebuild this pipeline in a worker process (see predict_file).
        self._config = {
            "task": task, "model": model, "mode": mode, "device": device, "batch_size": batch_size,
            "precision": precision, "num_threads": num_threads, "static": static, "tensorrt": tensorrt,
            "task_path": None if task_path is None else str(task_path),
            "home": None if home is None else str(home), "offline": offline, **task_options,
        }
        registered = get_task_class(task)
        package_task, model_name = self.locate(registered, model, mode)
        cls = registered.class_for(package_task)
        _check_option_names(cls, task_options)
        options = PredictorOptions(
            device=device, precision=precision, num_threads=num_threads, static=static, tensorrt=tensorrt
        )
        loaded = Model.load(package_task, model_name, task_path=task_path, home=home, offline=offline, options=options,
                            default_type=cls.network_type, default_normalization=cls.default_normalization)
        self.task = cls(loaded, batch_size=batch_size, **task_options)

    @staticmethod
    def locate(cls, model: str | None = None, mode: str | None = None) -> tuple[str, str]:
        """``(package task, model name)`` for a task class and the user's model/mode choice.

        ``"other_task/name"`` runs a model packaged under another task's folder,
        so thin tasks (e.g. word segmentation over the lexical model) share one package.
        """
        package_task, _, name = Taskflow._pick_model(cls, model, mode).rpartition("/")
        return package_task or cls.name, name

    @staticmethod
    def _pick_model(cls, model: str | None, mode: str | None) -> str:
        if mode is not None:
            if mode not in cls.modes:
                raise UnknownModelError(
                    f"task {cls.name!r} has no mode {mode!r}; modes: {', '.join(cls.modes) or 'none'}"
                )
            if model is not None and model != cls.modes[mode]:
                raise UnknownModelError(f"mode {mode!r} runs model {cls.modes[mode]!r}; do not also pass model={model!r}")
            return cls.modes[mode]
        return model or cls.default_model

    def __call__(self, inputs: Any) -> Results:
        """Results for ``inputs`` (one item or a list of items): a list with one
        result per item, in input order (it renders as HTML in notebooks)."""
        items = self.task.check_items(inputs)
        return Results(self.task.run_items(items), render=functools.partial(self.task.render_html, items=items))

    def stream(self, items: Iterable[Any], *, chunk_size: int | None = None) -> Iterator[Any]:
        """Results for any iterable of items, lazily and in order, a chunk at a time.

        A bad item raises a typed error whose index counts from the start of the stream.

        >>> for result in Taskflow("sentiment_analysis").stream(open("reviews.txt")):  # doctest: +SKIP
        ...     print(result["label"])
        """
        from .jobs import iter_chunks

        task = self.task
        offset = 0
        for chunk in iter_chunks(items, chunk_size or max(64, task.batch_size * 8)):
            checked = [task.check_item(item, offset + i) for i, item in enumerate(chunk)]
            yield from task.run_items(checked)
            offset += len(chunk)

    def predict_file(
        self,
        input_path: str | os.PathLike,
        output_path: str | os.PathLike,
        *,
        fields: Sequence[str] | None = None,
        workers: int = 1,
        resume: bool = False,
        on_error: str = "raise",
        errors_path: str | os.PathLike | None = None,
        chunk_size: int | None = None,
        progress: bool | None = None,
    ):
        """Run over a .txt/.jsonl/.csv/.tsv file into JSON lines, as the CLI does.

        Streams (memory independent of file size), keeps input order, writes the
        output atomically, and with ``resume=True`` continues an interrupted job.
        ``workers=N`` runs N processes, each with its own predictor.
        ``on_error="skip"`` records bad lines in ``<output>.errors.jsonl``
        instead of stopping.  Returns a :class:`taskflow.jobs.JobSummary`.
        """
        from .jobs import run_file

        return run_file(
            self.task, input_path, output_path, fields=fields, workers=workers, worker_config=self._config,
            resume=resume, on_error=on_error, errors_path=errors_path, chunk_size=chunk_size, progress=progress,
        )

    @property
    def model(self) -> Model:
        """The model this pipeline runs (its manifest, files and predictor)."""
        return self.task.model

    def __repr__(self) -> str:
        m = self.task.model
        return (
            f"Taskflow(task={self.task.name!r}, model={m.name!r}, version={m.version!r}, "
            f"device={str(m.options.device)!r}, source={m.source!r})"
        )

    @staticmethod
    def tasks() -> list[dict]:
        """Every registered task with its aliases, models, default model and modes.

        >>> [t["task"] for t in Taskflow.tasks()]   # doctest: +SKIP
        ['sentiment_analysis']
        """
        rows = []
        for name in task_names():
            cls = get_task_class(name)
            rows.append({
                "task": name,
                "aliases": list(cls.aliases),
                "models": available_models(name) + _shared_models(cls),
                "default_model": cls.default_model,
                "modes": dict(cls.modes),
            })
        return rows


def _shared_models(cls) -> list[str]:
    """The ``"other_task/name"`` models a task's default or modes name, if they ship."""
    found = []
    for ref in (cls.default_model, *cls.modes.values()):
        package_task, _, name = ref.rpartition("/")
        if package_task and ref not in found and name in available_models(package_task):
            found.append(ref)
    return found


def _check_option_names(cls, task_options: dict) -> None:
    """Unknown task options are an :class:`OptionError` naming what the task accepts (and the
    closest name, for a typo), raised before any model is resolved or downloaded."""
    import difflib

    accepted = cls.option_names()
    for name in sorted(set(task_options) - set(accepted)):
        close = difflib.get_close_matches(name, accepted, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise OptionError(
            f"Taskflow({cls.name!r}) got an unknown option {name!r}.{hint} {cls.name} accepts "
            f"{', '.join(accepted) or 'no task options'} (and Taskflow's own: model, mode, device, batch_size, "
            "precision, num_threads, static, tensorrt, task_path, home, offline)", name)
