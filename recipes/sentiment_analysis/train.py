"""Recipe: train the sentiment_analysis model package from public data (from the repository root).

    python -m recipes.sentiment_analysis.train --data-dir ../shared/data/sentiment --out my_model/

Data (see NOTES.md in this folder for sources and licences): ChnSentiCorp
(ERNIE split), online_shopping_10_cats and waimai_10k, each a folder of
``label<TAB>text`` TSV files with a header, and the Weibo posts of SMP2020-EWECT
(``smp2020_ewect/usual`` and ``/virus``, ``--social-sets``), read as polarity
(``read_smp2020``: happy positive; angry, sad, fear negative; neutral and
surprise left out).  Training uses their train splits only; every choice
(epoch, mixing weight) is made on the dev splits (``selection_splits``: the
three review sets' and SMP2020's, the mean of their accuracies); the test
splits are evaluated once, at the end, and written into the manifest.

The text is read with ``--normalization``: by default ``social`` first
(taskflow/text.py: a URL, an @-mention, an emoticon code such as [泪] become one
char each), then traditional to simplified, half-width, lower-case.

Two stages (tasks/text_classification/model.py explains the network):

1. deep: the char CNN + n-gram bag, AdamW (warm-up over the first tenth of
   the steps, then linear decay), ChnSentiCorp counted ``--chn-weight`` times
   per epoch, best epoch on dev;
2. wide: a linear model over hashed char 1/2/3-grams, trained on its own
   (Adam, linearly decaying rate), then ``deep_weight`` picked on dev.

``--deep-init DIR`` starts from the deep part of an existing package (its
weights.npz and vocab.txt) and runs only the wide stage.  ``--init PACKAGE`` starts both stages
from a package's network (its architecture, vocabulary, normalisation and weights, int8 tables
read back as float32) and trains both again (warm start: fewer epochs, a lower rate).  The deep
stage's weights are kept beside ``--out`` (``OUT.deep/``) from its end until the package is written,
and a run stopped in between and started again with the same ``--out`` resumes from them at the
wide stage.  ``--vectors DIR``
starts the deep stage's char table and hashed bigram buckets from corpus vectors
(``python -m pretraining.vectors``).

Both stages also train on sentences generated from the train splits and from
templates (augment.py: invariance copies, negation, contrast, slang;
``--augment none`` turns it off, ``--augment-scale`` sizes it).  The kind
no_opinion (opt-in: ``--augment invariance,negation,contrast,slang,no_opinion``)
adds statements of fact trained towards equal probabilities of both labels, with
``--neutral-weight``; the kind lexicon (opt-in, ``--augment ...,lexicon``; lexicon.py) adds
``--lexicon-sentences`` sentences made from the training half of the public sentiment lexicons
(words in many subjects and frames, with degree adverbs and negators: a negated negative is
positive) and bare subjects trained towards equal probabilities (or neutral, with ``--neutral``);
the lexicons' held-out half is the plain-opinion check (benchmarks/accuracy_sentiment_lexicon.py), and a tenth
of the rest, which no sentence uses, the plain-opinion dev split, which then joins the selection splits; ``--neutral-text FILE`` adds real sentences without an
opinion from FILE (e.g. the customer-service questions of BQ and AFQMC train).  The templates'
vocabulary is disjoint from the robustness suite's, so the suite stays a fair
dev measure.  The manifest records what was generated.

``--teacher-labels FILE`` adds unlabelled text with a stronger model's probabilities
(teacher.py writes the file): both stages learn them as soft targets, weighted
``--teacher-weight`` (knowledge distillation; NOTES.md, "Teacher labels").

``--neutral`` trains the three-label model of ``neutral=True`` (labels negative, positive,
neutral): SMP2020's neutral rows and the no_opinion statements of fact are the label neutral,
and SMP2020's dev splits are read three-way for every choice.

Then the scores are calibrated: a temperature T (probabilities become
softmax(log p / T)) is fitted on ChnSentiCorp dev by minimising the negative
log-likelihood, and stored in the manifest (``temperature``), which the task
applies to each text's probabilities; labels do not change.  An existing
package is calibrated in place, without training, by

    python -m recipes.sentiment_analysis.train --calibrate PACKAGE --data-dir ../shared/data/sentiment

``--short-lengths L,L,...`` lets the wide stage also choose a length L and a deep weight of its own for
texts of at most L chars; ``--wide-chn-weight N`` counts ChnSentiCorp N times an epoch of the wide
stage.  ``--short-wide LONG SHORT --out DIR`` trains nothing: LONG's network with SHORT's n-gram part
(a ``--deep-init LONG`` training, e.g. with the lexicon kind) reading the texts of at most L chars,
L and their deep weight chosen on dev (model.py ``short_wide``; NOTES.md, 2026-12-04).

``--int8-tables PACKAGE --out DIR`` writes a trained package again with its char and bigram tables
(a scale per row) and its wide n-gram weights (a scale per label) in int8 (taskflow/predictor.py),
for the packages' budget: measure it through the product before shipping it.

A package with an ``ensemble`` (the accurate mode's: the fine-tuned encoders with the char CNN
beside them) gets its ``ensemble_weights`` and ``ensemble_mixing`` (arithmetic or geometric mean) by
a grid over the simplex, each way, scored on the three dev splits pooled (each network run once),
then its temperature, fitted on the mix, by

    python -m recipes.sentiment_analysis.train --ensemble-weights PACKAGE --data-dir ../shared/data/sentiment

Training on your own labelled reviews is the product's: ``taskflow train sentiment_analysis --train
my.csv --out my_model/`` (tasks/sentiment_analysis/train.py).
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from taskflow.corpus_vectors import load_vectors, pretrained_embeddings, vectors_report
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import recipe_parser
from taskflow.tasks.sentiment_analysis import NORMALIZATION, temper
from taskflow.tasks.text_classification.train import Chars, add_network_options, build_vocab, network_architecture
from taskflow.text import Normalizer
from taskflow.training import Schedule, fit, length_batches, log, restore, seed_all

from recipes.tuning import update_manifest
from .augment import KINDS as GENERATED_KINDS
from .augment import NEUTRAL, SIZES, generate
from .robustness import LABELS

# augment.py's kinds, and lexicon.py's sentences from the sentiment lexicons' training words.
AUGMENT_KINDS = (*GENERATED_KINDS, "lexicon")

TRAIN_SETS = ("chnsenticorp", "online_shopping_10_cats", "waimai_10k")
# SMP2020-EWECT's two Weibo sets, read as polarity (read_smp2020).
SOCIAL_SETS = ("usual", "virus")
SOCIAL_ROOT = "smp2020_ewect"
NORMALIZATION_DEFAULT = ("social", *NORMALIZATION)
REPORT = [
    ("chnsenticorp_dev", "chnsenticorp/dev.tsv"),
    ("chnsenticorp_test", "chnsenticorp/test.tsv"),
    ("chnsenticorp_test_dedup", "chnsenticorp/test.dedup.tsv"),
    ("online_shopping_test", "online_shopping_10_cats/test.tsv"),
    ("waimai_test", "waimai_10k/test.tsv"),
]
# What the shipped model was trained with.  no_opinion (statements of fact trained towards equal
# probabilities) is opt-in: two runs of it did not beat 1.2.0 on dev (NOTES.md, "No opinion").
DEFAULT_AUGMENT = ("invariance", "negation", "contrast", "slang")
# Calibration: fitted on dev, and reported on dev and (held out) test.
CALIBRATION_SPLITS = (("chnsenticorp_dev", "chnsenticorp/dev.tsv"), ("chnsenticorp_test", "chnsenticorp/test.tsv"))
# What an ensemble's weights are chosen on: every dev split, reviews and Weibo posts, each counting alike.
ENSEMBLE_SELECTION = ("chnsenticorp/dev.tsv", "online_shopping_10_cats/dev.tsv", "waimai_10k/dev.tsv",
                      "smp2020_ewect/usual/dev.tsv", "smp2020_ewect/virus/dev.tsv")
ECE_BINS = 15   # equal-width confidence bins (Guo et al., On Calibration of Modern Neural Networks, 2017)
# How pretraining/vectors.py normalises its texts (its NORMALIZATION), for a vectors.npz without its vectors.json.
VECTORS_NORMALIZATION = ("t2s", "width", "lower", "space")


def read_split(data: Path, rel: str, *, neutral: bool = False) -> tuple[list[str], list[int]]:
    """A labelled split under ``data``: a review TSV (0/1 labels), or an SMP2020 file as polar rows
    (with ``neutral``, its neutral rows too, labelled NEUTRAL_INDEX)."""
    if not rel.startswith(SOCIAL_ROOT + "/"):
        return read_tsv(data / rel)
    texts, labels = read_smp2020(data / rel, neutral=neutral)
    return texts, [NEUTRAL_INDEX if y == NEUTRAL_LABEL else y for y in labels]


def social_files(sets: list[str], split: str) -> list[str]:
    return [f"{SOCIAL_ROOT}/{name}/{split}.tsv" for name in sets]


class DevSplits:
    """The dev splits every choice is made on, read once: a network's probabilities over all their
    texts, and the mean of the splits' accuracies (each split counts alike, so the 5,316 texts of
    online_shopping do not outvote the 1,200 of ChnSentiCorp)."""

    def __init__(self, data: Path, rels: list[str], *, neutral: bool = False,
                 more: dict[str, tuple[list[str], list[int]]] | None = None):
        """``more``: splits that are no file under ``data`` (the plain-opinion dev split), by name."""
        self.rels, self.texts, self.labels, self.bounds = [], [], [], [0]
        splits = {rel: read_split(data, rel, neutral=neutral) for rel in rels} | dict(more or {})
        for rel, (texts, labels) in splits.items():
            self.rels.append(rel)
            self.texts += texts
            self.labels += labels
            self.bounds.append(len(self.texts))
        self.labels = np.array(self.labels)

    def accuracies(self, probs: np.ndarray) -> dict[str, float]:
        right = probs.argmax(1) == self.labels
        return {rel: float(right[a:b].mean()) for rel, a, b in zip(self.rels, self.bounds, self.bounds[1:])}

    def score(self, probs: np.ndarray) -> float:
        return float(np.mean(list(self.accuracies(probs).values())))


def selection_splits(train_sets: list[str], social_sets: list[str]) -> list[str]:
    """The dev splits of what a model trains on: each review set's and each SMP2020 set's."""
    return [f"{name}/dev.tsv" for name in train_sets] + social_files(social_sets, "dev")


def read_tsv(path: Path) -> tuple[list[str], list[int]]:
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]


# SMP2020-EWECT's six emotions as polarity: happy is positive; angry, sad and fear negative; neutral
# is text without an opinion (NEUTRAL_LABEL where asked for, else left out); surprise goes either
# way and is left out.
SMP2020_POLARITY = {"2": 1, "1": 0, "3": 0, "4": 0}


def read_smp2020(path: Path, *, neutral: bool = False) -> tuple[list[str], list[int]]:
    """An SMP2020-EWECT file (``label  text_a``, six emotion labels) as polar rows."""
    texts, labels = [], []
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            label = SMP2020_POLARITY.get(row["label"], NEUTRAL_LABEL if neutral and row["label"] == "0" else None)
            if label is not None and row["text_a"].strip():
                texts.append(row["text_a"])
                labels.append(label)
    return texts, labels


def parse_args(argv):
    p = recipe_parser("sentiment_analysis", __doc__, name="char_cnn", out="", data_required=True,
                      data="folder holding chnsenticorp/, online_shopping_10_cats/, waimai_10k/")
    p.prog = "python -m recipes.sentiment_analysis.train"
    p.add_argument("--train-sets", default=",".join(TRAIN_SETS), help="review sets (default: %(default)s)")
    p.add_argument("--social-sets",
                   help=f"SMP2020-EWECT sets under {SOCIAL_ROOT}/ whose polar rows are trained on too, or 'none' "
                        f"(default: none; {','.join(SOCIAL_SETS)} with --neutral)")
    p.add_argument("--normalization",
                   help="how the text is read, steps of taskflow/text.py (default: "
                        f"{','.join(NORMALIZATION_DEFAULT)} with social sets, else {','.join(NORMALIZATION)})")
    add_network_options(p, max_len=256, min_freq=2, embed_dim=128, bigram_buckets=50000, ngram_dim=64,
                        conv_channels=128, max_kernel=5, dropout=0.3, lr=2e-3, batch_size=64, epochs=4)
    p.add_argument("--chn-weight", type=int, default=2, help="count ChnSentiCorp train this many times per epoch")
    p.add_argument("--balance-social", action="store_true",
                   help="weight each post's loss so that the posts' negatives and positives weigh the same in all "
                        "(SMP2020's polar rows are 63%% negative, and the reviews' model then leans negative)")
    p.add_argument("--wide-buckets", type=int, default=1 << 19)
    p.add_argument("--wide-epochs", type=int, default=3)
    p.add_argument("--wide-lr", type=float, default=0.02)
    p.add_argument("--short-wide", nargs=2, metavar=("LONG", "SHORT"),
                   help="no training: LONG's network with SHORT's n-gram part for short texts (SHORT trained with "
                        "--deep-init LONG), the length and weight chosen on dev, written to --out (int8 tables)")
    p.add_argument("--wide-chn-weight", type=int, default=1,
                   help="times ChnSentiCorp train is seen per epoch of the wide stage (--chn-weight: the deep stage's)")
    p.add_argument("--short-lengths", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=[],
                   metavar="L,L,...", help="also try mixing texts of at most L chars with a deep weight of their "
                                           "own (model.py short_length), each L, chosen on dev with the weights")
    p.add_argument("--deep-init", help="package dir whose deep weights and vocab to reuse (skips stage 1)")
    p.add_argument("--init", metavar="PACKAGE",
                   help="warm start: both stages start from this package's network (architecture, vocabulary, "
                        "normalisation, weights) and train again")
    p.add_argument("--lexicon-sentences", type=int, default=24000,
                   help="with --augment ...,lexicon: how many lexicon sentences (lexicon.py; default %(default)s), "
                        "besides its bare subjects")
    p.add_argument("--vectors", metavar="DIR",
                   help="corpus vectors (python -m pretraining.vectors --out DIR): the char table and the hashed "
                        "bigram buckets start from their char and bigram vectors")
    p.add_argument("--augment", default=",".join(DEFAULT_AUGMENT),
                   help="generated training sentences (augment.py), comma-separated kinds of "
                        f"{', '.join(AUGMENT_KINDS)}, or 'none' (default: %(default)s)")
    p.add_argument("--augment-scale", type=float, default=1.0,
                   help="multiplies how many sentences of each kind are generated (augment.SIZES; default 1)")
    p.add_argument("--neutral-text", nargs="+", default=[], metavar="FILE",
                   help="real sentences without an opinion for the no_opinion kind: text files (one a line, .gz "
                        "too), TSV files with a header, whose text_a / text_b / text columns are read, or "
                        "SQuAD-style JSON (CMRC 2018), whose contexts and questions are read")
    p.add_argument("--neutral-sentences", type=int, metavar="N",
                   help="how many --neutral-text sentences to take in all (default: augment.SIZES' "
                        "no_opinion_real times --augment-scale)")
    p.add_argument("--neutral-weight", type=float, default=0.5,
                   help="weight of a no_opinion sentence's loss (cross-entropy to equal probabilities; default 0.5)")
    p.add_argument("--teacher-labels", nargs="+", default=[], metavar="FILE",
                   help="unlabelled text with a teacher's probabilities (python -m "
                        "recipes.sentiment_analysis.teacher): both stages also learn them as soft targets")
    p.add_argument("--teacher-weight", type=float, default=1.0,
                   help="weight of a teacher-labelled text's loss (cross-entropy to the teacher's probabilities)")
    p.add_argument("--neutral", action="store_true",
                   help="train the three-label model (negative, positive, neutral) of neutral=True: SMP2020's "
                        "neutral rows and the no_opinion statements of fact are its neutral label")
    p.add_argument("--skip-calibration", action="store_true", help="do not fit a temperature on dev after training")
    p.add_argument("--ensemble-weights", metavar="PACKAGE",
                   help="no training: choose the ensemble_weights of this package with an ensemble on the dev splits "
                        "under --data-dir, then fit its temperature (--calibrate), and write both into its manifest")
    p.add_argument("--int8-tables", metavar="PACKAGE",
                   help="no training: write PACKAGE again to --out with its char and bigram tables and its wide "
                        "n-gram weights in int8")
    p.add_argument("--at-least", metavar="PACKAGE",
                   help="with --ensemble-weights: only weightings at least as accurate as PACKAGE (the fast model) "
                        "on every dev split are chosen from")
    p.add_argument("--calibrate", metavar="PACKAGE",
                   help="no training: fit the temperature of this existing package on ChnSentiCorp dev "
                        "(under --data-dir) and write it into the package's manifest")
    p.add_argument("--neutral-bias", metavar="PACKAGE",
                   help="no training: choose the shift of log p(neutral) of this three-label package on the dev "
                        "splits (three-way, a neutral answer on a polar text wrong) and write it into its manifest "
                        "(label_bias)")
    args = p.parse_args(argv)
    if args.init and (args.deep_init or args.vectors or args.neutral):
        p.error("--init starts from a package's network: not with --deep-init, --vectors or --neutral")
    if args.vectors and (args.deep_init or args.calibrate):
        p.error("--vectors starts the deep stage: not with --deep-init or --calibrate")
    if args.int8_tables and not args.out:
        p.error("--int8-tables writes the package again: it needs --out")
    if not args.calibrate and not args.ensemble_weights and not args.neutral_bias and not args.out:
        p.error("the following arguments are required: --out")
    kinds = [] if args.augment.strip() == "none" else [k.strip() for k in args.augment.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(AUGMENT_KINDS))
    if unknown:
        p.error(f"--augment: unknown kinds {unknown}; kinds are {', '.join(AUGMENT_KINDS)} (or 'none')")
    if args.neutral_weight < 0:
        p.error(f"--neutral-weight must be >= 0, got {args.neutral_weight}")
    if args.neutral_text and "no_opinion" not in kinds:
        p.error("--neutral-text feeds the no_opinion augmentation kind, which --augment leaves out")
    if args.teacher_weight < 0:
        p.error(f"--teacher-weight must be >= 0, got {args.teacher_weight}")
    if args.teacher_labels and args.deep_init:
        p.error("--teacher-labels adds to both stages' training: not with --deep-init")
    if args.augment_scale < 0:
        p.error(f"--augment-scale must be >= 0, got {args.augment_scale}")
    sets = args.social_sets or (",".join(SOCIAL_SETS) if args.neutral else "none")
    args.social_sets = [] if sets.strip() == "none" else [s for s in sets.split(",") if s]
    if args.neutral and not args.social_sets:
        p.error("--neutral learns the label from SMP2020's neutral rows: not with --social-sets none")
    if args.neutral and "no_opinion" not in kinds:
        kinds.append("no_opinion")   # the statements of fact are its other neutral examples
    if args.neutral and (args.teacher_labels or args.deep_init):
        p.error("--neutral trains both stages on three labels: not with --teacher-labels or --deep-init")
    args.augment_kinds = kinds
    try:
        steps = args.normalization or ",".join(NORMALIZATION_DEFAULT if args.social_sets else NORMALIZATION)
        args.normalizer = Normalizer([step for step in steps.split(",") if step])
    except ValueError as exc:
        p.error(f"--normalization: {exc}")
    return args


# Labels of training rows that are not a gold label: a no_opinion sentence (trained towards equal
# probabilities) and a teacher-labelled text (trained towards the teacher's probabilities).
NEUTRAL_LABEL, TEACHER_LABEL = -1, -2
# The three-label model's labels (--neutral): the two of the review files, then neutral.
NEUTRAL_INDEX = 2
THREE_LABELS = (*LABELS, NEUTRAL)
PLAIN_OPINION_DEV = "plain_opinion_dev (lexicon.dev_cases)"


def is_wide(name: str) -> bool:
    return name.startswith("wide_")


def load_deep(net, package_dir: str) -> list[dict]:
    """Stage 1 taken from an existing package: its deep (non-wide) weights, read as the product
    reads them (an int8 table with its scales), into ``net`` of the package's deep architecture."""
    from taskflow.tasks.text_classification.model import SentimentNet
    from taskflow.weights import load_weights

    manifest = json.loads(Path(package_dir, "manifest.json").read_text(encoding="utf-8"))
    stored = SentimentNet(**{k: v for k, v in manifest["architecture"].items() if k != "type"})
    load_weights(stored, Path(package_dir, "weights.npz"))
    deep = {k: v.numpy() for k, v in stored.state_dict().items() if not is_wide(k)}
    if "negated_vec" in net.state_dict() and "negated_vec" not in deep:
        # A negation scope the deep part never learnt: its vector stays at zero, so the deep part
        # reads every text as the package's did (the scope serves the new wide part alone).
        deep["negated_vec"] = np.zeros(net.negated_vec.shape, dtype="float32")
    restore(net, deep)
    return [{"from": portable_path(package_dir)}]


