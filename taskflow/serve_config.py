"""What ``taskflow serve`` serves: its routes (:class:`ServeConfig`), each a task with its Taskflow
options and its batching and limits (:class:`TaskConfig`), from ``--config FILE`` and the command
line (:func:`route_config`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import OptionError

__all__ = ["TaskConfig", "ServeConfig", "route_config"]


@dataclass
class TaskConfig:
    """How one route serves a task.  ``options`` are the Taskflow's own (mode, model, task_path,
    neutral, batch_size...); the rest are the route's batching and limits."""

    task: str
    options: dict = field(default_factory=dict)
    replicas: int = 1               # copies of the model, each with its own inference loop
    max_batch_items: int = 256      # items of several requests run as one call, at most
    max_batch_chars: int = 65536    # and their chars, at most (a long text counts whole)
    # How long the oldest waiting request waits for others to join it.  0: a free copy takes what is
    # queued at once; under load the requests that arrive while a batch runs make the next one.
    max_wait_ms: float = 0.0
    max_queue_items: int = 4096     # items waiting, past which a request is answered 429
    max_inputs: int = 1024          # inputs in one request, past which it is a 422
    timeout_s: float = 60.0         # a request not answered by then is a 504

    _LIMITS = ("replicas", "max_batch_items", "max_batch_chars", "max_queue_items", "max_inputs")

    def __post_init__(self):
        for name in self._LIMITS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptionError(f"{self.task}: {name} must be an int >= 1, got {value!r}", name)
        for name in ("max_wait_ms", "timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                    name == "timeout_s" and value == 0):
                raise OptionError(f"{self.task}: {name} must be a number >= 0 (timeout_s > 0), got {value!r}", name)


@dataclass
class ServeConfig:
    routes: dict[str, TaskConfig]
    api_key: str | None = None
    max_body_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_file(cls, path: str | os.PathLike, tasks: Sequence[str] = (), **defaults) -> "ServeConfig":
        """Routes from a JSON file ``{"tasks": {route: {"task": ..., <Taskflow options>, <limits>}}}``
        (``task`` defaults to the route's name), plus ``tasks`` named on the command line."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise OptionError(f"--config {path}: cannot be read as JSON ({exc})", "config") from None
        if not isinstance(data, Mapping) or not isinstance(data.get("tasks", {}), Mapping):
            raise OptionError(f"--config {path}: expected {{\"tasks\": {{route: {{options}}}}}}", "config")
        unknown = sorted(set(data) - {"tasks", "api_key", "max_body_bytes"})
        if unknown:
            raise OptionError(f"--config {path}: unknown key(s) {', '.join(map(repr, unknown))}; keys: tasks, "
                              "api_key, max_body_bytes", unknown[0])
        routes = {name: route_config(name, settings, defaults) for name, settings in data.get("tasks", {}).items()}
        for name in tasks:
            routes.setdefault(name, route_config(name, {}, defaults))
        return cls(routes, api_key=data.get("api_key"), max_body_bytes=data.get("max_body_bytes", 8 * 1024 * 1024))


def route_config(route: str, settings: Any, defaults: Mapping[str, Any] | None = None) -> TaskConfig:
    """A route's :class:`TaskConfig` from its settings: the limits by name, the rest Taskflow's."""
    if not isinstance(settings, Mapping):
        raise OptionError(f"route {route!r}: its settings must be an object, got {type(settings).__name__}", route)
    settings = {**(defaults or {}), **settings}
    limits = {f.name for f in fields(TaskConfig)} - {"task", "options"}
    options = {k: v for k, v in settings.items() if k not in limits and k != "task"}
    return TaskConfig(task=settings.get("task", route), options=options,
                      **{k: v for k, v in settings.items() if k in limits})
