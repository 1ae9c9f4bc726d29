"""reading_comprehension: the span of a Chinese context that answers a question.

>>> from taskflow import Taskflow
>>> qa = Taskflow("reading_comprehension")
>>> qa({"context": "杭州市是浙江省的省会，位于中国东南沿海。", "question": "浙江省的省会是哪里？"})   # doctest: +SKIP
[{'question': '浙江省的省会是哪里？', 'answer': '杭州市', 'start': 0, 'end': 3, 'score': 0.39...}]

What counts as an item, and how inputs are read:

* an item is ``{"context": ..., "question": ...}`` (other keys are ignored) or
  a ``(context, question)`` tuple / list of two ``str``;
* the input is one item or a list (any iterable) of items.  Anything else
  (a bare ``str``, a dict without ``context`` or ``question``, a non-``str``
  or empty field) raises ``InputTypeError`` / ``InvalidInputError`` naming the
  item's index and the key.

Contexts of any length are read in windows of ``max_seq_len`` chars that
overlap by ``doc_stride`` chars; each window is one unit of the base class's
batching, so memory is bounded by ``batch_size`` windows whatever the length.
Within a window the network gives each position a start and an end
probability, softmaxed over the window *including* a NULL position ("the
answer is not here"); a span's score is ``p_start * p_end``, comparable
across windows.  The same span found by two overlapping windows counts once
(its best score).  ``start`` / ``end`` index the caller's own context:
``context[start:end] == answer``, also with full-width characters and
newlines (normalisation maps one char to one char).

A package trained with a length scorer (``max_span`` in its architecture)
has a third output, the question's scores for each answer length; a span's
score is then its probability under the window's joint span distribution
(``data.best_spans``), so the model, not a cap, decides how long answers are.
A package without one may carry a ``length_prior`` in its manifest (log
weights per length from its training answers, ``recipes/reading_comprehension/calibrate.py``), decoded the
same way; a package with neither (as 1.0.0 shipped) decodes as it always did.

An ensemble with a member encoder (``transformer_span``) has it read each window in pieces of
its own positions; a manifest's ``encoder_focus`` k has it read only the pieces that hold the
other readers' k best spans of the window (``max(k, top_k)``), which it then re-scores: the
encoder is most of the time, and the answers it would pick are nearly always there
(``recipes/reading_comprehension/calibrate.py encoder-focus`` tunes k).  A span in no piece it
read gets the other readers' share alone.

``handle_impossible_answer=True``: the item's null score is the lowest
window null score ``p_start[NULL] * p_end[NULL]`` (the window most sure it
holds an answer decides; an ensemble's is its readers' mean margin, see
``data.ensemble_null``).  A package with a ``null_model`` (``data.NullModel``)
fitted for the readers that run replaces the margin ``ln(null) - ln(best span)``
by its logistic score of that margin and of how much of the question the
context holds, with the null model's own threshold.  The empty answer (``''``, ``start == end == 0``)
scores ``null * exp(-null_threshold)`` (at most 1) and ranks among the spans by
it, so it is the answer when ``ln(null) - ln(best span) > null_threshold``
(the manifest's, tuned on unanswerable questions; 0, "null beats the best
span", for packages without one).
"""

from __future__ import annotations

import html
from typing import Any, NamedTuple

import numpy as np

from taskflow.encoder import CharVocab, frame
from taskflow.errors import ManifestError, OptionError
from taskflow.model import register_network
from taskflow.predictor import InputSpec
from taskflow.registry import register_task
from taskflow.ensemble import Ensemble, feeds_of
from taskflow.task import MultiTextTask, Option, bool_option, int_option, number_option

from .data import (FEATURES, NullModel, Prepared, Vocab, distinct_top_spans, encode, ensemble_null, mean_span_scores,
                   merge, no_answer_score, prepare, span_scores, top_spans, windows)

__all__ = ["ReadingComprehensionTask"]

register_network("drqa_reader", "taskflow.tasks.reading_comprehension.model:ReaderNet")

class Item(NamedTuple):
    context: str
    question: str


class Window(NamedTuple):
    prepared: tuple[Prepared, ...]   # the context read by each reader (its vocabulary, its features)
    start: int
    end: int
    context: str                     # the item's whole context, as the caller gave it


