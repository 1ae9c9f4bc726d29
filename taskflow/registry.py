"""Task name -> task class, with aliases.

Task packages register themselves with :func:`register_task` when they are
imported.  They are discovered, not listed: every sub-package of
``taskflow.tasks`` is a task package.  A look-up imports only the package
that registers the name asked for (found by reading the packages'
``@register_task(...)`` lines, without importing them), so ``import
taskflow`` pays for no task, and ``Taskflow("ner")`` for no unrelated one.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import pkgutil
import re
import threading
from pathlib import Path

from .errors import RegistryError, UnknownTaskError

__all__ = ["register_task", "get_task_class", "task_names", "canonical_name", "load_all_tasks",
           "import_task_module"]

# name or alias -> canonical name; canonical name -> class
_ALIASES: dict[str, str] = {}
_CLASSES: dict[str, type] = {}
_loaded = False
# Every import of task code goes through this one lock.  Python locks a module while it runs, and
# ``from taskflow.tasks.lexical_analysis.tagger import ...`` (knowledge_mining) locks the submodule
# before its package, the reverse of the package's own ``from .tagger import ...``: two threads
# building two tasks at once would each hold the lock the other waits for (a _DeadlockError).
# Reentrant, since a task package's import may look another task up.
_load_lock = threading.RLock()


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


def task_packages() -> list[str]:
    """Module names of the built-in task packages (each sub-package of ``taskflow.tasks``)."""
    import taskflow.tasks as tasks

    return [f"{tasks.__name__}.{info.name}" for info in pkgutil.iter_modules(tasks.__path__) if info.ispkg]


_DECORATOR = re.compile(r"^[ \t]*@(register_task\(.*\))[ \t]*$", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def _declared_names() -> dict[str, str]:
    """name or alias -> the task package whose ``@register_task(...)`` declares it, read from source."""
    import taskflow.tasks as tasks

    declared: dict[str, str] = {}
    for module in task_packages():
        source = Path(tasks.__path__[0]) / module.rpartition(".")[2] / "__init__.py"
        try:
            text = source.read_text(encoding="utf-8")
            # Parsing a whole task module costs a first call ~5 ms; its one-line decorators are enough.
            lines = _DECORATOR.findall(text)
            tree = (ast.parse("\n".join(lines)) if len(lines) == text.count("register_task(")
                    else ast.parse(text))
        except (OSError, SyntaxError):
            continue   # importing it (load_all_tasks) will say what is wrong
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_task":
                aliases = next((k.value for k in node.keywords if k.arg == "aliases"), None)
                try:
                    names = [ast.literal_eval(node.args[0]), *(ast.literal_eval(aliases) if aliases else ())]
                except (ValueError, IndexError):
                    continue   # not literal: load_all_tasks finds it
                for name in names:
                    declared.setdefault(name, module)
    return declared


def import_task_module(name: str):
    """Import a module of task code (a task package, a network's module, a submodule a task loads
    when it is built) under the registry's lock, so threads building tasks at once never import
    two task modules in opposite orders (see ``_load_lock``)."""
    with _load_lock:
        return importlib.import_module(name)


def _load_for(key: str) -> None:
    """Import the task package that registers ``key``, if one declares it."""
    module = _declared_names().get(key)
    if module is not None:
        # Even when ``key`` is registered already: its class is registered while the package is
        # still running, and the rest of the package (its networks) must be there before it is used.
        import_task_module(module)


def load_all_tasks() -> None:
    """Import every built-in task package (for listings, and names nothing declares literally)."""
    global _loaded
    with _load_lock:
        if not _loaded:
            for module in task_packages():
                import_task_module(module)
            _loaded = True


def canonical_name(name: str) -> str:
    """The registered name for ``name`` or one of its aliases."""
    if not isinstance(name, str):
        raise UnknownTaskError(f"task must be a str naming a task, got {type(name).__name__} ({name!r})")
    key = name.strip().lower().replace("-", "_")
    _load_for(key)
    if key not in _ALIASES:
        load_all_tasks()
    if key in _ALIASES:
        return _ALIASES[key]
    if key in NOT_PROVIDED:
        raise UnknownTaskError(f"PaddleNLP's task {name!r} is not provided here: taskflow runs only models it trains "
                               f"from public data. {NOT_PROVIDED[key]}Available tasks: {', '.join(sorted(_CLASSES))}")
    close = difflib.get_close_matches(key, list(_ALIASES), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownTaskError(
        f"unknown task {name!r}.{hint} Available tasks: {', '.join(sorted(_CLASSES))}"
    )


# PaddleNLP Taskflow tasks that taskflow does not have, so that a user porting code hears that
# rather than a near miss ("text_summarization": did you mean 'text_similarity'?).
NOT_PROVIDED = {
    name: "" for name in ("text_summarization", "information_extraction", "dialogue", "poetry_generation",
                          "question_generation", "text_correction", "dependency_parsing", "text_to_image",
                          "document_intelligence", "zero_shot_text_classification", "feature_extraction",
                          "code_generation")
}
NOT_PROVIDED["question_answering"] = ("PaddleNLP's open-domain question answering has no context; for answers "
                                      "found in a context you give, use 'reading_comprehension'. ")


def get_task_class(name: str) -> type:
    """The task class registered under ``name`` (or an alias of it)."""
    return _CLASSES[canonical_name(name)]


def task_names() -> list[str]:
    """Sorted canonical names of every registered task."""
    load_all_tasks()
    return sorted(_CLASSES)
