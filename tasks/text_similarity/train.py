"""``taskflow train text_similarity --train FILE``: a matcher trained on your own labelled pairs.

    taskflow train text_similarity --train pairs.tsv --dev pairs_dev.tsv \\
        --text-field text_a,text_b --label-field label --out my_model/

A .csv / .tsv with a header, or .jsonl.  Labels are 0 (different meaning) and 1 (same).  The
defaults suit a few thousand pairs: a small bi-encoder (``--arch siamese``, so
``return_embeddings`` works), an evaluation on dev after each epoch, the best one kept, and the
decision threshold tuned on dev; the vocabulary comes from the --train file (its words found with
jieba).  The dev report (accuracy at that threshold; per label: train and dev pairs, precision,
recall) is printed and written into the manifest under metrics.dev.  ``--vectors DIR`` starts the
char and word tables from corpus vectors (``python -m pretraining.vectors``).

The pieces here (encoding, the network's options, the training loop, the threshold) are also
those of the recipe that made the bundled models from the public matching corpora
(``recipes/text_similarity/train.py`` in the repository).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from taskflow.corpus_vectors import jieba_cut, load_vectors, pretrained_embeddings, vectors_report
from taskflow.dev_report import classification_report, print_report
from taskflow.errors import TrainingDataError
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import recipe_parser
from taskflow.training import Fit, Schedule, fast_cpu_math, fit, length_batches, log, seed_all
from taskflow.training_data import add_own_data_options, check_label_sets, read_labelled, split_off_dev

from .features import NORMALIZATION, Vocab, encode, model_text
from .pairs import Pair

MAX_LENGTH = 64


def add_network_options(parser) -> None:
    """The network's and the training loop's options (the recipe for the public data has them too)."""
    parser.add_argument("--arch", choices=("match", "siamese"), default="match")
    parser.add_argument("--char-dim", type=int, default=128)
    parser.add_argument("--word-dim", type=int, default=64, help="0: chars only")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--enc-layers", type=int, default=2)
    parser.add_argument("--kernel", type=int, default=3)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--no-exact-match", action="store_true")
    parser.add_argument("--overlap-features", action="store_true",
                        help="the scorer also sees how the texts overlap, and in what order (model.py)")
    parser.add_argument("--rnn-size", type=int, default=0,
                        help="each text is also read in order by a BiGRU of this size (0: none); for --arch "
                             "match its states join the embeddings before alignment (ESIM)")
    parser.add_argument("--min-char", type=int, default=2)
    parser.add_argument("--min-word", type=int, default=3)
    parser.add_argument("--max-words", type=int, default=30000)
    parser.add_argument("--vectors", metavar="DIR",
                        help="corpus vectors (python -m pretraining.vectors --out DIR): the char and word tables "
                             "start from their char and word vectors")
    parser.add_argument("--float16-weights", action="store_true",
                        help="store every weight in float16, not only the embedding tables: half the bytes, "
                             "probabilities within ~1e-3 (the package is evaluated as stored)")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--minutes", type=float, help="wall-clock budget for the training loop")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=300)


def parse_args(argv):
    parser = recipe_parser("text_similarity", __doc__, name=None, seed=1234, data=None)
    add_network_options(parser)
    add_own_data_options(parser, text_field="text1,text2", label_field="label")
    parser.set_defaults(**SMALL_DATA)
    if any(arg == "--data-dir" or arg.startswith("--data-dir=") for arg in argv):
        parser.error("--data-dir DIR trains the bundled model from the public corpora, a recipe kept in the "
                     "repository (python -m recipes.text_similarity.train); give --train FILE for your own pairs")
    args = parser.parse_args(argv)
    if not args.train:
        parser.error("give --train FILE: your labelled pairs (.csv, .tsv or .jsonl, a 0/1 label)")
    return args


# A few thousand pairs of one domain, trained on a CPU in minutes: a bi-encoder a quarter of the
# shipped one's width, every char of the file and the words seen twice, an evaluation per epoch.
SMALL_DATA = dict(arch="siamese", char_dim=64, word_dim=32, hidden=64, enc_layers=1, min_char=1, min_word=2,
                  epochs=10.0, batch_size=32, warmup=20)


# ------------------------------------------------------------------ encoding

class Encoded:
    """Model texts of a list of pairs, ids cached per distinct text."""

    def __init__(self, pairs: list[Pair], vocab: Vocab, cache: dict):
        self.labels = np.array([p.label for p in pairs], dtype=np.float32)
        self.a = [self._ids(p.text1, vocab, cache) for p in pairs]
        self.b = [self._ids(p.text2, vocab, cache) for p in pairs]
        self.lengths = np.array([max(len(x[0]), len(y[0])) for x, y in zip(self.a, self.b)])

    @staticmethod
    def _ids(text, vocab, cache):
        key = model_text(text, MAX_LENGTH)
        if key not in cache:
            chars, words = encode([key], vocab)
            cache[key] = (chars[0], words[0])
        return cache[key]

    def batch(self, index) -> tuple[list[np.ndarray], np.ndarray]:
        return [*_pad([self.a[i] for i in index]), *_pad([self.b[i] for i in index])], self.labels[index]


def _pad(rows):
    width = max(len(chars) for chars, _ in rows)
    chars = np.zeros((len(rows), width), dtype=np.int64)
    words = np.zeros((len(rows), width), dtype=np.int64)
    for i, (c, w) in enumerate(rows):
        chars[i, : len(c)] = c
        words[i, : len(w)] = w
    return chars, words


# ---------------------------------------------------------------- evaluation

def predict(network, data: Encoded, batch_size: int = 256) -> np.ndarray:
    """P(same meaning) of each pair of ``data``, from the network in eval mode (as ``fit`` evaluates
    and ``ship_weights`` leaves it)."""
    import paddle

    order = np.argsort(data.lengths, kind="stable")
    scores = np.zeros(len(order), dtype=np.float32)
    with paddle.no_grad():
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            feeds, _ = data.batch(index)
            out = network(*[paddle.to_tensor(x) for x in feeds])
            out = out[0] if isinstance(out, (tuple, list)) else out
            scores[index] = out.numpy()
    return scores


def accuracy(scores: np.ndarray, labels: np.ndarray, threshold: float = 0.5) -> float:
    return float(((scores >= threshold) == (labels > 0.5)).mean())


def best_threshold(score_sets: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The threshold maximising the mean accuracy over the selection splits (ties: closest to 0.5)."""
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    means = [np.mean([accuracy(s, y, t) for s, y in score_sets]) for t in grid]
    best = max(means)
    return float(min((t for t, m in zip(grid, means) if m >= best - 1e-12), key=lambda t: abs(t - 0.5)))


