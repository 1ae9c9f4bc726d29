"""Records of a batch job's input file, one per physical line, every line accounted for.

Formats, by extension:

* ``.txt``: a record a line (tab-separated parts for a task of several fields);
* ``.jsonl`` / ``.ndjson``: a JSON value a line; an object's ``fields`` are picked;
* ``.csv`` / ``.tsv``: a header row, then a record a line.  ``.csv`` fields may be
  quoted (RFC 4180) within their line; ``.tsv`` has no quoting (a ``"`` is a character).

One rule for every format: a record is exactly one line (``\\n`` or ``\\r\\n``); the
newline that ends the file does not start another record.  A line that cannot be
a record becomes an error record with its line number (the job's ``on_error``
decides whether that stops it), never a skipped one: bytes that are not valid in
the file's encoding, a NUL byte, more than ``max_record_bytes``, a blank line, bad
JSON, a JSON value Python cannot hold (an integer of more than 4,300 digits), a number
JSON cannot hold (``NaN``, ``Infinity``, ``1e400``, which Python's parser takes), a
lone surrogate escape (``"\\udc80"``: no character, so it cannot be written out), a
missing key, a CSV quote left open (a field that would span lines), the wrong
number of fields.  A UTF-8 byte-order mark at the start is dropped (``utf-8`` and
``utf-8-sig`` read the same).

An input that cannot be read at all (missing file, unknown extension, unusable
encoding, a CSV header without the needed columns) raises at construction.

A FIFO or a character device (``mkfifo``, ``<(zcat x.gz)``, which is ``/dev/fd/N``) can only
be read once, front to back: :func:`stream_kind` tells it apart, and it is read as a stream
(``stream=``), by its extension's format or, with none, as .txt.  A job (``run_file``) needs a
regular file, which it reads again to count, check and resume.
"""

from __future__ import annotations

import codecs
import csv
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from .errors import InvalidInputError

__all__ = ["Record", "InputFile", "check_path", "stream_kind", "FORMATS", "DEFAULT_MAX_RECORD_BYTES", "count_records", "output_record", "error_record"]

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}
DEFAULT_MAX_RECORD_BYTES = 1 << 20  # 1 MiB: far beyond any text a model reads, short of a runaway line
_SHOWN = 200  # characters of an unreadable line kept in the errors file
_BOMS = {b"\xff\xfe": "UTF-16 (little-endian)", b"\xfe\xff": "UTF-16 (big-endian)"}
# Where a JSON line may spell a surrogate (\ud800-\udfff); only then are its strings searched for a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


@dataclass
class Record:
    """One input record: its line, and the item or why it cannot be one.

    ``carried`` holds the record's other keys or columns (copied into its output
    record); ``raw`` the line as read, shortened, when the record is an error;
    ``terminated`` is False for a last line without a newline; ``end`` is the byte
    offset just past the line (where a job that has done this record resumes).
    """

    line: int
    item: Any = None
    error: str | None = None
    carried: dict | None = None
    raw: str | None = None
    terminated: bool = True
    end: int = 0


def _lone_surrogate(value: Any) -> str | None:
    """A lone surrogate among a parsed JSON value's strings (keys included), if any."""
    stack = [value]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return value[exc.start]
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


class _NotFinite(ValueError):
    """A NaN, Infinity or overflowing number in a JSON line: Python's parser takes them, JSON has none."""


def _not_json(token: str):
    raise _NotFinite(token)


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):   # 1e400
        raise _NotFinite(token if len(token) <= 40 else token[:40] + "…")
    return value


class _BadRecord(Exception):
    """A line that is not a record; ``carried`` holds what could be read of its other fields."""

    def __init__(self, message: str, carried: dict | None = None):
        super().__init__(message)
        self.carried = carried


