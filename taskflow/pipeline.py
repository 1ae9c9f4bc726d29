"""``Taskflow``: the one class most users touch."""

from __future__ import annotations

import difflib
import functools
import os
import textwrap
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from .display import Results
from .errors import ModelNotFoundError, OptionError, UnknownModelError
from .files import home_dir
from .model import Model
from .predictor import PredictorOptions
from .registry import get_task_class, task_names
from .runner import Runner, check_on_error
from . import packages
from .packages import available_models, is_offline, pinned_manifest

__all__ = ["Taskflow", "PipelineSpec"]


@dataclass(frozen=True)
class PipelineSpec:
    """A Taskflow's options: enough to build the same pipeline in another process (a batch job's
    workers), and picklable, as the pipeline with its predictor is not.  The jobs layer receives
    one and calls :meth:`build_task`, so it never imports the pipeline."""

    options: Mapping[str, Any]

    def build_task(self, *, default_threads: int | None = None):
        """The task of a new pipeline; ``default_threads`` where the options leave Paddle's threads open."""
        options = dict(self.options)
        if options.get("num_threads") is None:
            options["num_threads"] = default_threads
        return Taskflow(**options).task


class Taskflow:
    """Run a Chinese NLP task end to end: ``Taskflow(task)(inputs)``.

    Args:
        task: a task name or alias, see :meth:`Taskflow.tasks`.
        model: which of the task's models to run (default: the task's default);
            ``"other_task/name"`` names a model packaged under another task.
        mode: a named preset of a task that maps to a model (e.g. ner's ``fast``).
        device: ``"cpu"`` (the default, None), ``"gpu"`` or ``"gpu:<id>"`` (needs paddlepaddle-gpu).
        batch_size: units per forward pass (default: the task's own).
        precision: ``"auto"`` (the default: fp32, but the pretrained encoders, checked in bf16
            on their dev splits, in bf16 on a CPU with AVX512-BF16 or AMX), ``"fp32"``,
            ``"bf16"`` (every network on oneDNN; a CPU with AVX512-BF16 or AMX) or ``"fp16"``
            (GPU only).
        num_threads: CPU threads for Paddle Inference (default: all cores).
        static: ``False`` runs the dynamic graph instead of Paddle Inference, for debugging.
        tensorrt: run TensorRT subgraphs (GPU only).
        task_path: directory of your own trained package (it runs in place of ``model``;
            ``mode`` then only says how a task reads it where its modes read different kinds
            of package, as ner's ``accurate`` reads a knowledge_mining one).
        home: cache root (default ``$PPNLP_HOME`` or ``~/.paddlenlp``).
        offline: never use the network (default ``$PPNLP_OFFLINE``).
        **task_options: options of the task itself; a wrong one is an ``OptionError``.

    PaddleNLP's names are accepted too: ``home_path`` for ``home``, ``device_id``
    (``-1`` for the CPU, ``N`` for ``"gpu:N"``) for ``device``.

    >>> from taskflow import Taskflow
    >>> Taskflow("sentiment_analysis")("这家酒店很干净，服务也好")   # doctest: +SKIP
    [{'text': '这家酒店很干净，服务也好', 'label': 'positive', 'score': 0.878...}]
    """

    def __init__(
        self,
        task: str,
        *,
        model: str | None = None,
        mode: str | None = None,
        device: str | None = None,
        batch_size: int | None = None,
        precision: str = "auto",
        num_threads: int | None = None,
        static: bool = True,
        tensorrt: bool = False,
        task_path: str | os.PathLike | None = None,
        home: str | os.PathLike | None = None,
        offline: bool | None = None,
        **task_options: Any,
    ):
        home, device = _paddlenlp_names(task_options, home, device)
        _check_choices(mode=mode, task_path=task_path, home=home, offline=offline)
        self.spec = PipelineSpec({
            "task": task, "model": model, "mode": mode, "device": device, "batch_size": batch_size,
            "precision": precision, "num_threads": num_threads, "static": static, "tensorrt": tensorrt,
            "task_path": None if task_path is None else str(task_path),
            "home": None if home is None else str(home), "offline": offline, **task_options,
        })
        registered = get_task_class(task)
        package_task, model_name = self.locate(registered, model, mode, own_package=task_path is not None)
        if model is None and mode is None and task_path is None:
            model_name = registered.model_for_options(model_name, task_options)
        cls = registered.class_for(package_task)
        _check_option_names(cls, task_options, registered)
        options = PredictorOptions(
            device=device, precision=precision, num_threads=num_threads, static=static, tensorrt=tensorrt
        )
        loaded = Model.load(package_task, model_name, task_path=task_path, home=home, offline=offline, options=options)
        self.task = cls(loaded, batch_size=batch_size, **task_options)

    @staticmethod
    def locate(cls, model: str | None = None, mode: str | None = None, *,
               own_package: bool = False) -> tuple[str, str]:
        """``(package task, model name)`` for a task class and the user's model/mode choice.

        ``"other_task/name"`` runs a model packaged under another task's folder,
        so thin tasks (e.g. word segmentation over the lexical model) share one package.
        A task with no bundled model (text_classification) needs ``own_package`` (a task_path).
        """
        package_task, _, name = Taskflow._pick_model(cls, model, mode).rpartition("/")
        if not name and not own_package:
            raise ModelNotFoundError(
                f"task {cls.name!r} has no bundled model: it runs a model you train on your own labelled "
                f"data. Train one with `taskflow train {cls.name} --train train.csv --dev dev.csv "
                f"--text-field text --label-field label --out my_model/`, then pass task_path='my_model/' "
                "(--task-path my_model/ on the command line)")
        return package_task or cls.name, name

    @staticmethod
    def _pick_model(cls, model: str | None, mode: str | None) -> str:
        picked = _listed_model(cls, model) if model not in (None, "") else None
        if mode is not None:
            if mode not in cls.modes:
                raise UnknownModelError(
                    f"task {cls.name!r} has no mode {mode!r}; modes: {', '.join(cls.modes) or 'none'}."
                    f"{_did_you_mean(mode, cls.modes)}", "mode")
            if picked is not None and picked != cls.modes[mode]:
                raise UnknownModelError(f"mode {mode!r} runs model {cls.modes[mode]!r}; do not also pass model={model!r}",
                                        "model")
            return cls.modes[mode]
        return picked or cls.default_model

    def __call__(self, inputs: Any, *, on_error: str = "raise", **options: Any) -> Results:
        """Results for ``inputs`` (one item or a list of items): a list with one
        result per item, in input order (it renders as HTML in notebooks).  For
        word_segmentation and pos_tagging a single ``str`` gives its word list itself,
        as PaddleNLP does; a list of texts gives one word list per text.

        A bad item (wrong type, empty text...) raises a typed error naming its index
        (``on_error="raise"``, the default), or with ``on_error="skip"`` gets an error
        record in its place, ``{"error": message, "error_type": "InvalidInputError",
        "index": i}``, while every other item gets its result.

        ``options`` are the task's call-time options (those that only change how outputs are
        decoded, e.g. ``top_k``, ``return_all_scores``, ``entity_only``, ``threshold``): they
        apply to this call alone; the others are fixed when the Taskflow is built.
        """
        task = self.task.for_call(options)
        good, results = Runner(task).check(self.task.as_items(inputs), on_error=on_error)
        Runner(task).run_checked(good, results)
        items = [item for _, item in good]
        render = functools.partial(_render_with_errors, task, items=items, positions=[p for p, _ in good])
        if isinstance(inputs, str) and task.single_text_unwrapped:
            return Results(results[0], render=lambda _: render(results))
        return Results(results, render=render)

    def stream(self, items: Iterable[Any], *, chunk_size: int | None = None, on_error: str = "raise",
               **options: Any) -> Iterator[Any]:
        """Results for any iterable of items, lazily and in order, a chunk at a time.

        A bad item raises a typed error whose index counts from the start of the stream,
        or with ``on_error="skip"`` yields an error record in its place (see ``__call__``,
        which takes the same call-time ``options``).  A file's lines keep their line ends,
        which are part of the text: strip them, as the CLI does when it reads a file.

        >>> with open("reviews.txt", encoding="utf-8") as lines:  # doctest: +SKIP
        ...     for result in Taskflow("sentiment_analysis").stream(line.rstrip("\\r\\n") for line in lines):
        ...         print(result["label"])
        """
        from .errors import InputTypeError
        from .task import MultiTextTask, int_option, shown

        # Checked here, not when the first result is asked for.
        check_on_error(on_error)
        if chunk_size is not None:
            int_option("chunk_size", chunk_size, what=" (items per chunk)")
        task = self.task.for_call(options)
        one_item = isinstance(items, (str, bytes, bytearray, Mapping)) or (
            isinstance(self.task, MultiTextTask) and self.task.is_one_item(items))
        if one_item or not isinstance(items, Iterable):
            raise InputTypeError(
                f"stream takes an iterable of items (a list, a generator, a file's lines); got "
                f"{type(items).__name__} ({shown(items)})"
                + (": for one item, call the Taskflow itself or pass [item]" if one_item else ""))
        return Runner(task).stream(iter(items), chunk_size or max(64, self.task.batch_size * 8), on_error=on_error)

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
        encoding: str = "utf-8",
        id_fields: Sequence[str] | None = None,
        backend: str = "local",
        address: str | None = None,
    ):
        """Run over a .txt/.jsonl/.csv/.tsv file into JSON lines, as the CLI does.

        Streams (memory independent of file size), keeps input order, writes the
        output atomically, and with ``resume=True`` continues an interrupted job.
        ``workers=N`` runs N processes, each with its own predictor.
        ``on_error="skip"`` records bad lines in ``<output>.errors.jsonl``
        instead of stopping.  ``encoding`` is the input's (e.g. ``"gbk"``);
        ``id_fields`` are the input fields each output line carries (default all).
        ``backend="ray"`` runs the model on ``workers`` Ray actors (a local Ray, or
        the cluster at ``address``); the rest of the job stays in this process.
        The CLI's ``--field``, ``--id-field``, ``--encoding``, ``--backend`` and ``--address``.
        Returns a :class:`taskflow.jobs.JobSummary`.
        """
        from .jobs import run_file

        return run_file(
            self.task, input_path, output_path, fields=fields, workers=workers, worker_spec=self.spec,
            resume=resume, on_error=on_error, errors_path=errors_path, chunk_size=chunk_size, progress=progress,
            encoding=encoding, id_fields=id_fields, backend=backend, address=address,
        )

    @property
    def model(self) -> Model:
        """The model this pipeline runs (its manifest, files and predictor)."""
        return self.task.model

    def __reduce__(self):
        # The predictor cannot be pickled, the options can: the copy (in another process, say one of
        # multiprocessing's "spawn") loads the same model again.
        return (_from_spec, (self.spec,))

    def __repr__(self) -> str:
        m = self.task.model
        return (
            f"Taskflow(task={self.task.name!r}, model={m.name!r}, version={m.version!r}, "
            f"device={str(m.options.device)!r}, source={m.source!r})"
        )

    def help(self, file=None) -> None:
        """Print what this pipeline does: its task, model, modes, options with their defaults,
        and what goes in and comes out (PaddleNLP's ``Taskflow(...).help()``)."""
        import inspect

        cls, model = type(self.task), self.task.model
        doc = inspect.getdoc(cls) or ""
        lines = [f"{cls.name} (aliases: {', '.join(cls.aliases) or 'none'})", "",
                 doc.split("\n\n")[0], "",
                 f"model: {model.task}/{model.name} {model.version} ({model.source}: {model.package.directory})"]
        registered = get_task_class(cls.name)
        if registered.modes:
            lines.append("modes: " + ", ".join(f"{m} -> {ref}" for m, ref in registered.modes.items()))
        lines += ["", "options (Taskflow(..., name=value); those marked [per call] also flow(items, name=value)):"]
        for name, option in cls.declared_options().items():
            lines.append(f"  {name} = {option.default!r}" + ("  [per call]" if option.per_call else ""))
            lines += ["      " + line for line in textwrap.wrap(option.help.replace("``", ""), 88)]
        lines += ["  batch_size = " + repr(cls.default_batch_size), "  (and model, mode, device, precision, "
                  "num_threads, static, tensorrt, task_path, home, offline)", "", "input: " + _input_shape(cls)]
        example = _doctest_lines(doc)
        if example:
            lines += ["", "example:"] + ["  " + line.strip() for line in example]
        print("\n".join(lines), file=file)

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
                "models": listed_models(cls),
                "default_model": cls.default_model,
                "modes": dict(cls.modes),
            })
        return rows


