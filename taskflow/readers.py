"""Records of a batch job's input file, every line accounted for.

Formats, by extension (or, for standard input and other streams, as ``format=`` names them):

* ``.txt``: a record a line (tab-separated parts for a task of several fields);
* ``.jsonl`` / ``.ndjson``: a JSON value a line; an object's ``fields`` are picked;
* ``.csv`` / ``.tsv``: a header row, then a record a line.  ``.csv`` fields may be
  quoted (RFC 4180), and a quoted field may hold line breaks (``"很好\\n下次还来",5``
  is one record of two fields); ``.tsv`` has no quoting (a ``"`` is a character).

A record is one line (``\\n`` or ``\\r\\n``), except a CSV record whose quoted field
holds line breaks: it is numbered by the line it starts on (in messages, the errors
file and a job's checkpoint alike), and its text keeps the line breaks as the file
writes them.  A quote opened on a line is taken for a stray one, not a field with
line breaks, when no later line closes it into a valid record of the header's width
(before the end of the input and within ``max_record_bytes``): that line alone is
then a bad record, and the lines after it are read as records of their own, so one
stray ``"`` never swallows the records after it.  The newline that ends the file
does not start another record.  A line that cannot be a record becomes an error
record with its line number (the job's ``on_error`` decides whether that stops it),
never a skipped one: bytes that are not valid in the file's encoding, a NUL byte,
more than ``max_record_bytes``, a blank line, bad JSON, a JSON value Python cannot
hold (an integer of more than 4,300 digits), a number JSON cannot hold (``NaN``,
``Infinity``, ``1e400``, which Python's parser takes), a lone surrogate escape
(``"\\udc80"``: no character, so it cannot be written out), a missing key, a CSV
quote left open, the wrong number of fields.  A UTF-8 byte-order mark at the start is
dropped (``utf-8`` and ``utf-8-sig`` read the same).

An input that cannot be read at all (missing file, unknown extension, unusable
encoding, a CSV header without the needed columns) raises at construction.

A FIFO or a character device (``mkfifo``, ``<(zcat x.gz)``, which is ``/dev/fd/N``) can only
be read once, front to back: :func:`stream_kind` tells it apart, and it is read as a stream
(``stream=``): in the ``format=`` given, else in its extension's format or, with none, as .txt.
A job (``run_file``) needs a regular file, which it reads again to count, check and resume.
"""

from __future__ import annotations

import codecs
import collections
import csv
import json
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence

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


class _Line(NamedTuple):
    """One physical line as read: its ``text`` (what can be shown of it, with an ``error``); ``ending`` is its
    line end as written ("\\n", "\\r\\n", or "" for a last line without one), ``size`` its bytes without it,
    ``end`` the byte offset just past it.  A CSV record that spans lines is one of these too, numbered by its
    first line."""

    number: int
    text: str
    error: str | None
    terminated: bool
    ending: str = "\n"
    size: int = 0
    end: int = 0


