"""text_classification: which of your labels does a Chinese text have?

There is no bundled model: the labels are yours.  Train one on a labelled file, then run it:

    taskflow train text_classification --train reviews.csv --dev reviews_dev.csv \\
        --text-field review --label-field stars --out my_model/

>>> from taskflow import Taskflow
>>> classify = Taskflow("text_classification", task_path="my_model/")   # doctest: +SKIP
>>> classify(["物流很快，包装也好", "质量太差了"])   # doctest: +SKIP
[{'text': '物流很快，包装也好', 'label': '5', 'score': 0.71...},
 {'text': '质量太差了', 'label': '1', 'score': 0.83...}]

The network is the char CNN + n-gram bag of ``model.py`` (sentiment_analysis runs the same
network, and is this task with the labels negative / positive and a bundled model), or the
project's pretrained encoder with a classification head (``architecture.type:
transformer_classifier``, written by ``pretraining/finetune_classifier.py``), which reads
``[CLS] text [SEP]``.  Texts longer than the model's ``max_length`` are split at sentence ends;
the chunks' probabilities are averaged, weighted by their length.

A package may name an ``ensemble`` of classifiers it requires (sentiment_analysis' accurate mode
does): each reads the package's chunks with its own vocabulary and normalisation, and a text's
probabilities are each network's, mixed as the manifest says (``ensemble_weights``,
``ensemble_mixing``: ``taskflow.ensemble``); ``ensemble=False`` runs the package's own network
alone.  Or it may name an ``ensemble_router`` (both sentiment_analysis modes do): a classifier
that sends each chunk down a route, one network or a mix of some (``ensemble_routes``, where a
cheap network may answer first and the others read only what it is unsure of); a call's chunks
are batched by their route, and each network reads only the chunks sent to it.
"""

from __future__ import annotations

import html

import numpy as np

from taskflow.encoder import CLASSIFIER_TYPE, add_cls_sep
from taskflow.errors import ManifestError
from taskflow.model import register_network
from taskflow.predictor import InputSpec
from taskflow.registry import register_task
from taskflow.ensemble import Ensemble
from taskflow.task import Option, TextTask, bool_option
from taskflow.text import Normalizer

__all__ = ["TextClassificationTask", "ClassifierNetwork", "encode", "read_vocab", "normalize", "NORMALIZATION"]

PAD, UNK = 0, 1
# What the shipped sentiment model was trained on, and own-data recipes train with:
# half-width, ASCII lower-case (one char per char).
NORMALIZATION = ("t2s", "width", "lower")
normalize = Normalizer(NORMALIZATION)

# "sentiment_cnn": the name the shipped sentiment package's manifest gives this network.
register_network("sentiment_cnn", "taskflow.tasks.text_classification.model:SentimentNet")
# A linear model over hashed char n-grams: what routes sentiment's fast mode between its networks.
register_network("ngram_linear", "taskflow.tasks.text_classification.model:NgramLinear")


def encode(texts: list[str], vocab: dict[str, int], normalize=normalize) -> np.ndarray:
    """Character ids of the normalised texts, right-padded with 0, unknown characters 1 (a text the
    normalisation leaves empty, e.g. a lone emoji skin tone, is one unknown char)."""
    rows = [[vocab.get(ch, UNK) for ch in normalize(text)] or [UNK] for text in texts]
    ids = np.zeros((len(rows), max(map(len, rows))), dtype=np.int64)
    for row, row_ids in enumerate(rows):
        ids[row, : len(row_ids)] = row_ids
    return ids


def read_vocab(path) -> dict[str, int]:
    """Token -> id (its line number) from a one-token-a-line file: the reader of this format that a
    task hands its model (``model.vocab(read_vocab)``), which reads the file it pins."""
    with open(path, encoding="utf-8") as handle:
        tokens = handle.read().split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    return {token: i for i, token in enumerate(tokens)}


class ClassifierNetwork:
    """One network that labels texts (a package's own, or an ensemble member): its labels, how it
    reads a text (vocabulary, normalisation, ``[CLS] ... [SEP]`` framing for an encoder) and the
    feeds it takes."""

    def __init__(self, model, role: str = ""):
        self.model, self.role = model, role
        self.labels = list(model.labels)
        self.vocab = model.vocab(read_vocab)
        self.normalize = model.normalizer
        # An encoder package's vocabulary starts with the special tokens (PAD 0 and UNK 1, as here);
        # it reads each text between [CLS] and [SEP].
        self.framed = model.network_type == CLASSIFIER_TYPE
        self.max_length = int(model.manifest["max_length"])

    def input_specs(self, batch_size: int, chunk_length: int) -> list[InputSpec]:
        # Both networks mask padding (id 0: an encoder's attention; the char CNN's pooling, n-grams
        # and GRU), so their batches can be padded to fewer shapes (taskflow.predictor.bucket_shape).
        return [InputSpec("input_ids", "int64", (batch_size, chunk_length + 2 * self.framed), pad_id=0)]

    def feeds(self, texts: list[str]) -> dict[str, np.ndarray]:
        ids = encode(texts, self.vocab, self.normalize)
        return {"input_ids": add_cls_sep(ids) if self.framed else ids}