def listed_models(cls) -> list[str]:
    """The models :meth:`Taskflow.tasks` lists for a task class: its own shipped ones, then the
    ``"other_task/name"`` ones its default or modes run.  A package that ships only as a member of
    another's ensemble is not offered on its own (it runs inside the package that names it),
    unless the task's default, a mode or an option (``option_models``) runs that package."""
    chosen = {cls.default_model, *cls.modes.values(), *cls.option_models.values()}
    own = [name for name in available_models(cls.name)
           if name in chosen or f"{cls.name}/{name}" not in _ensemble_members(cls.name)]
    return own + _shared_models(cls)


def _ensemble_members(task: str) -> frozenset[str]:
    """``"task/name"`` of every package a shipped package of ``task`` names in its ``ensemble`` or as
    its ``ensemble_router``."""
    return _members_of_bundle(task, str(packages._bundled_root()))   # read at call time: tests move it


@functools.lru_cache(maxsize=None)
def _members_of_bundle(task: str, root: str) -> frozenset[str]:
    # Read once per bundle folder (``root``: the one the shipped manifests are read from).
    members = set()
    for name in available_models(task):
        manifest = pinned_manifest(task, name)
        requires = manifest.get("requires") or {}
        roles = [*(manifest.get("ensemble") or []), manifest.get("ensemble_router")]
        members.update(requires[role] for role in roles if role in requires)
    return frozenset(members)


