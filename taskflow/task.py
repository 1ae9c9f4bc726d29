"""The task base class: input checking, batching, long-text splitting.

A task receives the :class:`~taskflow.model.Model` it runs (resolved by
``Taskflow``) and owns its options and three stages:

* ``preprocess(units) -> features``: Python/numpy only, no Paddle;
* ``forward(features) -> outputs``: the only stage that touches the predictor;
* ``cascade(features, outputs, units)``: optional, the features of a further round of networks
  that read what the last one said (plain Python; ``forward`` runs them);
* ``postprocess(outputs, units) -> results``: plain JSON-serialisable Python,
  one result per unit.

Everything else lives here: the caller's items are checked (``check_item``),
cut into units the model can take (``split``), the units are sorted by length
and batched (at most ``batch_size`` a batch), and the per-unit results are
put back in input order and joined into one result per item (``join``).
"""

from __future__ import annotations

import copy
import difflib
import numbers
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from .errors import InputTypeError, InvalidInputError, OptionError
from .model import Model
from .predictor import InputSpec, Predictor, PredictorOptions
from .text import split_text

__all__ = ["Task", "TextTask", "MultiTextTask", "Option", "check_text", "shown", "bool_option", "int_option",
           "number_option"]


def check_text(value: Any, index: int | None, *, what: str = "text", allow_empty: bool = False) -> str:
    """Return ``value`` if it is a usable text, else raise a typed error naming it."""
    where = f"{what} #{index}" if index is not None else what
    if isinstance(value, str):
        if not allow_empty and not _has_visible(value):
            raise InvalidInputError(
                f"{where} is empty or only whitespace, invisible characters or combining marks ({value!r}); "
                "pass text with at least one visible character", index,
            )
        return value if type(value) is str else str(value)   # numpy's str_ is a str; results hold plain ones
    if isinstance(value, (bytes, bytearray)):
        raise InputTypeError(f"{where} must be a str, got bytes; decode it first, e.g. value.decode('utf-8')", index)
    raise InputTypeError(f"{where} must be a str, got {type(value).__name__} ({shown(value)})", index)


def _has_visible(text: str) -> bool:
    """Whether ``text`` has a char that is neither whitespace nor a control or format char (NUL,
    zero-width space, BOM) nor a combining mark (categories Mn, Mc, Me), which no model reads as
    anything: marks with no char to sit on are no text either."""
    return any(not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE for ch in text)


