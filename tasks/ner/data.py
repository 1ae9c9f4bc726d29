"""A user's entity files, for ``taskflow train ner``: BIO and CLUENER-style JSON lines.

* **BIO** (CoNLL style): a token (usually one character) and its tag a line, separated
  by spaces or a tab (extra columns between them are ignored: the tag is the last one),
  a blank line between sentences; tags ``O``, ``B-TYPE``, ``I-TYPE`` (BIOES's ``S-``,
  ``E-``, ``M-`` are read too).  Tokens are joined without spaces, as Chinese text is.
* **CLUENER** JSON lines: ``{"text": "...", "label": {"TYPE": {"mention": [[start, end]]}}}``
  with ``end`` inclusive (CLUENER 2020's convention); ``"label": {}`` for a sentence
  without entities.  A mention that overlaps a longer one is left out (and reported by
  the recipe): a tag a character holds one entity.

Both become :class:`Sentence` objects, ``(text, spans, line)`` with ``(start, end, type)``
spans, ``end`` exclusive.  Anything that is not a sentence (an ``I-`` tag with no entity to
continue, a mention that is not at its offsets, overlapping mentions...) is a
:class:`~taskflow.errors.TrainingDataError` naming the file and line and saying how to fix it.

Pure Python: the recipe and the tests read files without Paddle.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from taskflow.errors import TrainingDataError

__all__ = ["Sentence", "read_entity_file", "read_bio", "read_cluener", "file_format", "char_labels",
           "spans_from_labels", "OUTSIDE"]

OUTSIDE = "O"
_PREFIXES = {"B": "begin", "S": "begin", "I": "inside", "M": "inside", "E": "inside"}


class Sentence(NamedTuple):
    text: str
    spans: tuple[tuple[int, int, str], ...]
    line: int       # where the sentence starts in its file
    # CLUENER mentions left out because they overlap a longer one: one tag a character cannot
    # hold nested entities (CLUENER 2020's train has one, a company inside a book title).
    dropped: tuple[tuple[int, int, str], ...] = ()


def file_format(path: str | Path, encoding: str = "utf-8") -> str:
    """``"cluener"`` when the first non-blank line is a JSON object, else ``"bio"``."""
    with open(path, encoding=_codec(encoding), errors="replace") as handle:
        for line in handle:
            if line.strip():
                return "cluener" if line.lstrip().startswith("{") else "bio"
    return "bio"


def read_entity_file(path: str | Path, *, encoding: str = "utf-8", format: str = "auto") -> list[Sentence]:
    """Every sentence of a BIO or CLUENER file (``format="auto"``: told apart by the first line)."""
    if not Path(path).is_file():
        raise TrainingDataError(f"training file {str(path)!r} does not exist", str(path))
    kind = file_format(path, encoding) if format == "auto" else format
    sentences = read_cluener(path, encoding) if kind == "cluener" else read_bio(path, encoding)
    if not sentences:
        raise TrainingDataError(f"{path} holds no sentences (it is empty)", str(path))
    return sentences


def _codec(encoding: str) -> str:
    # A UTF-8 byte-order mark is not part of the first token.
    return "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding


def _lines(path: str | Path, encoding: str):
    """``(number, text)`` of each line; bytes that are not ``encoding`` name their line."""
    codec = _codec(encoding)
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                text = raw.decode(codec if number == 1 else encoding)
            except UnicodeDecodeError as exc:
                raise TrainingDataError(
                    f"{path}:{number}: not valid {encoding} ({exc.reason}); if the file is in another encoding, "
                    "name it with --encoding (e.g. --encoding gbk)", str(path), number) from None
            yield number, text.rstrip("\r\n")


def read_bio(path: str | Path, encoding: str = "utf-8") -> list[Sentence]:
    sentences: list[Sentence] = []
    chars: list[str] = []
    labels: list[str] = []
    start_line = 0
    open_entity, previous_tag = None, None     # the type an I- tag may continue here, and the tag before

    def close() -> None:
        if chars:
            sentences.append(Sentence("".join(chars), tuple(spans_from_labels(labels)), start_line))

    for number, line in _lines(path, encoding):
        where = f"{path}:{number}"
        if not line.strip():
            close()
            chars, labels, open_entity, previous_tag = [], [], None, None
            continue
        if line.startswith("-DOCSTART-"):
            continue
        parts = line.split()
        if len(parts) < 2:
            raise TrainingDataError(
                f"{where}: {line!r} is not a token and its tag; a BIO line is a character, a space or tab, and "
                "its tag (e.g. '北 B-LOC'), with a blank line between sentences", str(path), number)
        token, tag = parts[0], parts[-1]
        prefix, entity = None, None
        if tag != OUTSIDE:
            prefix, dash, entity = tag.partition("-")
            if not (dash and entity and prefix in _PREFIXES):
                raise TrainingDataError(
                    f"{where}: tag {tag!r} is not O, B-TYPE or I-TYPE (BIOES's S-, E-, M- are read too); "
                    "fix the tag", str(path), number)
            if _PREFIXES[prefix] == "inside" and open_entity != entity:
                before = f"{previous_tag!r}" if previous_tag else "the start of the sentence"
                raise TrainingDataError(
                    f"{where}: {tag!r} follows {before}, but an {prefix}- tag continues an entity of its own type; "
                    f"make it B-{entity} if an entity starts here, or fix the tag before it", str(path), number)
        if not chars:
            start_line = number
        for i, char in enumerate(token):
            chars.append(char)
            begins = prefix in ("B", "S") and i == 0
            labels.append(OUTSIDE if entity is None else f"{entity}-{'B' if begins else 'I'}")
        # O, S- and E- leave nothing open: what follows must begin an entity of its own.
        open_entity = entity if prefix in ("B", "I", "M") else None
        previous_tag = tag
    close()
    return sentences


def read_cluener(path: str | Path, encoding: str = "utf-8") -> list[Sentence]:
    sentences: list[Sentence] = []
    for number, line in _lines(path, encoding):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrainingDataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); one JSON object a "
                                    "line, e.g. {\"text\": \"...\", \"label\": {\"name\": {\"李明\": [[0, 1]]}}}",
                                    str(path), number) from None
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise TrainingDataError(f"{where}: no non-empty \"text\" string; each line is an object with \"text\" "
                                    "and \"label\"", str(path), number)
        label = record.get("label")
        if not isinstance(label, dict):
            raise TrainingDataError(
                f"{where}: \"label\" is {'missing' if label is None else type(label).__name__}; it maps each type to "
                "its mentions and their [start, end] spans, e.g. {\"name\": {\"李明\": [[0, 1]]}} ({} when the "
                "sentence has no entities)", str(path), number)
        spans = []
        for entity, mentions in label.items():
            if not isinstance(mentions, dict):
                raise TrainingDataError(f"{where}: label {entity!r} holds {type(mentions).__name__}, not an object "
                                        "of mentions and their spans", str(path), number)
            for mention, offsets in mentions.items():
                if not (isinstance(offsets, list) and all(
                        isinstance(o, list) and len(o) == 2 and all(isinstance(x, int) for x in o) for o in offsets)):
                    raise TrainingDataError(f"{where}: mention {mention!r} of {entity!r} needs a list of [start, end] "
                                            f"integer pairs, got {offsets!r}", str(path), number)
                for start, end in offsets:
                    if not 0 <= start <= end < len(text) or text[start:end + 1] != mention:
                        shown = text[start:end + 1] if 0 <= start <= end < len(text) else "(outside the text)"
                        raise TrainingDataError(
                            f"{where}: mention {mention!r} of {entity!r} at [{start}, {end}] reads {shown!r} in the "
                            "text; spans are character offsets [start, end] with end inclusive (CLUENER's "
                            "convention): fix the offsets", str(path), number)
                    spans.append((start, end + 1, entity))
        kept, dropped = [], []
        for span in sorted(spans, key=lambda x: (x[0] - x[1], x[0])):     # longest first
            (dropped if any(span[0] < e and s < span[1] for s, e, _ in kept) else kept).append(span)
        sentences.append(Sentence(text, tuple(sorted(kept)), number, tuple(sorted(dropped))))
    return sentences


def char_labels(sentence: Sentence) -> list[str]:
    """One label a character: ``O``, ``TYPE-B`` (an entity starts) or ``TYPE-I`` (the LAC spelling
    that the lexical network's package labels use)."""
    labels = [OUTSIDE] * len(sentence.text)
    for start, end, entity in sentence.spans:
        labels[start] = f"{entity}-B"
        for i in range(start + 1, end):
            labels[i] = f"{entity}-I"
    return labels


def spans_from_labels(labels: list[str]) -> list[tuple[int, int, str]]:
    """``(start, end, type)`` entities of per-character labels; an ``-I`` of another type than the
    entity before it (a model's inconsistent path) starts an entity of its own."""
    spans: list[tuple[int, int, str]] = []
    start, current = None, None
    for i, label in enumerate([*labels, OUTSIDE]):
        entity, _, part = label.rpartition("-") if label != OUTSIDE else (None, "", "")
        if current is not None and (entity != current or part == "B"):
            spans.append((start, i, current))
            current = None
        if entity is not None and current is None:
            start, current = i, entity
    return spans