def _ends_quoted(text: str | bytes, quoted: bool = False) -> bool:
    """Whether a CSV line (str, or bytes of an ASCII-compatible encoding) ends inside a quoted field
    (``quoted``: it starts inside one), read as RFC 4180 and Python's csv module read quotes: a ``"``
    that starts a field opens it, ``""`` inside is a quote, another ``"`` closes it; a ``"`` inside an
    unquoted field is a character."""
    mark, comma = ('"', ",") if isinstance(text, str) else (b'"', b",")
    if not quoted and mark not in text:
        return False
    at = 0
    if not quoted and text.startswith(mark):
        quoted, at = True, 1
    while True:
        if quoted:
            quote = text.find(mark, at)
            if quote < 0:
                return True
            if text.startswith(mark, quote + 1):
                at = quote + 2
                continue
            quoted, at = False, quote + 1
        at = text.find(comma, at) + 1
        if not at:
            return False
        if text.startswith(mark, at):
            quoted, at = True, at + 1


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
        format: str | None = None,
    ):
        # ``stream``: an open binary stream with ``readline`` and ``peek`` (standard input, a FIFO), read
        # in ``format`` ("txt", "jsonl", "csv", "tsv"), else in the one ``path``'s extension names, as .txt
        # without one; ``path`` names it in messages.  It is not closed here.  A file is read in the format
        # its extension names (``format``, if given, must be that one).
        self.path = None if stream is not None else check_path(path)
        self.source = str(path)
        if format is not None and format not in FORMATS.values():
            raise InvalidInputError(f"unknown input format {format!r}; taskflow reads "
                                    f"{', '.join(dict.fromkeys(FORMATS.values()))}")
        if stream is None:
            self.format = file_format(self.path)
            if format is not None and format != self.format:
                raise InvalidInputError(f"{self.source} is read as its extension says ({self.format}), not as "
                                        f"{format}: rename it to .{format}, or pipe it in as standard input")
        else:
            self.format = format or (file_format(Path(path)) if Path(path).suffix else "txt")
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
                + (" (standard input and other streams: --format jsonl, csv or tsv)" if stream is not None else "")
            )
        self.lines = 0    # physical lines consumed, the header included
        self.offset = 0   # bytes consumed
        self.records = 0  # records yielded (not counting skipped ones)
        self.header: list[str] | None = None
        self._ahead: collections.deque[_Line] = collections.deque()   # lines read past a stray CSV quote
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

    def _read_line(self) -> _Line | None:
        """The next physical line (of those read ahead first), or None at the end."""
        if self._ahead:
            line = self._ahead.popleft()
            self.lines, self.offset = line.number, line.end
            return line
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
        ending = data[len(content):].decode("ascii")

        def line(text, error=None):
            return _Line(number, text, error, terminated, ending, len(content), self.offset)

        if len(content) > limit or (not terminated and len(data) == limit + 2):
            size = len(content)
            while not terminated:  # drop the rest of the line without holding it
                more = self._handle.readline(1 << 16)
                if not more:
                    break
                self.offset += len(more)
                terminated = more.endswith(b"\n")
                size += len(more.rstrip(b"\r\n"))
            return _Line(number, self._shown(content[:_SHOWN * 4]), (
                f"{self.source}:{number}: line is longer than max_record_bytes ({limit:,} bytes; it has {size:,}); "
                "is a quote or newline missing? (raise --max-record-bytes if such records are expected)"
            ), terminated, "", size, self.offset)
        try:
            text = content.decode(self.encoding)
        except ValueError as exc:   # UnicodeDecodeError, or a codec's own complaint (idna: "Invalid character")
            where = (f"{exc.reason} at byte {exc.start + 1} of the line" if isinstance(exc, UnicodeDecodeError)
                     else str(exc))
            return line(self._shown(content), (
                f"{self.source}:{number}: not valid {self.encoding} ({where}); "
                "if the file is in another encoding, name it with --encoding (e.g. --encoding gbk; encoding='gbk' in Python)"
            ))
        if "\x00" in text:
            return line(text, (
                f"{self.source}:{number}: line holds a NUL byte at character {text.index(chr(0)) + 1} "
                "(a binary file, or one damaged by a crash?)"
            ))
        return line(text)

    def _next_record(self) -> _Line | None:
        """The next record's line: a physical line, or for a CSV record whose quoted field holds line
        breaks, its lines joined (numbered by the first); None at the end."""
        first = self._read_line()
        if (first is None or self.format != "csv" or first.error is not None
                or not _ends_quoted(first.text)):
            return first
        lines, size, why = [first], first.size, None
        while why is None:
            line = self._read_line() if lines[-1].terminated else None
            if line is None:
                why = ", nor by the end of the input"
                break
            lines.append(line)
            size += len(lines[-2].ending) + line.size
            if size > self.max_record_bytes:
                why = (f", nor within max_record_bytes ({self.max_record_bytes:,} bytes; raise --max-record-bytes if "
                       "a field holds more text)")
                break
            if not _ends_quoted(line.text, quoted=True):
                break
        if why is None:
            text = "".join(line.text + line.ending for line in lines[:-1]) + lines[-1].text
            values = self._split(text)
            span = f"; where line {lines[-1].number} closes it, lines {first.number}-{lines[-1].number} make"
            if isinstance(values, str):
                why = f"{span} no record ({values})"
            elif self.header is not None and len(values) != len(self.header):
                why = f"{span} {len(values)} field(s), but the header has {len(self.header)}"
            else:
                error = None
                bad = next((line for line in lines if line.error is not None), None)
                if bad is not None:   # a bad line inside the record: the record is bad, named by its first line
                    prefix = f"{self.source}:{bad.number}: "
                    error = (f"{self.source}:{first.number}: line {bad.number}, inside a quoted field: "
                             + bad.error[len(prefix) if bad.error.startswith(prefix) else 0:])
                return _Line(first.number, text, error, lines[-1].terminated, lines[-1].ending, size, lines[-1].end)
        # A stray quote, not a field with line breaks: its line is the bad record, and the lines after it are
        # read again as records of their own.
        self._ahead.extendleft(reversed(lines[1:]))
        self.lines, self.offset = first.number, first.end
        if self.header is None:
            return first   # the header row: its own check says the quote is not closed
        return first._replace(error=f"{self.source}:{first.number}: a quoted field is not closed on its line{why}; "
                                    "a stray \" opens a quote: close the field's quote, or write a quote inside a "
                                    "field as \"\"")

    def _shown(self, content: bytes) -> str:
        """A line that cannot be a record, as text for the errors file: what cannot be decoded is replaced
        (as UTF-8 where the codec cannot replace, e.g. idna)."""
        try:
            return content.decode(self.encoding, "replace")
        except (ValueError, LookupError):
            return content.decode("utf-8", "replace")

    def _read_header(self) -> None:
        line = self._next_record()
        if line is None:
            self.header = []  # an empty file: no records
            return
        text, error = line.text, line.error
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
                return "a quoted field is not closed (a stray \" opens a quote)"
            if "field larger than field limit" in reason:
                return f"a field is longer than {csv.field_size_limit():,} characters"
            return f"not valid CSV ({reason})"

    # ----------------------------------------------------------- records
    def __iter__(self) -> Iterator[Record]:
        while True:
            line = self._next_record()
            if line is None:
                return
            self.records += 1
            record = self._record(line)
            record.end = self.offset
            yield record

    def skip(self, count: int | None = None) -> int:
        """Pass over ``count`` records (None: all) without parsing them (a resumed job's done ones); returns
        how many there were."""
        skipped = 0
        while (count is None or skipped < count) and self._next_record() is not None:
            skipped += 1
        return skipped

    def _record(self, line: _Line) -> Record:
        number, text, error, terminated = line.number, line.text, line.error, line.terminated
        if error is None and not text.strip():
            error = (f"{self.source}:{number}: empty line (a blank line is an error in every input format; delete it; "
                     "--on-error skip skips such lines)")
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


