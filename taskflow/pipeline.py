"""``Taskflow``: the one class most users touch."""

from __future__ import annotations

import os
from typing import Any

from .errors import UnknownModelError
from .predictor import PredictorOptions
from .registry import get_task_class, task_names
from .packages import available_models, resolve

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
        cls = get_task_class(task)
        accepted = cls.option_names()
        unknown = sorted(set(task_options) - set(accepted))
        if unknown:
            raise TypeError(
                f"Taskflow({cls.name!r}) got unknown option(s) {', '.join(unknown)}; "
                f"{cls.name} accepts {', '.join(accepted) or 'no task options'}"
            )
        options = PredictorOptions(
            device=device, precision=precision, num_threads=num_threads, static=static, tensorrt=tensorrt
        )
        package_task, model_name = self.locate(cls, model, mode)
        package = resolve(package_task, model_name, task_path=task_path, home=home, offline=offline)
        self.task = cls(package, options=options, batch_size=batch_size, home=home, **task_options)

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

    def __call__(self, inputs: Any) -> list:
        """Results for ``inputs`` (one item or a list of items): a list with one
        result per item, in input order."""
        return self.task(inputs)

    def __repr__(self) -> str:
        m = self.task.manifest
        return (
            f"Taskflow(task={self.task.name!r}, model={m.name!r}, version={m.version!r}, "
            f"device={str(self.task.options.device)!r}, source={self.task.package.source!r})"
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
                "models": available_models(name),
                "default_model": cls.default_model,
                "modes": dict(cls.modes),
            })
        return rows