def file_format(path: Path) -> str:
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        hint = ""
        if path.suffix.lower() in (".xlsx", ".xls", ".ods"):
            hint = " (save the sheet as CSV: File > Save As > CSV UTF-8)"
        elif path.suffix.lower() == ".json":
            hint = " (a .json file holds one document; write one JSON value a line as .jsonl)"
        elif not path.suffix:
            hint = " (rename it to .txt if it holds one text a line)"
        raise InvalidInputError(
            f"cannot read {str(path)!r}: unknown input format {path.suffix or '(no extension)'!r}; "
            f"taskflow reads {', '.join(FORMATS)}{hint}"
        ) from None


def stream_kind(path: str | os.PathLike) -> str | None:
    """What ``path`` is when it can only be read as a stream, once (a FIFO, a process substitution's
    ``/dev/fd/N``, a character device); None for anything else (a file, a folder, nothing)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe, or a process substitution such as <(zcat file.gz))"
    if stat.S_ISCHR(mode):
        return "a character device"
    return None


def check_path(path: str | os.PathLike) -> Path:
    """``path`` as a Path, if it names a readable file of a known format."""
    path = Path(path)
    if path.is_dir():
        raise InvalidInputError(f"input {str(path)!r} is a directory, not a file")
    kind = stream_kind(path)
    if kind is not None:
        raise InvalidInputError(
            f"input {str(path)!r} is {kind}, which can be read only once; a job reads its input file again "
            "(to count its records, to check it did not change, to resume), so it needs a regular file. Read it "
            f"as a stream with the command line (taskflow TASK --input {path}, to stdout or --output FILE; no "
            "resume), or copy it to a file first")
    if not path.is_file():
        raise InvalidInputError(f"input file {str(path)!r} does not exist")
    file_format(path)
    if not os.access(path, os.R_OK):
        raise InvalidInputError(f"input file {str(path)!r} is not readable (permission denied)")
    return path


def check_encoding(encoding: str) -> str:
    """The codec's canonical name; refuses encodings that do not write newlines, tabs and quotes as ASCII."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise InvalidInputError(f"unknown encoding {encoding!r}; e.g. utf-8 (the default), gbk, gb18030, big5") from None
    if name == "utf-8-sig":
        return "utf-8"   # UTF-8 whose byte-order mark is dropped: what utf-8 reads here too
    probe = '\n\t,"{}'
    try:
        ascii_compatible = probe.encode(name) == probe.encode("ascii")
    except (UnicodeError, LookupError):
        ascii_compatible = False
    if not ascii_compatible:
        raise InvalidInputError(
            f"encoding {encoding!r} is not ASCII-compatible (lines cannot be split in its bytes); "
            "convert the file to UTF-8 first, e.g. iconv -f UTF-16 -t UTF-8"
        )
    return name