class Reader:
    """One network that reads the windows: the package's own, or an ensemble member it requires.
    Each has its vocabulary, normalisation, feeds and decoding (its length scorer or prior)."""

    def __init__(self, model, role: str = ""):
        manifest = model.manifest
        self.role = role        # "" for the package's own reader, else its role in the package's requires
        if list(manifest.get("features", FEATURES)) != list(FEATURES):
            raise ManifestError(f"model {manifest.name!r} was trained with features {manifest.get('features')}; "
                                f"this taskflow computes {list(FEATURES)}: upgrade taskflow or retrain")
        self.model = model
        self.max_question_len = int(manifest.get("max_question_len", 64))
        self.length_prior = _length_prior(manifest)
        self.joint = bool(manifest.get("architecture", {}).get("max_span"))   # a third output: length scores
        self.output_count = 3 if self.joint else 2
        self.reads_words = bool(manifest.get("architecture", {}).get("word_dim"))
        self.vocab = model.vocab(Vocab.load)
        self.normalize = model.normalizer
        if not self.normalize.keeps_length:
            raise ManifestError(f"model {manifest.name!r}: reading comprehension needs a normalisation that keeps "
                                f"offsets; got {self.normalize!r}")

    def prepare(self, item: Item) -> Prepared:
        return prepare(item.context, item.question, self.vocab, self.max_question_len, normalize=self.normalize,
                       word_ids=self.reads_words)

    max_positions = None   # any window length

    def context_width(self, max_seq_len: int, prepared: Prepared | None = None) -> int:
        """How many context chars one window holds (after ``prepared``'s question, or the longest one
        when None): all of them, since this network reads the question apart."""
        return max_seq_len

    def feeds(self, units: list[tuple[Prepared, int, int]]) -> dict[str, np.ndarray]:
        return encode(units)

    def input_specs(self, batch_size: int, max_seq_len: int) -> list[InputSpec]:
        width = max_seq_len + 1
        specs = [InputSpec("context_ids", "int64", (batch_size, width)),
                 InputSpec("context_features", "float32", (batch_size, width, len(FEATURES))),
                 InputSpec("question_ids", "int64", (batch_size, self.max_question_len))]
        if self.reads_words:
            specs += [InputSpec("context_word_ids", "int64", (batch_size, width)),
                      InputSpec("question_word_ids", "int64", (batch_size, self.max_question_len))]
        return specs

    def window_scores(self, outputs, units: list[tuple[Prepared, int, int]], max_answer_len: int):
        """``data.span_scores`` of each window ``(prepared, start, end)`` from this reader's outputs
        for the batch (one row a window)."""
        return [span_scores(outputs[0][row], outputs[1][row], end - start, max_answer_len,
                            outputs[2][row] if self.joint else self.length_prior)
                for row, (_, start, end) in enumerate(units)]


class EncodedQuestion(NamedTuple):
    """An item as the encoder reads it: the question's and the context's char ids."""
    question_ids: np.ndarray   # [<= max_question_len]
    context_ids: np.ndarray    # [len(context)]