def start_from_vectors(net, vectors: str, vocab: list[str], seed: int) -> dict:
    """The char table and the hashed bigram buckets start from the corpus vectors
    (``pretraining/vectors.py``) at the spread of the network's own init; a bucket gets the vector of
    the most frequent corpus bigram that the network hashes into it.  What the manifest says of it:
    the vectors, their sources and the share of chars and of buckets covered (also logged).  The
    wide model's hashed tables (``wide_buckets``) hold per-label weights, not embeddings: they
    start as the network's."""
    import paddle

    from taskflow.tasks.text_classification.model import hash_ngrams

    report = vectors_report(vectors)
    # This model normalises t2s width lower, without the vectors' "space" step: a tab or an
    # ideographic space is a char of its own here and a plain space in the vectors, so each
    # vocabulary char is looked up as the vectors' normalisation writes it.
    as_vectors_key = Normalizer(report.get("normalization", VECTORS_NORMALIZATION))
    coverage = {}
    tokens, matrix = load_vectors(vectors, "char")
    table, coverage["char"] = pretrained_embeddings([as_vectors_key(c) for c in vocab], tokens, matrix,
                                                    net.char_emb.weight.shape[1], scale=_init_scale(net.char_emb),
                                                    seed=seed)
    net.char_emb.weight.set_value(table)
    if net.bigram_buckets > 0:
        tokens, matrix = load_vectors(vectors, "bigram")
        # A corpus bigram's chars are already in this model's form (the steps it lacks only touch
        # whitespace, which the vectors write as a plain space, a char of this vocabulary too).
        # Bigrams with a char outside the vocabulary (or a BOS/EOS mark) get id 0, which the hash
        # leaves out: their bucket at inference is (char, UNK), a mix of every unknown char.
        ids_of = {c: i for i, c in enumerate(vocab)}
        pairs = np.array([[ids_of.get(b[0], 0), ids_of.get(b[1], 0)] if len(b) == 2 else [0, 0] for b in tokens],
                         dtype="int64").reshape(-1, 2)
        with paddle.no_grad():   # the network's own hash, so a bucket is the one inference looks up
            buckets = hash_ngrams(paddle.to_tensor(pairs), paddle.to_tensor((pairs > 0).astype("int64")), 2,
                                net.bigram_buckets).numpy()[:, 0]
        taken, first = np.unique(buckets, return_index=True)   # tokens are most frequent first
        bucket_bigram = [""] * net.bigram_buckets              # "": no corpus bigram, a random row
        for bucket, row in zip(taken, first):
            if bucket > 0:
                bucket_bigram[bucket] = tokens[row]
        table, coverage["bigram_buckets"] = pretrained_embeddings(bucket_bigram, tokens, matrix,
                                                                  net.bigram_emb.weight.shape[1],
                                                                  scale=_init_scale(net.bigram_emb), seed=seed)
        net.bigram_emb.weight.set_value(table)
    log(f"embeddings from {vectors}: " + ", ".join(f"{k} {v:.1%}" for k, v in coverage.items()))
    sources = report.get("sources")
    return {"method": "corpus skip-gram char and bigram vectors (pretraining/vectors.py), centred, at the init's "
                      "spread; a bigram bucket from its most frequent corpus bigram",
            "vectors": portable_path(vectors), "sources": sources,
            "coverage": {k: round(v, 4) for k, v in coverage.items()}}


