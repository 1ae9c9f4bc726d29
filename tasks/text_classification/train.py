"""Train a text_classification package on your own labelled file.

    taskflow train text_classification --train reviews.csv --dev reviews_dev.csv \\
        --text-field review --label-field stars --out my_model/
    # then: Taskflow("text_classification", task_path="my_model/")

Files: .csv / .tsv (a header row naming the columns) or .jsonl (an object a line),
read like the batch job's input (taskflow.readers): any encoding (--encoding), a
UTF-8 BOM dropped, a bad line an error naming it.  Labels are any strings or
integers ("1".."5" stars, or names); two or more.  Without --dev, --dev-share of
the training file is held out (from every label) to pick the epoch and report on.

The network is model.py's char CNN + n-gram bag (sentiment_analysis's), sized for
small data; the vocabulary is the characters of the --train file.  Each epoch ends
with an evaluation on dev; the best epoch ships, and training stops after
--patience epochs without a better one, after --epochs, or when --minutes is spent.
The dev report (accuracy; per label: train and dev examples, precision, recall) is
printed and written into the package's manifest under metrics.dev.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from typing import Callable

import numpy as np

from taskflow.dev_report import classification_report, print_report
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import COUNT, DROPOUT, POSITIVE_INT, option_number, recipe_parser
from taskflow.training import Fit, Schedule, fit, length_batches, log, seed_all
from taskflow.training_data import add_own_data_options, check_label_sets, read_labelled, sorted_labels, split_off_dev

from . import NORMALIZATION, normalize

# train_own_data is sentiment_analysis's own-data trainer too; the char CNN's options, vocabulary,
# encoding and architecture are also what the recipe of the bundled sentiment model builds on.
__all__ = ["Chars", "build_vocab", "add_network_options", "check_network_options", "add_own_data_training",
           "network_architecture",
           "SMALL_DATA", "train_own_data", "main"]

# What a user's file of a few hundred to a few thousand rows trains best with, on a CPU in minutes:
# a network a fifth of the shipped sentiment model's size, every char of the file in the vocabulary,
# and enough epochs for dev to pick from.
SMALL_DATA = dict(max_len=256, min_freq=1, embed_dim=64, bigram_buckets=20000, ngram_dim=32, conv_channels=64,
                  max_kernel=3, dropout=0.3, lr=3e-3, batch_size=32, epochs=20)


def add_network_options(parser: argparse.ArgumentParser, *, max_len: int, min_freq: int, embed_dim: int,
                        bigram_buckets: int, ngram_dim: int, conv_channels: int, max_kernel: int, dropout: float,
                        lr: float, batch_size: int, epochs: int) -> None:
    """The char CNN's size and training options, with a recipe's defaults."""
    parser.add_argument("--max-len", type=POSITIVE_INT, default=max_len, help="chars per window (default: %(default)s)")
    parser.add_argument("--min-freq", type=POSITIVE_INT, default=min_freq,
                        help="vocabulary: chars seen at least this often")
    parser.add_argument("--embed-dim", type=POSITIVE_INT, default=embed_dim)
    parser.add_argument("--bigram-buckets", type=POSITIVE_INT, default=bigram_buckets)
    parser.add_argument("--ngram-dim", type=POSITIVE_INT, default=ngram_dim)
    parser.add_argument("--conv-channels", type=POSITIVE_INT, default=conv_channels)
    parser.add_argument("--max-kernel", type=POSITIVE_INT, default=max_kernel)
    parser.add_argument("--rnn-size", type=COUNT, default=0,
                        help="a BiGRU of this size per direction beside the CNN (0: none; default: %(default)s)")
    parser.add_argument("--negation-window", type=COUNT, default=0,
                        help="read the chars up to this many after 不/没/无 (to a clause break) as negated, with "
                             "n-gram weights of their own (model.py; 0: off; default: %(default)s)")
    parser.add_argument("--polarity-head", action="store_true",
                        help="also score the text as attention-weighted char polarities that "
                             "negators flip and contrast connectives reweigh (model.py; needs --negation-window)")
    parser.add_argument("--dropout", type=DROPOUT, default=dropout)
    parser.add_argument("--lr", type=option_number(float, at_least=0), default=lr)
    parser.add_argument("--batch-size", type=POSITIVE_INT, default=batch_size)
    parser.add_argument("--epochs", type=POSITIVE_INT, default=epochs, help="at most this many epochs (default: %(default)s)")


def check_network_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the options cannot say one at a time."""
    if args.polarity_head and not args.negation_window:
        parser.error("--polarity-head reads the negation scopes: give --negation-window N too (e.g. 3)")


def add_own_data_training(parser: argparse.ArgumentParser) -> None:
    add_own_data_options(parser, text_field="text", label_field="label")
    parser.add_argument("--patience", type=POSITIVE_INT, default=4,
                        help="own data: stop after this many epochs without a better dev accuracy (default: %(default)s)")