def count_records(path: str | os.PathLike, *, encoding: str = "utf-8",
                  max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> int:
    """How many records a file holds, as :class:`InputFile` reads them with these settings (every line but
    a CSV/TSV header; a CSV record over several lines once): for a progress bar's ETA and a job's accounting.
    One pass over bytes, unless a CSV line ends inside a quoted field: then its records are read (not
    parsed) as a job reads them."""
    fmt = file_format(Path(path))
    lines = _lines_of_one_record(path) if fmt == "csv" and not _stateful(encoding) else None
    if fmt == "csv" and lines is None:
        with InputFile(path, (), encoding=encoding, carry=(), max_record_bytes=max_record_bytes) as source:
            return source.skip()
    lines = count_lines(path) if lines is None else lines
    return max(0, lines - 1) if fmt in ("csv", "tsv") else lines


def _stateful(encoding: str) -> bool:
    """An encoding whose bytes for other characters may be a quote or a comma (ISO-2022, HZ), so that a
    CSV line's quotes are found only in its text."""
    return codecs.lookup(encoding).name.startswith(("iso2022", "hz"))


def _lines_of_one_record(path: str | os.PathLike) -> int | None:
    """The lines of a CSV file where none ends inside a quoted field (every line is a record, or its
    header), or None where one does, or holds more than a MiB (the reader decides those)."""
    count = 0
    with open(path, "rb") as handle:
        while True:
            line = handle.readline(1 << 20)
            if not line:
                return count
            if not line.endswith(b"\n") and len(line) == 1 << 20:
                return None
            if b'"' in line and _ends_quoted(line.rstrip(b"\r\n")):
                return None
            count += 1


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
