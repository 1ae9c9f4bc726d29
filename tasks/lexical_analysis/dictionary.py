"""The package's word dictionary: words the model cut apart, joined back.

The tagger learnt where words end from MSRA news of 1998 and cuts words newer or rarer than
that text into pieces: ``粉/丝``, ``性价/比``, ``耳/机``, ``配/送``.  A dictionary knows them.
After the model has labelled a text, a run of 2 to 4 consecutive words that spells a dictionary
word exactly becomes that one word, with the dictionary's tag (leftmost match first, then the
longest).  Words the model tagged PER, LOC, ORG, TIME or ``w`` are never part of a join: names
and punctuation are the model's.  A user dictionary (``user_dict``) applies after, and wins.

The shipped package's words are chosen by the lab's recipe
(``recipes/lexical_analysis/word_dictionary.py``) from the data the model was trained on.

The file is ``word<TAB>tag`` lines, gzip-compressed, named by the manifest's ``word_dictionary``.
"""

from __future__ import annotations

import gzip
import io
from bisect import bisect_right
from pathlib import Path

from taskflow.files import atomic_write_bytes

__all__ = ["WordDictionary", "write_word_dictionary", "KEPT_BY_MODEL"]

# Tags whose words a join never takes in: entities, and punctuation / whitespace / unseen symbols.
KEPT_BY_MODEL = frozenset({"PER", "LOC", "ORG", "TIME", "w"})


class WordDictionary:
    """Dictionary words and their tags, joined where the model cut them (module docstring).

    >>> d = WordDictionary({"粉丝": "n"})
    >>> text = "粉丝们"
    >>> begins, tags = [True, True, True], ["n", "m", "n"]
    >>> d.apply(text, [1, 2], begins, tags)
    [2]
    >>> begins, tags
    ([True, False, True], ['n', 'n', 'n'])
    """

    def __init__(self, words: dict[str, str]):
        self.words = words
        self.longest = max(map(len, words), default=0)
        # Every word and each of its prefixes of 2 chars or more.  A join begins with two words that
        # spell one of these, so one lookup per pair of neighbouring words finds where joins may
        # begin; most texts have no such pair (a third of MSRA's sentences have one).
        self._beginnings = {word[:n] for word in words for n in range(2, len(word) + 1)}

    def __len__(self) -> int:
        return len(self.words)

    @classmethod
    def load(cls, path: str | Path) -> "WordDictionary":
        """From a ``word<TAB>tag`` file, gzip-compressed or not."""
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as handle:
            rows = [line.rstrip("\n").split("\t") for line in handle if line.strip()]
        bad = next((row for row in rows if len(row) != 2 or not all(row)), None)
        if bad is not None:
            raise ValueError(f"{path}: {chr(9).join(bad)!r} is not a 'word<TAB>tag' line")
        return cls(dict(rows))

    def apply(self, text: str, cuts: list[int], begins: list[bool], tags: list[str]) -> list[int]:
        """Join runs of words that spell a dictionary word; the word cuts after joining.

        ``text`` is the normalised text, ``cuts`` the positions where its words start (but the
        first), as :func:`word_cuts` gives them; ``begins``/``tags`` are changed in place so that
        a later step (the user dictionary) sees the joined words.
        """
        longest, words = self.longest, self.words
        if longest < 2 or not cuts:
            return cuts
        ends = [*cuts, len(text)]
        maybe = [s for s, e in zip([0, *cuts], ends[1:]) if e - s <= longest and text[s:e] in self._beginnings]
        joined, taken_to = [], 0
        for s in maybe:                                   # left to right
            if s < taken_to:
                continue
            # The longest word from s to the end of a later word, with no word the model keeps.
            # Indexing from the bisection, not walking the list from its start, keeps a long text
            # linear: ``islice(ends, k, None)`` steps over the k ends before it for every candidate.
            best = None
            for j in range(bisect_right(ends, s) + 1, len(ends)):
                e = ends[j]
                if e - s > longest:
                    break
                if text[s:e] in words and KEPT_BY_MODEL.isdisjoint(tags[s:e]):
                    best = e
            if best is None:
                continue
            e = best
            begins[s + 1:e] = [False] * (e - s - 1)
            tags[s:e] = [words[text[s:e]]] * (e - s)
            begins[s] = True
            if e < len(text):
                begins[e] = True       # the next word may have had the same tag and no begin mark
            joined.append((s, e))
            taken_to = e
        if not joined:
            return cuts
        inside = {c for s, e in joined for c in range(s + 1, e)}
        return [c for c in cuts if c not in inside]


# ------------------------------------------------------------------ writing

def write_word_dictionary(words: dict[str, str], path: str | Path) -> Path:
    """Write ``words`` as a gzip ``word<TAB>tag`` file, byte for byte the same for the same words
    (no time stamp in the gzip header), so a rebuilt package keeps its sha256."""
    path = Path(path)
    data = "".join(f"{word}\t{tag}\n" for word, tag in sorted(words.items())).encode("utf-8")
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as handle:
        handle.write(data)
    atomic_write_bytes(path, buffer.getvalue())    # a package's file is never seen half-written
    return path
