"""sentiment_analysis: is a Chinese text positive or negative?

>>> from taskflow import Taskflow
>>> senta = Taskflow("sentiment_analysis")
>>> senta(["这家酒店很干净，服务也好", "等了一个小时还没上菜"])   # doctest: +SKIP
[{'text': '这家酒店很干净，服务也好', 'label': 'positive', 'score': 0.80...},
 {'text': '等了一个小时还没上菜', 'label': 'negative', 'score': 0.93...}]

Texts longer than the model's ``max_length`` are split at sentence ends; the
chunks' probabilities are averaged, weighted by their length.

This is :mod:`taskflow.tasks.text_classification` with a bundled model whose labels are
negative / positive (a package trained on your own file keeps your labels).
"""

from __future__ import annotations

from taskflow.registry import register_task
from taskflow.tasks.text_classification import NORMALIZATION, TextClassificationTask, encode, normalize, read_vocab

__all__ = ["SentimentAnalysisTask", "encode", "normalize", "read_vocab", "NORMALIZATION"]


@register_task("sentiment_analysis", aliases=["sentiment", "senta"])
class SentimentAnalysisTask(TextClassificationTask):
    """Binary sentiment (negative / positive) of each text.

    Options:
        return_all_scores: also return ``scores``, the probability of every label.
    """

    default_model = "char_cnn"
    label_colours = {"positive": "#bbf7d0", "negative": "#fecaca"}