class InputFile:
    """An input file open for reading records lazily; iterate it for :class:`Record` objects.

    ``fields`` are the keys/columns the task reads; ``carry`` the other ones to copy
    into each output record (``None``: every other one).  After iteration,
    ``lines`` and ``offset`` say how many physical lines and bytes were consumed.

    >>> with InputFile("reviews.csv", ["text"]) as source:   # doctest: +SKIP
    ...     for record in source:
    ...         print(record.line, record.item, record.carried)
    """

    def __init__(
        self,
        path: str | os.PathLike,
        fields: Sequence[str],
        *,
        encoding: str = "utf-8",
        carry: Sequence[str] | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        stream=None,
    ):
        # ``stream``: an open binary stream with ``readline`` and ``peek`` (standard input, a FIFO), read
        # in the format ``path``'s extension names, as .txt without one; ``path`` names it in messages.
        # It is not closed here.
        self.path = None if stream is not None else check_path(path)
        self.source = str(path)
        if stream is None:
            self.format = file_format(self.path)
        else:
            self.format = file_format(Path(path)) if Path(path).suffix else "txt"
        self.encoding = check_encoding(encoding)
        if not isinstance(max_record_bytes, int) or isinstance(max_record_bytes, bool) or max_record_bytes < 1:
            raise InvalidInputError(f"max_record_bytes must be a positive int, got {max_record_bytes!r}")
        self.max_record_bytes = max_record_bytes
        self.fields = tuple(fields)
        self.carry = None if carry is None else tuple(carry)
        if self.carry and self.format == "txt":
            raise InvalidInputError(
                f"{self.source}: a .txt file has no named fields to carry ({', '.join(self.carry)}); "
                "--id-field (id_fields=) needs a .jsonl, .csv or .tsv input"
            )
        self.lines = 0    # physical lines consumed, the header included
        self.offset = 0   # bytes consumed
        self.records = 0  # records yielded (not counting skipped ones)
        self.header: list[str] | None = None
        self._handle = stream if stream is not None else open(self.path, "rb")
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------- lines
    def _start(self) -> None:
        head = self._handle.read(3) if self.path is not None else self._handle.peek(3)[:3]
        for bom, name in _BOMS.items():
            if head.startswith(bom):
                raise InvalidInputError(
                    f"{self.source} is {name} text (it starts with that byte-order mark); "
                    "save it as UTF-8, or convert it: iconv -f UTF-16 -t UTF-8"
                )
        if head == codecs.BOM_UTF8 and self.encoding == "utf-8":
            self.offset = 3  # a BOM is not part of the first text (nor of the first CSV column's name)
        if self.path is None:
            self._handle.read(self.offset)
        else:
            self._handle.seek(self.offset)
        if self.format in ("csv", "tsv"):
            self._read_header()

    def _next_line(self) -> tuple[int, str | None, str | None, bool] | None:
        """``(number, text, error, terminated)`` of the next physical line, or None at the end."""
        limit = self.max_record_bytes
        data = self._handle.readline(limit + 2)  # + "\r\n"
        if not data:
            return None
        self.lines += 1
        self.offset += len(data)
        number = self.lines
        terminated = data.endswith(b"\n")
        content = data.rstrip(b"\n")
        content = content[:-1] if content.endswith(b"\r") else content
        if len(content) > limit or (not terminated and len(data) == limit + 2):
            size = len(content)
            while not terminated:  # drop the rest of the line without holding it
                more = self._handle.readline(1 << 16)
                if not more:
                    break
                self.offset += len(more)
                terminated = more.endswith(b"\n")
                size += len(more.rstrip(b"\r\n"))
            return number, self._shown(content[:_SHOWN * 4]), (
                f"{self.source}:{number}: line is longer than max_record_bytes ({limit:,} bytes; it has {size:,}); "
                "is a quote or newline missing? (raise --max-record-bytes if such records are expected)"
            ), terminated
        try:
            text = content.decode(self.encoding)
        except ValueError as exc:   # UnicodeDecodeError, or a codec's own complaint (idna: "Invalid character")
            where = (f"{exc.reason} at byte {exc.start + 1} of the line" if isinstance(exc, UnicodeDecodeError)
                     else str(exc))
            return number, self._shown(content), (
                f"{self.source}:{number}: not valid {self.encoding} ({where}); "
                "if the file is in another encoding, name it with --encoding (e.g. --encoding gbk; encoding='gbk' in Python)"
            ), terminated
        if "\x00" in text:
            return number, text, (
                f"{self.source}:{number}: line holds a NUL byte at character {text.index(chr(0)) + 1} "
                "(a binary file, or one damaged by a crash?)"
            ), terminated
        return number, text, None, terminated

    def _shown(self, content: bytes) -> str:
        """A line that cannot be a record, as text for the errors file: what cannot be decoded is replaced
        (as UTF-8 where the codec cannot replace, e.g. idna)."""
        try:
            return content.decode(self.encoding, "replace")
        except (ValueError, LookupError):
            return content.decode("utf-8", "replace")

    def _read_header(self) -> None:
        line = self._next_line()
        if line is None:
            self.header = []  # an empty file: no records
            return
        _, text, error, _ = line
        if error is not None:
            raise InvalidInputError(f"{error} (the header row)")
        if not text.strip():
            raise InvalidInputError(f"{self.source}:1: the header row is blank; a .{self.format} file starts with its column names")
        header = self._split(text)
        if isinstance(header, str):
            raise InvalidInputError(f"{self.source}:1: header row: {header}")
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise InvalidInputError(f"{self.source}:1: the header names column(s) {', '.join(map(repr, duplicates))} twice")
        missing = [f for f in self.fields if f not in header]
        if missing:
            raise InvalidInputError(
                f"{self.source}: no column {', '.join(map(repr, missing))}; columns are {header}; choose with --field"
            )
        missing = [f for f in self.carry or () if f not in header]
        if missing:
            raise InvalidInputError(
                f"{self.source}: no column {', '.join(map(repr, missing))} for --id-field (id_fields=); columns are {header}"
            )
        self.header = header

    def _split(self, text: str) -> list[str] | str:
        """The fields of one CSV/TSV line, or why it has none."""
        if self.format == "tsv":
            return text.split("\t")
        try:
            return next(csv.reader([text], strict=True))
        except csv.Error as exc:
            reason = str(exc)
            if "unexpected end of data" in reason:
                return ("a quoted field is not closed on its line (records are one line each: a field with a "
                        "line break inside is not supported; a stray \" opens a quote)")
            if "field larger than field limit" in reason:
                return f"a field is longer than {csv.field_size_limit():,} characters"
            return f"not valid CSV ({reason})"

    # ----------------------------------------------------------- records
    def __iter__(self) -> Iterator[Record]:
        while True:
            line = self._next_line()
            if line is None:
                return
            self.records += 1
            record = self._record(*line)
            record.end = self.offset
            yield record

    def skip(self, count: int) -> int:
        """Pass over ``count`` records without reading them (a resumed job's done ones); returns how many there were."""
        skipped = 0
        while skipped < count and self._next_line() is not None:
            skipped += 1
        return skipped

    def _record(self, number: int, text: str | None, error: str | None, terminated: bool) -> Record:
        if error is None and not text.strip():
            error = (f"{self.source}:{number}: empty line (a blank line is an error in every input format; delete it; "
                     "a job from --input FILE into --output FILE can skip such lines with --on-error skip)")
        if error is not None:
            raw = None if text is None else (text if len(text) <= _SHOWN else text[:_SHOWN] + "…")
            return Record(number, error=error, raw=raw, terminated=terminated)
        try:
            item, carried = getattr(self, f"_parse_{self.format}")(text, number)
        except _BadRecord as exc:
            raw = text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
            return Record(number, error=str(exc), raw=raw, carried=exc.carried, terminated=terminated)
        return Record(number, item, carried=carried, terminated=terminated)

    def _parse_txt(self, text: str, number: int) -> tuple[Any, dict | None]:
        return (text if len(self.fields) == 1 else text.split("\t")), None

    def _parse_jsonl(self, text: str, number: int) -> tuple[Any, dict | None]:
        where = f"{self.source}:{number}"
        try:
            value = json.loads(text, parse_constant=_not_json, parse_float=_finite)
        except _NotFinite as exc:
            raise _BadRecord(f"{where}: a number JSON cannot hold ({exc}); JSON has no NaN or Infinity, and a "
                             "number must lie within ±1.8e308 (write a missing value as null)") from None
        except json.JSONDecodeError as exc:
            raise _BadRecord(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except RecursionError:
            raise _BadRecord(f"{where}: JSON nested too deeply") from None
        except ValueError as exc:  # valid JSON that Python will not hold, e.g. an integer of 5,000 digits
            raise _BadRecord(f"{where}: a JSON value that cannot be read ({exc})") from None
        if _SURROGATE_ESCAPE.search(text):
            lone = _lone_surrogate(value)
            if lone is not None:
                raise _BadRecord(f"{where}: the JSON escape \\u{ord(lone):04x} is half of a UTF-16 surrogate pair, "
                                 "not a character (text cut inside an emoji?); it cannot be written out as UTF-8")
        if not isinstance(value, dict):
            if self.carry:
                raise _BadRecord(f"{where}: a JSON {type(value).__name__}, not an object with key(s) "
                                        f"{', '.join(map(repr, self.carry))} for --id-field")
            return value, None  # a bare value is the item (a bare string for a one-text task)
        return self._pick(value, where, "key")

    def _parse_csv(self, text: str, number: int) -> tuple[Any, dict | None]:
        where = f"{self.source}:{number}"
        values = self._split(text)
        if isinstance(values, str):
            raise _BadRecord(f"{where}: {values}")
        if len(values) != len(self.header):
            raise _BadRecord(
                f"{where}: {len(values)} field(s), but the header has {len(self.header)} ({', '.join(self.header)})"
                + ("; a stray delimiter or quote?" if self.format == "csv" else "; a stray tab?")
            )
        return self._pick(dict(zip(self.header, values)), where, "column")

    _parse_tsv = _parse_csv

    def _pick(self, row: dict, where: str, noun: str) -> tuple[Any, dict]:
        if self.carry is None:
            carried = {k: v for k, v in row.items() if k not in self.fields}
        else:
            carried = {k: row[k] for k in self.carry if k in row}
            absent = [f for f in self.carry if f not in row]
            if absent:
                raise _BadRecord(f"{where}: no {noun} {', '.join(map(repr, absent))} for --id-field", carried)
        missing = [f for f in self.fields if f not in row]
        if missing:
            raise _BadRecord(
                f"{where}: no {noun} {', '.join(map(repr, missing))} (has {', '.join(map(repr, row)) or 'none'}); "
                "choose with --field", carried
            )
        # Several fields fill the task's slots in the order given (--field text_a,text_b is a pair's
        # text1, text2), whatever the file calls them.
        item = row[self.fields[0]] if len(self.fields) == 1 else [row[f] for f in self.fields]
        return item, carried

    # ------------------------------------------------------------ housekeeping
    def close(self) -> None:
        if self.path is not None:
            self._handle.close()

    def __enter__(self) -> "InputFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def count_lines(path: str | os.PathLike, size: int | None = None) -> int:
    """Physical lines in the first ``size`` bytes of a file (all of it by default):
    newlines, plus one for a last line without a newline.  One pass over bytes."""
    count, last, left = 0, b"\n", size
    with open(path, "rb") as handle:
        while left is None or left > 0:
            block = handle.read(1 << 20 if left is None else min(1 << 20, left))
            if not block:
                break
            count += block.count(b"\n")
            last = block[-1:]
            if left is not None:
                left -= len(block)
    return count + (last != b"\n")


def count_records(path: str | os.PathLike) -> int:
    """How many records a file holds (every line but a CSV/TSV header): for a progress bar's ETA."""
    lines = count_lines(path)
    return max(0, lines - 1) if file_format(Path(path)) in ("csv", "tsv") else lines


# ------------------------------------------------------------------ output records

def _with_carried(front: dict, carried: dict | None, body: dict) -> dict:
    """``front``, the carried input fields, then ``body``; a carried field whose name is
    taken (a gold ``label`` column next to the predicted one) comes as ``input_<name>``."""
    out = dict(front)
    for key, value in (carried or {}).items():
        name = key
        while name in out or name in body:
            name = f"input_{name}"
        out[name] = value
    out.update(body)
    return out


def output_record(record: Record, result: Any) -> dict:
    """The JSON object written for one result: its input ``line``, the carried input
    fields, then the task's result (a dict's keys; any other result under ``"result"``).

    >>> output_record(Record(7, "很好", carried={"id": "a1"}), {"text": "很好", "label": "positive"})
    {'line': 7, 'id': 'a1', 'text': '很好', 'label': 'positive'}
    >>> output_record(Record(8, "你好"), ["你", "好"])
    {'line': 8, 'result': ['你', '好']}
    """
    body = result if isinstance(result, dict) and "line" not in result else {"result": result}
    return _with_carried({"line": record.line}, record.carried, body)


def error_record(record: Record, error: str) -> dict:
    """The JSON object written to the errors file for a record that was not processed:
    ``line``, the carried fields, ``error`` and ``input`` (the item, or the line as read)."""
    shown = record.item if record.error is None else record.raw
    return _with_carried({"line": record.line}, record.carried, {"error": error, "input": shown})