_INVISIBLE = frozenset({"Cc", "Cf", "Mn", "Mc", "Me"})


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` chars, for naming a bad input in an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refuse_tables_and_scalars(inputs: Any, columns_hint: str) -> None:
    """A pandas DataFrame iterates over its column names, and a 0-d array over nothing: either
    would be read as something else than the caller meant, so both are an InputTypeError."""
    if hasattr(inputs, "columns") and hasattr(inputs, "iloc"):
        raise InputTypeError(f"got a pandas DataFrame, whose items would be its column names: pass {columns_hint}")
    if getattr(inputs, "ndim", None) == 0:
        raise InputTypeError(f"got a 0-d array ({shown(inputs)}): pass its value, x.item(), or a list")


def bool_option(name: str, value: Any) -> bool:
    """``value`` if it is a bool, else an :class:`OptionError` (``bool("no")`` is True: never coerce)."""
    if not isinstance(value, (bool, np.bool_)):
        raise OptionError(f"{name} must be True or False, got {type(value).__name__} ({shown(value)})", name)
    return bool(value)


def int_option(name: str, value: Any, minimum: int = 1, what: str = "") -> int:
    """``value`` if it is an int >= ``minimum``, else an :class:`OptionError`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise OptionError(f"{name} must be an int >= {minimum}{what}, got {shown(value)}", name)
    return int(value)


def number_option(name: str, value: Any, low: float, high: float) -> float:
    """``value`` if it is a real number in ``[low, high]``, else an :class:`OptionError`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not low <= value <= high:
        raise OptionError(f"{name} must be a number between {low:g} and {high:g}, got {shown(value)}", name)
    return float(value)


@dataclass(frozen=True)
class Option:
    """One option a task declares, the one place it is described: ``Taskflow(task, name=value)``,
    the CLI's ``--name`` flag and its ``--help``, ``Taskflow.help()``, a batch job's identity and
    the server all read it.

    ``kind`` is how a command line spells a value (``"bool"``, ``"int"``, ``"float"``, ``"list"``:
    comma-separated, ``"str"``: a name or a path).  ``per_call`` options change only how outputs
    are decoded, so one call may give its own value (``flow(texts, top_k=3)``) without changing
    the pipeline for any other caller; ``check`` turns such a value into the one the task keeps
    (or raises an :class:`OptionError`), as the constructor does.
    """

    default: Any = None
    help: str = ""
    kind: str = "str"
    per_call: bool = False
    check: Callable[[str, Any], Any] | None = None


def _with_options(doc: str, options: Mapping[str, Option]) -> str:
    """A task class's docstring with an ``Options:`` section made from its declared options."""
    import inspect
    import textwrap

    lines = ["Options:"]
    for name, option in options.items():
        text = f"{name} (default {option.default!r}{', per call' if option.per_call else ''}): {option.help}"
        lines += textwrap.wrap(text, 96, initial_indent="    ", subsequent_indent="        ")
    return inspect.cleandoc(doc).rstrip() + "\n\n" + "\n".join(lines) + "\n"


class Task:
    """Base of every task; see the module docstring for the contract."""

    name: str = ""            # set by @register_task
    aliases: tuple[str, ...] = ()
    default_model: str = ""       # a model name, or "other_task/name" for a model packaged under another task
    modes: dict[str, str] = {}    # mode -> model, same forms as default_model
    # A True bool option that runs another bundled model when the user names none (option -> model).
    option_models: dict[str, str] = {}
    default_batch_size: int = 32
    # A batch of units longer than this many positions on average holds fewer than batch_size of
    # them (rows x the longest unit <= batch_size x batch_length): a long unit sorted first no
    # longer pads batch_size - 1 shorter ones to its length.  None: always batch_size.
    batch_length: int | None = None
    input_fields: tuple[str, ...] = ("text",)  # what a file record holds (jsonl keys, csv columns)
    # A single str in gives its result itself, not a list of one (PaddleNLP's shape for word
    # segmentation and POS tagging, whose results are lists already); a list in is one result each.
    single_text_unwrapped: bool = False
    runs_network: bool = True     # False for a task over a package with no network (jieba's segmentation)
    # The options this class adds (name -> Option); a subclass may redeclare one with its own default.
    declared: ClassVar[Mapping[str, Option]] = {}

    def __init__(self, model: Model, *, batch_size: int | None = None):
        self.model = model
        self.batch_size = int_option("batch_size", self.default_batch_size if batch_size is None else batch_size,
                                     what=" (units per forward pass)")
        self.network_model = model   # the model whose network runs; a task building on another model changes it

    @property
    def manifest(self):
        return self.model.manifest

    @property
    def options(self) -> PredictorOptions:
        return self.model.options

    @classmethod
    def model_for_options(cls, model_name: str, options: dict[str, Any]) -> str:
        """The bundled model to run when the user named none (no ``model``, ``mode`` or
        ``task_path``): the default, unless an option of ``option_models`` is True
        (sentiment_analysis' ``neutral=True`` runs its three-label model)."""
        return next((model for option, model in cls.option_models.items() if options.get(option) is True),
                    model_name)

    @classmethod
    def class_for(cls, package_task: str) -> type["Task"]:
        """The class that runs packages of ``package_task`` for this task (default: this one).
        A task whose modes run different kinds of model (ner) picks among its own classes here."""
        return cls

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # help(TaskClass) lists the options from the one declaration, not from a copy in the docstring.
        if cls.__doc__ and cls.declared_options():
            cls.__doc__ = _with_options(cls.__doc__, cls.declared_options())

    @classmethod
    def declared_options(cls) -> dict[str, Option]:
        """``{name: Option}`` for the options the class accepts on top of the base ones, its own
        declarations first, then those of the classes it builds on."""
        options: dict[str, Option] = {}
        for klass in cls.__mro__:
            for name, option in vars(klass).get("declared", {}).items():
                options.setdefault(name, option)
        return options

    @classmethod
    def option_names(cls) -> list[str]:
        """Keyword options a subclass accepts on top of the base ones."""
        return list(cls.declared_options())

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        """``{option: default}`` for the options a subclass accepts on top of the base ones."""
        return {name: option.default for name, option in cls.declared_options().items()}

    def for_call(self, options: Mapping[str, Any]) -> "Task":
        """This task with call-time ``options`` applied, for one call: a shallow copy sharing the
        model and its predictors, so the instance other callers hold is never changed.  An option
        the task does not declare, or one fixed at construction, is an :class:`OptionError`."""
        if not options:
            return self
        declared = self.declared_options()
        call = copy.copy(self)
        for name, value in options.items():
            option = declared.get(name)
            if option is None or not option.per_call:
                per_call = sorted(n for n, o in declared.items() if o.per_call)
                can = f"; options a call may give: {', '.join(per_call)}" if per_call else \
                    "; it takes no call-time options"
                if option is None:
                    close = difflib.get_close_matches(name, per_call, n=1, cutoff=0.6)
                    hint = f" Did you mean {close[0]!r}?" if close else ""
                    raise OptionError(f"{self.name} has no call-time option {name!r}.{hint} Call options "
                                      f"are given as flow(items, name=value){can}", name)
                raise OptionError(f"{name} is fixed when the Taskflow is built (it changes the model or how "
                                  f"inputs are read): pass Taskflow({self.name!r}, {name}=...) instead{can}", name)
            setattr(call, name, option.check(name, value) if option.check else value)
        return call

    def input_specs(self) -> Sequence[InputSpec]:
        """The network's feeds, named as :meth:`preprocess` returns them."""
        raise NotImplementedError

    @property
    def predictor(self) -> Predictor:
        return self.network_model.predictor(self.input_specs())

    @property
    def predictors(self) -> list[Predictor]:
        """Every predictor the task runs (made, and their graphs exported, on first access): its own
        network's, and those of the readers an ensemble adds."""
        return [self.predictor]

    # --------------------------------------------------------------- stages
    def check_item(self, item: Any, index: int) -> Any:
        """Validate and normalise one input item; raise a typed error naming ``index``."""
        raise NotImplementedError

    def split(self, item: Any) -> list[Any]:
        """Units the model can take for one item (default: the item itself)."""
        return [item]

    def unit_length(self, unit: Any) -> int:
        return len(unit)

    def plan(self, units: list[Any]) -> list[Any] | None:
        """A key per unit saying which path it takes through the task's networks (a router's
        choice), or ``None`` where every unit takes the same one.  With keys, each key's units are
        batched apart (where there is more than one batch) and :meth:`preprocess` receives the keys
        of its batch's units as a second argument: the state of a call is passed, never kept."""
        return None

    def join(self, item: Any, results: list[Any], units: list[Any]) -> Any:
        """One result for an item from the results of its units (default: the only one)."""
        return results[0]

    def preprocess(self, units: list[Any]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def forward(self, features: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.predictor.run(features)

    def cascade(self, features: dict, outputs: list, units: list[Any]) -> dict | None:
        """The features of one more round of networks, chosen from what the last round's said (a
        cascade: reading comprehension's focused encoder reads only the pieces holding the other
        readers' best spans), or ``None`` (the default) when ``outputs`` are complete.  Plain Python,
        like :meth:`preprocess`: what one round hands the next travels in the features it returns,
        and :meth:`forward` runs them."""
        return None

    def postprocess(self, outputs: list[np.ndarray], units: list[Any]) -> list[Any]:
        raise NotImplementedError

    def run_networks(self, units: list[Any], routes: list[Any] | None = None) -> list:
        """The outputs :meth:`postprocess` reads for one batch of ``units`` (``routes``: their keys
        from :meth:`plan`, if any): preprocess, forward, then forward again for each round
        :meth:`cascade` asks for."""
        features = self.preprocess(units) if routes is None else self.preprocess(units, routes)
        outputs = self.forward(features)
        while (features := self.cascade(features, outputs, units)) is not None:
            outputs = self.forward(features)
        return outputs

    def run_batch(self, units: list[Any], routes: list[Any] | None = None) -> list[Any]:
        """One result per unit of one batch, in order."""
        results = self.postprocess(self.run_networks(units, routes), units)
        if len(results) != len(units):
            raise RuntimeError(f"{type(self).__name__}.postprocess returned {len(results)} results for {len(units)} units")
        return results

    def render_html(self, results: list[Any], items: list[Any]) -> str:
        """How a notebook shows a list of results, given the checked items they answer
        (default: a table of the results' fields)."""
        from .display import html_table

        return html_table([r if isinstance(r, dict) else {"result": r} for r in results])

    # ----------------------------------------------------------------- driver
    def as_items(self, inputs: Any) -> list[Any]:
        """The caller's input as a list of items (a single item becomes a list of one)."""
        if isinstance(inputs, str):
            return [inputs]
        _refuse_tables_and_scalars(inputs, f"one column, df[{self.input_fields[0]!r}]")
        if isinstance(inputs, Iterable) and not isinstance(inputs, (bytes, bytearray, Mapping)):
            return list(inputs)  # lists, tuples, generators, pandas Series, numpy arrays of str
        raise InputTypeError(
            f"{self.name} takes a str or a list of str, got {type(inputs).__name__}"
            + ("; decode bytes first, e.g. value.decode('utf-8')" if isinstance(inputs, (bytes, bytearray)) else "")
        )

    def run_items(self, items: list[Any]) -> list[Any]:
        """Results for already-checked items, one per item, in order."""
        owners: list[int] = []
        units: list[Any] = []
        for i, item in enumerate(items):
            pieces = self.split(item)
            owners += [i] * len(pieces)
            units += pieces
        unit_results: list[Any] = [None] * len(units)
        # Longest first, so similar lengths share a batch and padding stays small.
        order = sorted(range(len(units)), key=lambda k: -self.unit_length(units[k]))
        keys = self.plan(units) if units else None
        if keys is not None and len(units) > self.batch_size:
            order = sorted(order, key=keys.__getitem__)     # stable: longest first within each path
        for picked in self._batches(order, units):
            batch = [units[k] for k in picked]
            results = self.run_batch(batch, None if keys is None else [keys[k] for k in picked])
            for k, result in zip(picked, results):
                unit_results[k] = result
        grouped_results: list[list[Any]] = [[] for _ in items]
        grouped_units: list[list[Any]] = [[] for _ in items]
        for owner, unit, result in zip(owners, units, unit_results):
            grouped_results[owner].append(result)
            grouped_units[owner].append(unit)
        return [self.join(item, r, u) for item, r, u in zip(items, grouped_results, grouped_units)]


    def _batches(self, order: list[int], units: list[Any]):
        """The unit indices of each batch, in ``order`` (longest first within a path): at most
        ``batch_size``, and with ``batch_length`` at most as many as its first unit's length allows."""
        start = 0
        while start < len(order):
            rows = self.batch_size
            if self.batch_length:
                rows = max(1, min(rows, self.batch_size * self.batch_length // max(1, self.unit_length(units[order[start]]))))
            yield order[start:start + rows]
            start += rows


class TextTask(Task):
    """A task whose items are single texts, split into chunks of the model's
    ``max_length`` (a manifest field) at sentence ends."""

    def check_item(self, item: Any, index: int) -> str:
        return check_text(item, index)

    @property
    def max_length(self) -> int:
        return int(self.network_model.manifest["max_length"])

    def split(self, item: str) -> list[tuple[int, str]]:
        return split_text(item, self.max_length)

    def unit_length(self, unit: tuple[int, str]) -> int:
        return len(unit[1])


class MultiTextTask(Task):
    """A task whose item is several named texts, one per ``input_fields`` key
    (a pair to compare, a context and its question): a dict with those keys, or
    a list/tuple of the texts in that order.  Checked items are tuples of str in
    field order; ``item_noun`` names an item in messages ("pair", "item")."""

    item_noun: str = "item"

    def _forms(self) -> str:
        fields = self.input_fields
        keys = ", ".join(f"{field!r}: ..." for field in fields)
        return f"({', '.join(fields)}), [{', '.join(fields)}] or {{{keys}}}"

    def _a_noun(self) -> str:
        return ("an " if self.item_noun[0] in "aeiou" else "a ") + self.item_noun

    def is_one_item(self, value: Any) -> bool:
        """A list/tuple (or 1-d array) of as many values as the item has fields, a text among them
        and none an item itself: one item, so that ``("text", None)`` is one pair whose second text
        is wrong, not two pairs."""
        return ((isinstance(value, (list, tuple)) or getattr(value, "ndim", None) == 1)
                and len(value) == len(self.input_fields)
                and any(isinstance(v, str) for v in value)
                and not any(isinstance(v, (list, tuple, Mapping)) for v in value))

    def is_misshapen_item(self, value: Any) -> bool:
        """Texts side by side, as one item is given, but not as many as the item has fields
        (``("a", "b", "c")`` to a pair task): one item of the wrong size, which check_item names,
        not a list of texts, none of which could be an item."""
        return ((isinstance(value, (list, tuple)) or getattr(value, "ndim", None) == 1)
                and len(value) > 0 and any(isinstance(v, str) for v in value)
                and not any(isinstance(v, (list, tuple, Mapping)) for v in value))

    def as_items(self, inputs: Any) -> list[Any]:
        if isinstance(inputs, Mapping) or self.is_one_item(inputs) or self.is_misshapen_item(inputs):
            return [inputs]
        columns = ", ".join(map(repr, self.input_fields))
        _refuse_tables_and_scalars(inputs, f"df[[{columns}]].values.tolist(), or df.to_dict('records') with columns "
                                           f"{columns}")
        takes = f"{self.name} takes {self._a_noun()} {self._forms()}, or a list of {self.item_noun}s"
        if isinstance(inputs, (str, bytes, bytearray)):
            raise InputTypeError(f"{takes}; got a single {type(inputs).__name__} ({shown(inputs)})")
        if isinstance(inputs, Iterable):
            return list(inputs)
        raise InputTypeError(f"{takes}; got {type(inputs).__name__} ({shown(inputs)})")

    def check_item(self, item: Any, index: int | None) -> tuple[str, ...]:
        where = f"{self.item_noun} #{index}" if index is not None else self.item_noun
        fields = self.input_fields
        if hasattr(item, "to_dict") and hasattr(item, "index") and not isinstance(item, Mapping):
            # A pandas row (df.iloc[i]): by its column names where it has the fields, else in order.
            item = item.to_dict() if set(fields) <= set(item.index) else list(item)
        if isinstance(item, Mapping):
            missing = [key for key in fields if key not in item]
            if missing:
                raise InvalidInputError(
                    f"{where} is a dict without {' and '.join(map(repr, missing))} (its keys: "
                    f"{', '.join(map(repr, item)) or 'none'}); {self._a_noun()} dict needs "
                    f"{' and '.join(map(repr, fields))}", index)
            values = [item[key] for key in fields]
        elif isinstance(item, (list, tuple, np.ndarray)):
            if len(item) != len(fields):
                raise InvalidInputError(f"{where} must hold exactly {len(fields)} texts, got {len(item)} "
                                        f"({shown(item)}); pass {self._forms()}", index)
            values = list(item)
        else:
            hint = (f"; a list of {len(fields)} str is one {self.item_noun}, a list of {self.item_noun}s is many"
                    if isinstance(item, str) else "")
            raise InputTypeError(f"{where} must be {self._forms()}, got {type(item).__name__} ({shown(item)}){hint}",
                                 index)
        return tuple(check_text(value, index, what=f"{field!r} of {self.item_noun}")
                     for field, value in zip(fields, values))