# ------------------------------------------------------------------- training

def build_network(args, vocab: Vocab):
    """The ``architecture`` manifest field the options describe, and its network."""
    from .model import build

    architecture = {"type": args.arch, "vocab_size": len(vocab.char_list), "word_vocab_size": len(vocab.word_list),
                    "char_dim": args.char_dim, "word_dim": args.word_dim, "hidden_size": args.hidden,
                    "enc_layers": args.enc_layers, "kernel_size": args.kernel, "dropout": args.dropout}
    if args.arch == "match":
        architecture.update(blocks=args.blocks, exact_match=not args.no_exact_match)
    if args.overlap_features:
        architecture.update(overlap_features=True)
    if args.rnn_size:
        architecture.update(rnn_size=args.rnn_size)
    return architecture, build(architecture)


def start_from_vectors(network, vectors: str, vocab: Vocab, seed: int) -> dict:
    """The char and word tables start from the corpus vectors (``pretraining/vectors.py``) at the
    spread of the network's own init; a token the corpus lacks keeps a random row.  What the
    manifest says of it: the vectors, their sources and the share of each vocabulary covered (also
    logged)."""
    # The vectors' keys are t2s width lower space; this model's tokens are t2s width lower with
    # whitespace and punctuation stripped, on which "space" changes nothing: a token is its own key.
    embed, coverage = network.embed, {}
    for kind, tokens_of_vocab, layer in (("char", vocab.char_list, embed.char_emb),
                                         ("word", vocab.word_list, embed.word_emb)):
        if layer is None:      # --word-dim 0
            continue
        tokens, matrix = load_vectors(vectors, kind)
        scale = float(np.sqrt(3.0) * layer.weight.numpy().std())   # the uniform init as wide as the network's own
        table, coverage[kind] = pretrained_embeddings(tokens_of_vocab, tokens, matrix, layer.weight.shape[1],
                                                      scale=scale, seed=seed)
        layer.weight.set_value(table)
    log(f"embeddings from {vectors}: " + ", ".join(f"{k} {v:.1%} of the vocabulary" for k, v in coverage.items()))
    return {"method": "corpus skip-gram char and word vectors (pretraining/vectors.py), centred, at the init's spread",
            "vectors": portable_path(vectors), "sources": vectors_report(vectors).get("sources"),
            "coverage": {k: round(v, 4) for k, v in coverage.items()}}