def _init_scale(layer) -> float:
    """The half-width of the uniform init with the spread of ``layer``'s own (Xavier) init."""
    return float(np.sqrt(3.0) * layer.weight.numpy().std())


def targets(labels: np.ndarray, neutral_weight: float, teacher: np.ndarray | None = None,
            teacher_weight: float = 1.0, num_labels: int = 2) -> np.ndarray:
    """Per text, the weights of -log p(negative), -log p(positive) in its loss: the gold label's
    one-hot; for a no_opinion sentence (label -1), ``neutral_weight`` times equal halves (the
    cross-entropy to the uniform distribution, least where both probabilities are 0.5), or, with
    ``num_labels`` 3, the one-hot of the third label, neutral; for a teacher-labelled text (label
    -2), ``teacher_weight`` times the teacher's probabilities (its ``teacher`` entry is
    p(positive); the cross-entropy to them, least where the model agrees)."""
    out = np.zeros((len(labels), num_labels), dtype="float32")
    known = labels >= 0
    out[np.flatnonzero(known), labels[known]] = 1.0
    if num_labels == 3:
        out[labels == NEUTRAL_LABEL, NEUTRAL_INDEX] = 1.0
    else:
        out[labels == NEUTRAL_LABEL] = neutral_weight / 2
    taught = labels == TEACHER_LABEL
    if taught.any():
        positive = np.asarray(teacher, dtype="float32")[taught]
        out[taught] = teacher_weight * np.stack([1.0 - positive, positive], axis=1)
    return out


