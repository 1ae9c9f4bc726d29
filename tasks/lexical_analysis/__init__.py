"""lexical_analysis, word_segmentation and pos_tagging: one LAC-style model (ner's fast mode is tasks/ner).

>>> from taskflow import Taskflow
>>> Taskflow("lexical_analysis")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
[{'text': '李明昨天在北京大学见到了王芳',
  'segs': ['李明', '昨天', '在', '北京大学', '见到', '了', '王芳'],
  'tags': ['PER', 'TIME', 'p', 'ORG', 'v', 'u', 'PER']}]

A char-level BiGRU-CRF (``model.py``) labels every char with ``TAG-B`` (a word
starts here) or ``TAG-I`` (the word goes on), in the LAC tag set::

    n f s t nr ns nt nw nz v vd vn a ad an d m q r p c u xc w PER LOC ORG TIME

word_segmentation, pos_tagging, ner and knowledge_mining run the same model
package (through :class:`LexicalStages`); they only shape the output differently.  Every task takes:

* ``user_dict``: a file path or a list of lines in LAC's customisation format
  (``春天/SEASON``, ``花 开/v``) or jieba's (``word freq tag``); see
  :mod:`taskflow.tasks.lexical_analysis.user_dict`.  User items win over the model.
* ``user_dict_format``: ``"auto"`` (default), ``"lac"`` or ``"jieba"``.

The model sees half-width, ASCII lower-case text (one char per char), so
outputs are slices of the caller's own text: ``''.join(segs) == text``.
Whitespace is never inside a word; a run of it is one ``w`` token.  Texts
longer than the model's window are split at sentence ends and joined back.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import numpy as np

from taskflow.errors import UserDictError
from taskflow.model import register_network
from taskflow.predictor import InputSpec
from taskflow.registry import register_task
from taskflow.task import TextTask
from taskflow.text import Normalizer

from .user_dict import UserDict, UserDictFormat

__all__ = [
    "LexicalStages", "LexicalAnalysisTask", "WordSegmentationTask", "POSTaggingTask",
    "normalize", "encode", "read_vocab", "words_from_labels", "NORMALIZATION",
]

PAD, UNK = 0, 1
BOS, EOS = "\x02", "\x03"   # bigram padding around a text; never produced by normalize()
# What the shipped model was trained on: half-width, ASCII lower-case, any whitespace a space.
NORMALIZATION = ("t2s", "width", "lower", "space")

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
        return self.normalizer(text).translate(self._MARKS)


normalize = LexicalNormalizer(Normalizer(NORMALIZATION))   # the shipped model's; recipes train with it


def read_vocab(path) -> tuple[dict[str, int], dict[str, int]]:
    """``(char -> id, bigram -> id)`` from a ``{"chars": [...], "bigrams": [...]}`` file: the reader of
    this format that a task hands its model (``model.vocab(read_vocab)``), which reads the file it pins."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return ({c: i for i, c in enumerate(data["chars"])}, {b: i for i, b in enumerate(data["bigrams"])})


def encode(texts: list[str], chars: dict[str, int], bigrams: dict[str, int]) -> dict[str, np.ndarray]:
    """Model inputs for already-normalised texts.

    ``char_ids`` [B, T]: char ids, 0-padded, unknown chars 1.
    ``bigram_ids`` [B, T + 1]: id of the pair ending at char i (with ``BOS``
    before the first char and ``EOS`` after the last), unknown pairs 1.
    """
    width = max(1, max(len(t) for t in texts))
    char_ids = np.zeros((len(texts), width), dtype=np.int64)
    bigram_ids = np.zeros((len(texts), width + 1), dtype=np.int64)
    for row, text in enumerate(texts):
        char_ids[row, : len(text)] = [chars.get(ch, UNK) for ch in text]
        padded = BOS + text + EOS
        bigram_ids[row, : len(text) + 1] = [bigrams.get(padded[i:i + 2], UNK) for i in range(len(text) + 1)]
    return {"char_ids": char_ids, "bigram_ids": bigram_ids}


def mark_unseen_symbols(text: str, known: dict[str, int], begins: list[bool], tags: list[str]) -> None:
    """Make each run of symbols the model never saw (emoji, rare signs, control chars) one ``w`` word.

    The model reads an unseen char as [UNK] and has no evidence to attach it to a neighbour, yet it
    often does (上海😀 as one place).  A run keeps combining marks, variation selectors and
    zero-width joiners with it, so an emoji sequence stays whole.  ``text`` is the normalised text;
    ``begins``/``tags`` are changed in place."""
    run = False
    for i, ch in enumerate(text):
        # Almost every char is in the vocabulary: look it up before asking for its category.
        kind = "" if ch in known else unicodedata.category(ch)[0]
        if (kind and kind in "SPC" and not ch.isspace()) or (run and kind == "M"):
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


