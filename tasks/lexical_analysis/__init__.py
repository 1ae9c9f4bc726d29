"""lexical_analysis, word_segmentation, pos_tagging and ner (fast): one LAC-style model.

>>> from taskflow import Taskflow
>>> Taskflow("lexical_analysis")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
[{'text': '李明昨天在北京大学见到了王芳',
  'segs': ['李明', '昨天', '在', '北京大学', '见到', '了', '王芳'],
  'tags': ['PER', 'TIME', 'p', 'ORG', 'v', 'u', 'PER']}]

A char-level BiGRU-CRF (``model.py``) labels every char with ``TAG-B`` (a word
starts here) or ``TAG-I`` (the word goes on), in the LAC tag set::

    n f s t nr ns nt nw nz v vd vn a ad an d m q r p c u xc w PER LOC ORG TIME

The three thin tasks run the same model package and share its cache; they
only shape the output differently.  Every task takes:

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
import unicodedata
from typing import Any, Iterable

import numpy as np

from taskflow.errors import InvalidInputError, UserDictError
from taskflow.predictor import InputSpec
from taskflow.registry import register_task
from taskflow.task import TextTask

from .user_dict import UserDict, UserDictFormat

__all__ = [
    "LexicalAnalysisTask", "WordSegmentationTask", "POSTaggingTask", "NERTask",
    "normalize", "encode", "read_vocab", "ENTITY_LABELS",
]

PAD, UNK = 0, 1
BOS, EOS = "\x02", "\x03"   # bigram padding around a text; never produced by normalize()
ENTITY_LABELS = ("PER", "LOC", "ORG", "TIME")

_NORMALIZE = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}            # full -> half width
_NORMALIZE.update({code: code + 32 for code in range(ord("A"), ord("Z") + 1)})  # ASCII lower-case
_NORMALIZE.update({code: code - 0xFEE0 + 32 for code in range(0xFF21, 0xFF3B)})  # Ａ -> a in one step
_NORMALIZE.update({code: 0x20 for code in range(0x10000) if chr(code).isspace()})
_NORMALIZE.update({ord(BOS): 0x20, ord(EOS): 0x20})


def normalize(text: str) -> str:
    """What the model sees: half-width, ASCII lower-case, any whitespace as a space.

    One char in, one char out (``str.lower`` would turn 'İ' into two), so
    offsets into the normalised text are offsets into the caller's.

    >>> normalize("ＩＢＭ\\u3000公司")
    'ibm 公司'
    """
    return text.translate(_NORMALIZE)


def read_vocab(path) -> tuple[dict[str, int], dict[str, int]]:
    """``(char -> id, bigram -> id)`` from a package's ``vocab.json``."""
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


@register_task("lexical_analysis", aliases=["lac", "lexical"])
class LexicalAnalysisTask(TextTask):
    """Words and their LAC tags (POS plus PER/LOC/ORG/TIME) for each text.

    >>> from taskflow import Taskflow
    >>> Taskflow("lexical_analysis", user_dict=["北京大学/ORG"])("我在北京大学")   # doctest: +SKIP
    [{'text': '我在北京大学', 'segs': ['我', '在', '北京大学'], 'tags': ['r', 'p', 'ORG']}]
    """

    default_model = "bigru_crf"
    default_batch_size = 64

    def __init__(self, package, *, user_dict: Any = None, user_dict_format: str = "auto", **base):
        super().__init__(package, **base)
        self.labels = list(self.manifest["labels"])
        self._label_tags = [label.rsplit("-", 1)[0] for label in self.labels]
        self._label_begins = [label.endswith("-B") for label in self.labels]
        self.chars, self.bigrams = read_vocab(package.path("vocab.json"))
        if user_dict_format not in [f.value for f in UserDictFormat]:
            raise UserDictError(f"user_dict_format must be one of 'auto', 'lac', 'jieba'; got {user_dict_format!r}")
        self.user_dict = None
        if user_dict is not None:
            from .data import JIEBA_TO_LAC

            self.user_dict = UserDict.load(user_dict, format=user_dict_format, normalize=normalize, tag_map=JIEBA_TO_LAC)

    @property
    def tag_set(self) -> list[str]:
        """The tags the model can give, in the package's order."""
        return list(dict.fromkeys(self._label_tags))

    # ---------------------------------------------------------------- model
    def network_class(self):
        from .model import LexicalNet

        return LexicalNet

    def input_specs(self):
        return [
            InputSpec("char_ids", "int64", (self.batch_size, self.max_length)),
            InputSpec("bigram_ids", "int64", (self.batch_size, self.max_length + 1)),
        ]

    # --------------------------------------------------------------- stages
    def preprocess(self, units):
        return encode([normalize(text) for _, text in units], self.chars, self.bigrams)

    def postprocess(self, outputs, units):
        paths = outputs[0]
        return [paths[row, : len(text)].tolist() for row, (_, text) in enumerate(units)]

    def join(self, item, results, units):
        ids = [label for result in results for label in result]
        begins = [self._label_begins[i] for i in ids]
        tags = [self._label_tags[i] for i in ids]
        if begins:
            begins[0] = True
        # A chunk's first char starts a word, whatever label the CRF gave it.
        for offset, _ in units:
            if offset < len(begins):
                begins[offset] = True
        norm = normalize(item)
        mark_unseen_symbols(norm, self.chars, begins, tags)
        if self.user_dict is not None:
            self.user_dict.apply(norm, begins, tags)
        return self.format_result(item, words_from_labels(item, begins, tags))

    def format_result(self, text: str, words: list[tuple[int, int, str]]) -> Any:
        return {"text": text, "segs": [text[s:e] for s, e, _ in words], "tags": [t for _, _, t in words]}

    def render_html(self, results, items):
        from taskflow.display import html_spans

        labels: list[str] = []
        blocks = []
        for r in results:
            spans = [(s, s + len(w), t) for (s, w), t in zip(_starts(r["segs"]), r["tags"]) if t != "w"]
            blocks.append(html_spans(r["text"], spans, labels))
        return "".join(blocks)


