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
package through :class:`~.tagger.LexicalStages` (``tagger.py``, the machinery they share);
they only shape the output differently.  Every task takes:

* ``user_dict``: a file path or a list of lines in LAC's customisation format
  (``春天/SEASON``, ``花 开/v``) or jieba's (``word freq tag``); see
  :mod:`taskflow.tasks.lexical_analysis.user_dict`.  User items win over the model.
* ``user_dict_format``: ``"auto"`` (default), ``"lac"`` or ``"jieba"``.

The model sees half-width, ASCII lower-case text (one char per char), so
outputs are slices of the caller's own text: ``''.join(segs) == text``.
Whitespace is never inside a word; a run of it is one ``w`` token.  Texts
longer than the model's window are split at sentence ends and joined back.
Where the model cut apart a word of the package's word dictionary (``粉/丝``),
the pieces are joined (:mod:`.dictionary`) before the user dictionary applies.
"""

from __future__ import annotations

from typing import Any

from taskflow.registry import register_task
from taskflow.task import Option

from .tags import JIEBA_TO_LAC
# The shared tagger (tagger.py); its main names are this package's too.
from .tagger import (NORMALIZATION, LexicalStages, LexicalVocab, encode, normalize, read_vocab, word_cuts,
                     words_from_labels)
from .user_dict import load_user_dict

__all__ = [
    "LexicalStages", "LexicalAnalysisTask", "WordSegmentationTask", "POSTaggingTask",
    "normalize", "encode", "read_vocab", "LexicalVocab", "words_from_labels", "word_cuts", "NORMALIZATION",
]


@register_task("lexical_analysis", aliases=["lac", "lexical"])
class LexicalAnalysisTask(LexicalStages):
    """Words and their LAC tags (POS plus PER/LOC/ORG/TIME) for each text.

    >>> from taskflow import Taskflow
    >>> Taskflow("lexical_analysis", user_dict=["北京大学/ORG"])("我在北京大学")   # doctest: +SKIP
    [{'text': '我在北京大学', 'segs': ['我', '在', '北京大学'], 'tags': ['r', 'p', 'ORG']}]
    """

    declared = {
        "user_dict": Option(
            None,
            'a UTF-8 text file (or a list of its lines) of words the model must get right, one entry a line: '
            'a word, or its parts separated by spaces, each optionally tagged, ``春天/SEASON`` or ``花 开/v``; or'
            " jieba's ``word [freq] [tag]``. Entries win over the model.",
            "str"),
        "user_dict_format": Option(
            'auto',
            "how user_dict's lines are read: ``auto`` (told by the lines), ``lac`` or ``jieba``.",
            "str"),
    }

    default_model = "bigru_crf"

    def __init__(self, model, *, user_dict: Any = None, user_dict_format: str = "auto", **base):
        super().__init__(model, **base)
        self.user_dict = load_user_dict(user_dict, user_dict_format, normalize=self.normalize, tag_map=JIEBA_TO_LAC)

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
    # PaddleNLP's modes: fast is jieba (fast.py, a package with no network), base the lexical model.
    modes = {"fast": "word_segmentation/jieba", "base": "lexical_analysis/bigru_crf"}
    single_text_unwrapped = True

    @classmethod
    def class_for(cls, package_task):
        if package_task == "word_segmentation":
            from .fast import JiebaSegmentationTask

            return JiebaSegmentationTask
        return cls

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