# Negation scope (model.py): the negators, and what ends a clause, as the normaliser leaves them
# (full-width punctuation is half-width there).  非, 别 and 未 are left out: 非常, 特别, 未来.
NEGATORS = "不没无"
CLAUSE_BREAKS = ",.!?;:、。~…\n"
# Words that hold a negator's char and negate nothing after them: but, not only, regardless,
# unexpectedly (没想到这么好吃), have to, incomparably (无比好吃), slang intensifiers (不要太好吃, 无敌),
# beyond words (没得说), can't help (不禁), no doubt (无疑).
NEGATION_EXCEPTIONS = ("不过", "不仅", "不但", "不光", "不只", "不止", "不管", "不论", "无论", "没想到", "不得不",
                       "无比", "不要太", "无敌", "没得说", "不禁", "无疑")
# Contrast connectives: the clause after one decides (polarity head).  但 covers 但是 and 但; 可 alone
# is 可以.
CONTRASTS = ("但", "却", "可是", "不过")


def network_architecture(args, vocab: list[str], num_labels: int, wide_buckets: int = 0) -> dict:
    """The SentimentNet arguments the options give; recorded in the manifest as they are."""
    architecture = dict(vocab_size=len(vocab), embed_dim=args.embed_dim, bigram_buckets=args.bigram_buckets,
                        trigram_buckets=0, ngram_dim=args.ngram_dim, conv_channels=args.conv_channels,
                        max_kernel=args.max_kernel, hidden_size=0, num_labels=num_labels, dropout=args.dropout,
                        wide_buckets=wide_buckets, deep_weight=1.0)
    if args.rnn_size:
        architecture["rnn_size"] = args.rnn_size
    ids = {c: i for i, c in enumerate(vocab)}
    if args.negation_window:
        architecture.update(negator_ids=[ids[c] for c in NEGATORS if c in ids],
                            clause_break_ids=[ids[c] for c in CLAUSE_BREAKS if c in ids],
                            negation_window=args.negation_window,
                            negation_exception_ids=[[ids[c] for c in word] for word in NEGATION_EXCEPTIONS
                                                    if all(c in ids for c in word)])
    if args.polarity_head:
        if not args.negation_window:
            raise SystemExit("--polarity-head needs --negation-window N")
        architecture.update(polarity_head=True, contrast_ids=[[ids[c] for c in word] for word in CONTRASTS
                                                              if all(c in ids for c in word)])
    return architecture


class Chars:
    """Texts as the network's char ids, and its predictions over whole texts."""

    def __init__(self, vocab: list[str], max_len: int, num_labels: int = 2, normalizer=normalize):
        self.ids_of = {c: i for i, c in enumerate(vocab)}
        self.max_len = max_len
        self.num_labels = num_labels
        self.normalize = normalizer

    def encode(self, text: str) -> list[int]:
        return [self.ids_of.get(c, 1) for c in self.normalize(text)] or [1]

    @staticmethod
    def pad(rows) -> np.ndarray:
        out = np.zeros((len(rows), max(map(len, rows))), dtype="int64")
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out

    def predict(self, fn, texts: list[str], batch: int = 128) -> np.ndarray:
        """Probabilities of each text: it is cut into windows of ``max_len`` chars wherever they
        fall (the product cuts at sentence ends instead), and its windows' probabilities are
        averaged, weighted by their length."""
        import paddle

        chunks, owner = [], []
        for i, t in enumerate(texts):
            ids = self.encode(t)
            for s in range(0, len(ids), self.max_len):
                chunks.append(ids[s:s + self.max_len])
                owner.append(i)
        order = sorted(range(len(chunks)), key=lambda i: len(chunks[i]))
        probs = np.zeros((len(chunks), self.num_labels))
        with paddle.no_grad():
            for s in range(0, len(order), batch):
                picked = order[s:s + batch]
                probs[picked] = fn(paddle.to_tensor(self.pad([chunks[i] for i in picked]))).numpy()
        total, weight = np.zeros((len(texts), self.num_labels)), np.zeros(len(texts))
        for c, i in enumerate(owner):
            total[i] += probs[c] * len(chunks[c])
            weight[i] += len(chunks[c])
        return total / weight[:, None]

    def accuracy(self, fn, texts: list[str], labels) -> float:
        return float((self.predict(fn, texts).argmax(1) == np.asarray(labels)).mean())


def build_vocab(texts: list[str], min_freq: int, normalizer=normalize) -> list[str]:
    counts = Counter(ch for t in texts for ch in normalizer(t))
    return ["[PAD]", "[UNK]"] + [c for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])) if n >= min_freq]