def _from_spec(spec: PipelineSpec) -> Taskflow:
    return Taskflow(**spec.options)


def _listed_model(cls, model: str) -> str:
    """The listed model ``model`` names: a listed name, or the part after the ``/`` of exactly one.

    Only listed names load: a name is never a path (``model="/some/dir/pkg"`` would run weights from
    anywhere as if they shipped with taskflow, and write their export beside them); a package of
    one's own is passed as ``task_path=``.
    """
    if not isinstance(model, str):
        raise OptionError(f"model must be a str naming one of the task's models, got {type(model).__name__} "
                          f"({model!r})", "model")
    listed = listed_models(cls)
    if model in listed:
        return model
    if model.startswith(cls.name + "/") and model[len(cls.name) + 1:] in listed:    # its own package, in full
        return model[len(cls.name) + 1:]
    named = [ref for ref in listed if "/" not in model and ref.rpartition("/")[2] == model]
    if len(named) == 1:
        return named[0]
    choices = ", ".join(listed) or "none"
    if len(named) > 1:
        raise UnknownModelError(f"model {model!r} of task {cls.name!r} is ambiguous: it may be {', '.join(named)}; "
                                "pass the full name", "model")
    if _looks_like_a_path(model):
        raise OptionError(f"model={model!r} is a path, not one of the models of task {cls.name!r} ({choices}): "
                          "model= takes a name that Taskflow.tasks() lists. To run a package of your own, pass "
                          f"task_path={model!r} (--task-path on the command line).", "model")
    raise UnknownModelError(f"task {cls.name!r} has no model {model!r}; available: {choices}."
                            f"{_did_you_mean(model, listed)} To run your own trained package, pass "
                            "task_path=<its directory>.", "model")


