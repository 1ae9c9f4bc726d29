"""What the reader sees: normalised text, words, match features, windows, spans.

Pure Python and numpy (no Paddle, no jieba), shared by the task, the training
recipe and the benchmarks, so training and inference prepare text the same way.

* :func:`normalise`: half-width, ASCII lower-case, every whitespace char a
  space; one char in, one char out, so offsets into the normalised text are
  offsets into the caller's text.
* words: :class:`taskflow.text.Segmenter`, the most probable path through the
  word list shipped in the package (jieba's DAG + unigram algorithm without its
  HMM); jieba finds that list once, at training time, and is not needed to run.
* :func:`prepare`: per context char, the features of the question it is read
  against (:data:`FEATURES`): does the char, the char bigram / trigram around
  it, or the word covering it occur in the question; where it sits in its word.
* :func:`windows`: the (start, end) windows a long context is read in.
* :func:`encode`: a batch of windows as the network's id and feature arrays;
  each window gets a NULL position 0, the "no answer here" slot.
* :func:`best_spans`: a window's best answer spans from the network's start /
  end probabilities (and a joint model's length scores), and its null score
  (:func:`span_scores`, then :func:`top_spans`; :func:`mean_span_scores` and
  :func:`ensemble_null` for an ensemble of readers);
  :func:`no_answer_score`: the empty answer's score with the package's ``null_threshold``;
  :class:`NullModel`: "is the answer in this context at all?" from the readers' margin and how
  much of the question the context holds (:func:`question_bigram_coverage`).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from taskflow.text import Normalizer, Vocab as CharWordVocab

__all__ = ["PAD", "UNK", "NULL", "FEATURES", "NORMALIZATION", "normalise", "Vocab", "Prepared", "prepare",
           "segment_context", "windows", "merge", "encode", "best_spans", "span_scores", "top_spans",
           "mean_span_scores", "ensemble_null", "no_answer_score", "question_bigram_coverage", "NullModel"]

PAD, UNK, NULL = 0, 1, 2
MAX_WORD_LENGTH = 8
# Per-char features, in column order.
FEATURES = ("char_in_q", "bigram_left_in_q", "bigram_right_in_q", "trigram_left_in_q", "trigram_mid_in_q",
            "trigram_right_in_q", "word_in_q", "word_B", "word_M", "word_E", "word_S", "punct")


# What the shipped model was trained on: half-width, ASCII lower-case, whitespace as spaces;
# one char in, one char out, so offsets into the normalised text are offsets into the caller's.
NORMALIZATION = ("t2s", "width", "lower", "space")
normalise = Normalizer(NORMALIZATION)


@functools.lru_cache(maxsize=4096)
def _is_punct(char: str) -> bool:
    return char == " " or unicodedata.category(char)[0] in "PSZ"


class Vocab(CharWordVocab):
    """The reader's chars (0 pad, 1 unknown, 2 NULL) and word list; see :class:`taskflow.text.Vocab`."""

    @classmethod
    def build(cls, texts: Iterable[str], cut, *, min_char: int = 2, min_word: int = 2) -> "Vocab":
        """Chars seen ``min_char`` times in the (normalised) ``texts``, and the words
        ``cut`` (e.g. ``jieba.lcut``) finds there at least ``min_word`` times."""
        from collections import Counter

        chars, words = Counter(), Counter()
        for text in texts:
            chars.update(text)
            words.update(w for w in cut(text) if 1 < len(w) <= MAX_WORD_LENGTH and not any(map(_is_punct, w)))
        char_list = ["[PAD]", "[UNK]", "[NULL]"] + sorted(c for c, n in chars.items() if n >= min_char)
        kept = sorted(((w, n) for w, n in words.items() if n >= min_word), key=lambda x: (-x[1], x[0]))
        return cls(char_list, kept)