def fit_epochs(net, chars: Chars, train_ids: list[list[int]], train_y: np.ndarray, dev_texts: list[str],
               dev_y: np.ndarray, args, rng) -> Fit:
    """Adam over length-bucketed batches, dev accuracy after each epoch; the best epoch's weights are put back."""
    import paddle
    import paddle.nn.functional as F

    def loss_of(batch):
        rows = []
        for i in batch:
            ids = train_ids[i]
            # A random window of a long text, so its middle and end teach too.
            start = rng.randint(0, len(ids) - args.max_len) if len(ids) > args.max_len else 0
            rows.append(ids[start:start + args.max_len])
        probs = net(paddle.to_tensor(chars.pad(rows)))
        return F.nll_loss(paddle.log(paddle.clip(probs, 1e-7, 1.0)), paddle.to_tensor(train_y[batch]))

    lengths = [min(len(ids), args.max_len) for ids in train_ids]
    schedule = Schedule(lr=args.lr, steps_per_epoch=-(-len(train_ids) // args.batch_size), epochs=args.epochs,
                        minutes=args.minutes)
    return fit(net, lambda: length_batches(lengths, args.batch_size, rng), loss_of,
               lambda: {"dev_accuracy": chars.accuracy(net, dev_texts, dev_y)}, schedule=schedule,
               select="dev_accuracy", patience=args.patience, average=args.average_weights,
               quiet=args.quiet)


def train_own_data(args, task: str, argv: list[str], *, label_names: Callable[[list[str]], list[str]] = list) -> int:
    """Train the char CNN on ``args.train`` (and ``args.dev``) and write a ``task`` package whose
    labels are ``label_names(the file's labels, sorted)``."""
    from .model import SentimentNet

    started = time.time()
    rng = seed_all(args.seed)
    fields = [f.strip() for f in args.text_field.split(",") if f.strip()]
    if len(fields) != 1:
        from taskflow.errors import OptionError

        raise OptionError(f"--text-field names one field for {task}, got {args.text_field!r}", "text_field")
    train = read_labelled(args.train, fields, args.label_field, encoding=args.encoding)
    if args.dev:
        dev = read_labelled(args.dev, fields, args.label_field, encoding=args.encoding)
    else:
        train, dev = split_off_dev(train, args.dev_share, rng, label_of=lambda e: e.label)
    check_label_sets(train, dev, args.train, args.dev)
    found = sorted_labels(e.label for e in train)
    labels = label_names(found)
    index = {label: i for i, label in enumerate(found)}

    vocab = build_vocab([e.texts for e in train], args.min_freq)
    chars = Chars(vocab, args.max_len, len(labels))
    architecture = network_architecture(args, vocab, len(labels))
    net = SentimentNet(**architecture)
    train_ids = [chars.encode(e.texts) for e in train]
    train_y = np.array([index[e.label] for e in train], dtype="int64")
    dev_texts = [e.texts for e in dev]
    dev_y = np.array([index[e.label] for e in dev], dtype="int64")
    if not args.quiet:
        log(f"{len(train)} training and {len(dev)} dev examples, {len(labels)} labels, {len(vocab)} chars")
    run = fit_epochs(net, chars, train_ids, train_y, dev_texts, dev_y, args, rng)

    with PackageDraft(args, task, started=started) as draft:
        draft.ship_weights(net, float16=lambda name: "emb" in name)   # the report is on the weights that ship
        (draft / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        predicted = chars.predict(net, dev_texts).argmax(1)
        counts = Counter(labels[index[e.label]] for e in train)
        report = classification_report([labels[i] for i in dev_y], [labels[i] for i in predicted], labels, counts)
        report["file"] = portable_path(args.dev) if args.dev else f"{args.dev_share:g} of {portable_path(args.train)}"
        print_report(report, title=f"dev report ({report['examples']} examples, best epoch {run.best['epoch']})",
                     headline=f"accuracy {report['accuracy']:.4f}", quiet=args.quiet)
        draft.write({
            "description": f"char CNN + hashed n-gram bag trained on {portable_path(args.train)} "
                           f"with `taskflow train {task}`",
            "architecture": {"type": "sentiment_cnn", **architecture},
            "labels": labels,
            "max_length": args.max_len,
            "normalization": list(NORMALIZATION),
            "training": {
                "train_file": portable_path(args.train), "dev_file": portable_path(args.dev) if args.dev else None,
                "text_field": fields[0], "label_field": args.label_field,
                "examples": {"train": len(train), "dev": len(dev)},
                "labels_in_file": found, **run.summary(), "seed": args.seed,
                "hyper_parameters": {k: getattr(args, k) for k in (
                    "max_len", "min_freq", "embed_dim", "bigram_buckets", "ngram_dim", "conv_channels", "max_kernel",
                    "dropout", "lr", "batch_size", "epochs", "patience", "minutes")},
                "command": f"taskflow train {task} " + " ".join(argv),
                "seconds": round(time.time() - started),
            },
            "metrics": {"dev": report},
            "framework": framework_versions("paddlepaddle"),
        })
    return 0


def parse_args(argv: list[str]):
    parser = recipe_parser("text_classification", __doc__, data=None, name=None)
    add_own_data_training(parser)
    add_network_options(parser, **SMALL_DATA)
    args = parser.parse_args(argv)
    if not args.train:
        parser.error("--train FILE is required: text_classification trains on your own labelled file")
    check_network_options(parser, args)
    return args


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    return train_own_data(parse_args(argv), "text_classification", argv)


if __name__ == "__main__":
    sys.exit(main())
