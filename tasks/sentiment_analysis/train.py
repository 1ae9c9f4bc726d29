"""Recipe: train the sentiment_analysis model package from public data.

    taskflow train sentiment_analysis --data-dir ../shared/data/sentiment --out my_model/
    # or: python -m taskflow.tasks.sentiment_analysis.train --data-dir ... --out ...

Data (see README.md in this folder for sources and licences): ChnSentiCorp
(ERNIE split), online_shopping_10_cats and waimai_10k, each a folder of
``label<TAB>text`` TSV files with a header.  Training uses their train splits
only; every choice (epoch, mixing weight) is made on ChnSentiCorp dev; the
test splits are evaluated once, at the end, and written into the manifest.

Two stages (model.py explains the network):

1. deep: the char CNN + n-gram bag, AdamW (warm-up over the first tenth of
   the steps, then linear decay), ChnSentiCorp counted ``--chn-weight`` times
   per epoch, best epoch on dev;
2. wide: a linear model over hashed char 1/2/3-grams, trained on its own
   (Adam, linearly decaying rate), then ``deep_weight`` picked on dev.

``--deep-init DIR`` starts from the deep part of an existing package (its
weights.npz and vocab.txt) and runs only the wide stage.

Your own labelled reviews instead (the text_classification recipe, with this task's name):

    taskflow train sentiment_analysis --train my.csv --dev my_dev.csv \
        --text-field review --label-field stars --out my_model/

Labels are the file's own ("1".."5" stars, or names); a file labelled 0/1 (as
ChnSentiCorp is) gives the labels negative/positive.  See
``taskflow train text_classification --help`` for the formats and options.
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

from taskflow.tasks.text_classification.train import (SMALL_DATA, Chars, add_network_options, add_own_data_training,
                                                      build_vocab, train_own_data)
from taskflow.training import (PackageDraft, Schedule, fit, framework_versions, length_batches, log, own_data_defaults,
                               portable_path, recipe_parser, restore, seed_all)

from . import NORMALIZATION

TRAIN_SETS = ("chnsenticorp", "online_shopping_10_cats", "waimai_10k")
DEV = ("chnsenticorp", "dev.tsv")
REPORT = [
    ("chnsenticorp_dev", "chnsenticorp/dev.tsv"),
    ("chnsenticorp_test", "chnsenticorp/test.tsv"),
    ("chnsenticorp_test_dedup", "chnsenticorp/test.dedup.tsv"),
    ("online_shopping_test", "online_shopping_10_cats/test.tsv"),
    ("waimai_test", "waimai_10k/test.tsv"),
]


def read_tsv(path: Path) -> tuple[list[str], list[int]]:
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]


def parse_args(argv):
    p = recipe_parser("sentiment_analysis", __doc__, name="char_cnn",
                      data="folder holding chnsenticorp/, online_shopping_10_cats/, waimai_10k/")
    p.add_argument("--train-sets", default=",".join(TRAIN_SETS))
    add_network_options(p, max_len=256, min_freq=2, embed_dim=128, bigram_buckets=50000, ngram_dim=64,
                        conv_channels=128, max_kernel=5, dropout=0.3, lr=2e-3, batch_size=64, epochs=4)
    p.add_argument("--chn-weight", type=int, default=2, help="count ChnSentiCorp train this many times per epoch")
    p.add_argument("--wide-buckets", type=int, default=1 << 19)
    p.add_argument("--wide-epochs", type=int, default=3)
    p.add_argument("--wide-lr", type=float, default=0.02)
    p.add_argument("--deep-init", help="package dir whose deep weights and vocab to reuse (skips stage 1)")
    add_own_data_training(p)
    own_data_defaults(p, argv, SMALL_DATA)
    args = p.parse_args(argv)
    if bool(args.data_dir) == bool(args.train):
        p.error("give --data-dir DIR (the project's data layout) or --train FILE (your own labelled file), one of them")
    return args


def sentiment_labels(found: list[str]) -> list[str]:
    """A file labelled 0/1 (ChnSentiCorp's convention) trains the labels negative/positive, as shipped."""
    return ["negative", "positive"] if found == ["0", "1"] else found


def is_wide(name: str) -> bool:
    return name.startswith("wide_")


def load_deep(net, package_dir: str) -> list[dict]:
    """Stage 1 taken from an existing package: its deep (non-wide) weights."""
    with np.load(Path(package_dir, "weights.npz")) as stored:
        restore(net, {k: stored[k].astype("float32") for k in stored.files if not is_wide(k)})
    return [{"from": portable_path(package_dir)}]


def train_deep(net, chars: Chars, train_ids, train_y, rows: list[int], dev, args, rng) -> list[dict]:
    """Stage 1: the CNN + n-gram bag, AdamW, warm-up then linear decay; keeps the best epoch on dev."""
    import paddle
    import paddle.nn.functional as F

    def crop(ids):
        # A random window, so long reviews teach their middles and ends too.
        if len(ids) <= args.max_len:
            return ids
        start = rng.randint(0, len(ids) - args.max_len)
        return ids[start:start + args.max_len]

    def loss_of(batch):
        probs = net.deep_probs(paddle.to_tensor(chars.pad([crop(train_ids[i]) for i in batch])))
        return F.nll_loss(paddle.log(paddle.clip(probs, 1e-7, 1.0)), paddle.to_tensor(train_y[batch]))

    lengths = [min(len(ids), args.max_len) for ids in train_ids]
    steps_per_epoch = -(-len(rows) // args.batch_size)
    schedule = Schedule(lr=args.lr, steps_per_epoch=steps_per_epoch, epochs=args.epochs,
                        warmup=max(1, steps_per_epoch * args.epochs // 10), floor=0.05)
    run = fit(net, lambda: length_batches(lengths, args.batch_size, rng, rows), loss_of,
              lambda: {"dev": chars.accuracy(net.deep_probs, *dev)}, schedule=schedule, select="dev",
              optimizer="AdamW", parameters=[p for n, p in net.named_parameters() if not is_wide(n)],
              keep=lambda name: not is_wide(name), description="deep")
    return run.history


def train_wide(net, chars: Chars, train_ids, train_y, dev, args, rng) -> tuple[list[dict], float]:
    """Stage 2: the linear hashed n-gram model on its own (Adam, linear decay); then the
    ``deep_weight`` that mixes the two best on dev.  Returns the history and that weight."""
    import paddle
    import paddle.nn.functional as F

    net.eval()
    dev_texts, dev_y = dev[0], np.array(dev[1])
    deep_dev = chars.predict(net.deep_probs, dev_texts)
    wide_rows = [ids[: args.max_len] for ids in train_ids]

    def evaluate():
        wide_dev = chars.predict(lambda x: F.softmax(net.wide_logits(x), axis=-1), dev_texts)
        mixed = {m: float(((m * deep_dev + (1 - m) * wide_dev).argmax(1) == dev_y).mean())
                 for m in (0.2, 0.3, 0.4, 0.5, 0.6)}
        mix = max(mixed, key=mixed.get)
        return {"wide_only_dev": float((wide_dev.argmax(1) == dev_y).mean()),
                "mixed_dev": {str(m): round(a, 4) for m, a in mixed.items()}, "dev": mixed[mix], "deep_weight": mix}

    def loss_of(batch):
        logits = net.wide_logits(paddle.to_tensor(chars.pad([wide_rows[i] for i in batch])))
        return F.cross_entropy(logits, paddle.to_tensor(train_y[batch]))

    batch_size, lengths = 128, [len(row) for row in wide_rows]
    schedule = Schedule(lr=args.wide_lr, steps_per_epoch=-(-len(wide_rows) // batch_size), epochs=args.wide_epochs,
                        floor=0.05)
    run = fit(net, lambda: length_batches(lengths, batch_size, rng), loss_of, evaluate, schedule=schedule,
              select="dev", parameters=[p for n, p in net.named_parameters() if is_wide(n)], keep=is_wide,
              grad_clip=None, description="wide")
    return run.history, run.best["deep_weight"]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.train:
        return train_own_data(args, "sentiment_analysis", argv, label_names=sentiment_labels)
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
    dev = read_tsv(data.joinpath(*DEV))
    if args.deep_init:
        vocab = Path(args.deep_init, "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    else:
        vocab = build_vocab(texts, args.min_freq)
    chars = Chars(vocab, args.max_len)

    architecture = dict(vocab_size=len(vocab), embed_dim=args.embed_dim, bigram_buckets=args.bigram_buckets,
                        trigram_buckets=0, ngram_dim=args.ngram_dim, conv_channels=args.conv_channels,
                        max_kernel=args.max_kernel, hidden_size=0, num_labels=2, dropout=args.dropout,
                        wide_buckets=args.wide_buckets, deep_weight=1.0)
    net = SentimentNet(**architecture)
    train_ids = [chars.encode(t)[: 100_000] for t in texts]
    train_y = np.array(labels, dtype="int64")
    if args.deep_init:
        history = {"deep": load_deep(net, args.deep_init)}
    else:
        rows = list(range(len(train_ids))) + list(range(chn_rows)) * (args.chn_weight - 1)
        history = {"deep": train_deep(net, chars, train_ids, train_y, rows, dev, args, rng)}
    history["wide"], net.deep_weight = train_wide(net, chars, train_ids, train_y, dev, args, rng)
    architecture["deep_weight"] = net.deep_weight

    with PackageDraft(args, "sentiment_analysis", started=started) as draft:
        # Embedding tables (including the wide n-gram tables) are stored as float16; the report is on those.
        draft.ship_weights(net, float16=lambda name: "emb" in name or is_wide(name) and "bias" not in name)
        (draft / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        metrics = {key: round(chars.accuracy(net, *read_tsv(data / rel)), 4) for key, rel in REPORT}
        log(f"metrics {metrics}")
        draft.write({
            "description": "char CNN + hashed n-gram bag (deep) mixed with a linear hashed char 1-3-gram model (wide)",
            "architecture": {"type": "sentiment_cnn", **architecture},
            "labels": ["negative", "positive"],
            "max_length": args.max_len,
            "normalization": list(NORMALIZATION),
            "training": {
                "train_files": [f"{s}/train.tsv" for s in sets],
                "selection": "ChnSentiCorp dev: deep epoch, wide epoch and deep_weight",
                "chn_weight": args.chn_weight, "epochs": args.epochs, "wide_epochs": args.wide_epochs,
                "seed": args.seed, "history": history, "command": "taskflow train sentiment_analysis " + " ".join(argv or sys.argv[1:]),
                "seconds": round(time.time() - started),
            },
            "metrics": metrics,
            "framework": framework_versions("paddlepaddle"),
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
