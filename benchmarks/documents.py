"""The figures tables of the README and the task documents, written from benchmarks/figures/.

Every benchmark script writes its section of RESULTS.md and, beside it, the section's figures as
JSON (``common.update_section``).  The tables that the README and the task documents show are
generated from those files, never typed: :data:`SPEC` says, for each table, its document, its
name, its columns and per row its cells, each literal text or a :class:`Ref` to a cell of a
benchmark's table (a :class:`Ratio` of two, a :class:`Span` of several).  A document holds
only the markers

    <!-- BEGIN figures:NAME -->
    <!-- END figures:NAME -->

and this script writes the table between them, with a line under it saying where, when and by
which command the figures were measured (from the paragraph of each section it used).

    python benchmarks/documents.py                 # rewrite the documents
    python benchmarks/documents.py --check         # exit 1 with a diff where a document differs
    python benchmarks/documents.py --from-results  # figures/*.json of every section now in RESULTS.md
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Union

sys.path.insert(0, str(Path(__file__).parent))
from common import FIGURES, RESULTS, section_figures, sections, write_figures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIGURES_DIR = RESULTS.parent / FIGURES


class FigureError(LookupError):
    """A reference to a section, table, row or column that the figures do not have, or a cell
    that is not the number its format asks for."""


@dataclass(frozen=True)
class Ref:
    """One cell of a benchmark's table: ``section`` (its RESULTS name), ``table`` (its heading, or
    its index among the section's tables), ``row`` (the row's first cell, or a tuple of its first
    cells where the first alone repeats), ``column`` (the column's name as written).

    Format: ``decimals`` rounds the number (half up; a thousands comma stays); ``first`` keeps only
    the cell's leading number ("37,032 (36,085-41,612)" -> "37,032"); ``bold`` keeps the cell's
    ``**`` emphasis (False drops it)."""

    section: str
    table: Union[str, int]
    row: Union[str, tuple]
    column: str
    decimals: Union[int, None] = None
    first: bool = False
    bold: bool = True


@dataclass(frozen=True)
class Ratio:
    """``numerator / denominator`` of two number cells, to ``decimals`` places, then ``suffix``
    ("1.40x": taskflow's chars/s over LAC's in the same run)."""

    numerator: Ref
    denominator: Ref
    decimals: int = 2
    suffix: str = "x"


@dataclass(frozen=True)
class Span:
    """The lowest and highest of several number cells, "0.973-0.997" (one when they are equal)."""

    refs: tuple
    decimals: Union[int, None] = None


Part = Union[str, Ref, Ratio, Span]
Cell = Union[Part, tuple]  # a tuple: its parts joined, e.g. ("BQ test ", Ref(...), "; LCQMC ", Ref(...))


@dataclass(frozen=True)
class Block:
    """One generated table: where it goes (``document``, relative to the repository root, and the
    marker ``name``), its ``columns`` and its ``rows`` of cells."""

    document: str
    name: str
    columns: tuple
    rows: tuple


def table_of(section: str, table: Union[str, int] = 0):
    """References into one table, shorter to write: ``sa = table_of("sentiment_accuracy");
    sa("ChnSentiCorp test", "accurate", decimals=3)``."""
    def ref(row, column, **fmt) -> Ref:
        return Ref(section, table, row, column, **fmt)

    return ref


# ---------------------------------------------------------------------------------------------
# The spec: every generated table of every document.

_sent_acc = table_of("sentiment_accuracy")
_sent_genre = table_of("sentiment_genre_accuracy")
_sent_lodo = table_of("sentiment_lodo")
_sent_robust = table_of("sentiment_robustness", 0)
_sent_neutral3 = table_of("sentiment_neutral", 0)
_sent_neutral_polar = table_of("sentiment_neutral", 1)
_sent_speed_vs = table_of("sentiment_speed", 3)   # beside encoder_ensemble, same run
_lex_speed = table_of("lexical_speed", 0)
_lex_peers = table_of("lexical_peers")
_lex_genre = table_of("lexical_genre")
_km_cluener = table_of("knowledge_mining", "CLUENER2020 dev (1,343 sentences, 3,072 mentions)")
_km_msra = table_of("knowledge_mining", "MSRA NER test (4,365 sentences, 6,181 mentions)")
_km_thuocl = table_of("knowledge_mining", "THUOCL held-out terms (7,104 terms, each one text; none is in the tree)")
_km_speed = table_of("knowledge_mining", 3)
_sim_fast = table_of("similarity_accuracy", 0)
_sim_acc = table_of("similarity_accuracy_accurate", 0)
_sim_contrast = table_of("similarity_contrast", 0)
_sim_speed = table_of("similarity_speed")
_mrc_fast = table_of("mrc_accuracy", 0)
_mrc_acc = table_of("mrc_accuracy_accurate", 0)
_mrc_speed = table_of("mrc_speed")

_SENTIMENT_SMP = "SMP2020 test, usual + virus (polar rows)"
_LODO_MEAN = "mean over the 10 categories (the off-genre figure)"
_LEX_MODEL = "taskflow lexical_analysis, batch 64"
_LEX_LAC = "LAC(mode='lac') on paddlepaddle 2.6.2, 2 math threads"
_LEX_JIEBA = "jieba.posseg.cut (HMM on)"
_LEX_JIEBA_FAST = "taskflow word_segmentation, mode 'fast' (jieba)"
_MRC_FAST = "`drqa_char` 1.1.1 + `drqa_word` 1.0.0 (their mean span probabilities) (through `Taskflow`, static graph)"
_MRC_ACCURATE = ("`reader_ensemble` 1.2.0 + `drqa_word` 1.0.0 + `encoder_span` 1.1.1 (their span probabilities "
                 "averaged with weights 0.1 / 0.4 / 0.5) (through `Taskflow`, static graph)")
_MRC_OVERLAP = "baseline: the best-overlap sentence itself"

README_MODES = Block("README.md", "modes", ("task, mode", "accuracy (in genre; off genre)", "beside", "speed (2 cores)"), (
    ("sentiment, `fast` (default)",
     ("ChnSentiCorp test **", _sent_acc("ChnSentiCorp test", "fast (default)", decimals=3, bold=False),
      "**; Weibo posts (SMP2020 polar test) **", _sent_acc(_SENTIMENT_SMP, "fast (default)", decimals=3, bold=False),
      "**; held-out product categories ", _sent_lodo(_LODO_MEAN, "taskflow dev", decimals=3),
      "; ten other genres ", _sent_genre("all", "fast (default)", decimals=3, bold=False)),
     ("TF-IDF + LR ", _sent_acc("ChnSentiCorp test", "TF-IDF + LR", decimals=3), "; ",
      _sent_acc(_SENTIMENT_SMP, "TF-IDF + LR", decimals=3), "; ", _sent_lodo(_LODO_MEAN, "TF-IDF + LR dev", decimals=3),
      "; ", _sent_genre("all", "TF-IDF + LR", decimals=3, bold=False)),
     (_sent_speed_vs("32", "`char_cnn` 1.3.0 texts/s"), " texts/s (batch 32)")),
    ("sentiment, `accurate`",
     ("ChnSentiCorp test **", _sent_acc("ChnSentiCorp test", "accurate", decimals=3, bold=False),
      "**; Weibo posts (SMP2020 polar test) **", _sent_acc(_SENTIMENT_SMP, "accurate", decimals=3, bold=False),
      "** (fast ", _sent_acc(_SENTIMENT_SMP, "fast (default)", decimals=3, bold=False), "); negation cases ",
      _sent_robust("negation", "taskflow encoder_ensemble 1.3.1", decimals=2, bold=False), ", contrast ",
      _sent_robust("contrast", "taskflow encoder_ensemble 1.3.1", decimals=2, bold=False), " (fast ",
      _sent_robust("negation", "taskflow char_cnn 1.3.0", decimals=2, bold=False), ", ",
      _sent_robust("contrast", "taskflow char_cnn 1.3.0", decimals=2, bold=False), "); ten other genres ",
      _sent_genre("all", "accurate", decimals=3, bold=False)),
     "the same",
     (_sent_speed_vs("32", "`encoder_ensemble` texts/s"), " texts/s, ", _sent_speed_vs("32", "ratio"),
      " the fast mode in the same run: the encoder reads only the reviews the fast network is unsure of")),
    ("sentiment, `neutral=True`",
     ("Weibo posts three-way macro-F1 **",
      _sent_neutral3("three-label model (`neutral=True`)", "macro-F1", decimals=3, bold=False),
      "**; polar posts and ChnSentiCorp test ", _sent_neutral_polar(_SENTIMENT_SMP, "difference", decimals=3), " and ",
      _sent_neutral_polar("chnsenticorp/test.tsv", "difference", decimals=3), " against the default"),
     ("TF-IDF + LR ", _sent_neutral3("TF-IDF + LR, same rows, three labels", "macro-F1", decimals=3)),
     "not measured (the fast network with three labels)"),
    ("lexical_analysis (no modes); ner, `fast`",
     ("MSRA dev seg F1 **", _lex_peers(_LEX_MODEL, "F1", decimals=3), "**, PER/LOC/ORG F1 **",
      _lex_peers(_LEX_MODEL, "PER/LOC/ORG F1", decimals=3), "**; six other genres entity F1 **",
      _lex_genre("taskflow lexical_analysis (1.4.1, shipped)", "F1", decimals=3, bold=False), "**"),
     ("LAC ", _lex_peers(_LEX_LAC, "F1", decimals=3), " (its own standard), ",
      _lex_peers(_LEX_LAC, "PER/LOC/ORG F1", decimals=3),
      ", ", _lex_genre("LAC 2.1.2 on paddlepaddle 2.6.2", "F1", decimals=3, bold=False), "; jieba.posseg ",
      _lex_peers(_LEX_JIEBA, "F1", decimals=3), ", ", _lex_peers(_LEX_JIEBA, "PER/LOC/ORG F1", decimals=3), ", ",
      _lex_genre("jieba 0.42.1 posseg (nr/ns/nt)", "F1", decimals=3, bold=False)),
     ("**", Ratio(_lex_peers(_LEX_MODEL, "chars/s"), _lex_peers(_LEX_LAC, "chars/s")), " LAC** (",
      _lex_peers(_LEX_MODEL, "chars/s", first=True), " chars/s, batch 64), ",
      Ratio(_lex_peers(_LEX_MODEL, "chars/s"), _lex_peers(_LEX_JIEBA, "chars/s")),
      " jieba.posseg (which tags no entities). On AMD, taskflow has MKL use its AVX2 kernels (the lexical card's *Speed*)")),
    ("word_segmentation, `fast`",
     ("jieba over its own dictionary (MSR F1 ", _lex_speed(_LEX_JIEBA_FAST, "F1", decimals=2), ")"),
     ("the model's ", _lex_speed("taskflow lexical_analysis, batch 64", "F1", decimals=2)),
     (_lex_speed(_LEX_JIEBA_FAST, "chars/s", first=True), " chars/s, ",
      Ratio(_lex_speed(_LEX_JIEBA_FAST, "chars/s"),
            _lex_speed("taskflow lexical_analysis, batch 64", "chars/s")), " the model")),
    ("ner / knowledge_mining, `accurate`",
     ("WordTag class of MSRA test mentions ", _km_msra("all", "ours head %", bold=False), "%; CLUENER dev ",
      _km_cluener("all", "ours head %", bold=False), "%"),
     ("LAC-tag mapping ", _km_msra("all", "baseline head %"), "%; ", _km_cluener("all", "baseline head %"), "%"),
     (Ratio(_km_speed("ner (mode accurate)", "chars/s"), _km_speed("lexical_analysis", "chars/s")), " the fast mode")),
    ("text_similarity, `fast`",
     ("BQ test **", _sim_fast("BQ test", "taskflow", decimals=3, bold=False), "**; LCQMC test ",
      _sim_fast("LCQMC test", "taskflow", decimals=3, bold=False), "; everyday contrasts and paraphrases ",
      _sim_contrast("all", "fast", bold=False), "; `similarity` is a probability calibrated on held-out dev pairs"),
     ("TF-IDF + LR ", _sim_fast("BQ test", "TF-IDF + LR", decimals=3), "; ", _sim_fast("LCQMC test", "TF-IDF + LR", decimals=3),
      "; bigram Jaccard ", _sim_contrast("all", "Jaccard", bold=False)),
     (_sim_speed(("fast", "32"), "static pairs/s"), " pairs/s (batch 32)")),
    ("text_similarity, `accurate`",
     ("BQ test **", _sim_acc("BQ test", "taskflow", decimals=3, bold=False), "**; LCQMC test ",
      _sim_acc("LCQMC test", "taskflow", decimals=3, bold=False), "; everyday contrasts ",
      _sim_contrast("all", "accurate", bold=False)),
     "the same",
     (_sim_speed(("accurate", "32"), "static pairs/s"), " pairs/s (same run)")),
    ("reading_comprehension, `fast`",
     ("CMRC 2018 dev F1 **", _mrc_fast(_MRC_FAST, "F1"), "** / EM ", _mrc_fast(_MRC_FAST, "EM")),
     ("best-overlap sentence F1 ", _mrc_fast(_MRC_OVERLAP, "F1")),
     (_mrc_speed(("500", "16"), "static questions/s", decimals=1), " questions/s (500-char contexts, batch 16)")),
    ("reading_comprehension, `accurate`",
     ("CMRC 2018 dev F1 **", _mrc_acc(_MRC_ACCURATE, "F1"), "** / EM ", _mrc_acc(_MRC_ACCURATE, "EM")),
     "the same",
     (_mrc_speed(("500", "16"), "`reader_ensemble` 1.2.0 static questions/s", decimals=1), " questions/s (fast ",
      _mrc_speed(("500", "16"), "static questions/s", decimals=1),
      " in that run): the encoder reads only where the char readers look")),
))

_SENTA = "tasks/sentiment_analysis/README.md"
_sent_lexicon = table_of("sentiment_lexicon_check")
_sent_neutral_check = table_of("sentiment_neutral_check")
_ROBUST_MODELS = ("taskflow char_cnn 1.3.0", "taskflow encoder_ensemble 1.3.1", "TF-IDF + LR")
_INVARIANCES = ("punctuation", "whitespace", "digits", "emoji", "year", "price")


_SENT_COLUMNS = ("fast (default)", "accurate", "TF-IDF + LR")


def _sent_acc_row(label, split, neutral_split=None):
    fast, accurate, tfidf = (_sent_acc(split, column) for column in _SENT_COLUMNS)
    neutral = _sent_neutral_polar(neutral_split, "neutral=True") if neutral_split else ""
    return (label, _sent_acc(split, "texts"), fast, accurate, neutral, tfidf)


def _off_genre_row(label, table, row, columns=_SENT_COLUMNS, neutral=None):
    """A row of the off-genre table: fast, accurate, `neutral=True`, TF-IDF + LR ("" where the
    benchmark does not run that system)."""
    fast, accurate, tfidf = ("" if column is None else table(row, column, bold=False) for column in columns)
    return (label, fast, accurate, "" if neutral is None else table(row, neutral, bold=False), tfidf)


SENTIMENT = (
    Block(_SENTA, "accuracy", ("split", "texts", "fast", "accurate", "`neutral=True`", "TF-IDF + LR"), (
        _sent_acc_row("ChnSentiCorp dev", "ChnSentiCorp dev"),
        _sent_acc_row("ChnSentiCorp test", "ChnSentiCorp test", "chnsenticorp/test.tsv"),
        _sent_acc_row("ChnSentiCorp test.dedup (no text shared with train)", "ChnSentiCorp test.dedup"),
        _sent_acc_row("online_shopping_10_cats test", "online_shopping_10_cats test", "online_shopping_10_cats/test.tsv"),
        _sent_acc_row("waimai_10k test", "waimai_10k test", "waimai_10k/test.tsv"),
        _sent_acc_row("SMP2020-EWECT Weibo posts, usual + virus test (polar rows)", _SENTIMENT_SMP, _SENTIMENT_SMP),
        ("the same posts with their neutral rows, three labels: macro-F1", "", "", "",
         _sent_neutral3("three-label model (`neutral=True`)", "macro-F1"),
         _sent_neutral3("TF-IDF + LR, same rows, three labels", "macro-F1")),
    )),
    Block(_SENTA, "off_genre", ("set", "fast", "accurate", "`neutral=True`", "TF-IDF + LR"), (
        _off_genre_row("ten other genres", _sent_genre, "all"),
        _off_genre_row("their positive texts", _sent_genre, "label `positive`"),
        _off_genre_row("their negative texts", _sent_genre, "label `negative`"),
        _off_genre_row("plain opinions, generated", _sent_lexicon, ("generated (held-out words)", "all")),
        _off_genre_row("plain opinions, generated, negated", _sent_lexicon, ("generated (held-out words)", "negated")),
        _off_genre_row("plain opinions, hand-written", _sent_lexicon, ("hand-written", "all")),
        _off_genre_row("plain opinions, hand-written, negated", _sent_lexicon, ("hand-written", "negated")),
        _off_genre_row("held-out product categories, mean of the ten folds (the fast recipe)", _sent_lodo, _LODO_MEAN,
                       ("taskflow dev", None, "TF-IDF + LR dev")),
        ("constructions: invariances (punctuation, spaces, digits, emoji, a year, a price)",
         *(Span(tuple(_sent_robust(kind, column) for kind in _INVARIANCES)) for column in _ROBUST_MODELS[:2]), "",
         Span(tuple(_sent_robust(kind, _ROBUST_MODELS[2]) for kind in _INVARIANCES))),
        _off_genre_row("constructions: negation (不难吃, 一点也不贵, 不是很好)", _sent_robust, "negation",
                       _ROBUST_MODELS),
        _off_genre_row("constructions: contrast (虽然…但是: the second clause decides)", _sent_robust, "contrast",
                       _ROBUST_MODELS),
        _off_genre_row("constructions: internet slang (yyds, 踩雷, 拉胯; known words in new frames)", _sent_robust, "slang",
                       _ROBUST_MODELS),
        _off_genre_row(("constructions: statements of fact read at most 0.75 sure (", _sent_robust("no opinion", "n"), ")"),
                       _sent_robust, "no opinion", _ROBUST_MODELS),
        _off_genre_row(("plain statements answered `neutral` (",
                        _sent_neutral_check("statements: answered neutral", "n"), ")"),
                       _sent_neutral_check, "statements: answered neutral", (None, None, None), "neutral=True"),
        _off_genre_row(("of them, customer-service questions (", _sent_neutral_check(("question", "40"), "n"), ")"),
                       _sent_neutral_check, ("question", "40"), (None, None, None), "neutral=True"),
        _off_genre_row(("hand-written opinions given their polarity (",
                        _sent_neutral_check("opinions: right polarity", "n"), ")"),
                       _sent_neutral_check, "opinions: right polarity", (None, None, None), "neutral=True"),
    )),
    Block(_SENTA, "speed", ("batch", "fast", "accurate", "accurate / fast"), tuple(
        (batch, _sent_speed_vs(batch, "`char_cnn` 1.3.0 texts/s"), _sent_speed_vs(batch, "`encoder_ensemble` texts/s"),
         _sent_speed_vs(batch, "ratio")) for batch in ("1", "32"))),
)

_SIM = "tasks/text_similarity/README.md"
_sim_fast_swap = table_of("similarity_accuracy", 1)
_sim_acc_swap = table_of("similarity_accuracy_accurate", 1)
_sim_contrast_kinds = table_of("similarity_contrast", 1)


def _sim_row(label, split, genre):
    return (label, _sim_fast(split, "pairs (read identically)", first=True), genre,
            _sim_fast(split, "taskflow", bold=False), _sim_acc(split, "taskflow", bold=False), _sim_fast(split, "TF-IDF + LR"))


def _contrast_row(label, table, row):
    return (label, table(row, "pairs"), *(table(row, column, bold=False) for column in ("fast", "accurate", "Jaccard")))


TEXT_SIMILARITY = (
    Block(_SIM, "accuracy", ("split", "pairs", "genre", "fast", "accurate", "TF-IDF + LR"), (
        _sim_row("BQ test", "BQ test", "in genre (bank)"),
        _sim_row("LCQMC test", "LCQMC test", "open domain, mostly off genre"),
        _sim_row("AFQMC dev", "AFQMC dev", "payments, a harder set"),
        _sim_row("swap dev (swapped roles, changed numbers, entities, negations; synonyms)", "swap dev (one place differs)",
                 "generated + hand-written"),
        ("of it, swapped roles", _sim_fast_swap("swap", "pairs"), "", _sim_fast_swap("swap", "taskflow", bold=False),
         _sim_acc_swap("swap", "taskflow", bold=False), _sim_fast_swap("swap", "TF-IDF + LR")),
    )),
    Block(_SIM, "contrast", ("kind", "pairs", "fast", "accurate", "Jaccard"), (
        _contrast_row("all", _sim_contrast, "all"),
        *(_contrast_row(label, _sim_contrast_kinds, kind) for label, kind in (
            ("negation 想/不想", "negation"), ("antonym verbs 注册/注销", "antonym"), ("time 今天/明天", "time"),
            ("place and direction", "place"), ("number", "number"), ("role swap", "role"),
            ("paraphrase, other words", "paraphrase_words"), ("paraphrase, other order", "paraphrase_order"))),
    )),
    Block(_SIM, "speed", ("batch", "fast", "accurate", "fast, static / dynamic", "accurate, static / dynamic"), tuple(
        (batch, _sim_speed(("fast", batch), "static pairs/s"), _sim_speed(("accurate", batch), "static pairs/s"),
         _sim_speed(("fast", batch), "static/dynamic"), _sim_speed(("accurate", batch), "static/dynamic"))
        for batch in ("1", "32", "128"))),
)

_LEX = "tasks/lexical_analysis/README.md"
_LEX_TASKFLOW_GENRE = "taskflow lexical_analysis (1.4.1, shipped)"
_LEX_GENRE_ENGINES = (_LEX_TASKFLOW_GENRE, "LAC 2.1.2 on paddlepaddle 2.6.2", "jieba 0.42.1 posseg (nr/ns/nt)")


def _lex_peers_row(what, data, column):
    return (what, data, _lex_peers(_LEX_MODEL, column, decimals=3), _lex_peers(_LEX_LAC, column, decimals=3),
            _lex_peers(_LEX_JIEBA, column, decimals=3))


def _lex_genre_row(what, data, column):
    return (what, data, *(_lex_genre(engine, column, decimals=3, bold=False) for engine in _LEX_GENRE_ENGINES))


LEXICAL = (
    Block(_LEX, "accuracy", ("what", "data", "taskflow", "LAC", "jieba.posseg"), (
        _lex_peers_row("segmentation F1 (in genre)", "MSRA dev, MSR's standard (LAC: Baidu's; jieba: its own)", "F1"),
        _lex_peers_row("PER / LOC / ORG F1 (in genre)", "MSRA dev", "PER/LOC/ORG F1"),
        _lex_genre_row("PER / LOC / ORG F1 (off genre)", "701 hand-checked sentences", "F1"),
        *(_lex_genre_row("", f"of them, {part}", column) for part, column in (
            ("social posts", "social (134)"), ("résumés", "resume (99)"), ("product talk", "product (115)"),
            ("dialogue", "dialogue (137)"), ("traditional text", "traditional (101)"), ("modern news", "news (115)"))),
    )),
    Block(_LEX, "speed", ("engine", "chars/s", "taskflow / it"), (
        ("taskflow lexical_analysis, batch 64", _lex_peers(_LEX_MODEL, "chars/s"), ""),
        *((label, _lex_peers(row, "chars/s"), Ratio(_lex_peers(_LEX_MODEL, "chars/s"), _lex_peers(row, "chars/s")))
          for label, row in (("LAC 2.1.2 on paddlepaddle 2.6.2, 2 math threads", _LEX_LAC),
                             ("jieba.posseg (HMM on; tags no entities)", _LEX_JIEBA))),
    )),
    Block(_LEX, "segmentation", ("segmenter", "chars/s", "vs batch 64", "F1"), tuple(
        (label, _lex_speed(row, "chars/s"),
         Ratio(_lex_speed(row, "chars/s"), _lex_speed("taskflow lexical_analysis, batch 64", "chars/s")), _lex_speed(row, "F1"))
        for label, row in (("lexical_analysis, batch 1", "taskflow lexical_analysis, batch 1"),
                           ("lexical_analysis, batch 16", "taskflow lexical_analysis, batch 16"),
                           ("lexical_analysis, batch 64", "taskflow lexical_analysis, batch 64"),
                           ("word_segmentation, `mode=\"fast\"` (jieba)", _LEX_JIEBA_FAST)))),
)

NER = (
    Block("tasks/ner/README.md", "modes", ("mode", "in genre", "off genre", "speed (2 cores, batch 64)"), (
        ("`fast`",
         ("MSRA dev PER/LOC/ORG F1 **", _lex_peers(_LEX_MODEL, "PER/LOC/ORG F1", decimals=3), "** (LAC ",
          _lex_peers(_LEX_LAC, "PER/LOC/ORG F1", decimals=3), ", jieba.posseg ",
          _lex_peers(_LEX_JIEBA, "PER/LOC/ORG F1", decimals=3), ")"),
         ("701 hand-checked sentences of six genres: F1 **", _lex_genre(_LEX_TASKFLOW_GENRE, "F1", decimals=3, bold=False),
          "** (LAC ", _lex_genre(_LEX_GENRE_ENGINES[1], "F1", decimals=3, bold=False), ", jieba.posseg ",
          _lex_genre(_LEX_GENRE_ENGINES[2], "F1", decimals=3, bold=False), ")"),
         (Ratio(_lex_peers(_LEX_MODEL, "chars/s"), _lex_peers(_LEX_LAC, "chars/s")), " LAC (",
          _lex_peers(_LEX_MODEL, "chars/s", first=True), " chars/s)")),
        ("`accurate`",
         ("MSRA test mentions with the right WordTag class (head) ", _km_msra("all", "ours head %"),
          "% (the LAC-tag mapping alone: ", _km_msra("all", "baseline head %"), "%)"),
         ("CLUENER dev mentions ", _km_cluener("all", "ours head %"), "% (mapping alone: ",
          _km_cluener("all", "baseline head %"), "%)"),
         (_km_speed("ner (mode accurate)", "chars/s", first=True), " chars/s, ",
          Ratio(_km_speed("ner (mode accurate)", "chars/s"),
                _km_speed("lexical_analysis", "chars/s")), " the fast mode in that run")),
    )),
)

_KM = "tasks/knowledge_mining/README.md"
_KM_COLUMNS = ("mentions", "baseline head %", "ours head %", "baseline exact %", "ours exact %", "linked %", "link precision %")

KNOWLEDGE_MINING = (
    Block(_KM, "accuracy", ("set", "mentions", "baseline head", "ours head", "baseline exact", "ours exact", "linked",
                            "link precision"), (
        ("CLUENER dev (10 fine classes)", *(_km_cluener("all", column) for column in _KM_COLUMNS)),
        ("MSRA test (PER/LOC/ORG)", *(_km_msra("all", column) for column in _KM_COLUMNS)),
    )),
    Block(_KM, "thuocl", ("THUOCL list", "terms", "baseline head", "ours head", "ours, whole term one item", "classifier alone"),
          tuple((label, *(_km_thuocl(row, column) for column in ("terms", "baseline head %", "ours head %", "ours whole %",
                                                                 "classifier alone %")))
                for label, row in (("all", "all"), ("animal", "animal"), ("place", "place"), ("finance", "finance"),
                                   ("idiom", "idiom")))),
    Block(_KM, "speed", ("task", "chars/s", "vs lexical_analysis"), (
        ("lexical_analysis", _km_speed("lexical_analysis", "chars/s"), ""),
        *((task, _km_speed(task, "chars/s"), Ratio(_km_speed(task, "chars/s"), _km_speed("lexical_analysis", "chars/s")))
          for task in ("knowledge_mining", "ner (mode accurate)")),
    )),
)

_MRC = "tasks/reading_comprehension/README.md"
_mrc_fast_answers = table_of("mrc_accuracy", 1)
_mrc_acc_answers = table_of("mrc_accuracy_accurate", 1)

READING_COMPREHENSION = (
    Block(_MRC, "accuracy", ("system", "F1", "EM"), tuple(
        (label, table(row, "F1"), table(row, "EM")) for label, table, row in (
            ('`mode="accurate"`', _mrc_acc, _MRC_ACCURATE),
            ("`encoder_span` 1.1.1 alone", _mrc_acc, "`encoder_span` 1.1.1 alone (answers 15.9 chars)"),
            ("fast (default)", _mrc_fast, _MRC_FAST),
            ("fast, `ensemble=False` (one reader)", _mrc_fast, "`drqa_char` 1.1.1 alone (answers 11.9 chars)"),
            ("baseline: the sentence with the most question chars", _mrc_fast, _MRC_OVERLAP)))),
    Block(_MRC, "answers", ("answer", "fast", "accurate"), tuple(
        (kind, _mrc_fast_answers(kind, "share"), _mrc_acc_answers(kind, "share")) for kind in (
            "exact", "a reference plus leading chars", "a reference plus trailing chars", "a reference plus chars on both sides",
            "inside a reference (too short)", "overlaps a reference", "disjoint from every reference"))),
    Block(_MRC, "speed", ("context chars", "batch", "fast", "accurate", "fast / accurate", "fast, static / dynamic"), tuple(
        (chars, batch, *(_mrc_speed((chars, batch), column) for column in (
            "static questions/s", "`reader_ensemble` 1.2.0 static questions/s", "ratio (shipped / compared)", "static/dynamic")))
        for chars, batch in (("500", "1"), ("500", "16"), ("5,000", "16"), ("20,000", "16")))),
)

SPEC: tuple = (README_MODES, *SENTIMENT, *TEXT_SIMILARITY, *LEXICAL, *NER, *KNOWLEDGE_MINING, *READING_COMPREHENSION)


# ---------------------------------------------------------------------------------------------
# Reading the figures.

class Figures:
    """The sections of a figures folder, read once each."""

    def __init__(self, folder: Path = FIGURES_DIR):
        self.folder = Path(folder)
        self._sections: dict[str, dict] = {}

    def section(self, name: str) -> dict:
        if name not in self._sections:
            path = self.folder / f"{name}.json"
            if not path.is_file():
                raise FigureError(
                    f"no figures for section {name!r}: {path} is missing (run the benchmark that writes "
                    f"that section, or `python benchmarks/documents.py --from-results` if RESULTS.md has it)")
            self._sections[name] = json.loads(path.read_text(encoding="utf-8"))
        return self._sections[name]

    def table(self, ref: Ref) -> dict:
        tables = self.section(ref.section)["tables"]
        if isinstance(ref.table, int):
            if not 0 <= ref.table < len(tables):
                raise FigureError(f"section {ref.section!r} has no table #{ref.table} (it has {len(tables)})")
            return tables[ref.table]
        found = [t for t in tables if t["heading"] == ref.table]
        if len(found) != 1:
            headings = sorted({str(t["heading"]) for t in tables})
            why = "no table" if not found else f"{len(found)} tables (give an index)"
            raise FigureError(f"section {ref.section!r} has {why} under the heading {ref.table!r}; headings: {headings}")
        return found[0]

    def cell(self, ref: Ref) -> str:
        table, where = self.table(ref), f"section {ref.section!r}, table {ref.table!r}"
        columns = [_plain(c) for c in table["columns"]]
        if columns.count(_plain(ref.column)) != 1:
            why = "no column" if _plain(ref.column) not in columns else "two columns"
            raise FigureError(f"{where} has {why} {ref.column!r}; columns: {table['columns']}")
        key = (ref.row,) if isinstance(ref.row, str) else tuple(ref.row)
        rows = [row for row in table["rows"] if tuple(_plain(c) for c in row[:len(key)]) == tuple(map(_plain, key))]
        if len(rows) != 1:
            keys = [row[0] for row in table["rows"]]
            why = "no row" if not rows else f"{len(rows)} rows"
            raise FigureError(f"{where} has {why} {ref.row!r} (first cells: {keys})")
        row = rows[0]
        index = columns.index(_plain(ref.column))
        return row[index] if index < len(row) else ""


def _plain(cell: str) -> str:
    return cell.replace("**", "").strip()


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def _number(text: str, ref: Ref) -> Decimal:
    if not _NUMBER.fullmatch(text):
        raise FigureError(f"section {ref.section!r}, table {ref.table!r}, row {ref.row!r}, column "
                          f"{ref.column!r}: {text!r} is not a number")
    return Decimal(text.replace(",", ""))


def _leading_number(text: str, ref: Ref) -> str:
    match = _NUMBER.match(text)
    if not match:
        raise FigureError(f"section {ref.section!r}, table {ref.table!r}, row {ref.row!r}, column "
                          f"{ref.column!r}: {text!r} does not start with a number")
    return match.group(0)


def _rounded(value: Decimal, decimals: int, grouped: bool) -> str:
    value = value.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return f"{value:,.{decimals}f}" if grouped else f"{value:.{decimals}f}"


def render_part(part: Part, figures: Figures) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, Ratio):
        top, bottom = (_number(_leading_number(_plain(figures.cell(r)), r), r) for r in (part.numerator, part.denominator))
        return _rounded(top / bottom, part.decimals, grouped=False) + part.suffix
    if isinstance(part, Span):
        texts = [render_part(replace(r, decimals=part.decimals, bold=False), figures) for r in part.refs]
        values = [_number(text, ref) for text, ref in zip(texts, part.refs)]
        low, high = texts[values.index(min(values))], texts[values.index(max(values))]
        return low if low == high else f"{low}-{high}"
    written = figures.cell(part)
    bold = written.startswith("**") and written.endswith("**") and len(written) > 4
    text = written[2:-2] if bold else written
    if part.first:
        text = _leading_number(text, part)
    if part.decimals is not None:
        text = _rounded(_number(text, part), part.decimals, grouped="," in text)
    return f"**{text}**" if bold and part.bold else text


def render_cell(cell: Cell, figures: Figures) -> str:
    parts = cell if isinstance(cell, tuple) else (cell,)
    return "".join(render_part(p, figures) for p in parts).replace("|", "\\|")


def _refs(cell: Cell):
    for part in cell if isinstance(cell, tuple) else (cell,):
        if isinstance(part, Ref):
            yield part
        elif isinstance(part, Ratio):
            yield part.numerator
            yield part.denominator
        elif isinstance(part, Span):
            yield from part.refs


# The machine string common.machine() writes: "<cpu model> (<vector flags>), N cores, Python X,
# paddlepaddle Y, DATE"; a section's paragraph quotes it after "Machine: ", " on " or "(".
_MACHINE_TAIL = re.compile(
    r"(?P<rest>, \d+ cores?, Python [^,;()\s]+, paddlepaddle [^,;()\s]+)(?:, (?P<date>\d{4}-\d{2}-\d{2}))?")
_MACHINE_START = re.compile(r"Machine: | on |\(")
_CPU = re.compile(r"(?:[^()`;\n]|\((?:R|TM)\))+ \([^()`;\n]*\)")
_COMMAND = (re.compile(r"Command: `([^`]+)`"), re.compile(r"Written by `([^`]+)`"), re.compile(r"^`([^`]+)`", re.M))


def measured(preamble: str) -> tuple:
    """``(machine, date, command)`` as a section's paragraph gives them; None for what it does not."""
    command = next((m.group(1) for pattern in _COMMAND for m in [pattern.search(preamble)] if m), None)
    machine = date = None
    tail = _MACHINE_TAIL.search(preamble)
    if tail:
        head = preamble[:tail.start()]
        for start in reversed([m.end() for m in _MACHINE_START.finditer(head)]):
            if _CPU.fullmatch(head[start:]):
                machine, date = head[start:] + tail.group("rest"), tail.group("date")
                break
    if date is None:
        found = re.search(r"\b\d{4}-\d{2}-\d{2}\b", preamble)
        date = found.group(0) if found else None
    return machine, date, command


def measured_line(section_names: list, figures: Figures) -> str:
    """"Measured: <machine>, <date>; `<command>`" for each distinct section, those measured on one
    machine on one day together."""
    groups: dict[tuple, list] = {}
    for name in section_names:
        machine, date, command = measured(figures.section(name)["preamble"])
        groups.setdefault((machine, date), [])
        if command and command not in groups[(machine, date)]:
            groups[(machine, date)].append(command)
    entries = []
    for (machine, date), commands in groups.items():
        where = ", ".join(x for x in (machine, date) if x) or "Machine and date not recorded"
        if machine is None and date is not None:
            where += " (machine not recorded)"
        entries.append(where + "; " + ", ".join(f"`{c}`" for c in commands) if commands else where)
    return "Measured: " + ". ".join(entries) + "."


def render_block(block: Block, figures: Figures) -> str:
    rows = [[render_cell(c, figures) for c in row] for row in block.rows]
    for row in rows:
        if len(row) != len(block.columns):
            raise FigureError(f"{block.document} figures:{block.name}: a row has {len(row)} cells for "
                              f"{len(block.columns)} columns: {row}")
    lines = ["| " + " | ".join(block.columns) + " |", "|" + "---|" * len(block.columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    used = list(dict.fromkeys(ref.section for row in block.rows for cell in row for ref in _refs(cell)))
    return "\n".join(lines) + "\n\n" + measured_line(used, figures)


_MARKERS = re.compile(r"(<!-- BEGIN figures:(\S+) -->\n)(.*?)(<!-- END figures:\2 -->)", re.S)


def generated(text: str, document: str, blocks: list, figures: Figures) -> str:
    """``text`` (a document) with every figures block rewritten from ``blocks``."""
    by_name = {b.name: b for b in blocks if b.document == document}
    found = [m.group(2) for m in _MARKERS.finditer(text)]
    unknown = [name for name in found if name not in by_name]
    missing = [name for name in by_name if name not in found]
    if unknown:
        raise FigureError(f"{document} has figures blocks no SPEC entry writes: {unknown}")
    if missing:
        raise FigureError(f"{document} lacks the markers of figures blocks {missing} "
                          f"(<!-- BEGIN figures:NAME --> ... <!-- END figures:NAME -->)")
    return _MARKERS.sub(lambda m: m.group(1) + render_block(by_name[m.group(2)], figures) + "\n" + m.group(4), text)


def documents(root: Path = ROOT, blocks=None) -> list:
    """The documents a check covers: those SPEC names, and every README that holds a figures block."""
    blocks = SPEC if blocks is None else blocks
    names = list(dict.fromkeys(b.document for b in blocks))
    for path in [root / "README.md", *sorted(root.glob("tasks/*/README.md"))]:
        name = path.relative_to(root).as_posix()
        if name not in names and path.is_file() and "<!-- BEGIN figures:" in path.read_text(encoding="utf-8"):
            names.append(name)
    return names


def differences(root: Path = ROOT, figures_dir: Path = FIGURES_DIR, blocks=None) -> dict:
    """Document -> (its text, the text it should have), for every document that differs."""
    blocks, figures, out = (SPEC if blocks is None else blocks), Figures(figures_dir), {}
    for document in documents(root, blocks):
        text = (root / document).read_text(encoding="utf-8")
        want = generated(text, document, blocks, figures)
        if want != text:
            out[document] = (text, want)
    return out


def unified_diff(document: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{document}", f"b/{document}"))


def from_results(results: Path = RESULTS, figures_dir: Path = FIGURES_DIR) -> list:
    """Write figures/<name>.json for every section now in ``results``; the paths written."""
    text = results.read_text(encoding="utf-8")
    return [write_figures(section_figures(name, body), figures_dir) for name, body in sections(text).items()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff where a document differs")
    parser.add_argument("--from-results", action="store_true", help="write figures/*.json from RESULTS.md's sections")
    args = parser.parse_args(argv)
    try:
        if args.from_results:
            for path in from_results():
                print(path.relative_to(ROOT))
            return 0
        changed = differences()
    except FigureError as error:
        print(f"documents.py: error: {error}", file=sys.stderr)
        return 2
    if args.check:
        for document, (old, new) in changed.items():
            sys.stdout.write(unified_diff(document, old, new))
        return 1 if changed else 0
    from taskflow.files import atomic_write_text

    for document, (_, new) in changed.items():
        atomic_write_text(ROOT / document, new)
        print(f"rewrote {document}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