class EncoderReader:
    """The pretrained encoder with a start/end head (``transformer_span``): the same interface as
    :class:`Reader`, for ``[CLS] question [SEP] context[start:end] [SEP]`` windows.  Its start and
    end logits over ``[CLS]`` and the window's chars are softmaxed into the NULL-first
    probabilities that :func:`data.span_scores` decodes, as the char readers' are."""

    output_count = 2
    length_prior = None

    def __init__(self, model, role: str = ""):
        self.model, self.role = model, role
        self.max_question_len = int(model.manifest.get("max_question_len", 64))
        self.vocab = model.vocab(CharVocab.load)
        self.normalize = model.normalizer
        if not self.normalize.keeps_length:
            raise ManifestError(f"model {model.name!r}: reading comprehension needs a normalisation that keeps "
                                f"offsets; got {self.normalize!r}")
        self.max_positions = int(model.manifest["architecture"].get("max_len", 512))
        # As an ensemble member it reads each of the package's windows in pieces the size it was
        # fine-tuned on (its manifest's); the package's own encoder reads one piece a window.
        self.read_pieces(int(model.manifest.get("max_seq_len", self.max_positions)),
                         int(model.manifest.get("doc_stride", 128)))

    def read_pieces(self, seq_len: int, stride: int) -> None:
        if seq_len > self.max_positions or self.context_width(seq_len) <= stride:
            raise ManifestError(f"model {self.model.name!r}: pieces of {seq_len} positions overlapping by {stride} "
                                f"chars do not fit its {self.max_positions} positions and "
                                f"{self.max_question_len}-char questions; fix its max_seq_len / doc_stride")
        self.piece_seq_len, self.piece_stride = seq_len, stride

    def pieces(self, prepared: EncodedQuestion, start: int, end: int) -> list[tuple[int, int]]:
        """The ``(start, end)`` context pieces this network reads window ``start:end`` in."""
        width = self.context_width(self.piece_seq_len, prepared)
        return [(start + a, start + b) for a, b in windows(end - start, width, self.piece_stride)]

    def prepare(self, item: Item) -> EncodedQuestion:
        question = self.vocab.encode_array(self.normalize(item.question))[:self.max_question_len]
        return EncodedQuestion(question.astype(np.int64), self.vocab.encode_array(self.normalize(item.context)))

    def context_width(self, max_seq_len: int, prepared: EncodedQuestion | None = None) -> int:
        question = self.max_question_len if prepared is None else len(prepared.question_ids)
        return max_seq_len - question - 3     # [CLS] question [SEP] ... [SEP]

    def feeds(self, units: list[tuple[EncodedQuestion, int, int]],
              pieces: list[list[tuple[int, int]]] | None = None) -> dict[str, np.ndarray]:
        """One row a piece: ``[CLS] question [SEP] piece [SEP]``; ``pieces``: those to read of each
        unit (:meth:`focus`), else all of them."""
        pieces = pieces or [self.pieces(p, start, end) for p, start, end in units]
        return {"input_ids": frame([(p.question_ids, p.context_ids[a:b]) for (p, _, _), own in zip(units, pieces)
                                    for a, b in own])}

    def focus(self, prepared: EncodedQuestion, start: int, end: int,
              spans: list[tuple[int, int, float]]) -> list[tuple[int, int]]:
        """The pieces of window ``start:end`` to read for ``spans`` (window offsets, as
        :func:`data.top_spans` gives them): for each span, the piece that holds it with the most
        context on its shorter side, each piece once, in the window's order."""
        pieces = self.pieces(prepared, start, end)
        chosen = set()
        for s, e, _ in spans:
            s, e = s + start, e + start
            room = [(min(s - a, b - e), -k) for k, (a, b) in enumerate(pieces) if a <= s and e <= b]
            if room:
                chosen.add(-max(room)[1])
            else:       # longer than the pieces' overlap: every piece it touches
                chosen.update(k for k, (a, b) in enumerate(pieces) if a < e and s < b)
        return [pieces[k] for k in sorted(chosen)] or pieces[:1]

    def input_specs(self, batch_size: int, max_seq_len: int) -> list[InputSpec]:
        pieces = len(windows(max_seq_len, self.context_width(self.piece_seq_len), self.piece_stride))
        return [InputSpec("input_ids", "int64", (batch_size * pieces, self.piece_seq_len))]

    def window_scores(self, outputs, units: list[tuple[EncodedQuestion, int, int]], max_answer_len: int,
                      pieces: list[list[tuple[int, int]]] | None = None):
        """Each window's span scores: each piece's NULL-first softmax of the start / end logits over
        ``[CLS]`` and its chars, decoded like a char reader's; a span two pieces hold keeps its best
        score, one no piece read holds whole has none (-1), the window's null is its pieces' lowest.
        ``pieces``: those read of each unit, as :meth:`feeds` was given them."""
        pieces = pieces or [self.pieces(p, start, end) for p, start, end in units]
        out, row = [], 0
        for (prepared, start, end), read in zip(units, pieces):
            offset = len(prepared.question_ids) + 2
            matrix, null = np.full((end - start, min(max_answer_len, end - start)), -1.0), 1.0
            for a, b in read:
                probabilities = []
                for logits in outputs[:2]:
                    piece = np.concatenate([logits[row, :1], logits[row, offset:offset + b - a]]).astype(np.float64)
                    weights = np.exp(piece - piece.max())
                    probabilities.append(weights / weights.sum())
                scores, piece_null = span_scores(*probabilities, b - a, max_answer_len)
                rows, width = scores.shape
                region = matrix[a - start:a - start + rows, :width]
                np.maximum(region, scores, out=region)
                null, row = min(null, piece_null), row + 1
            out.append((matrix, null))
        return out


