"""The term tree: terms with a WordTag category, a term id and a frequency, under a category hierarchy.

File format (UTF-8, optionally gzip-compressed; ``.tsv`` or ``.tsv.gz``), one term a line,
tab-separated, an optional header line ``term<TAB>category<TAB>termid<TAB>freq<TAB>source``::

    红楼梦	作品类_实体	作品与出版物_eb_红楼梦	334	cluener:book
    曹雪芹	人物类_实体		1165	thuocl:historical_figure
    长津湖	作品类_实体

* ``term`` and ``category`` are required; ``category`` is one of :data:`CATEGORIES`;
* ``termid`` may be empty: it becomes ``<top type>_eb_<term>`` (e.g. ``作品与出版物_eb_红楼梦``);
* ``freq`` (a non-negative integer, default 0) breaks ties when a term has several categories;
* ``source`` is free text (where the line came from).

Blank lines and lines starting with ``#`` are skipped.  A term may appear
under several categories (a place that is also a food).  Lookups match
regardless of character width and ASCII case.  A bad line raises
:class:`taskflow.errors.TermTreeError` naming the file and line number.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from taskflow.errors import TermTreeError
from taskflow.text import read_text_file

from .categories import CATEGORIES, TOP_TYPES, termid as make_termid

__all__ = ["TermTree", "Term", "COLUMNS"]

COLUMNS = ("term", "category", "termid", "freq", "source")
_KNOWN = frozenset(CATEGORIES)


class Term(NamedTuple):
    """One line of the tree."""

    term: str
    category: str
    termid: str
    freq: int = 0
    source: str = ""


class TermTree:
    """Terms keyed by their normalised text, each with one or more categories.

    >>> tree = TermTree.from_lines(["红楼梦\\t作品类_实体", "曹雪芹\\t人物类_实体\\t\\t1165"])
    >>> tree.lookup("红楼梦")[0].termid
    '作品与出版物_eb_红楼梦'
    """

    def __init__(self, terms: Iterable[Term] = (), normalize: Callable[[str], str] = lambda s: s):
        self.normalize = normalize
        self._terms: dict[str, list[Term]] = {}
        for term in terms:
            self.add(term)

    def add(self, term: Term) -> None:
        key = self.normalize(term.term)
        entries = self._terms.get(key)
        if entries is None:
            self._terms[key] = [term]
            return
        entries[:] = [e for e in entries if e.category != term.category] + [term]
        entries.sort(key=lambda e: -e.freq)   # most frequent sense first

    def __len__(self) -> int:
        return sum(len(v) for v in self._terms.values())

    def __contains__(self, text: str) -> bool:
        return self.normalize(text) in self._terms

    def __iter__(self) -> Iterator[Term]:
        for entries in self._terms.values():
            yield from entries

    def lookup(self, text: str, categories: Iterable[str] | None = None) -> list[Term]:
        """The entries of ``text``, most frequent first; only those in ``categories`` if given."""
        entries = self._terms.get(self.normalize(text), [])
        if categories is None:
            return list(entries)
        wanted = set(categories)
        return [e for e in entries if e.category in wanted]

    def linked(self, text: str, category: str) -> Term | None:
        """The entry for ``text`` under the same top type as ``category`` (what gets a termid), if any."""
        top = TOP_TYPES.get(category, category)
        for entry in self._terms.get(self.normalize(text), ()):
            if entry.category == category:
                return entry
        for entry in self._terms.get(self.normalize(text), ()):
            if TOP_TYPES.get(entry.category) == top:
                return entry
        return None

    @staticmethod
    def hierarchy() -> dict[str, list[str]]:
        """Top type -> its categories."""
        tops: dict[str, list[str]] = {}
        for category, top in TOP_TYPES.items():
            tops.setdefault(top, []).append(category)
        return tops

    # ---------------------------------------------------------------- loading
    @classmethod
    def load(cls, path: str | os.PathLike, normalize: Callable[[str], str] = lambda s: s) -> "TermTree":
        """From a ``.tsv`` or gzip-compressed ``.tsv.gz`` file (see the module docstring)."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"term_tree file {str(path)!r} does not exist; pass a path to a .tsv or .tsv.gz file")
        text = read_text_file(path, TermTreeError)
        return cls.from_lines(text.split("\n"), normalize=normalize, source=str(path))

    @classmethod
    def from_lines(cls, lines: Iterable[str], *, normalize: Callable[[str], str] = lambda s: s,
                   source: str = "term_tree") -> "TermTree":
        tree = cls(normalize=normalize)
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            if number == 1 and line.split("\t")[:2] == ["term", "category"]:
                continue
            tree.add(_parse(line, number, source))
        return tree

    def save(self, path: str | os.PathLike) -> None:
        """Write the tree as TSV with a header (gzip-compressed when ``path`` ends in ``.gz``)."""
        rows = ["\t".join(COLUMNS)]
        for term in sorted(self, key=lambda t: (t.category, -t.freq, t.term)):
            # An id that is the default form stays implicit: a third of the file, for nothing.
            shown = "" if term.termid == make_termid(term.category, term.term) else term.termid
            rows.append("\t".join([term.term, term.category, shown, str(term.freq), term.source]))
        blob = ("\n".join(rows) + "\n").encode("utf-8")
        if str(path).endswith(".gz"):
            blob = gzip.compress(blob, compresslevel=9, mtime=0)   # mtime 0: the same tree gives the same bytes
        Path(path).write_bytes(blob)


def _parse(line: str, number: int, source: str) -> Term:
    fields = line.split("\t")
    count = len(fields)
    if count < 2 or count > len(COLUMNS):
        raise TermTreeError(
            f"{source}:{number}: expected 2 to {len(COLUMNS)} tab-separated fields ({', '.join(COLUMNS)}), "
            f"got {count}: {line[:60]!r}", source=source, line=number,
        )
    term, category = fields[0].strip(), fields[1].strip()
    termid = fields[2].strip() if count > 2 else ""
    freq = fields[3].strip() if count > 3 else ""
    origin = fields[4].strip() if count > 4 else ""
    if not term:
        raise TermTreeError(f"{source}:{number}: the term is empty", source=source, line=number)
    if category not in _KNOWN:
        raise TermTreeError(
            f"{source}:{number}: unknown category {category!r} for {term!r}; use one of {', '.join(CATEGORIES)}",
            source=source, line=number,
        )
    # ASCII digits only (str.isdigit also takes '²' and other scripts' digits, which int() refuses),
    # and at most 18 of them: a count, not a number int() would spend seconds on.
    if freq and not (freq.isascii() and freq.isdigit() and len(freq) <= 18):
        raise TermTreeError(f"{source}:{number}: freq must be a non-negative integer of at most 18 digits, "
                            f"got {freq[:30]!r}", source=source, line=number)
    return Term(term, category, termid or make_termid(category, term), int(freq) if freq else 0, origin)
