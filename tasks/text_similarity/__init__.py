"""text_similarity: do two Chinese texts mean the same?

>>> from taskflow import Taskflow
>>> match = Taskflow("text_similarity")
>>> match([["怎么修改微信密码", "微信密码怎么改"], ["明天天气怎么样", "昨天天气怎么样"]])   # doctest: +SKIP
[{'text1': '怎么修改微信密码', 'text2': '微信密码怎么改', 'similarity': 0.98..., 'label': 1},
 {'text1': '明天天气怎么样', 'text2': '昨天天气怎么样', 'similarity': 0.42..., 'label': 0}]

What counts as a pair, and how inputs are read:

* a pair is ``[text1, text2]``, ``(text1, text2)`` or ``{"text1": ..., "text2": ...}``
  (other keys of a dict are ignored);
* the input is one pair or a list (any iterable) of pairs.  A list or tuple of
  exactly two ``str`` is one pair: a list of pairs never holds bare strings, so
  ``["a", "b"]`` has no other reading.  Anything else (a bare ``str``, a list of
  three texts, a pair with an empty or non-``str`` member) raises
  ``InputTypeError`` / ``InvalidInputError`` naming the pair's index.

``similarity`` is the model's probability that the two texts mean the same;
``label`` is 1 when it reaches ``threshold`` (default: the one stored with the
model, tuned on held-out dev data).  The model is symmetric by construction,
so swapping the texts gives the same score.  It reads each text without
punctuation or whitespace, and only its first ``max_length`` characters (64
for the shipped model); the result always holds your full texts.  Two texts
it reads identically (e.g. differing only in punctuation) get similarity 1.0.

``mode="accurate"`` runs ``siamese_rnn_ensemble``: three bi-encoders, two of which also read each
text in order with a BiGRU; about a point more accurate on LCQMC and BQ test and better on swapped
numbers and roles, at 0.45x the fast mode's speed (tasks/text_similarity/README.md).

A package may name an ``ensemble`` of models it requires (both modes' packages do):
each network scores every pair with its own vocabulary and normalisation, and
``similarity`` is the mean of their probabilities, with the manifest's
``ensemble_threshold``; ``ensemble=False`` runs the package's own network alone.
A package may store a calibration of that score (``ensemble_calibration``, or
``calibration`` for its own network alone: Platt scaling fitted on held-out dev
pairs by the recipe's calibrate.py), so that 0.5 means even odds there.

A package of the project's pretrained encoder with a classification head
(``architecture.type: transformer_classifier``, written by
``pretraining/finetune_classifier.py similarity``) is a cross-encoder: it reads
``[CLS] text1 [SEP] text2 [SEP]``, and ``similarity`` is the mean of its
probabilities for both orders, so it is symmetric too.
"""

from __future__ import annotations

import html
import math
from typing import NamedTuple

import numpy as np

from taskflow.encoder import CLASSIFIER_TYPE, CharVocab, frame
from taskflow.errors import ManifestError, OptionError
from taskflow.model import register_network
from taskflow.predictor import InputSpec
from taskflow.registry import register_task
from taskflow.ensemble import Ensemble
from taskflow.task import MultiTextTask, Option, bool_option, number_option

from .features import Vocab, encode, model_text

__all__ = ["TextSimilarityTask"]


class Unit(NamedTuple):
    text1: str          # as the package's own network reads it
    text2: str
    members: tuple[tuple[str, str], ...] = ()   # as each ensemble member reads the pair


class PairNetwork:
    """One network that scores pairs (the package's own, or an ensemble member): its model, how it
    reads a pair, the feeds it takes and how its outputs give the probability of "same".

    A matcher of this module (``siamese``, ``match``) takes each text's chars and words; an encoder
    classifier (``transformer_classifier``) takes ``[CLS] text1 [SEP] text2 [SEP]``, run in both
    orders and averaged, since reading the two texts together has an order.
    """

    def __init__(self, model):
        self.model = model
        self.cross_encoder = model.network_type == CLASSIFIER_TYPE
        self.vocab = model.vocab(CharVocab.load if self.cross_encoder else Vocab.load)
        self.normalize = model.normalizer
        self.max_length = int(model.manifest["max_length"])

    def read(self, item) -> tuple[str, str]:
        return (model_text(item[0], self.max_length, self.normalize),
                model_text(item[1], self.max_length, self.normalize))

    def input_specs(self, batch_size: int) -> list[InputSpec]:
        if self.cross_encoder:   # both orders of each pair: twice the rows
            return [InputSpec("input_ids", "int64", (2 * batch_size, 2 * self.max_length + 3), pad_id=0)]
        shape = (batch_size, self.max_length)
        return [InputSpec(name, "int64", shape) for name in ("text1_chars", "text1_words", "text2_chars", "text2_words")]

    def feeds(self, pairs: list[tuple[str, str]]) -> dict[str, np.ndarray]:
        if not self.cross_encoder:
            return _feeds(pairs, self.vocab)
        ids = [(self.vocab.encode_array(a), self.vocab.encode_array(b)) for a, b in pairs]
        return {"input_ids": frame(ids + [(b, a) for a, b in ids])}

    def probability(self, outputs) -> np.ndarray:
        """[B] probabilities that each pair means the same, from the network's outputs."""
        if not self.cross_encoder:
            return np.asarray(outputs[0], dtype=np.float64).reshape(-1)
        same = np.asarray(outputs[0], dtype=np.float64)[:, 1]
        half = len(same) // 2
        return (same[:half] + same[half:]) / 2