def balancing_weights(labels: list[int]) -> np.ndarray:
    """Per row, the loss weight that makes each polar label's rows weigh half of the polar rows
    in all (a label with fewer rows weighs more per row); other rows (neutral) weigh 1."""
    labels = np.asarray(labels)
    out = np.ones(len(labels), dtype="float32")
    polar = labels >= 0
    if len(set(labels[polar].tolist())) < 2:
        return out                  # one label only: nothing to balance
    for label in (0, 1):
        rows = labels == label
        if rows.any():
            out[rows] = polar.sum() / (2 * rows.sum())
    return out


def read_teacher_labels(paths: list[str]) -> tuple[list[str], list[float], list[dict]]:
    """The units and the teacher's p(positive) of each ``teacher.py`` TSV, and what the manifest
    records of them (the teacher package, from the ``.json`` beside each file when there is one)."""
    texts, positive, record = [], [], []
    for path in paths:
        with open(path, encoding="utf-8", newline="") as handle:
            rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
            if not {"text", "positive"} <= set(rows.fieldnames or ()):
                raise ValueError(f"{path}: a --teacher-labels file needs text and positive columns "
                                 f"(teacher.py writes them); its header: {rows.fieldnames}")
            count = 0
            for line, row in enumerate(rows, start=2):
                try:
                    q = float(row["positive"])
                except (TypeError, ValueError):
                    q = float("nan")
                if not 0.0 <= q <= 1.0 or not row["text"]:
                    raise ValueError(f"{path}, line {line}: needs a text and a probability in [0, 1] under "
                                     f"positive, got {row['text']!r} and {row['positive']!r}")
                texts.append(row["text"])
                positive.append(q)
                count += 1
        sidecar = Path(str(path) + ".json")
        about = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.is_file() else {}
        record.append({"file": portable_path(path), "units": count, "teacher": about.get("teacher"),
                       "positive_share": about.get("positive_share"), "sources": about.get("files")})
        log(f"{path}: {count} teacher-labelled units")
    return texts, positive, record


# The columns of a --neutral-text TSV that hold sentences (the matching and NLI sets' headers).
TEXT_COLUMNS = ("text_a", "text_b", "text", "sentence1", "sentence2")