@register_task("text_classification")
class TextClassificationTask(TextTask):
    """The label of each text, from the labels of the package you trained (``task_path=``).

    >>> from taskflow import Taskflow
    >>> Taskflow("text_classification", task_path="my_model/")(["质量太差了"])   # doctest: +SKIP
    [{'text': '质量太差了', 'label': '1', 'score': 0.83...}]
    """

    default_model = ""      # none bundled: Taskflow asks for task_path and says how to train one
    default_batch_size = 32
    label_colours: dict[str, str] = {}
    declared = {
        "return_all_scores": Option(False, "also return ``scores``, the probability of every label.", "bool",
                                    per_call=True, check=bool_option),
        "ensemble": Option(True, "with a package that names an ``ensemble``, mix its networks' probabilities "
                                 "(the default); False runs the package's own network alone.", "bool"),
    }

    def __init__(self, model, *, return_all_scores: bool = False, ensemble: bool = True, **base):
        super().__init__(model, **base)
        self.return_all_scores = bool_option("return_all_scores", return_all_scores)
        self.ensemble = Ensemble(model, ClassifierNetwork, members=bool_option("ensemble", ensemble), routes=True)
        self.networks = self.ensemble.networks
        own = self.networks[0]
        # Per network, the column of its output for each of the package's labels, in the package's
        # order (None: a label it does not know).  A member may know more labels (sentiment's
        # three-label model beside two-label encoders): its probabilities of the package's labels,
        # renormalised, are what it says among them.  Or fewer (two-label networks beside the
        # three-label one in neutral=True): the mix takes the labels it lacks from the others
        # (taskflow/ensemble.py).
        self.columns = [list(range(len(own.labels)))]
        for member in self.networks[1:]:
            if len(set(own.labels) & set(member.labels)) < 2:
                raise ManifestError(f"model {model.name!r}: its ensemble member {member.model.name!r} has the labels "
                                    f"{member.labels}, fewer than two of the package's {own.labels}; an ensemble "
                                    "mixes the package's labels")
            self.columns.append([member.labels.index(label) if label in member.labels else None
                                 for label in own.labels])
            if member.max_length < self.max_length:
                raise ManifestError(f"model {model.name!r}: its ensemble member {member.model.name!r} reads "
                                    f"{member.max_length} chars, fewer than the package's {self.max_length}-char "
                                    "chunks; lower the package's max_length")
        knows_all = [None not in columns for columns in self.columns]
        for k, route in enumerate(self.ensemble.routes):
            if not any(w > 0 and full for w, full in zip(route.weights, knows_all)):
                raise ManifestError(f"model {model.name!r}: ensemble_routes entry {k} weighs only networks that lack "
                                    f"some of the labels {own.labels}; weigh one that knows them all (the package's "
                                    "own) above 0 on every route")
        # The package's own network's, as every task exposes them.
        self.labels, self.vocab, self.normalize, self.framed = own.labels, own.vocab, own.normalize, own.framed

    def input_specs(self):
        return self.networks[0].input_specs(self.batch_size, self.max_length)

    @property
    def weights(self):
        return self.ensemble.weights

    @property
    def mixing(self):
        return self.ensemble.mixing

    @property
    def predictors(self):
        """The package's own predictor, then each ensemble member's."""
        return self.ensemble.predictors(self.predictor, lambda n: n.input_specs(self.batch_size, self.max_length))

    def preprocess(self, units, routes=None):
        texts = [text for _, text in units]
        if self.ensemble.router is None:
            return self.ensemble.feeds(lambda _, network: network.feeds(texts))
        # Routed: the router's choice for each unit (plan), the texts, which forward reads with each
        # network's vocabulary for the rows sent to it only, and which rows each network reads first.
        choice, nothing_read = np.array(routes), [None] * len(self.networks)
        reads, round_ = self.ensemble.routed_reads(choice), 1
        if not reads:       # no route asks a network first: every route's networks read at once
            reads, round_ = self.ensemble.routed_reads(choice, nothing_read), 2
        return {"texts": texts, "choice": choice, "reads": reads, "outputs": nothing_read, "round": round_}

    def forward(self, features):
        """Each network's label probabilities, the package's own first (routed: NaN on the rows
        the router sent elsewhere, None for a network no row went to; then the rows' routes)."""
        if self.ensemble.router is None:
            return [outputs[0] for outputs in self.ensemble.run(features, self.predictors)]
        outputs, texts = list(features["outputs"]), features["texts"]
        for k, rows in features["reads"].items():
            raw = self.predictors[k].run(self.networks[k].feeds([texts[i] for i in rows]))[0]
            probs = self._package_labels(k, raw)
            if outputs[k] is None:
                outputs[k] = np.full((len(texts), probs.shape[1]), np.nan)
            outputs[k][rows] = probs
        return outputs + [features["choice"]]

    def cascade(self, features, outputs, units):
        """Routed, after the first round: a route's other networks read the rows its ``first``
        network was not confident of."""
        if self.ensemble.router is None or features["round"] > 1:
            return None
        reads = self.ensemble.routed_reads(features["choice"], outputs[:-1])
        return {**features, "reads": reads, "outputs": outputs[:-1], "round": 2} if reads else None

    def _package_labels(self, k: int, probs: np.ndarray) -> np.ndarray:
        """Network k's probabilities of the package's labels, in the package's order (NaN on a label
        it does not know)."""
        probs = np.asarray(probs, dtype=np.float64)
        columns = self.columns[k]
        if columns == list(range(probs.shape[1])):
            return probs
        known = [c for c in columns if c is not None]
        out = np.full((len(probs), len(columns)), np.nan)
        out[:, [j for j, c in enumerate(columns) if c is not None]] = probs[:, known] / probs[:, known].sum(
            axis=1, keepdims=True)
        return out

    def postprocess(self, outputs, units):
        """Per chunk, one row of the package's label probabilities per network (NaN where it did
        not run); routed, one more: the chunk's answer (its route's mix)."""
        routed = self.ensemble.router is not None     # forward has put them in the package's labels already
        if routed:
            choice, outputs = outputs[-1], outputs[:-1]
            outputs = outputs + [self.ensemble.mix_routed(choice, outputs)]
        rows = []
        for k, probs in enumerate(outputs):
            if probs is None:
                probs = np.full((len(units), len(self.labels)), np.nan)
            rows.append(np.asarray(probs, dtype=np.float64) if routed else self._package_labels(k, probs))
        return np.stack(rows, axis=1).tolist()

    def plan(self, units):
        """Routed: the router's choice for every unit (it reads them in batches, longest first, as
        the networks will), so that each network's units are batched apart."""
        if self.ensemble.router is None:
            return None
        order = sorted(range(len(units)), key=lambda k: -len(units[k][1]))
        route = [0] * len(units)
        for start in range(0, len(order), self.batch_size):
            picked = order[start:start + self.batch_size]
            choice = self.ensemble.route(self.ensemble.router.feeds([units[k][1] for k in picked]), self.predictors)
            for k, r in zip(picked, choice.tolist()):
                route[k] = r
        return route

    def network_probabilities(self, results, units) -> np.ndarray:
        """[networks, labels]: each network's probabilities for the text, its chunks' averaged,
        weighted by their length (routed: the chunks it read; NaN for a network that read none)."""
        results, lengths = np.array(results, dtype=np.float64), self._lengths(units)
        if len(units) == 1:        # most texts: one chunk (and the routed mean of one is the row, NaN included)
            return results[0, :len(self.networks)]
        if self.ensemble.router is None:
            return np.average(results, axis=0, weights=lengths)
        results = results[:, :len(self.networks)]      # the last row is the chunk's answer
        read = lengths[:, None] * ~np.isnan(results[..., 0])
        with np.errstate(invalid="ignore"):
            mean = np.nansum(results * read[..., None], axis=0) / read.sum(axis=0)[:, None]
        return np.where(np.isnan(results).all(axis=0), np.nan, mean)     # NaN stays NaN: a label it lacks

    def probabilities(self, results, units) -> np.ndarray:
        """The text's label probabilities: its networks', mixed by the ensemble weights (routed: each
        chunk's answer from its route, averaged by length)."""
        if self.ensemble.router is None:
            return self.ensemble.mix(self.network_probabilities(results, units))
        answers = np.array(results, dtype=np.float64)[:, -1]
        return answers[0] if len(units) == 1 else np.average(answers, axis=0, weights=self._lengths(units))

    @staticmethod
    def _lengths(units) -> np.ndarray:
        return np.array([len(text) for _, text in units], dtype=np.float64)

    def join(self, item, results, units):
        probs = self.probabilities(results, units)
        best = int(np.argmax(probs))
        result = {"text": item, "label": self.labels[best], "score": float(probs[best])}
        if self.return_all_scores:
            result["scores"] = {label: float(p) for label, p in zip(self.labels, probs)}
        return result

    def render_html(self, results, items):
        from taskflow.display import html_table, label_colour

        seen: list[str] = []

        def cell(column, value):
            if column == "label":
                colour = self.label_colours.get(value) or label_colour(value, seen)
                return f"<span style='background:{colour};padding:0 4px'>{html.escape(value)}</span>"
            return None

        return html_table(results, ["text", "label", "score"], cell)
