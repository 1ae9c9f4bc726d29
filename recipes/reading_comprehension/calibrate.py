"""Calibrate a package's decoding: its answer-length prior and its ``null_threshold``.

**Length prior** (``length_prior`` in the manifest, for packages without a length scorer, e.g.
1.0.0): a log weight per answer length, index 0 the NULL span, taken from the lengths of the
training answers (:func:`length_log_prior`: the log share of answers of each length, add-one
smoothed).  ``data.best_spans`` then decodes ``p_start * p_end * exp(prior[length])`` normalised
over the window's spans, as for a joint model's own length scores.  Nothing is tuned: the prior
is the training answers' histogram (a package trained on train gets train's, which its own
start / end probabilities were fitted to; the independent start / end choice is what makes
1.0.0's answers long, not train's lengths).

**Null threshold**: for each question the reader (or the ensemble) gives its best span's score and the item's null
score (see ``data.best_spans`` and ``data.merge``); the answer is ``''`` when ``ln(null) - ln(best)
> null_threshold`` (``data.no_answer_score``).  The threshold is tuned on two sets together:

* answerable questions (the selection set: the recipe's held-out slice of CMRC train, or the
  file given), where each "no answer" loses that question's F1;
* unanswerable ones (``dev/unanswerable_tune.jsonl``: CMRC trial questions paired with another
  article's passage, see ``dev/make_unanswerable.py``), where each is right.

The tuned threshold is the lowest one (most "no answer") whose answerable F1 is at most
``max_f1_drop`` points below the F1 without "no answer" (``handle_impossible_answer=False``):
the target is "at least 80% of unanswerable questions said 'no answer', answerable F1 down at
most 1 point", and the default budget of 0.75 keeps a margin for the sets it is
reported on (CMRC dev and ``dev/unanswerable_report.jsonl``).  Between two margins of the tuning
sets every threshold decides alike; the middle of that interval is kept.  It depends on the
decoding, so a length prior goes in first.

The recipe tunes the threshold after training; for an existing package (1.0.0 read all of
train, so its answerable set is trial, its selection set):

    python -m recipes.reading_comprehension.calibrate length-prior \\
        --package resources/reading_comprehension/drqa_char --train ../shared/data/mrc/cmrc2018/train.json --write
    python -m recipes.reading_comprehension.calibrate null-threshold \\
        --package resources/reading_comprehension/drqa_char --answerable ../shared/data/mrc/cmrc2018/trial.json --write

A package with an ``ensemble`` (readers it requires, whose span probabilities it averages) is
tuned as it runs by default, the ensemble, into ``ensemble_null_threshold``; ``--own-reader``
tunes its own reader alone (``ensemble=False``) into ``null_threshold``.

**Null model** (``null_model`` in the manifest, ``data.NullModel``): the margin alone says how sure
the readers are of NULL against their best span; whether the context is about the question at all
is plainer in how much of the question it holds.  ``null-model`` fits a logistic regression of
"unanswerable" on the margin and ``data.question_bigram_coverage`` over the same two sets (L2,
C = 1, on standardised features), then tunes the threshold on its score by the rule above:

    python -m recipes.reading_comprehension.calibrate null-model \\
        --package resources/reading_comprehension/drqa_char --answerable ../shared/data/mrc/cmrc2018/trial.json --write

It is fitted for the readers that run (the ensemble by default, ``--own-reader`` for the package's
own), and the task uses it only with those readers.

**Ensemble weights** (``ensemble_weights``: one per reader, the package's own first): the readers'
span probabilities are averaged with these weights.  ``ensemble-weights`` scores every weighting on
a grid over the simplex (``--step``, each weight at least one step) by F1 on the answerable set,
without "no answer", and keeps the best (the networks run once; only the decoding is repeated);
``--max-length-ratio R`` keeps it to weightings whose answers average at most R times the
references' length (F1 alone rewards answers that hold the reference and more).
Tune the weights first, then the null model, which depends on them:

    python -m recipes.reading_comprehension.calibrate ensemble-weights \
        --package resources/reading_comprehension/reader_ensemble --answerable ../shared/data/mrc/cmrc2018/trial.json --write

**Encoder focus** (``encoder_focus``, for an ensemble with a member encoder): the encoder is most
of the accurate mode's time, and reads each window in several overlapping pieces.  With a focus k
it reads, of each window, only the pieces that hold the other readers' k best spans (their
weights renormalised); a span in no piece it read gets their share alone.  ``encoder-focus``
scores every piece and each candidate k on the answerable set and keeps the fewest spans within
``--max-f1-drop`` F1 points (0.3) of reading every piece.  Tune it after the weights, and fit the
null model after it:

    python -m recipes.reading_comprehension.calibrate encoder-focus \
        --package resources/reading_comprehension/reader_ensemble --answerable ../shared/data/mrc/cmrc2018/trial.json --write

``--write`` stores the figures in the package's manifest (its files stay as they are); without
it the command only prints them.  ``data`` and ``metrics`` above are the task's modules
(``taskflow.tasks.reading_comprehension.data`` and ``.metrics``).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = ["margin", "tune_null_threshold", "fit_null_model", "read_unanswerable", "package_scores", "tune_package",
           "tune_ensemble_weights", "tune_encoder_focus", "length_log_prior", "length_prior_fields", "main"]

DEFAULT_UNANSWERABLE = Path(__file__).resolve().parent / "dev" / "unanswerable_tune.jsonl"
_TINY = 1e-300


def margin(best_score: float | None, null_score: float) -> float:
    """``ln(null) - ln(best)``: above the threshold, "no answer" (``+inf`` when there is no span)."""
    if best_score is None:
        return math.inf
    return math.log(max(null_score, _TINY)) - math.log(max(best_score, _TINY))


def tune_null_threshold(answerable: Sequence[tuple[float | None, float, float]],
                        unanswerable: Sequence[tuple[float | None, float]], max_f1_drop: float = 0.75) -> dict:
    """The threshold, and what it does on the tuning sets.

    ``answerable``: per question ``(best span score, null score, F1 of the best span in [0, 1])``;
    ``unanswerable``: per question ``(best span score, null score)``.  Returns
    ``{"null_threshold", "answerable_f1", "answerable_f1_drop", "unanswerable_no_answer", ...}``
    (F1 and shares in percent).
    """
    if not answerable or not unanswerable:
        raise ValueError(f"tuning needs both sets; got {len(answerable)} answerable and "
                         f"{len(unanswerable)} unanswerable questions")
    a_margin = np.array([margin(b, n) for b, n, _ in answerable])
    a_f1 = np.array([f for _, _, f in answerable], dtype=np.float64)
    u_margin = np.array([margin(b, n) for b, n in unanswerable])
    n = len(answerable)
    # Thresholds worth trying: the finite margins seen (a threshold between two of them decides
    # like the lower one), most "no answer" first.
    candidates = np.unique(np.concatenate([a_margin, u_margin]))
    candidates = candidates[np.isfinite(candidates)]
    if not len(candidates):
        candidates = np.array([0.0])
    # F1 lost at threshold t: the answerable questions with margin > t.
    order = np.argsort(a_margin)
    sorted_margin, lost_after = a_margin[order], np.cumsum(a_f1[order][::-1])[::-1]
    lost_after = np.append(lost_after, 0.0)

    def f1_drop(t: float) -> float:
        return 100.0 * lost_after[np.searchsorted(sorted_margin, t, side="right")] / n

    feasible = [k for k, t in enumerate(candidates) if f1_drop(t) <= max_f1_drop + 1e-9]
    k = feasible[0] if feasible else len(candidates) - 1
    low = candidates[k]
    high = candidates[k + 1] if k + 1 < len(candidates) else low + 1.0
    threshold = float(round((low + high) / 2, 4))
    base = 100.0 * a_f1.mean()
    return {"null_threshold": threshold,
            "answerable_f1_without_no_answer": round(base, 3),
            "answerable_f1": round(base - f1_drop(threshold), 3),
            "answerable_f1_drop": round(f1_drop(threshold), 3),
            "answerable_no_answer": round(100.0 * float(np.mean(a_margin > threshold)), 2),
            "unanswerable_no_answer": round(100.0 * float(np.mean(u_margin > threshold)), 2),
            "max_f1_drop": max_f1_drop, "answerable_questions": n, "unanswerable_questions": len(unanswerable)}


# A margin of "no span at all" (inf) enters the fit as this: far past every real margin.
_MARGIN_CAP = 50.0


def _logistic_regression(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> tuple[np.ndarray, float]:
    """Weights and bias minimising ``c * sum(log loss) + |w|^2 / 2`` (scikit-learn's objective, the
    bias not penalised), by Newton's method: a handful of features, so exact and deterministic."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    theta, penalty = np.zeros(d + 1), np.append(np.ones(d), 0.0)
    for _ in range(100):
        p = 0.5 * (1.0 + np.tanh(0.5 * (a @ theta)))          # the sigmoid, without overflow
        gradient = c * a.T @ (p - y) + penalty * theta
        hessian = c * (a.T * (p * (1 - p))) @ a + np.diag(penalty) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return theta[:d], float(theta[d])


