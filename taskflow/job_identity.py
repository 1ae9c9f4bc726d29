"""What a job's output depends on, which its checkpoint pins so that a resume with anything else is
refused: :func:`job_identity` for a local model, :func:`endpoint_identity` for a server's, whose
side of it is :func:`served_model` (what ``GET /v1/tasks`` says of a route's model).
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any, Mapping

from .predictor import precision_in_effect
from .readers import InputFile

__all__ = ["job_identity", "endpoint_identity", "served_model"]


def job_identity(task, spec, source: InputFile) -> dict:
    """What a job's output depends on, pinned in its checkpoint: a resume with anything else is refused.

    The task, the model package's fingerprint (its manifest and the packages it requires), the
    task's own options (from ``spec``, a ``Taskflow.spec``; a file an option names, such as a
    user_dict, by its content), the fields read, the encoding, the id fields, and the input's
    resolved path (its content is pinned by the checkpoint, see :mod:`taskflow.checkpoint`).
    So are taskflow's version and how the numbers are computed: device, precision, the static or
    dynamic graph, TensorRT.  Left out: batch size, threads, workers, backend and chunk size, which
    move scores only in their last digits (up to 1e-7 measured: a batch is summed in another order),
    ``on_error`` and ``max_record_bytes`` (raising the limit after a long line stopped the job is the
    documented fix).
    """
    from . import __version__

    model = task.model
    options = model.options
    return {
        "task": task.name,
        "taskflow": __version__,
        "model": {"package": f"{model.task}/{model.name} {model.version}", "fingerprint": model.fingerprint},
        "compute": _compute(options),
        "options": _task_options(task, spec),
        "fields": list(source.fields),
        "encoding": source.encoding,
        "id_fields": None if source.carry is None else list(source.carry),
        "input": str(source.path.resolve()),
    }


def _compute(options) -> dict:
    """How a model's numbers are computed (its ``PredictorOptions``), as an identity pins it."""
    return {"device": str(options.device), "precision": precision_in_effect(options),
            "static": options.static, "tensorrt": options.tensorrt}


def served_model(task, spec) -> dict:
    """What a server says of the model behind a route (``GET /v1/tasks``), for the jobs run against
    it to pin (:func:`endpoint_identity`): the package and its fingerprint, how the numbers are
    computed and the task's options, as :func:`job_identity` pins a local model's, but a file an
    option names by its sha256 alone (a server does not show its paths)."""
    model = task.model
    return {"package": f"{model.task}/{model.name} {model.version}", "fingerprint": model.fingerprint,
            "compute": _compute(model.options), "options": _without_paths(_task_options(task, spec))}


def _without_paths(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"file", "sha256"}:
            return {"sha256": value["sha256"]}
        return {k: _without_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    return value


def endpoint_identity(route: Mapping[str, Any], parameters: Mapping[str, Any] | None, source: InputFile) -> dict:
    """What the output of a job run against a server depends on, pinned in its checkpoint: what the
    server says of the route (``route``, from ``GET /v1/tasks``: its task, model package, version and
    fingerprint, how it computes, the options it was started with, its taskflow version), the job's
    call-time ``parameters`` over the route's options, and the fields, encoding, id fields and input
    as :func:`job_identity` has them.  The URL and the route's name are left out: the same model
    behind another address continues the job.  A server that does not say its fingerprint is
    compared by package and version alone."""
    from . import __version__

    options = dict(route.get("options") or {})
    options.update({name: _pinned(value) for name, value in (parameters or {}).items()})
    package = route.get("package") or f"{route.get('task')}/{route.get('model')} {route.get('version')}"
    return {
        "task": route.get("task"),
        "taskflow": __version__,
        "server": route.get("taskflow"),
        "model": {"package": package, "fingerprint": route.get("fingerprint")},
        "compute": route.get("compute"),
        "options": options,
        "fields": list(source.fields),
        "encoding": source.encoding,
        "id_fields": None if source.carry is None else list(source.carry),
        "input": str(source.path.resolve()),
    }


def _task_options(task, spec) -> dict | None:
    """The task's own options, defaults filled in (so naming a default changes nothing); None
    without a spec (``run_file`` called on a bare task: its options cannot be read back)."""
    if spec is None:
        return None
    given: Mapping[str, Any] = getattr(spec, "options", {})
    return {name: _pinned(given.get(name, default)) for name, default in type(task).option_defaults().items()}


def _pinned(value: Any) -> Any:
    """An option's value as JSON that changes when its effect can: a file by its path and sha256."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (str, os.PathLike)):
        try:
            is_file = (isinstance(value, os.PathLike) or len(value) < 4096) and Path(value).is_file()
        except (OSError, ValueError):
            is_file = False
        if not is_file:
            return os.fspath(value)
        from .files import sha256_file

        return {"file": str(Path(value).resolve()), "sha256": sha256_file(value)}
    if isinstance(value, Mapping):
        return {str(k): _pinned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_pinned(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_pinned(v) for v in value), key=repr)
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return _pinned(value.item())
    # An object (a TermTree, a function): only its type can be told apart.
    return f"<{type(value).__module__}.{type(value).__qualname__}>"
