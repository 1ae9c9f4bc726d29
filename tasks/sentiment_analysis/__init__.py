"""sentiment_analysis: is a Chinese text positive or negative?

>>> from taskflow import Taskflow
>>> senta = Taskflow("sentiment_analysis")
>>> senta(["这家酒店很干净，服务也好", "等了一个小时还没上菜"])   # doctest: +SKIP
[{'text': '这家酒店很干净，服务也好', 'label': 'positive', 'score': 0.878...},
 {'text': '等了一个小时还没上菜', 'label': 'negative', 'score': 0.960...}]

Texts longer than the model's ``max_length`` are split at sentence ends; the
chunks' probabilities are averaged, weighted by their length.  A package whose
manifest has a ``temperature`` T (fitted on dev by the recipe) reports
softmax(log p / T) of those averaged probabilities: calibrated scores, the same
labels.

``neutral=True`` runs ``char_cnn_neutral``, a char CNN with a third label, ``"neutral"``, for text
without an opinion (announcements, facts, questions, schedules); ``return_all_scores`` then gives
three probabilities.  The default keeps the two labels.

``mode="accurate"`` runs ``encoder_ensemble``: the fast mode's router sends each text down a route
(``ensemble_routes``, chosen on the dev splits of the reviews and the Weibo posts).  A review is
read first by the fast mode's reviews network; where it is unsure, by a mix of a fine-tuning of
the project's pretrained char encoder, char_cnn_neutral and both char CNNs.  A post gets the posts
network, mixed with char_cnn_neutral where it is unsure (the encoder learnt from reviews only).
``mode="fast"`` is the default char_cnn.

This is :mod:`taskflow.tasks.text_classification` with a bundled model whose labels are
negative / positive (a package trained on your own file keeps your labels).
"""

from __future__ import annotations

import math

import numpy as np

from taskflow.ensemble import softmax
from taskflow.errors import ManifestError, OptionError
from taskflow.registry import register_task
from taskflow.task import Option, bool_option
from taskflow.tasks.text_classification import NORMALIZATION, TextClassificationTask, encode, normalize, read_vocab

__all__ = ["SentimentAnalysisTask", "encode", "normalize", "read_vocab", "shifted", "temper", "NORMALIZATION"]


def temper(probs: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log(probs) / temperature) along the last axis: T > 1 flattens, T < 1 sharpens, and
    the order of the labels' probabilities (so the label) stays.

    >>> temper(np.array([0.2, 0.8]), 0.5).round(3).tolist()
    [0.059, 0.941]
    """
    return softmax(np.log(np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1.0)) / temperature)


def shifted(probs: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """softmax(log(probs) + bias) along the last axis: a prior shift, per label.

    >>> shifted(np.array([0.4, 0.2, 0.4]), np.array([0.0, 0.0, -1.0])).round(3).tolist()
    [0.535, 0.268, 0.197]
    """
    return softmax(np.log(np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1.0)) + bias)


@register_task("sentiment_analysis", aliases=["sentiment", "senta"])
class SentimentAnalysisTask(TextClassificationTask):
    """Binary sentiment (negative / positive) of each text.
    """

    default_model = "char_cnn"
    # accurate: routed like fast; the fine-tuned encoder reads the reviews the fast network is unsure of
    # (negation, contrast).
    modes = {"fast": "char_cnn", "accurate": "encoder_ensemble"}
    # neutral=True runs the three-label char CNN (also the accurate mode's char CNN).
    option_models = {"neutral": "char_cnn_neutral"}
    label_colours = {"positive": "#bbf7d0", "negative": "#fecaca", "neutral": "#e5e7eb"}
    declared = {
        "neutral": Option(False, "a third label, ``\"neutral\"``, for text without an opinion (runs "
                                 "``char_cnn_neutral``, or a package of your own with that label).", "bool"),
    }

    def __init__(self, model, *, neutral: bool = False, **options):
        super().__init__(model, **options)
        self.neutral = bool_option("neutral", neutral)
        if self.neutral and "neutral" not in self.labels:
            raise OptionError(f"neutral=True needs a model with the label 'neutral'; {model.name!r} has "
                              f"{self.labels}. Leave model and mode unset (neutral=True then runs "
                              f"{self.option_models['neutral']!r}; the accurate mode has two labels only), or pass "
                              "task_path= a package trained with a neutral label", "neutral")
        # The manifest's calibration temperature; None (no field) reports the mix as it is.
        self.temperature = _temperature(model.manifest)
        # A per-label shift of log p fitted on dev (label_bias: how readily the three-label model
        # says "neutral"); None where the manifest has none.
        self.label_bias = _label_bias(model.manifest, self.labels)

    def probabilities(self, results, units):
        """The text's label probabilities, shifted by the manifest's ``label_bias`` and tempered by
        its temperature: on the text's averaged probabilities, not per chunk (the fits were on
        those; a temperature cannot change the label, a bias can)."""
        probs = super().probabilities(results, units)
        if self.label_bias is not None:
            probs = shifted(probs, self.label_bias)
        return probs if self.temperature is None else temper(probs, self.temperature)


def _temperature(manifest) -> float | None:
    value = manifest.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ManifestError(f"model {manifest.name!r}: 'temperature' must be a positive number, got {value!r}; "
                            "remove it, or refit it with the recipe's `python -m recipes.sentiment_analysis.train "
                            "--calibrate PACKAGE --data-dir DIR` (from the taskflow repository)")
    return float(value)


def _label_bias(manifest, labels) -> np.ndarray | None:
    value = manifest.get("label_bias")
    if value is None:
        return None
    unknown = sorted(set(value) - set(labels)) if isinstance(value, dict) else None
    if unknown is None or unknown or not all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in value.values()):
        raise ManifestError(f"model {manifest.name!r}: 'label_bias' must map labels of {list(labels)} to finite "
                            f"numbers, got {value!r}; remove it, or refit it with the recipe's `python -m "
                            "recipes.sentiment_analysis.train --neutral-bias PACKAGE --data-dir DIR`")
    return np.array([float(value.get(label, 0.0)) for label in labels])
