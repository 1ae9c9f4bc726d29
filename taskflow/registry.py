"""Task name -> task class, with aliases.

Task packages register themselves with :func:`register_task` when they are
imported.  They are imported lazily, on the first look-up, so that
``import taskflow`` does not pay for any task (nor for Paddle).
"""

from __future__ import annotations

import difflib
import importlib
import threading

from .errors import RegistryError, UnknownTaskError

__all__ = ["register_task", "get_task_class", "task_names", "canonical_name"]

# name or alias -> canonical name; canonical name -> class
_ALIASES: dict[str, str] = {}
_CLASSES: dict[str, type] = {}
_loaded = False
_load_lock = threading.Lock()


def register_task(name: str, *, aliases: tuple[str, ...] | list[str] = ()):
    """Class decorator that registers a task under ``name`` and its aliases.

    Registering the same class again is a no-op (a module reload); registering
    a *different* class under a taken name or alias raises :class:`RegistryError`.

    >>> from taskflow import Task, register_task
    >>> @register_task("my_task", aliases=["mine"])   # doctest: +SKIP
    ... class MyTask(Task): ...
    """

    def decorate(cls: type) -> type:
        for key in (name, *aliases):
            owner = _ALIASES.get(key)
            if owner is not None:
                existing = _CLASSES[owner]
                if _same_class(existing, cls):
                    continue
                raise RegistryError(
                    f"cannot register {cls.__module__}.{cls.__qualname__} as {key!r}: "
                    f"that name already belongs to {existing.__module__}.{existing.__qualname__}; "
                    "choose another name or alias"
                )
        for key in (name, *aliases):
            _ALIASES[key] = name
        _CLASSES[name] = cls
        cls.name = name
        cls.aliases = tuple(aliases)
        return cls

    return decorate


def _same_class(a: type, b: type) -> bool:
    # A re-imported module produces a new class object with the same identity.
    return a is b or (a.__module__ == b.__module__ and a.__qualname__ == b.__qualname__)


def _load_builtin_tasks() -> None:
    global _loaded
    with _load_lock:
        if not _loaded:
            importlib.import_module("taskflow.tasks")
            _loaded = True


def canonical_name(name: str) -> str:
    """The registered name for ``name`` or one of its aliases."""
    if not isinstance(name, str):
        raise UnknownTaskError(f"task must be a str naming a task, got {type(name).__name__} ({name!r})")
    _load_builtin_tasks()
    key = name.strip().lower().replace("-", "_")
    if key in _ALIASES:
        return _ALIASES[key]
    close = difflib.get_close_matches(key, list(_ALIASES), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownTaskError(
        f"unknown task {name!r}.{hint} Available tasks: {', '.join(sorted(_CLASSES))}"
    )


def get_task_class(name: str) -> type:
    """The task class registered under ``name`` (or an alias of it)."""
    return _CLASSES[canonical_name(name)]


def task_names() -> list[str]:
    """Sorted canonical names of every registered task."""
    _load_builtin_tasks()
    return sorted(_CLASSES)
