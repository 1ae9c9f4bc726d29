"""The lexical tagger: what every task that runs the lexical network builds on.

Users (each imports this module, never the other way round):

* ``lexical_analysis``, ``word_segmentation``, ``pos_tagging`` (this package's ``__init__``);
* ``ner``: its fast mode (:class:`LexicalStages` under ``NERTask``) and ``taskflow train ner``
  (:func:`build_vocab`, :class:`LexicalVocab`, :data:`normalize`);
* ``knowledge_mining``: its categories are put on the words this tagger finds;
* the lab's recipe for the shipped lexical model (``recipes/lexical_analysis``).

What it holds: the text normalisation the model reads (:data:`normalize`, one char in, one char
out), the char and bigram vocabulary (:class:`LexicalVocab`, :func:`build_vocab`), the stages
that run the network (:class:`LexicalStages`), and the decoding of per-char labels into
``(start, end, tag)`` words with the fixes applied after the model (:func:`words_from_labels`,
:func:`mark_unseen_symbols`, :func:`keep_latin_runs_whole`, :func:`split_off_brackets`).  The
network and its CRF loss are :mod:`.model`; the package's word dictionary :mod:`.dictionary`;
user dictionaries :mod:`.user_dict`.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections import Counter
from itertools import compress, islice
from operator import ne, or_
from typing import Any, Mapping, Sequence

import numpy as np

from taskflow.errors import ManifestError
from taskflow.model import register_network
from taskflow.predictor import InputSpec
from taskflow.task import TextTask
from taskflow.text import Normalizer

from .dictionary import WordDictionary
from .user_dict import UserDict

__all__ = [
    "LexicalStages", "LexicalNormalizer", "NormalisedChunk", "normalize", "encode", "read_vocab", "LexicalVocab",
    "build_vocab", "words_from_labels", "word_cuts", "mark_unseen_symbols", "JOINERS", "keep_latin_runs_whole",
    "split_off_brackets", "NORMALIZATION", "BOS", "EOS", "OPENING_MARKS", "CLOSING_MARKS",
]

PAD, UNK = 0, 1
BOS, EOS = "\x02", "\x03"   # bigram padding around a text; never produced by normalize()
# What the shipped model was trained on: half-width, ASCII lower-case, any whitespace a space.
NORMALIZATION = ("t2s", "width", "lower", "space")

# The networks a lexical package may name (model.py); registered here, where they are run.
register_network("bigru_crf", "taskflow.tasks.lexical_analysis.model:LexicalNet")
register_network("idcnn_crf", "taskflow.tasks.lexical_analysis.model:ConvLexicalNet")


class LexicalNormalizer:
    """A model's normalisation, with the bigram padding marks also made spaces (so text can
    never fake them); one char in, one char out, so offsets into the normalised text are
    offsets into the caller's.

    >>> LexicalNormalizer(Normalizer(NORMALIZATION))("ＩＢＭ\\u3000公司")
    'ibm 公司'
    """

    _MARKS = {ord(BOS): 0x20, ord(EOS): 0x20}

    def __init__(self, normalizer: Normalizer):
        if not normalizer.keeps_length:
            raise ValueError(f"the lexical tasks need a normalisation that keeps offsets; got {normalizer!r}")
        self.normalizer = normalizer

    def __call__(self, text: str) -> str:
        text = self.normalizer(text)
        # The marks are almost never there: look for them (a scan in C) before paying translate's
        # dict lookup per char.
        return text.translate(self._MARKS) if BOS in text or EOS in text else text


normalize = LexicalNormalizer(Normalizer(NORMALIZATION))   # the shipped model's; recipes train with it


def read_vocab(path) -> tuple[dict[str, int], dict[str, int]]:
    """``(char -> id, bigram -> id)`` from a ``{"chars": [...], "bigrams": [...]}`` file: the reader of
    this format that a task hands its model (``model.vocab(read_vocab)``), which reads the file it pins."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return ({c: i for i, c in enumerate(data["chars"])}, {b: i for i, b in enumerate(data["bigrams"])})