def _did_you_mean(name: str, accepted) -> str:
    """`` Did you mean 'x'?`` for a near miss of one of ``accepted`` (case aside), else ``""``."""
    by_case = [a for a in accepted if a.lower() == name.lower()]
    close = by_case or difflib.get_close_matches(name, list(accepted), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _looks_like_a_path(name: str) -> bool:
    """Whether ``name`` is written as a path (or names one) rather than as ``name`` or ``task/name``."""
    parts = name.replace("\\", "/").split("/")
    return (len(parts) > 2 or name.startswith("~") or os.path.isabs(name) or "\\" in name
            or any(part in ("", ".", "..") for part in parts)
            or (len(parts) == 2 and parts[0] not in task_names()) or os.path.exists(name))


def _shared_models(cls) -> list[str]:
    """The ``"other_task/name"`` models a task's default or modes name, if they ship."""
    found = []
    for ref in (cls.default_model, *cls.modes.values()):
        package_task, _, name = ref.rpartition("/")
        # A mode may name the task's own package in full ("word_segmentation/jieba"): listed once, by its name.
        if package_task not in ("", cls.name) and ref not in found and name in available_models(package_task):
            found.append(ref)
    return found


def mode_classes(registered) -> dict[str, type]:
    """``{mode: the class that runs it}`` for a registered task class (ner's accurate mode runs
    another class, with options of its own)."""
    return {mode: registered.class_for(ref.rpartition("/")[0] or registered.name)
            for mode, ref in registered.modes.items()}


def _check_option_names(cls, task_options: dict, registered=None) -> None:
    """Unknown task options are an :class:`OptionError` naming what the task accepts (and the
    closest name, for a typo, or the mode that has it), raised before any model is resolved or
    downloaded."""
    accepted = cls.option_names()
    classes = mode_classes(registered) if registered is not None else {}
    for name in sorted(set(task_options) - set(accepted)):
        modes = [mode for mode, klass in classes.items() if klass is not cls and name in klass.option_names()]
        if modes:
            running = [mode for mode, klass in classes.items() if klass is cls]
            now = f" (this pipeline runs mode {running[0]!r})" if running else ""
            raise OptionError(
                f"{name} is an option of {cls.name}'s mode {modes[0]!r}{now}: pass mode={modes[0]!r} "
                f"(--mode {modes[0]} on the command line) to use it", name)
        raise OptionError(
            f"Taskflow({cls.name!r}) got an unknown option {name!r}.{_did_you_mean(name, accepted)} {cls.name} accepts "
            f"{', '.join(accepted) or 'no task options'} (and Taskflow's own: model, mode, device, batch_size, "
            "precision, num_threads, static, tensorrt, task_path, home, offline)", name)


def _doctest_lines(doc: str) -> list[str]:
    """The docstring's examples: each ``>>>`` line with its ``...`` lines and the output after them,
    up to a blank line (a line of prose that happens to start with "[" is not one)."""
    lines, inside = [], False
    for line in doc.splitlines():
        stripped = line.strip()
        inside = stripped.startswith(">>>") or (inside and bool(stripped))
        if inside:
            lines.append(line)
    return lines


def _render_with_errors(task, results: list, items: list, positions: list[int]) -> str:
    """The task's view of the good results, then the error records of skipped items."""
    from .display import html_table

    good = [results[p] for p in positions]
    answered = set(positions)
    errors = [r for i, r in enumerate(results) if i not in answered]
    page = task.render_html(good, items=items) if good else ""
    return page + (html_table(errors, ["index", "error_type", "error"]) if errors else "")


def _input_shape(cls) -> str:
    fields = cls.input_fields
    if len(fields) == 1:
        return "a str, or a list of str (one result per text)"
    return (f"an item ({', '.join(fields)}) as a tuple, a list or a dict with those keys, or a list of items "
            "(one result per item)")


def _paddlenlp_names(task_options: dict, home, device):
    """``home``/``device`` after PaddleNLP's ``home_path``/``device_id`` (taken out of ``task_options``)."""
    if "home_path" in task_options:
        if home is not None:
            raise OptionError("pass home or home_path (PaddleNLP's name for it), not both", "home_path")
        home = task_options.pop("home_path")
    if "device_id" in task_options:
        device_id = task_options.pop("device_id")
        if device is not None:
            raise OptionError(f"pass device or device_id (PaddleNLP's name), not both (got device={device!r}, "
                              f"device_id={device_id!r})", "device_id")
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < -1:
            raise OptionError(f"device_id must be -1 (CPU) or a GPU index >= 0, got {device_id!r}", "device_id")
        device = "cpu" if device_id == -1 else f"gpu:{device_id}"
    return home, "cpu" if device is None else device


def _check_choices(*, mode, task_path, home, offline) -> None:
    """The constructor's own options are of the types they name (a wrong one is an OptionError, as a
    task option's is): a list for ``mode`` or a number for ``home`` fails here, not deep inside."""
    if mode is not None and not isinstance(mode, str):     # model's type is checked where it is looked up
        raise OptionError(f"mode must be a name (str), got {type(mode).__name__} ({mode!r})", "mode")
    if task_path is not None and not isinstance(task_path, (str, os.PathLike)):
        raise OptionError(f"task_path must be a folder's path (str or os.PathLike), got "
                          f"{type(task_path).__name__} ({task_path!r})", "task_path")
    home_dir(home), is_offline(offline)     # each raises its OptionError, even where a task_path leaves it unused


class _TaskList:
    """``Taskflow.task_list``: the registered task names (PaddleNLP's spelling of :meth:`Taskflow.tasks`)."""

    def __get__(self, instance, owner) -> list[str]:
        return task_names()


Taskflow.task_list = _TaskList()