def fit_null_model(answerable: Sequence[tuple[str, str, float | None, float, float]],
                   unanswerable: Sequence[tuple[str, str, float | None, float]], max_f1_drop: float = 0.75,
                   ensemble: bool = True) -> dict:
    """The manifest's ``null_model`` fields: a logistic regression of "unanswerable" on the margin and
    the question's bigram coverage, and its threshold by :func:`tune_null_threshold`'s rule.

    ``answerable``: per question ``(question, context, best span score, null score, F1 in [0, 1])``;
    ``unanswerable``: ``(question, context, best span score, null score)``.
    """
    from taskflow.tasks.reading_comprehension.data import NullModel, question_bigram_coverage

    def features(rows):
        return np.array([[min(max(margin(best, null), -_MARGIN_CAP), _MARGIN_CAP),
                          question_bigram_coverage(question, context)] for question, context, best, null, *_ in rows],
                        dtype=np.float64).reshape(-1, 2)

    xa, xu = features(answerable), features(unanswerable)
    x = np.vstack([xa, xu])
    mean, scale = x.mean(axis=0), np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    weights, bias = _logistic_regression((x - mean) / scale, np.append(np.zeros(len(xa)), np.ones(len(xu))))
    weights, bias = weights / scale, bias - float((weights * mean / scale).sum())   # on the raw features
    fields = {"features": list(NullModel.FEATURES), "weights": [round(float(w), 6) for w in weights],
              "bias": round(bias, 6), "ensemble": ensemble, "threshold": 0.0}
    model = NullModel(fields)
    # tune_null_threshold reads margins as ln(null / best): give it the model's score that way.
    za = [model.score(*row) for row in xa]
    zu = [model.score(*row) for row in xu]
    tuned = tune_null_threshold([(1.0, math.exp(min(z, 700.0)), row[4]) for z, row in zip(za, answerable)],
                                [(1.0, math.exp(min(z, 700.0))) for z in zu], max_f1_drop)
    return {**fields, "threshold": tuned.pop("null_threshold"), "tuning": tuned}


