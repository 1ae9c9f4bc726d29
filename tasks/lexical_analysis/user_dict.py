"""User dictionaries for the lexical tasks: LAC's customisation format, or jieba's.

LAC format (one item a line; parts separated by spaces; each part optionally
``word/TAG``)::

    春天/SEASON          one word, tagged SEASON
    花 开/v              the text 花开 becomes two words, 花 (tag from the model) and 开/v
    秋天的风             one word, tag from the model at its first char

jieba format (``word [freq] [tag]``)::

    云计算 5
    创新办 3 i

An item matches the text regardless of character width and ASCII case (both
sides are normalised like the model's input).  Matches are found by forward
maximum matching, left to right: at each position the longest item that
starts there wins, and scanning resumes after it.  A match overrides the
model: its parts become exactly the words, with the item's tags where given
and the model's tag (at the part's first char) elsewhere, and the text right
after a match always starts a new word.  When two lines give the same item,
the later line wins.

jieba's tags are mapped to LAC's (``nr -> PER``, ``ns -> LOC``, ``nt -> ORG``,
``t -> TIME``...) so one tag set comes out; jieba's frequencies are accepted
and ignored.  LAC-format tags are kept as written (any ``[A-Za-z][A-Za-z0-9_]*``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Sequence

from taskflow.errors import UserDictError
from taskflow.text import read_text_file

__all__ = ["UserDict", "UserDictFormat", "DictItem"]

# The largest user dictionary read, decompressed: jieba's full dictionary is under 9 MB, and a
# .gz a few KB long could otherwise expand to gigabytes before a line is parsed.
_MAX_DICT_BYTES = 64 << 20
# A tag after the last '/': LAC's letters (SEASON, n), or a Chinese category of two chars or more
# (电影, 作品类_实体, as the accurate mode's entries have); else the '/' is part of the word (1/2, 和/或).
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[\u4e00-\u9fff][\u4e00-\u9fffA-Za-z0-9_]+")
_JIEBA_LINE = re.compile(r"(\S+)(?:\s+(\d+))?(?:\s+([A-Za-z][A-Za-z0-9_]*))?")


def user_dict_lines(source: Any, *, example: list[str]) -> tuple[list[str], str]:
    """The lines of a user dictionary given as a file path (``str`` or ``os.PathLike``) or a list
    of str, and how messages name it; ``example`` lines show the format in the errors."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"user_dict file {str(path)!r} does not exist; pass a path to a UTF-8 text "
                                    f"file, one entry a line (e.g. `echo '{example[0]}' > my_dict.txt`), or in "
                                    f"Python a list of lines such as {example!r}")
        return read_text_file(path, UserDictError, _MAX_DICT_BYTES).splitlines(), str(path)
    if isinstance(source, (list, tuple)):
        for number, line in enumerate(source, 1):
            if not isinstance(line, str):
                raise UserDictError(f"user_dict line {number} must be a str, got {type(line).__name__} ({line!r})",
                                    source="user_dict", line=number)
        return list(source), "user_dict"
    raise UserDictError(f"user_dict must be a file path or a list of str lines, got {type(source).__name__}; "
                        f"e.g. user_dict='my_dict.txt' or user_dict={example!r}")


class UserDictFormat(str, Enum):
    AUTO = "auto"
    LAC = "lac"
    JIEBA = "jieba"


@dataclass(frozen=True)
class DictItem:
    """One user item: its parts (words) and their tags (``None``: keep the model's)."""

    words: tuple[str, ...]
    tags: tuple[str | None, ...]
    line: int


