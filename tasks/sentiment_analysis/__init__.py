"""sentiment_analysis: is a Chinese text positive or negative?

>>> from taskflow import Taskflow
>>> senta = Taskflow("sentiment_analysis")
>>> senta(["这家酒店很干净，服务也好", "等了一个小时还没上菜"])   # doctest: +SKIP
[{'text': '这家酒店很干净，服务也好', 'label': 'positive', 'score': 0.80...},
 {'text': '等了一个小时还没上菜', 'label': 'negative', 'score': 0.93...}]

Texts longer than the model's ``max_length`` are split at sentence ends; the
chunks' probabilities are averaged, weighted by their length.
"""

from __future__ import annotations

import html

import numpy as np

from taskflow.model import register_network
from taskflow.predictor import InputSpec
from taskflow.registry import register_task
from taskflow.task import TextTask, bool_option
from taskflow.text import Normalizer

__all__ = ["SentimentAnalysisTask", "encode", "normalize", "NORMALIZATION"]

PAD, UNK = 0, 1
# What the shipped model was trained on: half-width, ASCII lower-case (one char per char).
NORMALIZATION = ("width", "lower")
normalize = Normalizer(NORMALIZATION)

register_network("sentiment_cnn", "taskflow.tasks.sentiment_analysis.model:SentimentNet")


def encode(texts: list[str], vocab: dict[str, int], normalize=normalize) -> np.ndarray:
    """Character ids of the normalised texts, right-padded with 0, unknown characters 1."""
    width = max(1, max(len(t) for t in texts))
    ids = np.zeros((len(texts), width), dtype=np.int64)
    for row, text in enumerate(texts):
        ids[row, : len(text)] = [vocab.get(ch, UNK) for ch in normalize(text)]
    return ids


def read_vocab(path) -> dict[str, int]:
    with open(path, encoding="utf-8") as handle:
        tokens = handle.read().split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    return {token: i for i, token in enumerate(tokens)}


@register_task("sentiment_analysis", aliases=["sentiment", "senta"])
class SentimentAnalysisTask(TextTask):
    """Binary sentiment (negative / positive) of each text.

    Options:
        return_all_scores: also return ``scores``, the probability of every label.
    """

    default_model = "char_cnn"
    default_batch_size = 32
    network_type = "sentiment_cnn"
    default_normalization = NORMALIZATION

    def __init__(self, model, *, return_all_scores: bool = False, **base):
        super().__init__(model, **base)
        self.return_all_scores = bool_option("return_all_scores", return_all_scores)
        self.labels = list(self.manifest["labels"])
        self.vocab = read_vocab(model.path("vocab.txt"))
        self.normalize = model.normalizer

    def input_specs(self):
        return [InputSpec("input_ids", "int64", (self.batch_size, self.max_length))]

    def preprocess(self, units):
        return {"input_ids": encode([text for _, text in units], self.vocab, self.normalize)}

    def postprocess(self, outputs, units):
        return [row.astype(float).tolist() for row in outputs[0]]

    def join(self, item, results, units):
        weights = np.array([len(text) for _, text in units], dtype=np.float64)
        probs = np.average(np.array(results), axis=0, weights=weights)
        best = int(np.argmax(probs))
        result = {"text": item, "label": self.labels[best], "score": float(probs[best])}
        if self.return_all_scores:
            result["scores"] = {label: float(p) for label, p in zip(self.labels, probs)}
        return result

    def render_html(self, results, items):
        from taskflow.display import html_table

        colours = {"positive": "#bbf7d0", "negative": "#fecaca"}

        def cell(column, value):
            if column == "label":
                return f"<span style='background:{colours.get(value, '#eee')};padding:0 4px'>{html.escape(value)}</span>"
            return None

        return html_table(results, ["text", "label", "score"], cell)