def fit_matcher(network, train: Encoded, index: list[int], evaluate, select: str, args, rng, *,
                evals: int | None, eval_guess: float) -> Fit:
    """Adam on the binary cross-entropy of the pairs ``index`` of ``train`` (an index listed twice is
    seen twice an epoch); warm-up, then linear decay over ``--epochs`` or what fits in ``--minutes``;
    ``evaluate()`` after each epoch (``evals``: that many over the run), the best evaluation kept."""
    import paddle
    import paddle.nn.functional as F

    def loss_of(batch):
        feeds, labels = train.batch(batch)
        logits = network.logits(*[paddle.to_tensor(x) for x in feeds])
        return F.binary_cross_entropy_with_logits(logits, paddle.to_tensor(labels))

    steps_per_epoch = -(-len(index) // args.batch_size)
    schedule = Schedule(lr=args.lr, steps_per_epoch=steps_per_epoch, epochs=args.epochs, floor=0.02,
                        warmup=min(args.warmup, steps_per_epoch), evals=evals, minutes=args.minutes,
                        first_check=40, eval_guess=eval_guess)
    return fit(network, lambda: length_batches(train.lengths, args.batch_size, rng, index), loss_of, evaluate,
               schedule=schedule, select=select, average=args.average_weights,
               quiet=getattr(args, "quiet", False))


def read_own_pairs(path: str, args) -> list:
    """The labelled pairs of a user's file; a label other than 0/1 names its line."""
    fields = [f.strip() for f in args.text_field.split(",") if f.strip()]
    if len(fields) != 2:
        from taskflow.errors import OptionError

        raise OptionError(f"--text-field names the pair's two fields, e.g. text_a,text_b; got {args.text_field!r}",
                          "text_field")
    examples = read_labelled(path, fields, args.label_field, encoding=args.encoding)
    for example in examples:
        if example.label not in ("0", "1"):
            raise TrainingDataError(
                f"{path}:{example.line}: label {example.label!r}; a pair's label is 1 (same meaning) or 0 (not): "
                "fix it, or choose another column with --label-field", path, example.line)
    return examples


def train_own_pairs(args, argv: list[str]) -> int:
    """Train on the user's --train pairs, pick the step and the threshold on --dev, write the package."""
    started = time.time()
    rng = seed_all(args.seed)
    train = read_own_pairs(args.train, args)
    if args.dev:
        dev = read_own_pairs(args.dev, args)
    else:
        train, dev = split_off_dev(train, args.dev_share, rng, label_of=lambda e: e.label)
    check_label_sets(train, dev, args.train, args.dev)
    train_pairs = [Pair(*e.texts, int(e.label)) for e in train]
    dev_pairs = [Pair(*e.texts, int(e.label)) for e in dev]

    distinct = list(dict.fromkeys(model_text(t, MAX_LENGTH) for p in train_pairs for t in (p.text1, p.text2)))
    vocab = Vocab.build(distinct, jieba_cut(), min_char=args.min_char, min_word=args.min_word, max_words=args.max_words)
    cache: dict = {}
    train_data, dev_data = Encoded(train_pairs, vocab, cache), Encoded(dev_pairs, vocab, cache)
    if not args.quiet:
        log(f"{len(train_pairs)} training and {len(dev_pairs)} dev pairs, {len(vocab.char_list)} chars, "
            f"{len(vocab.word_list)} words")

    architecture, network = build_network(args, vocab)
    pretrained = start_from_vectors(network, args.vectors, vocab, args.seed) if args.vectors else None

    def evaluate():
        scores = predict(network, dev_data)
        return {"dev_accuracy": accuracy(scores, dev_data.labels, best_threshold([(scores, dev_data.labels)]))}

    run = fit_matcher(network, train_data, list(range(len(train_pairs))), evaluate, "dev_accuracy", args, rng,
                      evals=None, eval_guess=2.0)

    with PackageDraft(args, "text_similarity", started=started) as draft:
        draft.ship_weights(network, float16=stored_in_float16(args))    # the report is on the weights that ship
        vocab.save(draft / "vocab.json")
        scores = predict(network, dev_data)
        threshold = best_threshold([(scores, dev_data.labels)])
        gold = [str(int(y)) for y in dev_data.labels]
        report = classification_report(gold, [str(int(s >= threshold)) for s in scores], ["0", "1"],
                                       {label: sum(p.label == int(label) for p in train_pairs) for label in "01"})
        report.update(threshold=threshold, accuracy_at_0_5=round(accuracy(scores, dev_data.labels), 4),
                      file=portable_path(args.dev) if args.dev else f"{args.dev_share:g} of {portable_path(args.train)}")
        print_report(report, title=f"dev report ({report['examples']} pairs, threshold {threshold})",
                     headline=f"accuracy {report['accuracy']:.4f}", quiet=args.quiet)
        draft.write({
            "description": (f"{'siamese conv bi-encoder' if args.arch == 'siamese' else 'RE2-style matcher'} over "
                            f"chars and words, trained on {portable_path(args.train)} with `taskflow train text_similarity`"),
            **package_fields(architecture, threshold),
            "training": {
                "train_file": portable_path(args.train), "dev_file": portable_path(args.dev) if args.dev else None,
                "text_fields": args.text_field.split(","), "label_field": args.label_field,
                "pairs": {"train": len(train_pairs), "dev": len(dev_pairs)},
                "vocab": {"chars": len(vocab.char_list), "words": len(vocab.word_list), "min_char": args.min_char,
                          "min_word": args.min_word},
                "command": "taskflow train text_similarity " + " ".join(argv),
                **({"pretrained_embeddings": pretrained} if pretrained else {}),
                **run.summary(), "selection": "the epoch with the best dev accuracy, at the threshold best for it",
                "batch_size": args.batch_size, "seed": args.seed,
            },
            "metrics": {"dev": report},
            "framework": framework_versions("paddlepaddle", "numpy"),
        })
    return 0


def package_fields(architecture: dict, threshold: float) -> dict:
    """The manifest fields every matcher package has, own data or the recipe's: the network, how it
    reads a pair, its labels and its threshold."""
    return {"architecture": architecture, "normalization": list(NORMALIZATION), "labels": [0, 1],
            "max_length": MAX_LENGTH, "threshold": threshold}


def stored_in_float16(args):
    """Which weights ship in float16: the embedding tables, or with ``--float16-weights`` all."""
    return (lambda name: True) if args.float16_weights else (lambda name: "_emb." in name)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    fast_cpu_math()
    return train_own_pairs(args, argv)


if __name__ == "__main__":
    sys.exit(main())