class UserDict:
    """Parsed user items, keyed by their normalised text.

    >>> d = UserDict.from_lines(["春天/SEASON", "花 开/v"])
    >>> sorted(d.items)
    ['春天', '花开']
    """

    def __init__(self, items: dict[str, DictItem], normalize: Callable[[str], str] = lambda s: s):
        self.items = items
        self.normalize = normalize
        self._lengths = sorted({len(key) for key in items}, reverse=True)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def tags(self) -> set[str]:
        """Every tag the items set."""
        return {tag for item in self.items.values() for tag in item.tags if tag}

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(cls, source: Any, *, format: str = "auto", normalize: Callable[[str], str] = lambda s: s,
             tag_map: dict[str, str] | None = None) -> "UserDict":
        """From a file path (``str`` or ``os.PathLike``) or a list of lines."""
        try:
            fmt = UserDictFormat(format)
        except ValueError:
            raise UserDictError(f"user_dict_format must be one of 'auto', 'lac', 'jieba'; got {format!r}") from None
        lines, where = user_dict_lines(source, example=["春天/SEASON", "花 开/v"])
        return cls.from_lines(lines, format=fmt, normalize=normalize, tag_map=tag_map, source=where)

    @classmethod
    def from_lines(cls, lines: Sequence[str], *, format: "str | UserDictFormat" = "auto",
                   normalize: Callable[[str], str] = lambda s: s, tag_map: dict[str, str] | None = None,
                   source: str = "user_dict") -> "UserDict":
        fmt = UserDictFormat(format)
        numbered = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
        if fmt is UserDictFormat.AUTO:
            fmt = _detect(numbered)
        parse = _parse_jieba if fmt is UserDictFormat.JIEBA else _parse_lac
        items: dict[str, DictItem] = {}
        for number, line in numbered:
            item = parse(line, number, source, tag_map or {})
            key = normalize("".join(item.words))
            items[key] = item       # a later line wins
        return cls(items, normalize)

    # --------------------------------------------------------------- applying
    def apply(self, norm_text: str, begins: list[bool], tags: list[str]) -> None:
        """Override per-char word starts and tags in place (forward maximum matching)."""
        n, i = len(norm_text), 0
        while i < n:
            for length in self._lengths:
                if length <= n - i and norm_text[i:i + length] in self.items:
                    item = self.items[norm_text[i:i + length]]
                    start = i
                    for word, tag in zip(item.words, item.tags):
                        end = start + len(word)   # normalisation keeps lengths
                        tag = tag or tags[start]
                        for k in range(start, end):
                            begins[k], tags[k] = k == start, tag
                        start = end
                    i += length
                    if i < n:
                        begins[i] = True
                    break
            else:
                i += 1


def load_user_dict(source: Any, format: str, *, normalize: Callable[[str], str],
                   tag_map: dict[str, str] | None = None) -> "UserDict | None":
    """The lexical tasks' ``user_dict`` / ``user_dict_format`` options: ``None`` without a
    dictionary, but a format that is not one of ours is an error either way."""
    if format not in [f.value for f in UserDictFormat]:
        raise UserDictError(f"user_dict_format must be one of 'auto', 'lac', 'jieba'; got {format!r}")
    return None if source is None else UserDict.load(source, format=format, normalize=normalize, tag_map=tag_map)


def _split_part(part: str, number: int, source: str) -> tuple[str, str | None]:
    if "/" not in part or part == "/":
        return part, None
    word, _, tag = part.rpartition("/")
    if not tag:
        raise UserDictError(f"{source}:{number}: part {part!r} ends with '/' but has no tag; write e.g. {word}/n",
                            source=source, line=number)
    if not _TAG.fullmatch(tag):
        return part, None       # a '/' inside a word, e.g. 1/2
    if not word:
        raise UserDictError(f"{source}:{number}: part {part!r} has a tag but no word; write e.g. 春天/{tag}",
                            source=source, line=number)
    return word, tag


def _parse_lac(line: str, number: int, source: str, tag_map: dict[str, str]) -> DictItem:
    words, tags = [], []
    for part in line.split():
        word, tag = _split_part(part, number, source)
        words.append(word)
        tags.append(tag)
    return DictItem(tuple(words), tuple(tags), number)


def _parse_jieba(line: str, number: int, source: str, tag_map: dict[str, str]) -> DictItem:
    match = _JIEBA_LINE.fullmatch(line)
    if not match:
        raise UserDictError(
            f"{source}:{number}: {line!r} is not a jieba dictionary line 'word [freq] [tag]' "
            "(freq a non-negative integer, tag letters/digits)", source=source, line=number,
        )
    word, _, tag = match.groups()
    return DictItem((word,), (tag_map.get(tag, tag) if tag else None,), number)


def _detect(numbered: list[tuple[int, str]]) -> UserDictFormat:
    """jieba if some line has a frequency, no line uses '/', and every line fits jieba's grammar."""
    if any("/" in line for _, line in numbered):
        return UserDictFormat.LAC
    fits = all(_JIEBA_LINE.fullmatch(line) for _, line in numbered)
    has_freq = any(len(line.split()) >= 2 and line.split()[1].isdigit() for _, line in numbered)
    return UserDictFormat.JIEBA if fits and has_freq else UserDictFormat.LAC