def read_statements(paths: list[str], total: int) -> list[str]:
    """About ``total`` opinion-free sentences (``augment.opinion_free``), an equal share from each
    ``--neutral-text`` file, evenly spread over it, so that no one source makes up the kind.  A TSV
    with a header gives its text_a / text_b / text (or sentence1 / sentence2) columns, a SQuAD-style .json its contexts and
    questions; any other file its lines (gzip read by the .gz suffix), cut into sentences at 。；！？."""
    import gzip
    import json
    import re

    from .augment import opinion_free

    per_file = -(-total // max(1, len(paths)))
    out = []
    for path in paths:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            if ".json" in Path(path).suffixes:
                lines = [text for article in json.load(handle)["data"] for paragraph in article["paragraphs"]
                         for text in [paragraph["context"]] + [qa["question"] for qa in paragraph["qas"]]]
            elif ".tsv" in Path(path).suffixes:
                rows = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
                columns = [c for c in rows.fieldnames or () if c in TEXT_COLUMNS]
                if not columns:
                    raise ValueError(f"{path}: a TSV for --neutral-text needs one of the columns {TEXT_COLUMNS}; "
                                     f"its header: {rows.fieldnames}")
                lines = [row[c] or "" for row in rows for c in columns]
            else:
                lines = list(handle)
        found = list(dict.fromkeys(s.strip() for line in lines for s in re.split(r"[。；！？\n]", line)
                                   if opinion_free(s)))
        taken = found[::max(1, len(found) // per_file)][:per_file] if per_file else []
        out += taken
        log(f"{path}: {len(found)} opinion-free sentences, {len(taken)} taken")
    return out


def train_deep(net, chars: Chars, train_ids, train_t, rows: list[int], dev, args, rng) -> list[dict]:
    """Stage 1: the CNN + n-gram bag, AdamW, warm-up then linear decay; keeps the best epoch on dev."""
    import paddle

    def crop(ids):
        # A random window, so long reviews teach their middles and ends too.
        if len(ids) <= args.max_len:
            return ids
        start = rng.randint(0, len(ids) - args.max_len)
        return ids[start:start + args.max_len]

    def loss_of(batch):
        probs = net.deep_probs(paddle.to_tensor(chars.pad([crop(train_ids[i]) for i in batch])))
        weights = paddle.to_tensor(train_t[batch])
        return -(weights * paddle.log(paddle.clip(probs, 1e-7, 1.0))).sum(axis=1).mean()

    lengths = [min(len(ids), args.max_len) for ids in train_ids]
    steps_per_epoch = -(-len(rows) // args.batch_size)
    schedule = Schedule(lr=args.lr, steps_per_epoch=steps_per_epoch, epochs=args.epochs,
                        warmup=max(1, steps_per_epoch * args.epochs // 10), floor=0.05)
    run = fit(net, lambda: length_batches(lengths, args.batch_size, rng, rows), loss_of,
              lambda: dev_report(dev, chars.predict(net.deep_probs, dev.texts)), schedule=schedule, select="dev",
              optimizer="AdamW", parameters=[p for n, p in net.named_parameters() if not is_wide(n)],
              keep=lambda name: not is_wide(name), average=args.average_weights, description="deep")
    return run.history


def dev_report(dev: DevSplits, probs: np.ndarray) -> dict:
    """An epoch's figures: ``dev``, the mean the choice is made on, and each split's accuracy."""
    return {"dev": dev.score(probs), "dev_splits": {rel: round(a, 4) for rel, a in dev.accuracies(probs).items()}}


def macro_f1(chars: Chars, net, texts: list[str], labels) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(labels, chars.predict(net, texts).argmax(1), average="macro"))


MIX_WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6)
SPLIT_WEIGHTS = tuple(k / 10 for k in range(9))      # with --short-lengths, 0 to 0.8 for either length


def train_wide(net, chars: Chars, train_ids, train_t, dev, args, rng, rows: list[int] | None = None) -> tuple[list[dict], dict]:
    """Stage 2: the linear hashed n-gram model on its own (Adam, linear decay); then the
    ``deep_weight`` that mixes the two best on dev, or with ``--short-lengths`` the length L and
    the two weights (texts of at most L chars, longer ones) that do.  Returns the history and the
    architecture's mix fields.  ``rows``: the training rows of an epoch (a row may come more than
    once; default: each once)."""
    import paddle
    import paddle.nn.functional as F

    net.eval()
    deep_dev = chars.predict(net.deep_probs, dev.texts)
    wide_rows = [ids[: args.max_len] for ids in train_ids]
    # A text's length as the network counts it (chars; a text past max_len is mixed as a long one).
    dev_lengths = np.array([len(chars.encode(t)) for t in dev.texts])[:, None]

    def mixes():
        """(fields, deep weight of each dev text): one weight for every text first, so that a split
        by length is chosen only where it does better."""
        for m in MIX_WEIGHTS:
            yield {"deep_weight": m}, m
        for length in args.short_lengths:
            short = dev_lengths <= length
            for ws in SPLIT_WEIGHTS:
                for wl in SPLIT_WEIGHTS:
                    if ws != wl:
                        yield ({"deep_weight": wl, "short_length": length, "short_deep_weight": ws},
                               np.where(short, ws, wl))

    def evaluate():
        wide_dev = chars.predict(lambda x: F.softmax(net.wide_logits(x), axis=-1), dev.texts)
        scored = [(dev.score(w * deep_dev + (1 - w) * wide_dev), fields, w) for fields, w in mixes()]
        best = max(scored, key=lambda row: row[0])      # the first of equal scores
        return {**dev_report(dev, best[2] * deep_dev + (1 - best[2]) * wide_dev), "wide_only_dev": dev.score(wide_dev),
                "mixed_dev": {str(fields["deep_weight"]): round(score, 4) for score, fields, _ in scored
                              if len(fields) == 1},
                **best[1]}

    def loss_of(batch):
        batch = [rows[i] for i in batch]
        logits = net.wide_logits(paddle.to_tensor(chars.pad([wide_rows[i] for i in batch])))
        weights = paddle.to_tensor(train_t[batch])
        return -(weights * F.log_softmax(logits, axis=-1)).sum(axis=1).mean()

    rows = list(range(len(wide_rows))) if rows is None else rows
    batch_size, lengths = 128, [len(wide_rows[i]) for i in rows]
    schedule = Schedule(lr=args.wide_lr, steps_per_epoch=-(-len(rows) // batch_size), epochs=args.wide_epochs,
                        floor=0.05)
    run = fit(net, lambda: length_batches(lengths, batch_size, rng), loss_of, evaluate, schedule=schedule,
              select="dev", parameters=[p for n, p in net.named_parameters() if is_wide(n)], keep=is_wide,
              grad_clip=None, average=args.average_weights, description="wide")
    return run.history, {k: run.best[k] for k in ("deep_weight", "short_length", "short_deep_weight") if k in run.best}


def augmented(texts: list[str], labels: list[int], kinds: list[str], *, seed: int, scale: float,
              statements: list[str] = ()) -> tuple[list[str], list[int], dict | None]:
    """Sentences generated from the training sentences (augment.py), their labels (0/1, as the
    TSV files', and NEUTRAL_LABEL for no_opinion), and what the manifest records of them (None when
    ``kinds`` is empty)."""
    if not kinds:
        return [], [], None
    made = generate(texts, [LABELS[y] for y in labels], kinds=kinds, seed=seed, scale=scale, statements=statements)
    counts = Counter((g.kind, g.source) for g in made)
    record = {
        "kinds": kinds, "scale": scale, "seed": seed, "sentences": len(made),
        "by_kind": {k: {source: counts[k, source] for source in ("template", "real") if counts[k, source]}
                    for k in kinds},
        "labels": dict(Counter(g.label for g in made)),
        "held_out": "templates use augment.TRAIN_VOCABULARY, which shares no word or frame with the robustness "
                    "suite's SUITE_VOCABULARY; no generated sentence is a suite sentence; slang words are shared",
    }
    made_labels = [NEUTRAL_LABEL if g.label == NEUTRAL else LABELS.index(g.label) for g in made]
    return [g.text for g in made], made_labels, record


def plain_opinion_dev() -> dict[str, tuple[list[str], list[int]]]:
    """The plain-opinion dev split (lexicon.dev_cases: words no lexicon sentence uses), as a
    selection split beside the files' when the lexicon kind trains: the choices of epoch and
    ``deep_weight`` then weigh what the lexicon teaches as one split among the others."""
    from . import lexicon

    cases = lexicon.dev_cases()
    return {PLAIN_OPINION_DEV: ([c.text for c in cases], [LABELS.index(c.label) for c in cases])}


def lexicon_augmented(count: int, seed: int) -> tuple[list[str], list[int], dict]:
    """lexicon.py's sentences from the training half of the sentiment lexicons, labelled as the TSV
    files (NEUTRAL_LABEL for a bare subject), and what the manifest records of them."""
    from . import lexicon

    made = lexicon.training_sentences(count, seed=seed)
    train_words, dev_words = lexicon.split_dev_words()
    held_words = lexicon.split_words()[1]
    labels = [NEUTRAL_LABEL if y == lexicon.NEUTRAL else LABELS.index(y) for _, y in made]
    record = {"sentences": len(made), "labels": dict(Counter(y for _, y in made)), "seed": seed,
              "lexicons": "DUTIR affective ontology, Tsinghua (Li Jun) polarity lists, HowNet sentiment, NTUSD "
                          f"(../shared/data/lexicon/sentiment; research use): words >= {lexicon.MIN_SOURCES} of them "
                          "give one polarity and none the other",
              "words": {"training": len(train_words), "dev": len(dev_words), "held_out": len(held_words)},
              "held_out": f"{lexicon.HELD_OUT_SHARE:.0%} of the words by an md5 of the word, and any word that "
                          "contains one or is contained in one, and the robustness suite's words; no check text "
                          "(generated or hand-written) is trained on"}
    return [t for t, _ in made], labels, record


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.ensemble_weights:
        tuned = tune_ensemble_weights(args.ensemble_weights, Path(args.data_dir), at_least=args.at_least)
        log(f"ensemble_weights {tuned['ensemble_weights']} ({tuned['ensemble_mixing']} mean) written into "
            f"{args.ensemble_weights}/manifest.json: "
            f"dev accuracy {tuned['ensemble_weights_tuning']['accuracy']}")
        args.calibrate = args.ensemble_weights   # the temperature of the new mix
    if args.int8_tables:
        return int8_tables(args)
    if args.short_wide:
        return short_wide(args)
    if args.calibrate:
        record = calibrate_package(args.calibrate, Path(args.data_dir))
        log(f"temperature {record['temperature']} written into {args.calibrate}/manifest.json: {record['figures']}")
        return 0
    if args.neutral_bias:
        tuned = tune_neutral_bias(args.neutral_bias, Path(args.data_dir))
        log(f"label_bias {tuned['label_bias']} written into {args.neutral_bias}/manifest.json: "
            f"{tuned['label_bias_tuning']['chosen']}")
        return 0
    from taskflow.tasks.text_classification.model import SentimentNet

    data = Path(args.data_dir)
    rng = seed_all(args.seed)
    started = time.time()

    sets = args.train_sets.split(",")
    texts, labels = [], []
    for name in sets:
        t, y = read_tsv(data / name / "train.tsv")
        texts += t
        labels += y
    chn_rows = len(read_tsv(data / "chnsenticorp" / "train.tsv")[0]) if sets[0] == "chnsenticorp" else 0
    review_rows = len(texts)
    for rel in social_files(args.social_sets, "train"):
        t, y = read_smp2020(data / rel, neutral=args.neutral)
        texts += t
        labels += y
    real_rows = len(texts)
    statements = read_statements(args.neutral_text, args.neutral_sentences if args.neutral_sentences is not None
                                 else round(SIZES["no_opinion_real"] * args.augment_scale))
    # After the real rows, so that ChnSentiCorp stays rows [0, chn_rows).
    # Generated from the polar rows (an SMP2020 neutral row has no polarity to negate or contrast).
    polar = [i for i, y in enumerate(labels) if y >= 0]
    extra_texts, extra_labels, augmentation = augmented([texts[i] for i in polar], [labels[i] for i in polar],
                                                        [k for k in args.augment_kinds if k != "lexicon"],
                                                        seed=args.seed, scale=args.augment_scale,
                                                        statements=statements)
    if "lexicon" in args.augment_kinds:
        lexicon_texts, lexicon_labels, lexicon_record = lexicon_augmented(args.lexicon_sentences, args.seed)
        extra_texts, extra_labels = extra_texts + lexicon_texts, extra_labels + lexicon_labels
        augmentation = augmentation or {"kinds": [], "by_kind": {}}
        augmentation["kinds"] = args.augment_kinds
        augmentation["by_kind"]["lexicon"] = {"template": len(lexicon_texts)}
        augmentation["lexicon"] = lexicon_record
    if augmentation and "no_opinion" in args.augment_kinds:
        augmentation["no_opinion"] = {"weight": 1.0 if args.neutral else args.neutral_weight,
                                      "target": "the label neutral" if args.neutral else "equal probabilities",
                                      "statements_from": [portable_path(p) for p in args.neutral_text],
                                      "statements_read": len(statements)}
    texts, labels = texts + extra_texts, labels + extra_labels
    if augmentation:
        log(f"{real_rows} training sentences and {len(extra_texts)} generated: {augmentation['by_kind']}")
    taught_texts, taught_positive, taught = read_teacher_labels(args.teacher_labels)
    teacher = [float("nan")] * len(texts) + taught_positive
    texts, labels = texts + taught_texts, labels + [TEACHER_LABEL] * len(taught_texts)
    dev = DevSplits(data, selection_splits(sets, args.social_sets), neutral=args.neutral,
                    more=plain_opinion_dev() if "lexicon" in args.augment_kinds else None)
    labels_out = list(THREE_LABELS if args.neutral else LABELS)
    start = args.init or args.deep_init
    if start:
        init_manifest = json.loads(Path(start, "manifest.json").read_text(encoding="utf-8"))
        args.normalizer = Normalizer(init_manifest["normalization"])
    if args.deep_init or args.init:
        vocab = Path(args.deep_init or args.init, "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    else:
        vocab = build_vocab(texts, args.min_freq, args.normalizer)
    chars = Chars(vocab, args.max_len, len(labels_out), normalizer=args.normalizer)

    architecture = network_architecture(args, vocab, len(labels_out), args.wide_buckets)
    if start:
        # The package's own network: its architecture, and its weights read as the product reads them
        # (int8 tables with their scales); --deep-init then trains the wide part afresh.
        from taskflow.weights import load_weights

        architecture = {k: v for k, v in init_manifest["architecture"].items() if k != "type"}
        architecture["deep_weight"] = 1.0
        if args.deep_init:
            # The wide part is new: its buckets, and the negation scope it may read (--negation-window)
            # where the package's deep part had none.
            fresh = network_architecture(args, vocab, len(labels_out), args.wide_buckets)
            architecture["wide_buckets"] = args.wide_buckets
            if args.negation_window and not architecture.get("negator_ids"):
                architecture.update({k: fresh[k] for k in fresh if k.startswith("negat") or k == "clause_break_ids"})
    net = SentimentNet(**architecture)
    if args.init:
        load_weights(net, Path(args.init, "weights.npz"))
    resume = Path(str(args.out).rstrip("/") + ".deep")
    train_ids = [chars.encode(t)[: 100_000] for t in texts]
    train_t = targets(np.array(labels, dtype="int64"), args.neutral_weight, np.array(teacher), args.teacher_weight,
                      len(labels_out))
    if args.balance_social:
        train_t[review_rows:real_rows] *= balancing_weights(labels[review_rows:real_rows])[:, None]
    pretrained = start_from_vectors(net, args.vectors, vocab, args.seed) if args.vectors else None
    if args.deep_init:
        history = {"deep": load_deep(net, args.deep_init)}
    elif (resume / "weights.npz").is_file():
        log(f"resuming at the wide stage: the deep stage's weights from {resume}")
        history = {"deep": json.loads((resume / "history.json").read_text(encoding="utf-8"))}
        load_deep(net, str(resume))
    else:
        rows = list(range(len(train_ids))) + list(range(chn_rows)) * (args.chn_weight - 1)
        history = {"deep": train_deep(net, chars, train_ids, train_t, rows, dev, args, rng)}
        resume.mkdir(parents=True, exist_ok=True)
        np.savez(resume / "weights.npz", **{k: v.numpy() for k, v in net.state_dict().items() if not is_wide(k)})
        (resume / "history.json").write_text(json.dumps(history["deep"]), encoding="utf-8")
    if args.init:
        history["init"] = portable_path(args.init)
    wide_rows = list(range(len(train_ids))) + list(range(chn_rows)) * (args.wide_chn_weight - 1)
    history["wide"], mix = train_wide(net, chars, train_ids, train_t, dev, args, rng, wide_rows)
    architecture.update(mix)
    net.deep_weight = mix["deep_weight"]
    net.short_length, net.short_deep_weight = mix.get("short_length", 0), mix.get("short_deep_weight", 1.0)

    with PackageDraft(args, "sentiment_analysis", started=started) as draft:
        # Embedding tables (including the wide n-gram tables) are stored as float16; the report is on those.
        draft.ship_weights(net, float16=lambda name: "emb" in name or is_wide(name) and "bias" not in name)
        (draft / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        report = REPORT + [(rel[:-len(".tsv")].replace("/", "_"), rel) for split in ("dev", "test")
                           for rel in social_files(args.social_sets, split)]
        metrics = {key: round(chars.accuracy(net, *read_split(data, rel, neutral=args.neutral)), 4)
                   for key, rel in report}
        if args.neutral:
            metrics["three_way_macro_f1"] = {rel: round(macro_f1(chars, net, *read_split(data, rel, neutral=True)), 4)
                                             for rel in social_files(args.social_sets, "test")}
        log(f"metrics {metrics}")
        draft.write({
            "description": "char CNN + hashed n-gram bag (deep) mixed with a linear hashed char 1-3-gram model (wide)",
            "architecture": {"type": "sentiment_cnn", **architecture},
            "labels": labels_out,
            "max_length": args.max_len,
            "normalization": list(args.normalizer.steps),
            "training": {
                "train_files": [f"{s}/train.tsv" for s in sets] + social_files(args.social_sets, "train"),
                **({"social_rows": "SMP2020-EWECT read as polarity: happy positive; angry, sad, fear negative; "
                                   "neutral and surprise left out"} if args.social_sets else {}),
                "examples": {"real": real_rows, "reviews": review_rows, "social": real_rows - review_rows,
                             "generated": len(extra_texts), "teacher": len(taught_texts)},
                "augmentation": augmentation,
                **({"teacher_labels": {"weight": args.teacher_weight, "files": taught,
                                       "target": "the teacher's probabilities (cross-entropy)"}} if taught else {}),
                **({"pretrained_embeddings": pretrained} if pretrained else {}),
                "selection": {"splits": dev.rels, "score": "mean of the splits' accuracies",
                              "chooses": "deep epoch, wide epoch and deep_weight (with --short-lengths: short_length and short_deep_weight too)"},
                "chn_weight": args.chn_weight, "wide_chn_weight": args.wide_chn_weight, "balance_social": args.balance_social,
                "epochs": args.epochs, "wide_epochs": args.wide_epochs,
                "seed": args.seed, "history": history,
                "command": "python -m recipes.sentiment_analysis.train " + " ".join(argv),
                "seconds": round(time.time() - started),
            },
            "metrics": metrics,
            "framework": framework_versions("paddlepaddle"),
        })
    if not args.skip_calibration:
        record = calibrate_package(args.out, data)
        log(f"temperature {record['temperature']}: {record['figures']}")
    import shutil

    shutil.rmtree(resume, ignore_errors=True)   # the package is written: nothing left to resume
    return 0


def ship_int8_tables(draft, network) -> None:
    """Store ``network`` in ``draft`` as the fast packages are: char and bigram tables in int8 (a
    scale per row), the wide n-gram tables in int8 (a scale per label), the rest as it is."""
    draft.ship_weights(network, float16=lambda name: is_wide(name) and "bias" not in name,
                       int8=lambda name: "_emb." in name or is_wide(name) and "bias" not in name)


def int8_tables(args) -> int:
    """``--int8-tables PACKAGE``: the package's network stored again with its char and bigram
    embedding tables (``_emb.`` names, a scale per row) and its wide n-gram weights (a scale per
    label) in int8, the rest as it was; the manifest is kept (name,
    version, temperature) and says where the weights came from.  Its metrics are the stored
    network's: measure the new one through the product before shipping it."""
    import shutil

    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.weights import load_weights
    from taskflow.tasks.text_classification.model import SentimentNet

    source = Path(args.int8_tables)
    manifest = Manifest.load(source / MANIFEST)
    architecture = {k: v for k, v in manifest.data["architecture"].items() if k != "type"}
    network = SentimentNet(**architecture)
    load_weights(network, source / "weights.npz")
    fields = {k: v for k, v in manifest.data.items() if k not in ("task", "name", "version", "files")}
    fields["training"] = {**fields.get("training", {}), "int8_tables": {
        "from_weights_sha256": manifest.files["weights.npz"]["sha256"],
        "tables": "char_emb, bigram_emb (a scale per row); the wide n-gram tables (a scale per label)",
        "note": "stored again with --int8-tables; metrics above are from the weights before"}}
    with PackageDraft(args, "sentiment_analysis") as draft:
        draft.identity.update(name=manifest.name, version=manifest.version)
        ship_int8_tables(draft, network)
        shutil.copyfile(source / "vocab.txt", draft / "vocab.txt")
        draft.write(fields)
    return 0


def short_wide(args) -> int:
    """``--short-wide LONG SHORT``: one network of LONG's, with SHORT's n-gram part as the n-gram
    part of short texts (model.py ``short_wide``).  SHORT must be a ``--deep-init LONG`` training
    (the same vocabulary and deep part); LONG's own mix stays as it is for every longer text.  The
    length L and the deep weight of texts of at most L chars are chosen on the dev splits of the
    review sets and the plain-opinion dev split (L = 0: LONG itself, chosen unless a split does
    better).  Stored as ``--int8-tables`` stores a package; the temperature is LONG's."""
    import shutil

    import paddle.nn.functional as F

    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.tasks.text_classification.model import SentimentNet
    from taskflow.weights import load_weights

    long_dir, short_dir = map(Path, args.short_wide)
    manifests = [Manifest.load(d / MANIFEST) for d in (long_dir, short_dir)]
    nets = []
    for d, manifest in zip((long_dir, short_dir), manifests):
        net = SentimentNet(**{k: v for k, v in manifest.data["architecture"].items() if k != "type"})
        load_weights(net, d / "weights.npz")
        nets.append(net.eval())
    long_net, short_net = nets
    long_arch, short_arch = (dict(m.data["architecture"]) for m in manifests)
    if (long_dir / "vocab.txt").read_bytes() != (short_dir / "vocab.txt").read_bytes() or \
            long_arch["wide_buckets"] != short_arch["wide_buckets"]:
        raise SystemExit(f"{short_dir}: not a --deep-init {long_dir} training (another vocabulary or wide_buckets)")
    long_state, short_state = long_net.state_dict(), short_net.state_dict()
    for name, value in long_state.items():
        if not is_wide(name) and np.abs(value.numpy() - short_state[name].numpy()).max() > 1e-2:
            raise SystemExit(f"{short_dir}: its deep part ({name}) is not {long_dir}'s: train it with --deep-init")
    chars = Chars((long_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1], args.max_len,
                  normalizer=Normalizer(manifests[0].data["normalization"]))
    data = Path(args.data_dir)
    dev = DevSplits(data, selection_splits(args.train_sets.split(","), args.social_sets), more=plain_opinion_dev())
    deep = chars.predict(long_net.deep_probs, dev.texts)
    wide_long = chars.predict(lambda x: F.softmax(long_net.wide_logits(x), axis=-1), dev.texts)
    wide_short = chars.predict(lambda x: F.softmax(short_net.wide_logits(x), axis=-1), dev.texts)
    lengths = np.array([len(chars.encode(t)) for t in dev.texts])[:, None]
    w = long_arch["deep_weight"]
    grid = []
    for length in [0, *args.short_lengths]:
        for ws in SPLIT_WEIGHTS:
            probs = np.where(lengths <= length, ws * deep + (1 - ws) * wide_short, w * deep + (1 - w) * wide_long)
            grid.append([length, ws, round(dev.score(probs), 4), *(round(a, 4) for a in dev.accuracies(probs).values())])
            if length == 0:
                break
    best = max(grid, key=lambda row: row[2])      # the first of equal scores: LONG itself first
    log(f"chosen: short_length {best[0]}, short_deep_weight {best[1]}, dev {best[2]} (LONG alone {grid[0][2]})")
    architecture = {**{k: v for k, v in long_arch.items() if k != "type"}, "short_length": best[0],
                    "short_deep_weight": best[1], "short_wide": True}
    for key in ("negator_ids", "clause_break_ids", "negation_window", "negation_exception_ids"):
        if key in short_arch and key not in long_arch:
            architecture[key] = short_arch[key]
            architecture["wide_negation"] = False
    network = SentimentNet(**architecture)
    state = {k: v.numpy() for k, v in long_state.items()}
    state.update({"wide_short_" + k[len("wide_"):]: v.numpy() for k, v in short_state.items() if is_wide(k)})
    if "negated_vec" in network.state_dict() and "negated_vec" not in state:
        state["negated_vec"] = np.zeros(network.negated_vec.shape, dtype="float32")   # the deep part as LONG's
    restore(network, state)
    network.eval()
    fields = {k: v for k, v in manifests[0].data.items() if k not in ("task", "name", "version", "files", "architecture")}
    # The network's own figures, as the recipe reports a trained one (before the int8 tables).
    report = REPORT + [(rel[:-len(".tsv")].replace("/", "_"), rel) for split in ("dev", "test")
                       for rel in social_files(args.social_sets, split)]
    fields["metrics"] = {key: round(chars.accuracy(network, *read_split(data, rel)), 4) for key, rel in report}
    log(f"metrics {fields['metrics']}")
    fields["architecture"] = {"type": long_arch["type"], **architecture}
    fields["description"] = (f"{manifests[0].data.get('description', '')}; a text of at most {best[0]} chars is "
                             "mixed with an n-gram part of its own (word polarity from public lexicons, negation "
                             "scope), chosen on dev" if best[0] else manifests[0].data.get("description", ""))
    fields["training"] = {**fields.get("training", {}), "short_wide": {
        "long": {"package": portable_path(long_dir), "weights_sha256": manifests[0].files["weights.npz"]["sha256"]},
        "short": {"package": portable_path(short_dir), "weights_sha256": manifests[1].files["weights.npz"]["sha256"],
                  "training": {k: manifests[1].data["training"].get(k) for k in ("command", "augmentation", "history")}},
        "selection": {"splits": dev.rels, "score": "mean of the splits' accuracies", "chosen": best[:3],
                      "grid_columns": ["short_length", "short_deep_weight", "mean", *dev.rels], "grid": grid},
        "command": "python -m recipes.sentiment_analysis.train --short-wide " + " ".join(args.short_wide)}}
    with PackageDraft(args, "sentiment_analysis") as draft:
        draft.identity.update(name=manifests[0].name, version=args.version or manifests[0].version)
        ship_int8_tables(draft, network)
        shutil.copyfile(long_dir / "vocab.txt", draft / "vocab.txt")
        draft.write(fields)
    return 0


# --- calibration ---------------------------------------------------------------------------------

def negative_log_likelihood(probs: np.ndarray, labels) -> float:
    """Mean -log p(gold label)."""
    labels = np.asarray(labels)
    return float(-np.log(np.clip(probs[np.arange(len(labels)), labels], 1e-12, 1.0)).mean())


def expected_calibration_error(probs: np.ndarray, labels, bins: int = ECE_BINS) -> float:
    """Sum over equal-width bins of the top probability: the bin's share of texts times
    |accuracy - mean top probability| in it."""
    labels = np.asarray(labels)
    confidence, predicted = probs.max(axis=1), probs.argmax(axis=1)
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    error = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            error += inside.mean() * abs((predicted[inside] == labels[inside]).mean() - confidence[inside].mean())
    return float(error)


def fit_temperature(probs: np.ndarray, labels, low: float = 0.02, high: float = 50.0) -> float:
    """The temperature T in [low, high] that minimises the NLL of ``temper(probs, T)`` on ``labels``.

    The NLL is convex in 1/T (a one-parameter logistic regression on log p), so a golden-section
    search over 1/T finds its minimum."""
    def loss(inverse: float) -> float:
        return negative_log_likelihood(temper(probs, 1.0 / inverse), labels)

    a, b = 1.0 / high, 1.0 / low
    ratio = (5 ** 0.5 - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    loss_c, loss_d = loss(c), loss(d)
    while b - a > 1e-6:
        if loss_c <= loss_d:
            b, d, loss_d = d, c, loss_c
            c = b - ratio * (b - a)
            loss_c = loss(c)
        else:
            a, c, loss_c = c, d, loss_d
            d = a + ratio * (b - a)
            loss_d = loss(d)
    return 1.0 / ((a + b) / 2)


def package_probabilities(package: str | Path, texts: list[str], labels=LABELS) -> np.ndarray:
    """The package's probabilities (its labels, ``labels`` first) for ``texts`` through the product
    (chunks cut at sentence ends, mixed by length), before any temperature or label bias it has."""
    from taskflow import Taskflow

    flow = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True, offline=True)
    if list(flow.task.labels)[:len(labels)] != list(labels):
        raise ValueError(f"{package}: needs the labels {list(labels)} first, the package has {flow.task.labels}")
    # Fit on the mix itself, also when the package has a temperature or a label bias already.
    flow.task.temperature = flow.task.label_bias = None
    return np.array([[r["scores"][label] for label in flow.task.labels] for r in flow(texts)])


def network_probabilities(package: str | Path, texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """Each network's probabilities for ``texts`` through the product, unmixed: ``[texts, networks,
    labels]``, and the networks' names (the package's own first)."""
    from taskflow import Taskflow

    task = Taskflow("sentiment_analysis", task_path=str(package), offline=True).task
    if list(task.labels) != list(LABELS):
        raise ValueError(f"{package}: needs the labels {list(LABELS)}, the package has {task.labels}")

    class EachNetwork(type(task)):
        """The task up to mixing: each text's [networks, labels] probabilities."""

        def join(self, item, results, units):
            return self.network_probabilities(results, units)

    per_network = EachNetwork(task.model, batch_size=task.batch_size)
    probs = np.array(per_network.run_items([per_network.check_item(t, i) for i, t in enumerate(texts)]))
    return probs, [network.model.name for network in task.networks]


def tune_ensemble_weights(package: str | Path, data: Path, step: float = 0.1, at_least: str | Path | None = None) -> dict:
    """Choose the ``ensemble_weights`` and ``ensemble_mixing`` of ``package`` (a package with an
    ``ensemble``): every weighting of :func:`recipes.tuning.simplex_grid`, mixed each way of
    ``MIXINGS``, scored by the mean accuracy of the dev splits (``ENSEMBLE_SELECTION``); ties go to the
    first (arithmetic before geometric, then the package's own network weighted least).  With
    ``at_least`` (a package: the fast model), only weightings at least as accurate as it on every
    dev split count, so the accurate mode never loses a split to the fast one.  Each network runs
    once and the mixes are recomputed.  Writes the choice and the grids' figures
    (``ensemble_weights_tuning``) into the manifest and returns them."""
    from taskflow.ensemble import MIXINGS, mix
    from recipes.tuning import simplex_grid

    dev = DevSplits(data, ENSEMBLE_SELECTION)
    probs, names = network_probabilities(package, dev.texts)
    if len(names) < 2:
        raise ValueError(f"{package} names no ensemble: nothing to weight")
    by_network = probs.transpose(1, 0, 2)                                       # [networks, texts, labels]
    floor = dev.accuracies(package_probabilities(at_least, dev.texts)) if at_least else None
    grids, allowed = {}, []    # allowed: (mixing, row) of the weightings no dev split of which is under the floor
    for mixing in MIXINGS:
        grids[mixing] = []
        for weights in simplex_grid(len(names), step):
            mixed = mix(by_network, weights, mixing)
            grids[mixing].append([*(round(w, 4) for w in weights), round(dev.score(mixed), 4)])
            if floor is None or all(a >= floor[rel] for rel, a in dev.accuracies(mixed).items()):
                allowed.append((mixing, grids[mixing][-1]))
    if not allowed:
        raise ValueError(f"no weighting of {package} is at least as accurate as {at_least} on every dev split")
    mixing, best = max(allowed, key=lambda pair: pair[1][-1])  # first of equals: arithmetic, then the grid's order
    alone = {name: round(dev.score(probs[:, k]), 4) for k, name in enumerate(names)}
    fields = {"ensemble_weights": best[:-1], "ensemble_mixing": mixing,
              "ensemble_weights_tuning": {"accuracy": best[-1], "score": "mean of the splits' accuracies",
                                          "texts": len(dev.texts), "files": list(ENSEMBLE_SELECTION),
                                          "step": step, "alone": alone, "grid": grids["arithmetic"],
                                          **({"at_least": {"package": portable_path(at_least),
                                                           "dev": {k: round(v, 4) for k, v in floor.items()}}}
                                             if floor else {}),
                                          "grid_geometric": grids["geometric"]}}
    update_manifest(package, fields)
    return fields


def tune_neutral_bias(package: str | Path, data: Path, low: float = -3.0, high: float = 3.0,
                      step: float = 0.1) -> dict:
    """Choose how readily a three-label package says "neutral": the shift b of log p(neutral) in
    [low, high] (``label_bias``) with the best mean accuracy over the dev splits read three-way
    (``ENSEMBLE_SELECTION``: the reviews' polar rows, where a neutral answer is wrong, and SMP2020's
    rows with their neutral ones), the training's own selection score; ties go to the smallest
    shift.  Writes it and the grid into the manifest and returns them."""
    dev = DevSplits(data, ENSEMBLE_SELECTION, neutral=True)
    fields = neutral_bias_fields(package_probabilities(package, dev.texts, labels=THREE_LABELS), dev, low, high, step)
    update_manifest(package, fields)
    return fields


def neutral_bias_fields(probs: np.ndarray, dev: DevSplits, low: float = -3.0, high: float = 3.0,
                        step: float = 0.1) -> dict:
    """The manifest's ``label_bias`` and ``label_bias_tuning`` for three-label ``probs`` of ``dev``'s
    texts (read three-way): the shift of log p(neutral) on the grid with the best mean accuracy, ties
    to the smallest shift."""
    from taskflow.tasks.sentiment_analysis import shifted

    grid = []
    for k in range(int(round((high - low) / step)) + 1):
        bias = round(low + k * step, 4)
        accuracies = dev.accuracies(shifted(probs, np.array([0.0, 0.0, bias])))
        grid.append([bias, round(float(np.mean(list(accuracies.values()))), 4),
                     *(round(accuracies[rel], 4) for rel in dev.rels)])
    best = max(grid, key=lambda row: (row[1], -abs(row[0])))
    return {"label_bias": {NEUTRAL: best[0]},
            "label_bias_tuning": {"score": "mean of the dev splits' three-way accuracies", "files": list(dev.rels),
                                  "texts": len(dev.texts), "chosen": {"bias": best[0], "dev": best[1]},
                                  "unshifted": next(row[1] for row in grid if row[0] == 0.0),
                                  "grid": grid, "grid_columns": ["bias", "mean", *dev.rels]}}


def calibrate_package(package: str | Path, data: Path) -> dict:
    """Fit the temperature of the package on ChnSentiCorp dev (``data``/chnsenticorp/dev.tsv) and
    write it, with NLL and ECE before and after on dev and test, into the package's manifest
    (``temperature``, ``calibration``).  Returns the calibration record."""
    splits = {name: read_tsv(data / rel) for name, rel in CALIBRATION_SPLITS if (data / rel).is_file()}
    if "chnsenticorp_dev" not in splits:
        raise FileNotFoundError(f"calibration fits on {data / CALIBRATION_SPLITS[0][1]}, which is missing")
    probs = {name: package_probabilities(package, texts) for name, (texts, _) in splits.items()}
    temperature = round(fit_temperature(probs["chnsenticorp_dev"], splits["chnsenticorp_dev"][1]), 4)
    figures = {}
    for name, (_, labels) in splits.items():
        before, after = probs[name], temper(probs[name], temperature)
        figures[name] = {
            "nll": [round(negative_log_likelihood(before, labels), 4), round(negative_log_likelihood(after, labels), 4)],
            "ece": [round(expected_calibration_error(before, labels), 4),
                    round(expected_calibration_error(after, labels), 4)],
        }
    record = {"temperature": temperature, "method": "temperature scaling of the mixed probabilities "
              "(softmax(log p / T)), T minimising NLL on ChnSentiCorp dev", "fitted_on": CALIBRATION_SPLITS[0][1],
              "figures": figures, "figures_are": "[before, after]", "ece_bins": ECE_BINS}
    update_manifest(package, {"temperature": temperature,
                              "calibration": {k: v for k, v in record.items() if k != "temperature"}})
    return record


if __name__ == "__main__":
    sys.exit(main())