def reader_for(model, role: str = ""):
    """The reader of a package's network: the encoder's for ``transformer_span``, else the char reader."""
    return EncoderReader(model, role) if model.network_type == "transformer_span" else Reader(model, role)


def _encoder_focus(manifest) -> int | None:
    """The manifest's ``encoder_focus`` (a positive int), or None without the field."""
    focus = manifest.get("encoder_focus")
    if focus is not None and (isinstance(focus, bool) or not isinstance(focus, int) or focus < 1):
        raise ManifestError(f"model {manifest.name!r}: encoder_focus must be a positive int (how many of the other "
                            f"readers' best spans a window's encoder reads the pieces of); got {focus!r:.40}")
    return focus


def _length_prior(manifest) -> np.ndarray | None:
    """The manifest's ``length_prior`` (log weights, index 0 the NULL span, then 1..L chars), if any."""
    prior = manifest.get("length_prior")
    if prior is None:
        return None
    numbers = isinstance(prior, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in prior)
    values = np.asarray(prior, dtype=np.float64) if numbers else None
    if values is None or len(values) < 2 or not np.all(np.isfinite(values)):
        raise ManifestError(f"model {manifest.name!r}: length_prior must be a list of at least 2 finite numbers "
                            f"(log weights for the NULL span, then for answers of 1, 2, ... chars); got {prior!r:.80}")
    return values