@register_task("word_segmentation", aliases=["segmentation", "cws"])
class WordSegmentationTask(LexicalAnalysisTask):
    """The words of each text (the lexical model's segmentation).

    >>> from taskflow import Taskflow
    >>> Taskflow("word_segmentation")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
    [['李明', '昨天', '在', '北京大学', '见到', '了', '王芳']]
    """

    default_model = "lexical_analysis/bigru_crf"

    def format_result(self, text, words):
        return [text[s:e] for s, e, _ in words]


@register_task("pos_tagging", aliases=["pos"])
class POSTaggingTask(LexicalAnalysisTask):
    """``(word, tag)`` pairs of each text, in the LAC tag set.

    >>> from taskflow import Taskflow
    >>> Taskflow("pos_tagging")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
    [[('李明', 'PER'), ('昨天', 'TIME'), ('在', 'p'), ('北京大学', 'ORG'), ('见到', 'v'), ('了', 'u'), ('王芳', 'PER')]]
    """

    default_model = "lexical_analysis/bigru_crf"

    def format_result(self, text, words):
        return [(text[s:e], t) for s, e, t in words]


@register_task("ner", aliases=["named_entity_recognition"])
class NERTask(LexicalAnalysisTask):
    """Named entities with character offsets, plus the ``(word, tag)`` list.

    Options (on top of ``user_dict`` / ``user_dict_format``):
        entity_labels: which tags count as entities (default PER, LOC, ORG,
            TIME); tags from the user dictionary may be added.
        entity_only: keep only entity words in ``words``.

    ``mode="accurate"`` gives WordTag categories instead (人物类_实体, 组织机构类...),
    ``entity_only=True`` by default, in the same shape; see
    :class:`taskflow.tasks.knowledge_mining.AccurateNERTask`.

    ``text[start:end] == entity['text']`` for every entity (``end`` exclusive).

    >>> from taskflow import Taskflow
    >>> Taskflow("ner", mode="fast")("李明昨天在北京大学见到了王芳")   # doctest: +SKIP
    [{'text': '李明昨天在北京大学见到了王芳',
      'entities': [{'text': '李明', 'label': 'PER', 'start': 0, 'end': 2},
                   {'text': '昨天', 'label': 'TIME', 'start': 2, 'end': 4},
                   {'text': '北京大学', 'label': 'ORG', 'start': 5, 'end': 9},
                   {'text': '王芳', 'label': 'PER', 'start': 12, 'end': 14}],
      'words': [('李明', 'PER'), ('昨天', 'TIME'), ('在', 'p'), ('北京大学', 'ORG'),
                ('见到', 'v'), ('了', 'u'), ('王芳', 'PER')]}]
    """

    default_model = "lexical_analysis/bigru_crf"
    modes = {"fast": "lexical_analysis/bigru_crf", "accurate": "knowledge_mining/termtree"}

    @classmethod
    def class_for(cls, package_task):
        # mode="accurate" runs a knowledge_mining package: WordTag categories, same output shape.
        if package_task == "knowledge_mining":
            from taskflow.tasks.knowledge_mining import AccurateNERTask

            return AccurateNERTask
        return cls

    def __init__(self, package, *, entity_labels: Iterable[str] | None = None, entity_only: bool = False, **base):
        super().__init__(package, **base)
        user_tags = sorted(self.user_dict.tags) if self.user_dict is not None else []
        known = list(dict.fromkeys(self.tag_set + user_tags))
        self.entity_labels = check_entity_labels(entity_labels, ENTITY_LABELS, known, "tag names such as ['PER', 'ORG']")
        self.entity_only = bool(entity_only)

    def format_result(self, text, words):
        return entity_result(text, words, self.entity_labels, self.entity_only)

    def render_html(self, results, items):
        from taskflow.display import html_spans

        labels: list[str] = []
        return "".join(
            html_spans(r["text"], [(e["start"], e["end"], e["label"]) for e in r["entities"]], labels) for r in results
        )


def _starts(words: list[str]) -> list[tuple[int, str]]:
    out, start = [], 0
    for word in words:
        out.append((start, word))
        start += len(word)
    return out


def check_entity_labels(entity_labels: Iterable[str] | None, default: Iterable[str], known: list[str],
                        example: str) -> frozenset:
    """The labels a ner task reports (``default`` when ``None``); a typed error names unknown ones."""
    if entity_labels is None:
        return frozenset(default)
    if isinstance(entity_labels, str) or not all(isinstance(x, str) for x in entity_labels):
        raise InvalidInputError(f"entity_labels must be a list of {example}, got {entity_labels!r}")
    entity_labels = tuple(entity_labels)
    unknown = sorted(set(entity_labels) - set(known))
    if unknown or not entity_labels:
        raise InvalidInputError(
            f"entity_labels has {', '.join(map(repr, unknown)) or 'no labels'}; choose from {', '.join(known)}"
        )
    return frozenset(entity_labels)


def entity_result(text: str, words: Iterable[tuple[int, int, str]], entity_labels: frozenset, entity_only: bool) -> dict:
    """ner's output for ``(start, end, label)`` words: ``{'text', 'entities', 'words'}`` (both modes)."""
    words = list(words)
    entities = [{"text": text[s:e], "label": t, "start": s, "end": e} for s, e, t in words if t in entity_labels]
    pairs = [(text[s:e], t) for s, e, t in words if not entity_only or t in entity_labels]
    return {"text": text, "entities": entities, "words": pairs}