def _code_points(text: str) -> np.ndarray:
    """The code point of every char of ``text`` (int64); a lone surrogate is its own code point."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32).astype(np.int64)


class LexicalVocab:
    """A model's char and bigram ids, looked up for a whole batch at once with numpy.

    Chars go through a dense code point -> id table; a bigram, as the integer
    ``code(a) << 21 | code(b)`` (code points are below 2**21), is found by binary search in
    the vocabulary's sorted keys.  Vocabulary entries that are not one char (chars) or two
    (bigrams), such as ``[PAD]`` and ``[UNK]``, can never match and are left out.  Build it
    once per vocabulary: the shipped one's 100,000 bigrams take about 40 ms.

    >>> vocab = LexicalVocab({"[PAD]": 0, "[UNK]": 1, "我": 2}, {"[PAD]": 0, "[UNK]": 1, "\\x02我": 2})
    >>> vocab.encode(["我他"])["bigram_ids"].tolist()
    [[2, 1, 1]]
    """

    _SHIFT = 21                            # bits of a code point (U+10FFFF < 2**21)
    _NO_KEY = 1 << (2 * _SHIFT)            # above every bigram key: ends the sorted keys

    def __init__(self, chars: Mapping[str, int], bigrams: Mapping[str, int]):
        self.chars, self.bigrams = chars, bigrams
        singles = {c: i for c, i in chars.items() if len(c) == 1}
        codes = _code_points("".join(singles))
        # One slot past the largest known code point: every unknown char is clipped onto it.
        self._char_ids = np.full(int(codes.max(initial=-1)) + 2, UNK, np.int64)
        self._char_ids[codes] = np.fromiter(singles.values(), np.int64, len(singles))
        pairs = {b: i for b, i in bigrams.items() if len(b) == 2}
        pair_codes = _code_points("".join(pairs)).reshape(-1, 2)
        keys = np.append(pair_codes[:, 0] << self._SHIFT | pair_codes[:, 1], self._NO_KEY)
        ids = np.append(np.fromiter(pairs.values(), np.int64, len(pairs)), UNK)
        order = np.argsort(keys, kind="stable")
        self._bigram_keys, self._bigram_ids = keys[order], ids[order]

    @classmethod
    def read(cls, path) -> "LexicalVocab":
        """From a vocabulary file (:func:`read_vocab`'s format)."""
        return cls(*read_vocab(path))

    @functools.cached_property
    def _unseen_char(self) -> re.Pattern:
        known = sorted(c for c in self.chars if len(c) == 1 and c not in JOINERS)   # a joiner is always looked at
        return re.compile("[^" + "".join(map(re.escape, known)) + "]" if known else "(?s:.)")

    def has_unseen(self, text: str) -> bool:
        """Whether some char of ``text`` is not in the char vocabulary or is one of :data:`JOINERS`:
        whether :func:`mark_unseen_symbols` has work to do (one regex search, in C)."""
        return self._unseen_char.search(text) is not None

    def encode(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Model inputs for already-normalised texts.

        ``char_ids`` [B, T]: char ids, 0-padded, unknown chars 1.
        ``bigram_ids`` [B, T + 1]: id of the pair ending at char i (with ``BOS``
        before the first char and ``EOS`` after the last), unknown pairs 1.
        """
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        width = max(1, int(lengths.max(initial=0)))
        codes = _code_points("".join(texts))
        char_ids = np.zeros((len(texts), width), dtype=np.int64)
        # Row-major order of a "within the text" mask is the order of the joined texts.
        char_ids[np.arange(width) < lengths[:, None]] = self._char_ids[np.minimum(codes, len(self._char_ids) - 1)]

        # Every text framed as BOS text EOS, back to back; the pair at j is (padded[j], padded[j + 1]).
        ends = np.cumsum(lengths + 2)
        starts = ends - lengths - 2
        padded = np.empty(int(ends[-1]) if len(texts) else 0, np.int64)
        inside = np.ones(len(padded), bool)
        inside[starts] = inside[ends - 1] = False
        padded[inside] = codes
        padded[starts], padded[ends - 1] = ord(BOS), ord(EOS)
        keys = padded[:-1] << self._SHIFT | padded[1:]
        within = np.ones(len(keys), bool)
        within[ends[:-1] - 1] = False            # EOS of one text, BOS of the next
        keys = keys[within]
        # Searched in sorted order, each search starts where the last ended: half the time of
        # searching in text order.  Never past the end: the last key is above every pair.
        order = np.argsort(keys)
        at = np.empty(len(keys), np.intp)
        at[order] = np.searchsorted(self._bigram_keys, keys[order])
        ids = np.where(self._bigram_keys[at] == keys, self._bigram_ids[at], UNK)
        bigram_ids = np.zeros((len(texts), width + 1), dtype=np.int64)
        bigram_ids[np.arange(width + 1) < lengths[:, None] + 1] = ids
        return {"char_ids": char_ids, "bigram_ids": bigram_ids}


def encode(texts: list[str], chars: dict[str, int], bigrams: dict[str, int]) -> dict[str, np.ndarray]:
    """:meth:`LexicalVocab.encode` with tables built for this call; code that encodes more than
    once builds a :class:`LexicalVocab` and keeps it."""
    return LexicalVocab(chars, bigrams).encode(texts)


def build_vocab(texts: list[str], min_char: int, min_bigram: int, max_bigrams: int = 0,
                corpus_chars: Sequence[str] = (), corpus_bigrams: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Chars and bigrams seen often enough; at most ``max_bigrams`` bigrams (the bigram table is
    most of the package's size).  ``corpus_chars``/``corpus_bigrams`` (the corpus vectors' tokens,
    most frequent first) are added: a char or bigram the training text lacks but the corpus has is
    then a row with a meaning, not [UNK].  The corpus's bigrams come first, then the training
    text's most frequent: the training text alone has more than ``max_bigrams`` bigrams seen
    ``min_bigram`` times, so put after them the corpus's would never get a row."""
    chars, bigrams = Counter(), Counter()
    for text in texts:
        chars.update(text)
        padded = BOS + text + EOS
        bigrams.update(padded[i:i + 2] for i in range(len(text) + 1))
    kept_chars = {c for c, n in chars.items() if n >= min_char} | set(corpus_chars)
    char_list = ["[PAD]", "[UNK]"] + sorted(kept_chars - {"[PAD]", "[UNK]"})
    kept = list(dict.fromkeys([*corpus_bigrams, *(b for b, n in bigrams.most_common() if n >= min_bigram)]))
    bigram_list = ["[PAD]", "[UNK]"] + sorted(kept[:max_bigrams or None])
    return char_list, bigram_list


# Chars that join the symbol before them to the next (ZWJ) or change how it is drawn (variation
# selectors, skin tones, the keycap mark): parts of an emoji sequence, whatever the vocabulary holds.
ZWJ = "\u200d"
JOINERS = frozenset(ZWJ + "\ufe0e\ufe0f\u20e3" + "".join(map(chr, range(0x1F3FB, 0x1F400))))


def mark_unseen_symbols(text: str, known: dict[str, int], begins: list[bool], tags: list[str]) -> None:
    """Make each run of symbols the model never saw (emoji, rare signs, control chars) one ``w`` word.

    The model reads an unseen char as [UNK] and has no evidence to attach it to a neighbour, yet it
    often does (上海😀 as one place).  A run keeps combining marks, joiners (:data:`JOINERS`) and the
    symbol a ZWJ joins on with it, so an emoji sequence stays whole.  A joiner after a word the model
    read (❤ + U+FE0F) joins that word; it is never tagged alone, even where the vocabulary has it
    (then the model would tag it, e.g. a ZWJ as a PER).  ``text`` is the normalised text;
    ``begins``/``tags`` are changed in place."""
    run = False
    for i, ch in enumerate(text):
        # Almost every char is in the vocabulary: look it up before asking for its category.
        joiner = ch in JOINERS
        kind = "" if ch in known and not joiner else unicodedata.category(ch)[0]
        after = text[i - 1] if i else " "
        if not after.isspace() and (joiner or (run and kind == "M")
                                    or (after == ZWJ and (run or unicodedata.category(ch)[0] == "S"))):
            begins[i] = False
            tags[i] = "w" if run else tags[i - 1]
        elif kind and kind in "SPC" and not ch.isspace():
            begins[i] = not run
            tags[i] = "w"
            run = True
        else:
            if run:
                begins[i] = True
            run = False


_LATIN_RUN = re.compile(r"[0-9A-Za-z]{2,}")   # normalised text: full-width Latin is half-width here


def keep_latin_runs_whole(text: str, begins: list[bool], tags: list[str]) -> None:
    """Never cut inside a run of Latin letters and digits (``iPhone15``, ``MacBook``, ``2024``), as LAC
    and jieba never do: a char-level model trained on Chinese news has seen few such runs and splits
    them where their chars' statistics look like a boundary (``iPho|ne``).  Each char of a run goes on
    the word that holds the run's first char, with its tag.  ``text`` is the normalised text (half-width,
    so full-width Latin counts too); ``begins``/``tags`` are changed in place."""
    for run in _LATIN_RUN.finditer(text):   # most texts have none: no per-char Python loop
        start, end = run.span()
        begins[start + 1:end] = [False] * (end - start - 1)
        tags[start + 1:end] = [tags[start]] * (end - start - 1)


# Title marks, corner brackets and double quotes (normalised: half-width where one exists).  Not
# parentheses: they are inside names (华为技术(深圳)有限公司); not single quotes: they are
# apostrophes too (O'Neil, don’t).
OPENING_MARKS, CLOSING_MARKS = "《〈「『【〔“", "》〉」』】〕”"
_BRACKETS = re.compile("[" + re.escape(OPENING_MARKS + CLOSING_MARKS + '"') + "]")


def split_off_brackets(text: str, begins: list[bool], tags: list[str]) -> None:
    """A bracket or double quote is a word of its own, tagged ``w``, as in LAC and MSRA: titles are
    《/w 红楼梦/nw 》/w, never ``《红楼梦》``.  Training sets that mark a title with its brackets
    (CLUENER's book/movie/game mentions do) teach a model to swallow them; this undoes it whatever the
    model learned.  ``begins``/``tags`` are changed in place."""
    for mark in _BRACKETS.finditer(text):
        i = mark.start()
        begins[i] = True
        tags[i] = "w"
        if i + 1 < len(text):
            begins[i + 1] = True


_WHITESPACE = re.compile(r"\s+")   # \s is str.isspace(), char for char


def word_cuts(begins: list[bool], tags: list[str]) -> list[int]:
    """Where words start, but the first char: where ``begins`` says so or the tag changes."""
    n = len(begins)
    # The per-char steps run in C (map, compress); Python touches each word, not each char.
    return list(compress(range(1, n), map(or_, islice(begins, 1, n), map(ne, islice(tags, 1, n), tags))))


def words_from_labels(text: str, begins: list[bool], tags: list[str],
                      cuts: list[int] | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` words from per-char starts and tags; whitespace runs are ``w`` words.

    A word starts where ``begins`` says so or where the tag changes (``cuts``, when the caller
    has them already: :func:`word_cuts`); a whitespace run is one word whatever its labels.
    ``begins`` holds bools (or ints)."""
    n = len(text)
    if not n:
        return []
    if cuts is None:
        cuts = word_cuts(begins, tags)
    spaces = [run.span() for run in _WHITESPACE.finditer(text)]
    if not spaces:
        starts = [0, *cuts]
        return list(zip(starts, [*cuts, n], map(tags.__getitem__, starts)))
    kept = set(cuts)
    for start, end in spaces:
        kept.difference_update(range(start + 1, end))
        kept.update((start, end))
    kept.discard(0)
    kept.discard(n)
    cuts = sorted(kept)
    space_starts = {start for start, _ in spaces}
    starts = [0, *cuts]
    return [(s, e, "w" if s in space_starts else tags[s]) for s, e in zip(starts, [*cuts, n])]


class NormalisedChunk(tuple):
    """A unit ``(offset, text)`` of an item that also carries ``norm``, the model's normalisation
    of ``text``: made once in :meth:`LexicalStages.split`, read by ``preprocess`` and, when the
    item is one chunk, by ``lac_words``, instead of normalising each text twice."""

    norm: str

    def __new__(cls, offset: int, text: str, norm: str) -> "NormalisedChunk":
        chunk = super().__new__(cls, (offset, text))
        chunk.norm = norm
        return chunk

    def __getnewargs__(self) -> tuple[int, str, str]:   # so copy and pickle keep norm
        return (*self, self.norm)


class LexicalStages(TextTask):
    """The stages of every task that runs the lexical network: text in, ``(start, end, tag)``
    words out (:meth:`lac_words`).  ``lexical_role`` names the required model to run when
    the task's own model builds on the lexical one (knowledge_mining: ``"lexical"``)."""

    default_batch_size = 64
    # A sentence of 500 chars sorted first padded 63 others to its length: 19% of MSRA dev's
    # positions at batch 64.  Fewer rows for long units: the same tags, about 1.16x the chars/s
    # there (benchmarks/RESULTS.md, lexical_analysis: batches by length).
    batch_length = 64
    lexical_role: str | None = None

    def result_words(self, result: Any) -> list[tuple[str, str | None]]:
        """``(word, tag)`` pairs of one result, for the notebook view."""
        raise NotImplementedError

    def render_html(self, results, items):
        from taskflow.display import html_words

        labels: list[str] = []   # one colour per tag, shared by the whole view
        return "".join(html_words(text, self.result_words(r), labels) for r, text in zip(results, items))

    def __init__(self, model, **base):
        super().__init__(model, **base)
        if self.lexical_role is not None:
            self.network_model = model.required(self.lexical_role)
        lexical = self.network_model
        self.labels = list(lexical.labels)
        self._label_tags = [label.rsplit("-", 1)[0] for label in self.labels]
        self._label_begins = [label.endswith("-B") for label in self.labels]
        self.vocab = lexical.vocab(LexicalVocab.read)
        self.chars, self.bigrams = self.vocab.chars, self.vocab.bigrams
        self.normalize = LexicalNormalizer(lexical.normalizer)
        # The package's word dictionary (dictionary.py), when its manifest names one: packages made
        # before 1.4.1 work without.
        self.word_dictionary = None
        name = lexical.manifest.get("word_dictionary")
        if name:
            try:
                self.word_dictionary = WordDictionary.load(lexical.path(name))
            except (OSError, ValueError) as exc:      # gzip, UTF-8 and layout errors alike
                raise ManifestError(f"model {lexical.name!r}: cannot read its word_dictionary {name!r}: "
                                    f"{type(exc).__name__}: {exc}") from exc

    @property
    def tag_set(self) -> list[str]:
        """The tags the model can give, in the package's order."""
        return list(dict.fromkeys(self._label_tags))

    def input_specs(self):
        return [
            InputSpec("char_ids", "int64", (self.batch_size, self.max_length)),
            InputSpec("bigram_ids", "int64", (self.batch_size, self.max_length + 1)),
        ]

    def split(self, item: str) -> list[NormalisedChunk]:
        # Each chunk is normalised on its own, as the model reads it (t2s looks at a char's
        # neighbours, so a chunk's normalisation need not be a slice of the item's).
        return [NormalisedChunk(offset, text, self.normalize(text)) for offset, text in super().split(item)]

    def preprocess(self, units):
        return self.vocab.encode([unit.norm if isinstance(unit, NormalisedChunk) else self.normalize(unit[1])
                                  for unit in units])

    def postprocess(self, outputs, units):
        paths = outputs[0]
        return [paths[row, : len(text)].tolist() for row, (_, text) in enumerate(units)]

    def lac_words(self, item: str, results, units, user_dict: UserDict | None = None) -> list[tuple[int, int, str]]:
        """``(start, end, LAC tag)`` words of ``item`` from its chunks' label ids."""
        ids = results[0] if len(results) == 1 else [label for result in results for label in result]
        begins = list(map(self._label_begins.__getitem__, ids))
        tags = list(map(self._label_tags.__getitem__, ids))
        if begins:
            begins[0] = True
        # A chunk's first char starts a word, whatever label the CRF gave it.
        for offset, _ in units:
            if offset < len(begins):
                begins[offset] = True
        one_chunk = len(units) == 1 and isinstance(units[0], NormalisedChunk)   # the chunk is the item
        norm = units[0].norm if one_chunk else self.normalize(item)
        if self.vocab.has_unseen(norm):   # else it would change nothing, after a Python step per char
            mark_unseen_symbols(norm, self.chars, begins, tags)
        keep_latin_runs_whole(norm, begins, tags)
        split_off_brackets(norm, begins, tags)
        cuts = word_cuts(begins, tags)
        if self.word_dictionary is not None:
            cuts = self.word_dictionary.apply(norm, cuts, begins, tags)
        if user_dict is not None:
            user_dict.apply(norm, begins, tags)
            cuts = None      # its items move word starts: found again from the labels
        return words_from_labels(item, begins, tags, cuts)