@dataclass
class Prepared:
    """A (normalised) context read against one question: char ids and per-char features."""

    context: str              # normalised, same length as the caller's
    char_ids: np.ndarray      # [len(context)] int64
    features: np.ndarray      # [len(context), len(FEATURES)] float32
    question_ids: np.ndarray  # [<= max_question_len] int64, at least one id
    # Only for a reader of word vectors (prepare's word_ids=True), None otherwise:
    word_ids: np.ndarray | None = None           # [len(context)] int64: per char, its (multi-char) word's id, 0 for none
    question_word_ids: np.ndarray | None = None  # [len(question_ids)] int64, the same for the question's chars


def _word_features(words: list[str], n: int, question_words: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per char: is its word in the question, and its B/M/E/S position in the word."""
    in_q = np.zeros(n, dtype=np.float32)
    tags = np.zeros((n, 4), dtype=np.float32)
    position = 0
    for word in words:
        end = position + len(word)
        if word in question_words:
            in_q[position:end] = 1.0
        if len(word) == 1:
            tags[position, 3] = 1.0
        else:
            tags[position, 0] = 1.0
            tags[position + 1:end - 1, 1] = 1.0
            tags[end - 1, 2] = 1.0
        position = end
    return in_q, tags


def _word_ids(words: list[str], n: int, vocab: Vocab) -> np.ndarray:
    """Per char, 1 + its word's place in the package's word list; 0 for a one-char word or a word not
    in the list (a word-vector model's row 0, all zeros: the char alone speaks for it)."""
    ids = np.zeros(n, dtype=np.int64)
    get, position = vocab.words.get, 0
    for word in words:
        end = position + len(word)
        if end - position > 1:
            ids[position:end] = get(word, -1) + 1
        position = end
    return ids


def segment_context(context: str, vocab: Vocab) -> list[str]:
    """The words of a (normalised) context, for :func:`prepare` to reuse across questions."""
    return [w for piece in _pieces(context) for w in vocab.segment(piece)]


def prepare(context: str, question: str, vocab: Vocab, max_question_len: int = 64,
            context_words: list[str] | None = None, normalize: Normalizer = normalise,
            word_ids: bool = False) -> Prepared:
    """Ids and features of ``context`` (any length) read against ``question``;
    ``context_words`` is :func:`segment_context` of the normalised context, if known;
    ``word_ids``: also each char's word id, for a reader of word vectors (model.py)."""
    context, question = normalize(context), normalize(question)
    question = "".join(question.split())[:max_question_len] or question[:max_question_len]
    n = len(context)
    punct = np.fromiter((_is_punct(c) for c in context), dtype=np.float32, count=n)
    q_chars = {c for c in question if not _is_punct(c)}
    q_bigrams = {question[i:i + 2] for i in range(len(question) - 1)}
    q_trigrams = {question[i:i + 3] for i in range(len(question) - 2)}
    features = np.zeros((n, len(FEATURES)), dtype=np.float32)
    features[:, 0] = [c in q_chars for c in context]
    if n > 1:
        bigram = np.fromiter((context[i:i + 2] in q_bigrams for i in range(n - 1)), dtype=np.float32, count=n - 1)
        features[1:, 1] = bigram     # c[i-1:i+1]
        features[:-1, 2] = bigram    # c[i:i+2]
    if n > 2:
        trigram = np.fromiter((context[i:i + 3] in q_trigrams for i in range(n - 2)), dtype=np.float32, count=n - 2)
        features[2:, 3] = trigram    # c[i-2:i+1]
        features[1:-1, 4] = trigram  # c[i-1:i+2]
        features[:-2, 5] = trigram   # c[i:i+3]
    segment = vocab.segment
    # Multi-char words only: a one-char word in the question is already ``char_in_q``.
    q_segmented = segment(question)
    q_words = {w for w in q_segmented if len(w) > 1}
    if context_words is None:
        context_words = [w for piece in _pieces(context) for w in segment(piece)]
    words = context_words
    features[:, 6], features[:, 7:11] = _word_features(words, n, q_words)
    features[:, 11] = punct
    question_ids = np.asarray(vocab.ids(question) or [UNK], dtype=np.int64)
    prepared = Prepared(context, np.asarray(vocab.ids(context), dtype=np.int64), features, question_ids)
    if word_ids:
        prepared.word_ids = _word_ids(words, n, vocab)
        prepared.question_word_ids = (_word_ids(q_segmented, len(question), vocab) if question
                                      else np.zeros(1, dtype=np.int64))
    return prepared


def _pieces(text: str, size: int = 2000) -> list[str]:
    """``text`` in pieces cut after a space or sentence end near every ``size`` chars (the
    segmenter's cost is linear, this only keeps each call small)."""
    out, start = [], 0
    while len(text) - start > size:
        cut = start + size
        for stop in range(cut, max(start + size // 2, cut - 200), -1):
            if text[stop - 1] in " 。！？；!?;":
                cut = stop
                break
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def windows(length: int, max_seq_len: int, doc_stride: int) -> list[tuple[int, int]]:
    """``(start, end)`` windows of at most ``max_seq_len`` chars covering ``range(length)``,
    each overlapping the previous by ``doc_stride`` chars (the last one ends at ``length``).

    >>> windows(10, 4, 1)
    [(0, 4), (3, 7), (6, 10)]
    """
    if length <= max_seq_len:
        return [(0, length)]
    step = max_seq_len - doc_stride
    out, start = [], 0
    while True:
        if start + max_seq_len >= length:
            out.append((max(0, length - max_seq_len), length))
            return out
        out.append((start, start + max_seq_len))
        start += step


def encode(units: Sequence[tuple[Prepared, int, int]]) -> dict[str, np.ndarray]:
    """The network's feeds for windows ``(prepared, start, end)``.

    ``context_ids`` [B, 1 + T]: NULL, then the window's char ids, 0-padded;
    ``context_features`` [B, 1 + T, F]; ``question_ids`` [B, Q], 0-padded; and when the windows
    were prepared with word ids, ``context_word_ids`` [B, 1 + T] and ``question_word_ids`` [B, Q].
    """
    width = 1 + max(end - start for _, start, end in units)
    q_width = max(len(p.question_ids) for p, _, _ in units)
    context_ids = np.zeros((len(units), width), dtype=np.int64)
    features = np.zeros((len(units), width, len(FEATURES)), dtype=np.float32)
    question_ids = np.zeros((len(units), q_width), dtype=np.int64)
    for row, (p, start, end) in enumerate(units):
        context_ids[row, 0] = NULL
        context_ids[row, 1:1 + end - start] = p.char_ids[start:end]
        features[row, 1:1 + end - start] = p.features[start:end]
        question_ids[row, :len(p.question_ids)] = p.question_ids
    feeds = {"context_ids": context_ids, "context_features": features, "question_ids": question_ids}
    if units[0][0].word_ids is not None:
        context_word_ids = np.zeros((len(units), width), dtype=np.int64)
        question_word_ids = np.zeros((len(units), q_width), dtype=np.int64)
        for row, (p, start, end) in enumerate(units):
            context_word_ids[row, 1:1 + end - start] = p.word_ids[start:end]
            question_word_ids[row, :len(p.question_word_ids)] = p.question_word_ids
        feeds.update(context_word_ids=context_word_ids, question_word_ids=question_word_ids)
    return feeds


def best_spans(p_start: np.ndarray, p_end: np.ndarray, length: int, max_answer_len: int,
               top_k: int, length_scores: np.ndarray | None = None) -> tuple[list[tuple[int, int, float]], float]:
    """A window's ``top_k`` spans ``(start, end, score)`` (window offsets, end exclusive,
    ``end - start <= max_answer_len``), best first, and its null score: :func:`top_spans` of
    :func:`span_scores`."""
    return top_spans(*span_scores(p_start, p_end, length, max_answer_len, length_scores), top_k)


def span_scores(p_start: np.ndarray, p_end: np.ndarray, length: int, max_answer_len: int,
                length_scores: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """A window's span scores and its null score ``p_start[0] * p_end[0]``.  The scores are
    ``[i, j]``: the span from window char ``i`` to char ``i + j`` inclusive, by
    ``p_start[i + 1] * p_end[i + j + 1]`` (the probabilities include the NULL position 0, so
    window char ``i`` is at ``i + 1``); -1 where no span is (past the window's end).

    ``length_scores`` (a joint model's third output, ``[L + 1]``: index 0 the NULL span, ``k``
    a span of ``k`` chars; see ``model.py``): each span's product is weighted by
    ``exp(length_scores[end - start])`` and the null product by ``exp(length_scores[0])``, all
    divided by their sum over NULL and every span of at most ``L`` chars in the window: the
    window's joint span distribution, as trained.  Spans longer than ``L`` have no score (the
    model gives none), so answers are at most ``min(max_answer_len, L)`` chars.  Without it
    the result is exactly the 1.0.0 package's (the old formula, untouched).
    """
    if length_scores is not None:
        return _joint_span_scores(p_start, p_end, length, max_answer_len, np.asarray(length_scores))
    null = float(p_start[0] * p_end[0])
    if length == 0:
        return _NO_SPANS, null
    ps = np.asarray(p_start[1:1 + length], dtype=np.float64)
    pe = np.asarray(p_end[1:1 + length], dtype=np.float64)
    return _span_products(ps, pe, min(max_answer_len, length)), null


_NO_SPANS = np.full((0, 0), -1.0)


def _span_products(ps: np.ndarray, pe: np.ndarray, span: int) -> np.ndarray:
    """``[i, j]``: ``ps[i] * pe[i + j]`` (start i, end i + j inclusive); ends past the window are -1."""
    length = len(ps)
    scores = np.full((length, span), -1.0)
    for j in range(span):
        scores[: length - j, j] = ps[: length - j] * pe[j:]
    return scores


def top_spans(scores: np.ndarray, null: float, top_k: int) -> tuple[list[tuple[int, int, float]], float]:
    """The ``top_k`` spans ``(start, end, score)`` of :func:`span_scores`' matrix, best first
    (end exclusive), and the null score as given."""
    span = scores.shape[1] if scores.ndim == 2 else 0
    k = min(top_k, scores.size)
    if k == 0:
        return [], null
    flat = np.argpartition(-scores.ravel(), k - 1)[:k]
    flat = flat[np.argsort(-scores.ravel()[flat], kind="stable")]
    out = []
    for index in flat:
        i, j = divmod(int(index), span)
        if scores[i, j] >= 0:
            out.append((i, i + j + 1, float(scores[i, j])))
    return out, null


def distinct_top_spans(scores: np.ndarray, null: float, top_k: int, text: str) -> tuple[list[tuple[int, int, float]], float]:
    """:func:`top_spans`, where spans of ``text`` (the window's) that are one answer once
    :func:`merge` trims the spaces at their ends count once, and a span of spaces not at all: so
    that ``top_k`` distinct answers remain where the window holds them.  Spans come back as found
    (untrimmed, best first); merge trims them."""
    fetch = top_k
    while True:
        spans, null = top_spans(scores, null, fetch)
        kept: dict[tuple[int, int], tuple[int, int, float]] = {}
        for start, end, score in spans:
            trimmed = _trimmed(text, start, end)
            if trimmed[0] < trimmed[1] and trimmed not in kept:
                kept[trimmed] = (start, end, score)
        if len(kept) >= top_k or len(spans) < fetch:
            return list(kept.values())[:top_k], null
        fetch = 2 * fetch + 4


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _joint_span_scores(p_start: np.ndarray, p_end: np.ndarray, length: int, max_answer_len: int,
                       length_scores: np.ndarray) -> tuple[np.ndarray, float]:
    # Shift before exp: the distribution is the same, and no length weight overflows.
    weights = np.exp(np.asarray(length_scores, dtype=np.float64) - float(np.max(length_scores)))
    null = float(p_start[0]) * float(p_end[0]) * weights[0]
    longest = min(len(weights) - 1, length)
    if longest <= 0:
        return _NO_SPANS, 1.0
    ps = np.asarray(p_start[1:1 + length], dtype=np.float64)
    pe = np.asarray(p_end[1:1 + length], dtype=np.float64)
    products = _span_products(ps, pe, longest)
    valid = products >= 0
    scores = np.where(valid, products * weights[1:1 + longest], 0.0)
    total = null + scores.sum()
    if total <= 0:          # every probability underflowed: nothing to rank
        return _NO_SPANS, 1.0
    scores = np.where(valid, scores / total, -1.0)
    return scores[:, :min(max_answer_len, longest)], float(null / total)


def mean_span_scores(per_reader: Sequence[tuple[np.ndarray, float]],
                     weights: Sequence[float] | None = None) -> tuple[np.ndarray, float]:
    """Several readers' :func:`span_scores` of one window, averaged (with ``weights`` summing to 1,
    else equally): each reader's scores are probabilities over the window's spans and NULL, so
    their mean is one too.  A span one reader gives no score (beyond its longest answer) counts 0
    for it; the null score is the readers' mean (an item's "no answer" is :func:`ensemble_null`'s)."""
    weights = [1.0 / len(per_reader)] * len(per_reader) if weights is None else weights
    rows = max(scores.shape[0] for scores, _ in per_reader)
    width = max(scores.shape[1] for scores, _ in per_reader)
    total = np.zeros((rows, width))
    valid = np.zeros((rows, width), dtype=bool)
    for (scores, _), weight in zip(per_reader, weights):
        r, w = scores.shape
        total[:r, :w] += weight * np.maximum(scores, 0.0)
        valid[:r, :w] |= scores >= 0
    return np.where(valid, total, -1.0), sum(weight * null for (_, null), weight in zip(per_reader, weights))


def ensemble_null(per_reader: Sequence[Sequence[tuple[float, float]]], best: float,
                  weights: Sequence[float] | None = None) -> float | None:
    """An ensemble's null score for one item: ``per_reader[x]`` holds reader ``x``'s ``(best span
    score, null score)`` in each window of the item, ``best`` is the ensemble's best span score.

    Each reader judges "is the answer here?" against what it found itself: its margin is
    ``ln(null) - ln(best span)`` over the item (its lowest window null, its best span, as
    :func:`merge` takes them for one reader), and the ensemble's null score is ``best`` times
    ``exp`` of the readers' mean margin (weighted as their spans are), so "no answer" wins by that
    mean margin.  (The mean of
    the null probabilities would be judged against the averaged best, which the readers'
    agreement lifts: it says "no answer" far less often.)  ``None`` when a reader found no span
    or gave NULL no probability, or ``best`` is 0: the caller keeps the mean null."""
    margins = []
    for windows in per_reader:
        own_best = max((b for b, _ in windows), default=0.0)
        own_null = min((n for _, n in windows), default=0.0)
        if own_best <= 0 or own_null <= 0:
            return None
        margins.append(math.log(own_null) - math.log(own_best))
    if best <= 0 or not margins:
        return None
    # Not capped at 1 (it is a margin carrier, not a probability): capped, an unanswerable item
    # whose best span scores over exp(-null_threshold) could never get the empty answer.
    # no_answer_score caps what the caller sees.
    weights = [1.0 / len(margins)] * len(margins) if weights is None else weights
    return best * math.exp(sum(w * m for w, m in zip(weights, margins)))


def no_answer_score(null_score: float, null_threshold: float = 0.0) -> float:
    """The empty answer's score under ``handle_impossible_answer=True``: the null score weighed by
    the package's threshold, ``null * exp(-null_threshold)`` (at most 1), so that it ranks among the
    spans by its score and comes first exactly when ``ln(null) - ln(best span) > null_threshold``.
    ``null_threshold = 0`` (packages without one, 1.0.0) is the null score itself: "the null score
    beats the best span".  Tuned by ``recipes/reading_comprehension/calibrate.py``."""
    return min(1.0, null_score * math.exp(-null_threshold))


_COVERAGE_NORMALIZE = Normalizer(("t2s", "width", "lower", "strip"))


def question_bigram_coverage(question: str, context: str) -> float:
    """The share of the question's distinct char bigrams that occur in the context (normalised, without
    punctuation or whitespace): a question about this context copies some of its words, one about
    something else hardly any.  1.0 for a question of one char.

    >>> question_bigram_coverage("杭州是哪个省的省会？", "杭州市是浙江省的省会。")
    0.5
    """
    q, c = _COVERAGE_NORMALIZE(question), _COVERAGE_NORMALIZE(context)
    wanted = {q[i:i + 2] for i in range(len(q) - 1)}
    if not wanted:
        return 1.0
    return len(wanted & {c[i:i + 2] for i in range(len(c) - 1)}) / len(wanted)


class NullModel:
    """A package's learned "no answer" rule (the manifest's ``null_model``): a logistic score

        z = bias + w_margin * ln(null / best span) + w_coverage * question_bigram_coverage

    that replaces the plain margin ``ln(null / best span)`` in the threshold test, so the empty answer
    comes first when ``z > null_threshold``.  It holds for the readers it was fitted on: with
    ``"ensemble": true`` the ensemble's mean margin, else the package's own reader alone.  Fitted by
    ``recipes/reading_comprehension/calibrate.py null-model`` on answerable and unanswerable questions
    (logistic regression), with
    its ``threshold`` tuned on the same sets as ``null_threshold`` is.
    """

    FEATURES = ("margin", "question_bigram_coverage")

    def __init__(self, fields, name: str = "?"):
        from taskflow.errors import ManifestError

        try:
            if list(fields["features"]) != list(self.FEATURES):
                raise ValueError(f"features must be {list(self.FEATURES)}, got {fields['features']!r}")
            self.weights = [float(w) for w in fields["weights"]]
            if len(self.weights) != len(self.FEATURES):
                raise ValueError(f"one weight per feature, got {fields['weights']!r}")
            self.bias, self.threshold = float(fields["bias"]), float(fields["threshold"])
            self.ensemble = bool(fields["ensemble"])
            if not all(map(math.isfinite, [*self.weights, self.bias, self.threshold])):
                raise ValueError("weights, bias and threshold must be finite numbers")
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"model {name!r}: its null_model is malformed ({exc}); refit it with "
                                "`python -m recipes.reading_comprehension.calibrate null-model`") from None

    def score(self, margin: float, coverage: float) -> float:
        return self.bias + self.weights[0] * margin + self.weights[1] * coverage

    def null_score(self, question: str, context: str, best: float, null: float) -> float:
        """The item's null score as the threshold test reads it: ``best * exp(z)``, so that
        ``ln(null) - ln(best)`` is ``z`` (a margin carrier, as :func:`ensemble_null`'s)."""
        if best <= 0 or null <= 0:
            return null
        margin = math.log(null) - math.log(best)
        return best * math.exp(min(self.score(margin, question_bigram_coverage(question, context)), 700.0))


def merge(context: str, per_window: Sequence[tuple[int, list[tuple[int, int, float]], float]],
          top_k: int) -> tuple[list[tuple[int, int, float]], float]:
    """One item's ``top_k`` answers ``(start, end, score)`` in ``context`` offsets, best first,
    and its null score, from each window's ``(window_start, spans, null_score)`` (an ensemble's
    windows carry a fourth field, its readers' own figures for :func:`ensemble_null`).

    The same span found by overlapping windows counts once, with its best score;
    whitespace at a span's ends is trimmed off.  The item's null score is the
    lowest over its windows: the window most sure it holds an answer decides.
    """
    candidates: dict[tuple[int, int], float] = {}
    for offset, spans, *_ in per_window:
        for start, end, score in spans:
            start, end = _trimmed(context, start + offset, end + offset)
            if start < end and score > candidates.get((start, end), -1.0):
                candidates[(start, end)] = score
    null = min((window[2] for window in per_window), default=1.0)
    ranked = sorted(candidates.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
    return [(s, e, score) for (s, e), score in ranked], null