def read_calibration(manifest, key: str) -> tuple[float, float] | None:
    """The manifest's ``key`` (``{"slope": a, "intercept": b}``, fitted by the recipe's calibrate.py)
    as ``(a, b)``; None without it."""
    field = manifest.get(key)
    if field is None:
        return None
    try:
        slope, intercept = float(field["slope"]), float(field["intercept"])
    except (TypeError, KeyError, ValueError):
        slope = intercept = float("nan")
    if not (math.isfinite(slope) and slope > 0 and math.isfinite(intercept)):
        raise ManifestError(f"model {manifest.name!r}: {key} must be {{'slope': a positive number, 'intercept': a "
                            f"number}}; got {field!r:.80}")
    return slope, intercept


def calibrated(probability: np.ndarray, calibration: tuple[float, float] | None) -> np.ndarray:
    """Platt scaling: ``sigmoid(slope * logit(p) + intercept)``; ``p`` as it is without a calibration.
    Monotone, so it moves the scores, not their order."""
    if calibration is None:
        return probability
    slope, intercept = calibration
    p = np.clip(np.asarray(probability, dtype=np.float64), 1e-7, 1 - 1e-7)
    return 1.0 / (1.0 + np.exp(-(slope * np.log(p / (1 - p)) + intercept)))


# A cross-encoder reads both texts together; a bi-encoder ("siamese") encodes each alone.
register_network("match", "taskflow.tasks.text_similarity.model:MatchNet")
register_network("siamese", "taskflow.tasks.text_similarity.model:SiameseNet")