def read_unanswerable(path: str | Path) -> list[dict]:
    """Rows of an unanswerable set (JSON lines with ``context`` and ``question``)."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def package_scores(task, rows: Iterable[dict]) -> list[tuple[str, float | None, float]]:
    """``(best answer, its score or None, null score)`` per ``{context, question}`` row, through
    ``task`` (a ``ReadingComprehensionTask``: its windows, batching, predictor and merging), before
    any no-answer decision."""
    from taskflow.tasks.reading_comprehension import ReadingComprehensionTask
    from taskflow.tasks.reading_comprehension.data import merge

    class BeforeTheDecision(ReadingComprehensionTask):
        """The task up to merging the windows; join keeps the best span and the null score."""

        def join(self, item, results, units):
            spans, null = merge(item.context, results, 1)
            null = self.item_null(results, spans, null)
            return (item.context[spans[0][0]:spans[0][1]], spans[0][2], null) if spans else ("", None, null)

    raw = BeforeTheDecision(task.model, batch_size=task.batch_size, max_answer_len=task.max_answer_len,
                            max_seq_len=task.max_seq_len, doc_stride=task.doc_stride, ensemble=len(task.readers) > 1)
    items = [raw.check_item((row["context"], row["question"]), i) for i, row in enumerate(rows)]
    return raw.run_items(items)


def tune_package(package: str | Path, answerable_rows: list[dict], unanswerable_rows: list[dict],
                 max_f1_drop: float = 0.75, ensemble: bool = True, null_model: bool = False) -> dict:
    """Tune ``package``'s threshold through the product (static graph) on these rows: its
    ensemble's (``ensemble_null_threshold``) when it has one and ``ensemble``, else its own reader's;
    with ``null_model``, fit :func:`fit_null_model` for those readers instead."""
    from taskflow import Taskflow
    from taskflow.tasks.reading_comprehension.metrics import f1_score

    task = Taskflow("reading_comprehension", task_path=str(package), ensemble=ensemble).task
    answered = package_scores(task, answerable_rows)
    refused = package_scores(task, unanswerable_rows)
    if null_model:
        return fit_null_model([(row["question"], row["context"], score, null, f1_score(row["answers"], answer))
                               for row, (answer, score, null) in zip(answerable_rows, answered)],
                              [(row["question"], row["context"], score, null)
                               for row, (_, score, null) in zip(unanswerable_rows, refused)],
                              max_f1_drop, ensemble=len(task.readers) > 1)
    return tune_null_threshold([(score, null, f1_score(row["answers"], answer))
                                for row, (answer, score, null) in zip(answerable_rows, answered)],
                               [(score, null) for _, score, null in refused], max_f1_drop)


def tune_ensemble_weights(package: str | Path, rows: list[dict], step: float = 0.1,
                          max_length_ratio: float | None = None) -> dict:
    """The ``ensemble_weights`` of ``package`` with the best F1 on ``rows`` (answerable, no "no
    answer"), over :func:`simplex_grid`; ties keep the grid's first (the package's own reader
    weighted least).  With ``max_length_ratio``, only weightings whose answers average at most that
    many times the references' length (each question's mean over its references) are chosen: F1
    rewards an answer that holds the reference and more, so the best F1 alone drifts to long
    answers.  The readers' outputs are computed once and reused for every weighting.
    ``ensemble_weights_tuning.grid`` lists each weighting with its F1, EM and length ratio."""
    from taskflow import Taskflow
    from taskflow.tasks.reading_comprehension.metrics import evaluate
    from recipes.tuning import simplex_grid

    shipped = Taskflow("reading_comprehension", task_path=str(package)).task
    if len(shipped.readers) < 2:
        raise SystemExit(f"{package} has no ensemble: nothing to weight")

    task = _keeping_outputs(shipped)
    task.encoder_focus = None      # every piece: which pieces a focused encoder reads depends on the weights
    items = [task.check_item((row["context"], row["question"]), i) for i, row in enumerate(rows)]
    references = [row["answers"] for row in rows]
    reference_length = float(np.mean([np.mean([len(a) for a in answers]) for answers in references]))
    scored = []
    for weights in simplex_grid(len(task.readers), step):
        task.weights = list(weights)
        answers = [out[0]["answer"] if isinstance(out, list) else out["answer"] for out in task.run_items(items)]
        result = evaluate(references, answers)
        ratio = float(np.mean([len(a) for a in answers])) / reference_length
        scored.append((result["f1"], result["em"], ratio, weights))
        print(f"weights {' / '.join(f'{w:.2f}' for w in weights)}: F1 {result['f1']:.2f} EM {result['em']:.2f} "
              f"length {ratio:.2f}x", file=sys.stderr, flush=True)
    allowed = [s for s in scored if max_length_ratio is None or s[2] <= max_length_ratio]
    if not allowed:
        raise SystemExit(f"no weighting keeps the answers within {max_length_ratio}x the references' length "
                         f"(the shortest: {min(s[2] for s in scored):.2f}x); allow more with --max-length-ratio")
    f1, em, ratio, weights = max(allowed, key=lambda s: s[0])   # max keeps the first of equals
    return {"ensemble_weights": [round(w, 4) for w in weights],
            "ensemble_weights_tuning": {"f1": round(f1, 3), "em": round(em, 3), "length_ratio": round(ratio, 3),
                                        "max_length_ratio": max_length_ratio, "questions": len(rows), "step": step,
                                        "grid": [[*(round(w, 4) for w in ws), round(f, 3), round(e, 3), round(r, 3)]
                                                 for f, e, r, ws in scored]}}


class _RowCache:
    """A predictor whose outputs are kept row by row, keyed by the row's feeds without their
    padding: a row read once (a window, an encoder's piece) is not read again when another decoding
    of the same questions asks for it, whichever rows share its batch."""

    def __init__(self, predictor):
        self.predictor, self.rows = predictor, {}

    @staticmethod
    def _key(feeds: dict, row: int) -> bytes:
        return b"|".join(np.trim_zeros(np.asarray(v[row]).ravel(), "b").tobytes() for _, v in sorted(feeds.items()))

    def run(self, feeds: dict) -> list[np.ndarray]:
        rows = len(next(iter(feeds.values())))
        keys = [self._key(feeds, r) for r in range(rows)]
        if any(key not in self.rows for key in keys):
            outputs = [np.asarray(o) for o in self.predictor.run(feeds)]
            for r, key in enumerate(keys):
                self.rows[key] = [o[r] for o in outputs]
        kept = [self.rows[key] for key in keys]
        out = []
        for k in range(len(kept[0])):     # rows of other batches may be shorter: pad to the longest
            width = max(row[k].shape for row in kept)
            out.append(np.stack([np.pad(row[k], [(0, w - d) for w, d in zip(width, row[k].shape)]) for row in kept]))
        return out


@functools.lru_cache(maxsize=1)
def _KeptOutputs() -> type:
    """``ReadingComprehensionTask`` whose networks' outputs are kept row by row (:class:`_RowCache`):
    a tuner decodes the same outputs many ways and runs each network once."""
    from taskflow.tasks.reading_comprehension import ReadingComprehensionTask

    class KeptOutputs(ReadingComprehensionTask):
        kept: list | None = None

        @property
        def predictors(self):
            if self.kept is None:
                self.kept = [_RowCache(predictor) for predictor in super().predictors]
            return self.kept

    return KeptOutputs


def _keeping_outputs(shipped, cls: type | None = None):
    """A task like ``shipped`` (its package, batch and windows) of class ``cls`` (a subclass of
    :func:`_KeptOutputs`), keeping its networks' outputs."""
    return (cls or _KeptOutputs())(shipped.model, batch_size=shipped.batch_size, max_answer_len=shipped.max_answer_len,
                                   max_seq_len=shipped.max_seq_len, doc_stride=shipped.doc_stride)


def tune_encoder_focus(package: str | Path, rows: list[dict], candidates: Sequence[int] = (1, 2, 3, 4, 5, 6, 8, 10),
                       max_f1_drop: float = 0.3) -> dict:
    """The ``encoder_focus`` of ``package`` (an ensemble with a member encoder): the fewest of the
    other readers' best spans whose pieces the encoder reads (``EncoderReader.focus``) with an F1 on
    ``rows`` (answerable, no "no answer") at most ``max_f1_drop`` points under reading every piece.
    Every piece is read once (each network's outputs are kept row by row); only the decoding
    repeats.  ``encoder_focus_tuning.grid`` lists each candidate (0: every piece) with its F1, EM and
    the share of the pieces the encoder read."""
    from taskflow import Taskflow
    from taskflow.tasks.reading_comprehension.metrics import evaluate

    shipped = Taskflow("reading_comprehension", task_path=str(package)).task
    encoders = [k for k, reader in enumerate(shipped.readers) if k and hasattr(reader, "focus")]
    if not encoders:
        raise SystemExit(f"{package} has no member encoder: nothing to focus")
    focused = encoders[0]

    class Counted(_KeptOutputs()):
        """The task counting the pieces its encoder reads and could read."""
        read = possible = 0

        def forward(self, features):
            outputs = super().forward(features)
            if self.encoder_focus is not None and outputs[-1] is not None:   # the round the encoder read in
                encoder = self.readers[focused]
                Counted.read += sum(len(p) for p in outputs[-1])
                Counted.possible += sum(len(encoder.pieces(u.prepared[focused], u.start, u.end))
                                        for u in features["units"])
            return outputs

    task = _keeping_outputs(shipped, Counted)
    items = [task.check_item((row["context"], row["question"]), i) for i, row in enumerate(rows)]
    references = [row["answers"] for row in rows]
    grid = []
    for focus in [None, *candidates]:
        task.encoder_focus, Counted.read, Counted.possible = focus, 0, 0
        answers = [out[0]["answer"] if isinstance(out, list) else out["answer"] for out in task.run_items(items)]
        result = evaluate(references, answers)
        share = Counted.read / Counted.possible if focus is not None else 1.0
        grid.append([focus or 0, round(result["f1"], 3), round(result["em"], 3), round(share, 3)])
        print(f"encoder_focus {focus or 'every piece'}: F1 {result['f1']:.2f} EM {result['em']:.2f} "
              f"pieces read {share:.1%}", file=sys.stderr, flush=True)
    full = grid[0][1]
    chosen = next((row for row in grid[1:] if row[1] >= full - max_f1_drop), None)
    return {"encoder_focus": chosen[0] if chosen else None,
            "encoder_focus_tuning": {"f1": chosen[1] if chosen else full, "every_piece_f1": full,
                                     "pieces_read": chosen[3] if chosen else 1.0, "max_f1_drop": max_f1_drop,
                                     "questions": len(rows), "grid": grid}}


def length_log_prior(rows: list[dict], longest: int) -> np.ndarray:
    """Where the length bias starts: index ``k`` the log share of training answers of ``k`` chars
    (add-one smoothed, lengths 1..longest), index 0 (NULL) zero; a joint model with flat start and
    end scores then draws lengths as the answers have them."""
    counts = np.ones(longest + 1)
    for row in rows:
        k = len(row["answers"][0]) if row["answers"] else 0
        if 1 <= k <= longest:
            counts[k] += 1
    prior = np.log(counts / counts[1:].sum())
    prior[0] = 0.0
    return prior.astype(np.float32)


def length_prior_fields(train_rows: list[dict], longest: int, train_file: str) -> dict:
    """The manifest fields of a length prior from ``train_rows``' first answers, lengths 1..``longest``."""
    prior = length_log_prior(train_rows, longest)
    return {"length_prior": [round(float(x), 4) for x in prior],
            "length_prior_source": {"file": train_file, "answers": len(train_rows),
                                    "method": "log share of the training answers of each length 1..max_answer_len "
                                              "(add-one smoothed); index 0, the NULL span, 0"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.reading_comprehension.calibrate",
                                     description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    prior = commands.add_parser("length-prior", help="a length prior from the training answers")
    prior.add_argument("--train", required=True, help="the SQuAD-format file the package was trained on")
    null = commands.add_parser("null-threshold", help="tune null_threshold")
    null_model = commands.add_parser("null-model", help="fit null_model (margin + question coverage) and its threshold")
    weights = commands.add_parser("ensemble-weights", help="tune ensemble_weights on answerable questions")
    weights.add_argument("--answerable", required=True,
                         help="SQuAD-format questions no reader was trained on (e.g. the selection set)")
    weights.add_argument("--step", type=float, default=0.1, help="grid step of the weights (1/N)")
    weights.add_argument("--max-length-ratio", type=float, default=None,
                         help="choose among the weightings whose answers average at most this many times the "
                              "references' length (say 1.3); default: any")
    for command in (null, null_model):
        command.add_argument("--answerable", required=True,
                             help="SQuAD-format questions the package was not trained on (e.g. its selection set)")
        command.add_argument("--unanswerable", default=str(DEFAULT_UNANSWERABLE), help="default: %(default)s")
        command.add_argument("--max-f1-drop", type=float, default=0.75,
                             help="answerable F1 points the threshold may cost")
        command.add_argument("--own-reader", action="store_true",
                             help="for a package with an ensemble: its own reader alone, not the ensemble")
    focus = commands.add_parser("encoder-focus", help="tune encoder_focus (how much of each window the member "
                                                      "encoder reads) on answerable questions")
    focus.add_argument("--answerable", required=True,
                       help="SQuAD-format questions no reader was trained on (e.g. the selection set)")
    focus.add_argument("--max-f1-drop", type=float, default=0.3, help="F1 points the focus may cost")
    for command in (prior, null, null_model, weights, focus):
        command.add_argument("--package", required=True, help="a reading_comprehension model package (folder)")
        command.add_argument("--write", action="store_true", help="store the result in the package's manifest")
    args = parser.parse_args(argv)
    from taskflow.manifest import Manifest
    from taskflow.tasks.reading_comprehension.squad import read_squad

    if args.command == "length-prior":
        manifest = Manifest.load(Path(args.package) / "manifest.json")
        if manifest["architecture"].get("max_span"):
            raise SystemExit(f"{args.package} has its own length scorer (max_span); a prior would not be used")
        rows = [r for r in read_squad(args.train) if r["answers"]]
        fields = length_prior_fields(rows, int(manifest.get("max_answer_len", 64)), Path(args.train).name)
        print(json.dumps(fields, ensure_ascii=False))
    elif args.command == "ensemble-weights":
        answerable = [r for r in read_squad(args.answerable) if r["question"].strip() and r["answers"]]
        fields = tune_ensemble_weights(args.package, answerable, args.step, args.max_length_ratio)
        fields["ensemble_weights_tuning"]["answerable_file"] = Path(args.answerable).name
        print(json.dumps(fields, ensure_ascii=False, indent=1))
    elif args.command == "encoder-focus":
        answerable = [r for r in read_squad(args.answerable) if r["question"].strip() and r["answers"]]
        fields = tune_encoder_focus(args.package, answerable, max_f1_drop=args.max_f1_drop)
        fields["encoder_focus_tuning"]["answerable_file"] = Path(args.answerable).name
        print(json.dumps(fields, ensure_ascii=False))
        if fields["encoder_focus"] is None:
            raise SystemExit(f"no encoder_focus keeps F1 within {args.max_f1_drop} of every piece; the manifest "
                             "is left as it is")
    else:
        answerable = [r for r in read_squad(args.answerable) if r["question"].strip() and r["answers"]]
        tuned = tune_package(args.package, answerable, read_unanswerable(args.unanswerable), args.max_f1_drop,
                             ensemble=not args.own_reader, null_model=args.command == "null-model")
        files = {"answerable_file": Path(args.answerable).name, "unanswerable_file": Path(args.unanswerable).name}
        if args.command == "null-model":
            tuned["tuning"].update(files)
            fields = {"null_model": tuned}
        else:
            tuned.update(files)
            manifest = Manifest.load(Path(args.package) / "manifest.json")
            key = "ensemble_null" if manifest.get("ensemble") and not args.own_reader else "null"
            fields = {f"{key}_threshold": tuned["null_threshold"], f"{key}_tuning": tuned}
        print(json.dumps(tuned, ensure_ascii=False, indent=1))
    if args.write:
        from recipes.tuning import update_manifest

        update_manifest(args.package, fields)
        print(f"wrote {', '.join(k for k in fields if not k.endswith(('_source', '_tuning')))} into "
              f"{Path(args.package) / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
