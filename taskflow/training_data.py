"""Training on a user's own files (``taskflow train TASK --train FILE [--dev FILE]``).

* :func:`add_own_data_options`: ``--train``, ``--dev``, ``--text-field``, ``--label-field``,
  ``--encoding``, ``--dev-share``, ``--minutes``, ``--quiet``.
* :func:`read_labelled`: ``(texts, label, line)`` examples (:class:`LabelledExample`) from a
  CSV/TSV/JSONL file, read by :class:`taskflow.readers.InputFile`; a bad line is a
  :class:`~taskflow.errors.TrainingDataError` naming the file and line and saying how to fix it.
* :func:`split_off_dev`, :func:`check_label_sets`, :func:`sorted_labels`.
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path
from typing import Any, Callable, Iterable

from .recipe_command import POSITIVE, SHARE

__all__ = ["add_own_data_options", "read_labelled", "LabelledExample", "split_off_dev",
           "check_label_sets", "sorted_labels"]


def add_own_data_options(parser: argparse.ArgumentParser, *, text_field: str | None, label_field: str | None = "label",
                         formats: str = "a .csv, .tsv or .jsonl file") -> argparse._ArgumentGroup:
    """The options of ``taskflow train TASK --train FILE``, in a group of their own (``None``: a
    format whose records have no named fields, such as BIO, takes no ``--text-field`` / ``--label-field``)."""
    group = parser.add_argument_group(
        "training on your own data", "Give --train (and --dev); the vocabulary comes from "
        "the --train file, the epoch is picked on --dev, and the dev report is printed and kept in the manifest.")
    group.add_argument("--train", help=f"your training examples: {formats}")
    group.add_argument("--dev", help="examples to pick the epoch on and report (same format; default: --dev-share "
                                     "of --train, held out)")
    group.add_argument("--dev-share", type=SHARE, default=0.1,
                       help="share of --train held out as dev when no --dev is given (default: %(default)s)")
    if text_field is not None:
        # a pair task names its two texts' fields, comma-separated; any other, one
        what = "keys/columns of the two texts, comma-separated" if "," in text_field else "key/column of the text"
        group.add_argument("--text-field", default=text_field, help=f"{what} (default: %(default)s)")
    if label_field is not None:
        group.add_argument("--label-field", default=label_field, help="key/column of the label (default: %(default)s)")
    group.add_argument("--encoding", default="utf-8", help="the files' text encoding (default utf-8), e.g. gbk")
    if "--minutes" not in parser._option_string_actions:     # a recipe with a budget of its own keeps its option
        group.add_argument("--minutes", type=POSITIVE, help="time budget for training: stop (keeping the best epoch so "
                                                         "far) when it is spent")
    group.add_argument("--quiet", action="store_true", help="no progress bar, no report on stdout")
    return group


class LabelledExample(tuple):
    """``(texts, label, line)``: one example of a user's file (``texts`` a str, or a tuple for pairs)."""

    def __new__(cls, texts, label: str, line: int):
        return super().__new__(cls, (texts, label, line))

    texts = property(lambda self: self[0])
    label = property(lambda self: self[1])
    line = property(lambda self: self[2])


_FIX = {"csv": "fix or delete that line (a text with a comma must be quoted: \"a, b\")",
        "tsv": "fix or delete that line (a text may not hold a tab)",
        "jsonl": "fix or delete that line (one JSON object a line)",
        "txt": "save the examples as .csv, .tsv or .jsonl with a text and a label field"}