@register_task("text_similarity", aliases=["text_matching"])
class TextSimilarityTask(MultiTextTask):
    """Semantic similarity of Chinese sentence pairs (1 = same meaning).

    >>> from taskflow import Taskflow
    >>> Taskflow("text_matching", threshold=0.7)(("怎么修改微信密码", "微信密码怎么改"))   # doctest: +SKIP
    [{'text1': '怎么修改微信密码', 'text2': '微信密码怎么改', 'similarity': 0.98..., 'label': 1}]
    """

    declared = {
        "threshold": Option(
            None,
            "similarity at or above which ``label`` is 1 (default: the model's own, tuned on held-out dev "
            'data; 0.5 if it has none).',
            "float", per_call=True, check=lambda name, value: number_option(name, value, 0.0, 1.0)),
        "return_embeddings": Option(
            False,
            'also return ``embedding1`` / ``embedding2``, the sentence vectors, for retrieval; only models '
            'that encode each text alone (bi-encoders, ``architecture.type == "siamese"``) have them (an '
            "ensemble's are its own network's).",
            "bool"),
        "ensemble": Option(
            True,
            'with a package that names an ``ensemble``, average the probabilities of all its networks '
            "(default True); False runs the package's own network alone, with its own threshold.",
            "bool"),
    }

    default_model = "siamese_char_word"
    # accurate: three bi-encoders, two with a BiGRU (+1 point on LCQMC / BQ test; 0.45x the speed).
    modes = {"fast": "siamese_char_word", "accurate": "siamese_rnn_ensemble"}
    default_batch_size = 32
    input_fields = ("text1", "text2")
    item_noun = "pair"

    def __init__(self, model, *, threshold: float | None = None, return_embeddings: bool = False,
                 ensemble: bool = True, **base):
        super().__init__(model, **base)
        self.ensemble = Ensemble(model, lambda member, role: PairNetwork(member),
                                 members=bool_option("ensemble", ensemble))
        self.network = self.ensemble.networks[0]
        self.members = dict(self.ensemble.members)
        # An ensemble's averaged probabilities have their own threshold, tuned on the same dev data.
        own = "ensemble_threshold" if self.members else "threshold"
        self.threshold = number_option("threshold", self.manifest.get(own, 0.5) if threshold is None
                                       else threshold, 0.0, 1.0)
        # And their own calibration, so that a similarity of 0.5 is even odds on the dev data.
        self.calibration = read_calibration(self.manifest, "ensemble_calibration" if self.members else "calibration")
        self.bi_encoder = model.network_type == "siamese"
        if bool_option("return_embeddings", return_embeddings) and not self.bi_encoder:
            raise OptionError(
                f"return_embeddings=True needs a bi-encoder model; {model.name!r} compares the two texts "
                "jointly and has no sentence embeddings. Pick a model whose architecture type is 'siamese' "
                "(see Taskflow.tasks()), or drop return_embeddings.", "return_embeddings"
            )
        self.return_embeddings = return_embeddings

    @property
    def max_length(self) -> int:
        return self.network.max_length

    def input_specs(self):
        return self.network.input_specs(self.batch_size)

    @property
    def predictors(self):
        """The package's own predictor, then each ensemble member's."""
        return self.ensemble.predictors(self.predictor, lambda network: network.input_specs(self.batch_size))

    # --------------------------------------------------------------- inputs
    def split(self, item: tuple[str, str]) -> list[Unit]:
        # One unit per pair: each side is cut to max_length (its head), see the module docstring.
        return [Unit(*self.network.read(item), tuple(member.read(item) for member in self.members.values()))]

    def unit_length(self, unit: Unit) -> int:
        return max(len(unit.text1), len(unit.text2))

    # --------------------------------------------------------------- stages
    def preprocess(self, units):
        return self.ensemble.feeds(lambda k, network: network.feeds(
            [(u.text1, u.text2) if k == 0 else u.members[k - 1] for u in units]))

    def forward(self, features):
        """Each network's outputs, the package's own first."""
        return self.ensemble.run(features, self.predictors)

    def similarities(self, outputs) -> np.ndarray:
        """Each pair's similarity from :meth:`forward`'s outputs: the own network's probability, or
        for an ensemble its networks' mixed (the manifest's weights; equal without), calibrated."""
        same = [np.asarray(network.probability(out), dtype=np.float64).reshape(-1)
                for network, out in zip(self.ensemble.networks, outputs)]
        # Mixed as two-label rows (different, same): a geometric mix normalises over the labels.
        mixed = self.ensemble.mix(np.stack([np.stack([1 - p, p], axis=-1) for p in same]))[:, 1]
        return np.asarray(calibrated(mixed, self.calibration), dtype=np.float64).reshape(-1)

    def postprocess(self, outputs, units):
        scores = self.similarities(outputs)
        # Texts the model reads identically are the same question by definition.  The training
        # corpora hold almost no such pairs, so the network alone scores some finance questions
        # against themselves near 0.6; the identity is not left to it.
        results = [{"similarity": 1.0 if u.text1 == u.text2 else float(s)} for s, u in zip(scores, units)]
        if self.return_embeddings:
            for row, result in enumerate(results):
                # A bi-encoder's embeddings: the package's own network's.
                result["embedding1"] = outputs[0][1][row].astype(float).tolist()
                result["embedding2"] = outputs[0][2][row].astype(float).tolist()
        return results

    def join(self, item, results, units):
        result = results[0]
        out = {"text1": item[0], "text2": item[1], "similarity": result["similarity"],
               "label": int(result["similarity"] >= self.threshold)}
        if self.return_embeddings:
            out["embedding1"], out["embedding2"] = result["embedding1"], result["embedding2"]
        return out

    def render_html(self, results, items):
        from taskflow.display import html_table

        colours = {1: "#bbf7d0", 0: "#fecaca"}

        def cell(column, value):
            if column == "label":
                return f"<span style='background:{colours.get(value, '#eee')};padding:0 4px'>{html.escape(str(value))}</span>"
            if column == "similarity" and isinstance(value, float):
                width = max(0, min(100, round(value * 100)))
                return (f"<div style='display:flex;align-items:center;gap:6px'><span>{value:.4f}</span>"
                        f"<span style='display:inline-block;width:60px;height:8px;background:#eee'>"
                        f"<span style='display:block;width:{width}%;height:8px;background:#60a5fa'></span></span></div>")
            return None

        return html_table(results, ["text1", "text2", "similarity", "label"], cell)


def _feeds(pairs: list[tuple[str, str]], vocab: Vocab) -> dict[str, np.ndarray]:
    chars1, words1 = encode([a for a, _ in pairs], vocab)
    chars2, words2 = encode([b for _, b in pairs], vocab)
    return {"text1_chars": chars1, "text1_words": words1, "text2_chars": chars2, "text2_words": words2}