@register_task("reading_comprehension", aliases=["question_answering_extractive"])
class ReadingComprehensionTask(MultiTextTask):
    """Extractive question answering over Chinese contexts of any length.

    >>> from taskflow import Taskflow
    >>> Taskflow("question_answering_extractive", top_k=2)(("北京是中国的首都。", "中国的首都是哪里？"))  # doctest: +SKIP
    [[{'question': '中国的首都是哪里？', 'answer': '北京', 'start': 0, 'end': 2, 'score': 0.70...}, ...]]
    """

    declared = {
        "top_k": Option(
            1,
            'answers per item; 1 (default) gives one dict per item, more a list of dicts per item, best '
            'first.',
            "int", per_call=True, check=int_option),
        "max_answer_len": Option(
            None,
            "longest answer in chars (default: the model's, 64).",
            "int", per_call=True, check=int_option),
        "max_seq_len": Option(
            None,
            "window size in chars (default: the model's, 512).",
            "int"),
        "doc_stride": Option(
            None,
            "overlap of consecutive windows in chars (default: the model's, 128; with a smaller max_seq_len, "
            'the same share of it).',
            "int"),
        "handle_impossible_answer": Option(
            False,
            'allow "no answer": give ``\'\'`` (start = end = 0) when the model\'s score for "the answer is not '
            'in the context" beats the best span\'s score by the null_threshold margin (else the best span is '
            'always given).',
            "bool", per_call=True, check=bool_option),
        "null_threshold": Option(
            None,
            "the margin of handle_impossible_answer, ``ln(null) - ln(best span)`` (or the package's null "
            "model's score) above which the answer is ``''`` (default: the model's tuned value, else 0; lower"
            ' says "no answer" more often).',
            "float"),
        "ensemble": Option(
            True,
            "with a package whose manifest names an ``ensemble`` (readers it requires, e.g. the default's "
            'word-vector reader), every reader scores every span and their probabilities are averaged '
            "(default True); False runs the package's own reader alone, in about half the time, with its own "
            '``null_threshold``.',
            "bool"),
    }

    default_model = "drqa_char"
    # accurate: drqa_char's two readers voting with the fine-tuned encoder (about 4x the time).
    modes = {"fast": "drqa_char", "accurate": "reader_ensemble"}
    default_batch_size = 16
    input_fields = ("context", "question")

    def __init__(self, model, *, top_k: int = 1, max_answer_len: int | None = None, max_seq_len: int | None = None,
                 doc_stride: int | None = None, handle_impossible_answer: bool = False,
                 null_threshold: float | None = None, ensemble: bool = True, **base):
        super().__init__(model, **base)
        manifest = self.manifest
        self.top_k = int_option("top_k", top_k)
        self.max_answer_len = int_option("max_answer_len", manifest.get("max_answer_len", 64)
                                         if max_answer_len is None else max_answer_len)
        model_window, model_stride = int(manifest.get("max_seq_len", 512)), int(manifest.get("doc_stride", 128))
        self.max_seq_len = int_option("max_seq_len", model_window if max_seq_len is None else max_seq_len, 8)
        if doc_stride is None:
            # Windows narrower than the model's overlap by the same share of their width, so a
            # max_seq_len alone is always a valid choice.
            self.doc_stride = model_stride * min(self.max_seq_len, model_window) // model_window
        else:
            self.doc_stride = int_option("doc_stride", doc_stride, 0)
        if self.doc_stride >= self.max_seq_len:
            raise OptionError(f"doc_stride ({self.doc_stride}) must be smaller than max_seq_len "
                              f"({self.max_seq_len}): windows overlap by doc_stride chars; lower doc_stride "
                              "(--doc-stride) or raise max_seq_len (--max-seq-len)", "doc_stride")
        self.handle_impossible_answer = bool_option("handle_impossible_answer", handle_impossible_answer)
        self.ensemble = Ensemble(model, reader_for, members=bool_option("ensemble", ensemble))
        if self.ensemble.mixing != "arithmetic":
            raise ManifestError(f"model {model.name!r}: reading comprehension averages its readers' span "
                                f"probabilities (ensemble_mixing 'arithmetic'), not {self.ensemble.mixing!r}")
        self.readers = self.ensemble.networks
        # Windows are the package's own reader's; a member encoder reads each window in pieces of
        # its own positions (EncoderReader.pieces), the windows it was fine-tuned on.
        own = self.readers[0]
        if own.max_positions is not None and self.max_seq_len > own.max_positions:
            raise OptionError(f"max_seq_len {self.max_seq_len} is longer than model {model.name!r} reads "
                              f"({own.max_positions} positions); pass max_seq_len <= {own.max_positions}",
                              "max_seq_len")
        width = own.context_width(self.max_seq_len)
        if width <= self.doc_stride:
            raise OptionError(f"max_seq_len {self.max_seq_len} leaves {width} context chars a window after a "
                              f"question of {own.max_question_len} chars, not more than doc_stride "
                              f"({self.doc_stride}); raise max_seq_len or lower doc_stride", "max_seq_len")
        if isinstance(own, EncoderReader):
            own.read_pieces(self.max_seq_len, self.doc_stride)   # one piece a window
        # The package's own reader's, as every task exposes them (tests and callers read these).
        own = self.readers[0]
        self.vocab, self.normalize, self.length_prior = own.vocab, own.normalize, own.length_prior
        # An ensemble decides "no answer" on its readers' mean margin, with its own tuned threshold
        # (recipes/reading_comprehension/calibrate.py). Bounded so exp(-threshold) stays finite; tuned values
        # are a few units.
        # A null_model fitted for these readers replaces the margin by its score, with its threshold.
        self.null_model = None
        if manifest.get("null_model") is not None:
            null_model = NullModel(manifest["null_model"], model.name)
            if null_model.ensemble == (len(self.readers) > 1):
                self.null_model = null_model
        if self.null_model is not None:
            tuned = self.null_model.threshold
        else:
            tuned = manifest.get("ensemble_null_threshold" if len(self.readers) > 1 else "null_threshold", 0.0)
        self.null_threshold = number_option("null_threshold", tuned if null_threshold is None else null_threshold,
                                            -50.0, 50.0)
        if null_threshold is not None and not self.handle_impossible_answer:
            raise OptionError("null_threshold is the margin of handle_impossible_answer: pass "
                              "handle_impossible_answer=True with it (without, the best span is always given)",
                              "null_threshold")
        # The manifest's encoder_focus: how many of the other readers' best spans a window's member
        # encoder reads the pieces of (None: every piece). The encoder is most of the accurate
        # mode's time, and the spans it would move to the top are nearly always among those.
        focus = _encoder_focus(manifest)
        self.encoder_focus = focus if len(self.readers) > 1 else None
        if self.encoder_focus is not None and not any(isinstance(r, EncoderReader) for r in self.readers[1:]):
            raise ManifestError(f"model {model.name!r}: encoder_focus says how much of each window its member "
                                "encoder reads, and its ensemble has none; remove encoder_focus")

    def input_specs(self):
        return self.readers[0].input_specs(self.batch_size, self.max_seq_len)

    @property
    def weights(self) -> list[float] | None:
        """The readers' ensemble weights (None: equal); the calibration recipe sets them to tune."""
        return self.ensemble.weights

    @weights.setter
    def weights(self, weights) -> None:
        self.ensemble.weights = weights

    @property
    def predictors(self):
        """The package's own predictor, then each ensemble member's (each member's export goes
        beside its own package)."""
        return self.ensemble.predictors(self.predictor,
                                        lambda reader: reader.input_specs(self.batch_size, self.max_seq_len))

    # --------------------------------------------------------------- inputs
    def check_item(self, item: Any, index: int | None) -> Item:
        return Item(*super().check_item(item, index))

    def split(self, item: Item) -> list[Window]:
        prepared = tuple(reader.prepare(item) for reader in self.readers)
        width = self.readers[0].context_width(self.max_seq_len, prepared[0])
        return [Window(prepared, a, b, item.context) for a, b in windows(len(item.context), width, self.doc_stride)]

    def unit_length(self, unit: Window) -> int:
        return unit.end - unit.start

    # --------------------------------------------------------------- stages
    def _focused(self) -> int | None:
        """The index of the member encoder that reads only the pieces :meth:`forward` picks, if any."""
        if self.encoder_focus is None:
            return None
        return next(k for k, reader in enumerate(self.readers) if k and isinstance(reader, EncoderReader))

    def preprocess(self, units):
        focused = self._focused()
        feeds = self.ensemble.feeds(lambda k, reader: {} if k == focused else reader.feeds(
            [(unit.prepared[k], unit.start, unit.end) for unit in units]))
        # Focused, the encoder's feeds wait for the other readers' spans (cascade).
        return feeds if focused is None else {"feeds": feeds, "units": units}

    def forward(self, features):
        """The package's own outputs, then each ensemble member's (postprocess tells them apart);
        with a focused encoder, then the pieces it read of each window.  A focused batch takes two
        rounds: the other readers first, with ``None`` in the encoder's places and the pieces'; then
        the encoder, on the pieces :meth:`cascade` chose from their outputs."""
        focused = self._focused()
        if focused is None:
            return [output for outputs in self.ensemble.run(features, self.predictors) for output in outputs]
        if "encoder" in features:      # the second round: the earlier outputs, the encoder's filled in
            outputs = list(features["outputs"])
            start = sum(reader.output_count for reader in self.readers[:focused])
            outputs[start:start + self.readers[focused].output_count] = self.predictors[focused].run(features["encoder"])
            return outputs[:-1] + [features["pieces"]]
        feeds = features["feeds"]
        return [output for k, (role, predictor, reader) in enumerate(zip(self.ensemble.roles, self.predictors,
                                                                          self.readers))
                for output in ([None] * reader.output_count if k == focused else predictor.run(feeds_of(feeds, role)))
                ] + [None]

    def cascade(self, features, outputs, units):
        """With a focused encoder, after the first round: the pieces of each window it reads, those
        holding the other readers' best spans (their weighted mean, as postprocess mixes them)."""
        focused = self._focused()
        if focused is None or "encoder" in features:
            return None
        per_reader = self._per_reader(outputs)
        others = [k for k in range(len(self.readers)) if k != focused]
        weights = [1.0] * len(self.readers) if self.weights is None else self.weights
        per_window = {k: self._window_scores(k, per_reader[k], units) for k in others}
        encoder = self.readers[focused]
        pieces = []
        for row, unit in enumerate(units):
            mixed = mean_span_scores([per_window[k][row] for k in others],
                                     [weights[k] / sum(weights[j] for j in others) for k in others])
            spans, _ = top_spans(*mixed, max(self.encoder_focus, self.top_k))
            pieces.append(encoder.focus(unit.prepared[focused], unit.start, unit.end, spans))
        units_of_encoder = [(unit.prepared[focused], unit.start, unit.end) for unit in units]
        return {"encoder": encoder.feeds(units_of_encoder, pieces), "pieces": pieces, "outputs": outputs,
                "units": units}

    def _per_reader(self, outputs) -> list[list]:
        """``outputs`` (flat, the package's own first) cut into each reader's."""
        per_reader, start = [], 0
        for reader in self.readers:
            per_reader.append(outputs[start:start + reader.output_count])
            start += reader.output_count
        return per_reader

    def _window_scores(self, k: int, outputs, units, pieces=None):
        """Reader ``k``'s :func:`data.span_scores` of each unit's window from its outputs."""
        own = [(unit.prepared[k], unit.start, unit.end) for unit in units]
        focused = () if pieces is None else (pieces,)      # the pieces a focused encoder read
        return self.readers[k].window_scores([np.asarray(o) for o in outputs], own, self.max_answer_len, *focused)

    def postprocess(self, outputs, units):
        focused = self._focused()
        pieces = outputs[-1] if focused is not None else None
        per_reader = self._per_reader(outputs)
        per_window = [self._window_scores(k, own, units, pieces if k == focused else None)
                      for k, own in enumerate(per_reader)]
        results = []
        for row, unit in enumerate(units):
            scores = [reader_scores[row] for reader_scores in per_window]
            text = unit.context[unit.start:unit.end]
            if len(scores) == 1:
                results.append((unit.start, *distinct_top_spans(*scores[0], self.top_k, text)))
                continue
            # An ensemble's window also keeps each reader's own best span and null (item_null).
            own = tuple((float(matrix.max()) if matrix.size else 0.0, null) for matrix, null in scores)
            results.append((unit.start, *distinct_top_spans(*mean_span_scores(scores, self.weights), self.top_k, text),
                            own))
        return results

    def item_null(self, results, spans, null: float) -> float:
        """The item's null score from its windows' ``results`` and merged ``spans``: ``null`` (the
        lowest window null) for one reader, :func:`data.ensemble_null` for an ensemble."""
        if len(self.readers) == 1 or not spans:
            return null
        own = ensemble_null([[window[3][x] for window in results] for x in range(len(self.readers))], spans[0][2],
                            self.weights)
        return null if own is None else own

    def join(self, item: Item, results, units):
        spans, null = merge(item.context, results, self.top_k)
        null = self.item_null(results, spans, null)
        if self.null_model is not None and spans:
            null = self.null_model.null_score(item.question, item.context, spans[0][2], null)
        answers = [{"question": item.question, "answer": item.context[s:e], "start": s, "end": e, "score": score}
                   for s, e, score in spans]
        if self.handle_impossible_answer or not answers:
            empty = {"question": item.question, "answer": "", "start": 0, "end": 0,
                     "score": no_answer_score(null, self.null_threshold) if self.handle_impossible_answer else 0.0}
            # Stable sort: on a tie the spans stay ahead of the empty answer.
            answers = sorted(answers + [empty], key=lambda a: -a["score"])[: self.top_k]
        return answers[0] if self.top_k == 1 else answers

    # -------------------------------------------------------------- display
    def render_html(self, results, items):
        """Each question, then its answer(s) highlighted in the context."""
        from taskflow.display import html_spans, overlapped

        blocks = []
        for result, item in zip(results, items):
            answers = result if isinstance(result, list) else [result]
            # Best first: an answer overlapping a better one is listed under the context, not drawn.
            spans = [(a["start"], a["end"], f"#{rank} {a['score']:.2f}") for rank, a in enumerate(answers, 1) if a["answer"]]
            head = f"<div style='font-weight:bold;margin-top:6px'>Q: {html.escape(item.question)}</div>"
            body = html_spans(item.context, spans)
            for start, end, label in overlapped(spans):
                body += f"<div>{html.escape(label)}: {html.escape(item.context[start:end])}</div>"
            # "No answer" among the answers (handle_impossible_answer) is said at its rank, not dropped.
            for rank, answer in enumerate(answers, 1):
                if not answer["answer"]:
                    body += f"<div>#{rank} <i>no answer</i> ({answer['score']:.2f})</div>"
            blocks.append(head + body)
        return "<div style='font-family:sans-serif'>" + "".join(blocks) + "</div>"