def read_labelled(path: str | os.PathLike, text_fields: Iterable[str], label_field: str, *,
                  encoding: str = "utf-8") -> list[LabelledExample]:
    """Every example of ``path``, in order; any line that is not one is a :class:`TrainingDataError`
    naming the file and line (training on a file with silently skipped lines would hide the problem)."""
    from .errors import InvalidInputError, TrainingDataError
    from .readers import InputFile

    text_fields = tuple(text_fields)
    source = str(path)
    if Path(path).suffix.lower() == ".txt":
        raise TrainingDataError(f"{source}: a .txt file has no label field; {_FIX['txt']}", source)
    try:
        reader = InputFile(path, [*text_fields, label_field], encoding=encoding, carry=[])
    except InvalidInputError as exc:
        raise TrainingDataError(_training_flags(str(exc)), source) from None
    examples = []
    with reader:
        for record in reader:
            if record.error is not None:
                raise TrainingDataError(f"{_training_flags(record.error)}; {_FIX[reader.format]}", source, record.line)
            if not isinstance(record.item, list):     # a JSON line that is a bare value, not an object
                raise TrainingDataError(
                    f"{source}:{record.line}: a JSON {type(record.item).__name__}, not an object with the keys "
                    f"{', '.join(map(repr, [*text_fields, label_field]))}; {_FIX['jsonl']}", source, record.line)
            *texts, label = record.item
            where = f"{source}:{record.line}"
            if reader.header is not None and [*texts, label] == [*text_fields, label_field]:
                # Two files joined with `cat`: the second one's header would train a label named after a column.
                raise TrainingDataError(
                    f"{where}: the header row again ({', '.join([*text_fields, label_field])}), as where two files "
                    "were joined; delete that line", source, record.line)
            for field, text in zip(text_fields, texts):
                if not isinstance(text, str) or not text.strip():
                    raise TrainingDataError(
                        f"{where}: {field!r} is {'empty' if isinstance(text, str) else type(text).__name__} "
                        f"({text!r}); every example needs a text: fill it in or delete the line", source, record.line)
            if isinstance(label, bool) or not isinstance(label, (str, int)) or not str(label).strip():
                if label is None or isinstance(label, str):
                    fix = "fill it in or delete the line"
                elif isinstance(label, float) and label.is_integer():
                    fix = f"write it as the integer {int(label)} or the string \"{int(label)}\""
                else:
                    fix = f"write it as a string (\"{label}\")" if isinstance(label, (bool, float)) else \
                        "write one string or integer"
                raise TrainingDataError(
                    f"{where}: label {label_field!r} is {label!r} ({type(label).__name__}); a label is a non-empty "
                    f"string or an integer: {fix}", source, record.line)
            examples.append(LabelledExample(texts[0] if len(texts) == 1 else tuple(texts), str(label).strip(),
                                            record.line))
    if not examples:
        raise TrainingDataError(f"{source} holds no examples (it is empty, or has only its header row)", source)
    return examples


def _training_flags(message: str) -> str:
    # InputFile's messages name the batch job's flag; training names its fields with these.
    return message.replace("choose with --field", "choose with --text-field / --label-field")


def split_off_dev(examples: list, share: float, rng: random.Random, label_of: Callable[[Any], Any]) -> tuple[list, list]:
    """``(train, dev)``: about ``share`` of the examples held out, from every label that has more
    than one example (so dev never holds a label train lacks), at least one in all."""
    if not 0 < share < 1:
        from .errors import OptionError

        raise OptionError(f"--dev-share must be between 0 and 1 (exclusive), got {share}", "dev_share")
    by_label: dict[Any, list[int]] = {}
    for index, example in enumerate(examples):
        by_label.setdefault(label_of(example), []).append(index)
    held: set[int] = set()
    for indices in by_label.values():
        if len(indices) > 1:
            picked = list(indices)
            rng.shuffle(picked)
            held.update(picked[:min(len(indices) - 1, max(1, round(len(indices) * share)))])
    if not held:
        from .errors import TrainingDataError

        raise TrainingDataError(
            f"no label has two examples or more ({len(by_label)} labels in {len(examples)} examples), so none can "
            "be held out as dev: is --label-field the label column? Otherwise give a --dev file")
    return [e for i, e in enumerate(examples) if i not in held], [e for i, e in enumerate(examples) if i in held]


def sorted_labels(labels: Iterable[str]) -> list[str]:
    """The label set in a stable order: numerically when every label is an integer ("1".."5" stars),
    else alphabetically."""
    found = set(labels)
    if all(label.lstrip("-").isdigit() for label in found):
        return sorted(found, key=int)
    return sorted(found)


def check_label_sets(train: list[LabelledExample], dev: list[LabelledExample], train_file: str,
                     dev_file: str | None) -> None:
    """A classifier needs two labels or more in train, and dev may hold only labels train has."""
    from .errors import TrainingDataError

    train_labels = {e.label for e in train}
    if len(train_labels) < 2:
        raise TrainingDataError(
            f"{train_file}: every example has the label {next(iter(train_labels))!r}; a classifier needs "
            "examples of two labels or more (is --label-field the right column?)", train_file)
    for example in dev:
        if example.label not in train_labels:
            where = f"{dev_file}:{example.line}" if dev_file else f"held-out example (line {example.line})"
            raise TrainingDataError(
                f"{where}: label {example.label!r} never occurs in {train_file} (its labels: "
                f"{', '.join(map(repr, sorted_labels(train_labels)))}); the model can only learn labels it is "
                f"trained on: add examples of {example.label!r} to the training file, or fix the label",
                dev_file, example.line)
