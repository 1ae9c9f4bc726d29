"""The package's word dictionary: words the model cut apart, joined back.

The tagger learnt where words end from MSRA news of 1998 and cuts words newer or rarer than
that text into pieces: ``粉/丝``, ``性价/比``, ``耳/机``, ``配/送``.  A dictionary knows them.
After the model has labelled a text, a run of 2 to 4 consecutive words that spells a dictionary
word exactly becomes that one word, with the dictionary's tag (leftmost match first, then the
longest).  Words the model tagged PER, LOC, ORG, TIME or ``w`` are never part of a join: names
and punctuation are the model's.  A user dictionary (``user_dict``) applies after, and wins.

What goes into the dictionary (:func:`build_word_dictionary`) decides what the step may do, so
it is chosen from data the model was trained on, not from the sets it is evaluated on:

* jieba's dictionary (``extra_dict/dict.txt.small``): words of 2 to 4 Han characters that it
  has seen at least ``min_freq`` times, except its person, place and organisation names (noisy,
  and entities are the model's) and its Latin and number entries;
* only where MSR's segmentation agrees: if the word's string occurs in MSRA's gold-segmented
  training text, the annotators kept it one word at least ``min_whole_share`` of the times
  (就是 is mostly 就/是 there, so it is left to the model; 粉丝 and 性价比 never occur);
* each word's tag as the recipe tags a training word (:func:`data.derive_sentence`); a word
  that would be tagged PER, LOC, ORG or TIME is left out.

The file is ``word<TAB>tag`` lines, gzip-compressed, named by the manifest's ``word_dictionary``.
"""

from __future__ import annotations

import gzip
import io
import re
from bisect import bisect_right
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Callable

from taskflow.packages import atomic_write_bytes

__all__ = ["WordDictionary", "build_word_dictionary", "write_word_dictionary", "KEPT_BY_MODEL"]

# Tags whose words a join never takes in: entities, and punctuation / whitespace / unseen symbols.
KEPT_BY_MODEL = frozenset({"PER", "LOC", "ORG", "TIME", "w"})
_JIEBA_NAMES_LATIN_NUMBERS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "x", "eng", "m", "mq"})
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


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
            best = None
            for e in islice(ends, bisect_right(ends, s) + 1, None):
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


# ------------------------------------------------------------------ building

def build_word_dictionary(jieba_small: str | Path, msra_train: str | Path, lexicon,
                          normalize: Callable[[str], str], *, min_freq: int = 20,
                          min_whole_share: float = 0.5, max_length: int = 4) -> dict[str, str]:
    """``{word: LAC tag}`` chosen as the module docstring says.

    ``jieba_small``: jieba's small dictionary as a ``term<TAB>freq<TAB>pos`` file with a header;
    ``msra_train``: MSRA's ``word/TAG`` training file; ``lexicon``: the recipe's
    :class:`data.Lexicon` (jieba POS), which tags the words as the training data's are tagged.
    """
    from .data import derive_sentence, read_word_tag_file

    candidates: dict[str, str] = {}
    with open(jieba_small, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            row = line.rstrip("\n").split("\t")
            if number == 0 and row[0].lower() == "term" or len(row) < 3:
                continue
            word, freq, pos = row[0], row[1], row[2]
            if (2 <= len(word) <= max_length and _HAN.fullmatch(word) and freq.isdigit() and int(freq) >= min_freq
                    and pos not in _JIEBA_NAMES_LATIN_NUMBERS):
                candidates.setdefault(normalize(word), word)

    # How often each candidate occurs in MSRA's training text, and how often as one gold word.
    seen, whole = Counter(), Counter()
    for sentence in read_word_tag_file(msra_train):
        words = [normalize(word) for word, _ in sentence]
        whole.update(word for word in words if word in candidates)
        text = "".join(words)
        seen.update(text[i:i + n] for n in range(2, max_length + 1) for i in range(len(text) - n + 1)
                    if text[i:i + n] in candidates)

    out, cache = {}, {}
    for norm, word in sorted(candidates.items()):
        if seen[norm] and whole[norm] < min_whole_share * seen[norm]:
            continue                                  # MSR cuts it: the model learnt to
        ((_, tag),) = derive_sentence([(word, "o")], lexicon, cache)
        if tag not in KEPT_BY_MODEL:
            out[norm] = tag
    return out


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