def words_from_labels(text: str, begins: list[bool], tags: list[str]) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` words from per-char starts and tags; whitespace runs are ``w`` words."""
    words: list[tuple[int, int, str]] = []
    start = None
    for i, ch in enumerate(text):
        space = ch.isspace()
        if start is not None:
            prev_space = text[i - 1].isspace()
            if space != prev_space or (not space and (begins[i] or tags[i] != tags[start])):
                words.append((start, i, "w" if prev_space else tags[start]))
                start = None
        if start is None:
            start = i
    if start is not None:
        words.append((start, len(text), "w" if text[start].isspace() else tags[start]))
    return words


class LexicalStages(TextTask):
    """The stages of every task that runs the lexical network: text in, ``(start, end, tag)``
    words out (:meth:`lac_words`).  ``lexical_role`` names the required model to run when
    the task's own model builds on the lexical one (knowledge_mining: ``"lexical"``)."""

    default_batch_size = 64
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
        self.chars, self.bigrams = lexical.vocab(read_vocab)
        self.normalize = LexicalNormalizer(lexical.normalizer)

    @property
    def tag_set(self) -> list[str]:
        """The tags the model can give, in the package's order."""
        return list(dict.fromkeys(self._label_tags))

    def input_specs(self):
        return [
            InputSpec("char_ids", "int64", (self.batch_size, self.max_length)),
            InputSpec("bigram_ids", "int64", (self.batch_size, self.max_length + 1)),
        ]

    def preprocess(self, units):
        return encode([self.normalize(text) for _, text in units], self.chars, self.bigrams)

    def postprocess(self, outputs, units):
        paths = outputs[0]
        return [paths[row, : len(text)].tolist() for row, (_, text) in enumerate(units)]

    def lac_words(self, item: str, results, units, user_dict: UserDict | None = None) -> list[tuple[int, int, str]]:
        """``(start, end, LAC tag)`` words of ``item`` from its chunks' label ids."""
        ids = [label for result in results for label in result]
        begins = [self._label_begins[i] for i in ids]
        tags = [self._label_tags[i] for i in ids]
        if begins:
            begins[0] = True
        # A chunk's first char starts a word, whatever label the CRF gave it.
        for offset, _ in units:
            if offset < len(begins):
                begins[offset] = True
        norm = self.normalize(item)
        mark_unseen_symbols(norm, self.chars, begins, tags)
        keep_latin_runs_whole(norm, begins, tags)
        split_off_brackets(norm, begins, tags)
        if user_dict is not None:
            user_dict.apply(norm, begins, tags)
        return words_from_labels(item, begins, tags)


@register_task("lexical_analysis", aliases=["lac", "lexical"])
class LexicalAnalysisTask(LexicalStages):
    """Words and their LAC tags (POS plus PER/LOC/ORG/TIME) for each text.

    Options:
        user_dict: a UTF-8 text file (or a list of its lines) of words the model must
            get right, one entry a line: a word, or its parts separated by spaces, each
            optionally tagged, ``春天/SEASON`` or ``花 开/v``; or jieba's ``word [freq]
            [tag]``. Entries win over the model.
        user_dict_format: how user_dict's lines are read: ``auto`` (told by the lines),
            ``lac`` or ``jieba``.

    >>> from taskflow import Taskflow
    >>> Taskflow("lexical_analysis", user_dict=["北京大学/ORG"])("我在北京大学")   # doctest: +SKIP
    [{'text': '我在北京大学', 'segs': ['我', '在', '北京大学'], 'tags': ['r', 'p', 'ORG']}]
    """

    default_model = "bigru_crf"

    def __init__(self, model, *, user_dict: Any = None, user_dict_format: str = "auto", **base):
        super().__init__(model, **base)
        if user_dict_format not in [f.value for f in UserDictFormat]:
            raise UserDictError(f"user_dict_format must be one of 'auto', 'lac', 'jieba'; got {user_dict_format!r}")
        self.user_dict = None
        if user_dict is not None:
            from .data import JIEBA_TO_LAC

            self.user_dict = UserDict.load(user_dict, format=user_dict_format, normalize=self.normalize,
                                           tag_map=JIEBA_TO_LAC)

    def join(self, item, results, units):
        return self.format_result(item, self.lac_words(item, results, units, self.user_dict))

    def format_result(self, text: str, words: list[tuple[int, int, str]]) -> Any:
        return {"text": text, "segs": [text[s:e] for s, e, _ in words], "tags": [t for _, _, t in words]}

    def result_words(self, result: Any) -> list[tuple[str, str | None]]:
        return list(zip(result["segs"], result["tags"]))


@register_task("word_segmentation", aliases=["segmentation", "cws"])
class WordSegmentationTask(LexicalAnalysisTask):
    """The words of each text (the lexical model's segmentation).

    >>> from taskflow import Taskflow
    >>> Taskflow("word_segmentation")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
    ['李明', '昨天', '在', '北京大学', '见到', '了', '王芳']
    >>> Taskflow("word_segmentation")(["李明昨天在北京大学见到了王芳"])   # doctest: +SKIP
    [['李明', '昨天', '在', '北京大学', '见到', '了', '王芳']]
    """

    default_model = "lexical_analysis/bigru_crf"
    single_text_unwrapped = True

    def format_result(self, text, words):
        return [text[s:e] for s, e, _ in words]

    def result_words(self, result):
        return [(word, None) for word in result]


@register_task("pos_tagging", aliases=["pos"])
class POSTaggingTask(LexicalAnalysisTask):
    """``(word, tag)`` pairs of each text, in the LAC tag set.

    >>> from taskflow import Taskflow
    >>> Taskflow("pos_tagging")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
    [('李明', 'PER'), ('昨天', 'TIME'), ('在', 'p'), ('北京大学', 'ORG'), ('见到', 'v'), ('了', 'u'), ('王芳', 'PER')]
    """

    default_model = "lexical_analysis/bigru_crf"
    single_text_unwrapped = True

    def format_result(self, text, words):
        return [(text[s:e], t) for s, e, t in words]

    def result_words(self, result):
        return list(result)
