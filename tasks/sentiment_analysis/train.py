"""Recipe: train the sentiment_analysis model package from public data.

    taskflow train sentiment_analysis --data-dir ../shared/data/sentiment --out my_model/
    # or: python -m taskflow.tasks.sentiment_analysis.train --data-dir ... --out ...

Data (see README.md in this folder for sources and licences): ChnSentiCorp
(ERNIE split), online_shopping_10_cats and waimai_10k, each a folder of
``label<TAB>text`` TSV files with a header.  Training uses their train splits
only; every choice (epoch, mixing weight) is made on ChnSentiCorp dev; the
test splits are evaluated once, at the end, and written into the manifest.

Two stages (model.py explains the network):

1. deep: the char CNN + n-gram bag, AdamW with a one-cycle schedule,
   ChnSentiCorp counted ``--chn-weight`` times per epoch, best epoch on dev;
2. wide: a linear model over hashed char 1/2/3-grams, trained on its own
   (Adam, linearly decaying rate), then ``deep_weight`` picked on dev.

``--deep-init DIR`` starts from the deep part of an existing package (its
weights.npz and vocab.txt) and runs only the wide stage.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from taskflow.training import portable_path, seed_all

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
    p = argparse.ArgumentParser(prog="taskflow train sentiment_analysis", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True, help="folder holding chnsenticorp/, online_shopping_10_cats/, waimai_10k/")
    p.add_argument("--out", required=True, help="where to write the model package")
    p.add_argument("--train-sets", default=",".join(TRAIN_SETS))
    p.add_argument("--name", default="char_cnn")
    p.add_argument("--version", default="1.0.0")
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--min-freq", type=int, default=2, help="vocabulary: chars seen at least this often")
    p.add_argument("--embed-dim", type=int, default=128)
    p.add_argument("--bigram-buckets", type=int, default=50000)
    p.add_argument("--ngram-dim", type=int, default=64)
    p.add_argument("--conv-channels", type=int, default=128)
    p.add_argument("--max-kernel", type=int, default=5)
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--chn-weight", type=int, default=2, help="count ChnSentiCorp train this many times per epoch")
    p.add_argument("--wide-buckets", type=int, default=1 << 19)
    p.add_argument("--wide-epochs", type=int, default=3)
    p.add_argument("--wide-lr", type=float, default=0.02)
    p.add_argument("--deep-init", help="package dir whose deep weights and vocab to reuse (skips stage 1)")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    import paddle
    import paddle.nn.functional as F

    from taskflow.packages import write_package
    from taskflow.predictor import save_weights

    from . import normalize
    from .model import SentimentNet

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
    dev_texts, dev_labels = read_tsv(data.joinpath(*DEV))
    dev_y = np.array(dev_labels)

    if args.deep_init:
        vocab = Path(args.deep_init, "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    else:
        counts = Counter(ch for t in texts for ch in normalize(t))
        vocab = ["[PAD]", "[UNK]"] + [c for c, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])) if n >= args.min_freq]
    ids_of = {c: i for i, c in enumerate(vocab)}

    def encode(text):
        return [ids_of.get(c, 1) for c in normalize(text)] or [1]

    def pad(rows):
        out = np.zeros((len(rows), max(map(len, rows))), dtype="int64")
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out

    def predict(fn, some_texts, batch=128):
        """As the product does it: chunks of max_len, probabilities averaged weighted by length."""
        chunks, owner = [], []
        for i, t in enumerate(some_texts):
            ids = encode(t)
            for s in range(0, len(ids), args.max_len):
                chunks.append(ids[s:s + args.max_len])
                owner.append(i)
        order = sorted(range(len(chunks)), key=lambda i: len(chunks[i]))
        probs = np.zeros((len(chunks), 2))
        with paddle.no_grad():
            for s in range(0, len(order), batch):
                picked = order[s:s + batch]
                probs[picked] = fn(paddle.to_tensor(pad([chunks[i] for i in picked]))).numpy()
        total, weight = np.zeros((len(some_texts), 2)), np.zeros(len(some_texts))
        for c, i in enumerate(owner):
            total[i] += probs[c] * len(chunks[c])
            weight[i] += len(chunks[c])
        return total / weight[:, None]

    architecture = dict(vocab_size=len(vocab), embed_dim=args.embed_dim, bigram_buckets=args.bigram_buckets,
                        trigram_buckets=0, ngram_dim=args.ngram_dim, conv_channels=args.conv_channels,
                        max_kernel=args.max_kernel, hidden_size=0, num_labels=2, dropout=args.dropout,
                        wide_buckets=args.wide_buckets, deep_weight=1.0)
    net = SentimentNet(**architecture)
    train_ids = [encode(t)[: 100_000] for t in texts]
    train_y = np.array(labels, dtype="int64")
    history = {"deep": [], "wide": []}

    # ---------------------------------------------------------------- stage 1: deep
    deep_params = [p for n, p in net.named_parameters() if not n.startswith("wide_")]
    if args.deep_init:
        with np.load(Path(args.deep_init, "weights.npz")) as stored:
            state = net.state_dict()
            for key in stored.files:
                if not key.startswith("wide_"):
                    state[key] = paddle.to_tensor(stored[key].astype("float32"))
            net.set_state_dict(state)
        history["deep"].append({"from": portable_path(args.deep_init)})
    else:
        rows = list(range(len(train_ids))) + list(range(chn_rows)) * (args.chn_weight - 1)

        def epoch_batches():
            # Length-bucketed batches (sorted inside random pools) keep CPU padding waste low.
            order = list(rows)
            rng.shuffle(order)
            pool, batches = args.batch_size * 50, []
            for s in range(0, len(order), pool):
                chunk = sorted(order[s:s + pool], key=lambda i: min(len(train_ids[i]), args.max_len))
                batches += [chunk[j:j + args.batch_size] for j in range(0, len(chunk), args.batch_size)]
            rng.shuffle(batches)
            return batches

        def crop(ids):
            # A random window, so long reviews teach their middles and ends too.
            if len(ids) <= args.max_len:
                return ids
            start = rng.randint(0, len(ids) - args.max_len)
            return ids[start:start + args.max_len]

        steps = len(epoch_batches())
        schedule = paddle.optimizer.lr.OneCycleLR(max_learning_rate=args.lr, total_steps=steps * args.epochs, phase_pct=0.1)
        optimizer = paddle.optimizer.AdamW(learning_rate=schedule, parameters=deep_params,
                                           grad_clip=paddle.nn.ClipGradByGlobalNorm(5.0))
        best = (-1.0, None)
        for epoch in range(1, args.epochs + 1):
            net.train()
            t0 = time.time()
            for batch in epoch_batches():
                probs = net.deep_probs(paddle.to_tensor(pad([crop(train_ids[i]) for i in batch])))
                loss = F.nll_loss(paddle.log(paddle.clip(probs, 1e-7, 1.0)), paddle.to_tensor(train_y[batch]))
                loss.backward()
                optimizer.step()
                optimizer.clear_grad()
                schedule.step()
            net.eval()
            acc = float((predict(net.deep_probs, dev_texts).argmax(1) == dev_y).mean())
            history["deep"].append({"epoch": epoch, "dev": round(acc, 4), "seconds": round(time.time() - t0)})
            print("deep", history["deep"][-1], flush=True)
            if acc > best[0]:
                best = (acc, {k: v.numpy().copy() for k, v in net.state_dict().items() if not k.startswith("wide_")})
        state = net.state_dict()
        state.update({k: paddle.to_tensor(v) for k, v in best[1].items()})
        net.set_state_dict(state)

    # ---------------------------------------------------------------- stage 2: wide
    net.eval()
    deep_dev = predict(net.deep_probs, dev_texts)
    wide_params = [p for n, p in net.named_parameters() if n.startswith("wide_")]
    wide_rows = [ids[: args.max_len] for ids in train_ids]
    batch_size = 128
    steps = args.wide_epochs * ((len(wide_rows) + batch_size - 1) // batch_size)
    decay = paddle.optimizer.lr.PolynomialDecay(args.wide_lr, steps, args.wide_lr / 20)
    optimizer = paddle.optimizer.Adam(learning_rate=decay, parameters=wide_params)
    best = (-1.0, None, None)
    mixes = (0.2, 0.3, 0.4, 0.5, 0.6)
    for epoch in range(1, args.wide_epochs + 1):
        order = list(range(len(wide_rows)))
        rng.shuffle(order)
        for s in range(0, len(order), batch_size):
            batch = order[s:s + batch_size]
            logits = net.wide_logits(paddle.to_tensor(pad([wide_rows[i] for i in batch])))
            loss = F.cross_entropy(logits, paddle.to_tensor(train_y[batch]))
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            decay.step()
        wide_dev = predict(lambda x: F.softmax(net.wide_logits(x), axis=-1), dev_texts)
        scores = {m: float(((m * deep_dev + (1 - m) * wide_dev).argmax(1) == dev_y).mean()) for m in mixes}
        history["wide"].append({"epoch": epoch, "wide_only_dev": round(float((wide_dev.argmax(1) == dev_y).mean()), 4),
                                "mixed_dev": {str(m): round(a, 4) for m, a in scores.items()}})
        print("wide", history["wide"][-1], flush=True)
        mix, acc = max(scores.items(), key=lambda kv: kv[1])
        if acc > best[0]:
            best = (acc, mix, {k: v.numpy().copy() for k, v in net.state_dict().items() if k.startswith("wide_")})
    state = net.state_dict()
    state.update({k: paddle.to_tensor(v) for k, v in best[2].items()})
    net.set_state_dict(state)
    net.deep_weight = architecture["deep_weight"] = best[1]

    # ------------------------------------------------------------- package + report
    with tempfile.TemporaryDirectory() as tmp:
        weights, vocab_file = Path(tmp, "weights.npz"), Path(tmp, "vocab.txt")
        # Embedding tables (including the wide n-gram tables) are stored as float16.
        save_weights(net, weights, float16=lambda name: "emb" in name or name.startswith("wide_") and "bias" not in name)
        vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
        # Report what ships: reload the float16 weights before evaluating.
        from taskflow.predictor import load_weights

        shipped = SentimentNet(**architecture)
        load_weights(shipped, weights)
        shipped.eval()
        metrics = {}
        for key, rel in REPORT:
            t, y = read_tsv(data / rel)
            metrics[key] = round(float((predict(shipped, t).argmax(1) == np.array(y)).mean()), 4)
        print("metrics", metrics, flush=True)
        manifest = write_package(args.out, {
            "task": "sentiment_analysis",
            "name": args.name,
            "version": args.version,
            "description": "char CNN + hashed n-gram bag (deep) mixed with a linear hashed char 1-3-gram model (wide)",
            "architecture": architecture,
            "labels": ["negative", "positive"],
            "max_length": args.max_len,
            "normalization": "q2b (full-width to half-width) + ASCII lower-case, per character",
            "training": {
                "train_files": [f"{s}/train.tsv" for s in sets],
                "selection": "ChnSentiCorp dev: deep epoch, wide epoch and deep_weight",
                "chn_weight": args.chn_weight, "epochs": args.epochs, "wide_epochs": args.wide_epochs,
                "seed": args.seed, "history": history, "command": "taskflow train sentiment_analysis " + " ".join(argv or sys.argv[1:]),
                "seconds": round(time.time() - started),
            },
            "metrics": metrics,
            "framework": {"paddlepaddle": paddle.__version__},
        }, {"weights.npz": weights, "vocab.txt": vocab_file})
    print(f"wrote {args.out} ({manifest.name} {manifest.version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
