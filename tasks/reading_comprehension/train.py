"""Recipe: CMRC 2018 train -> DrQA-style char reader -> model package.

    OMP_NUM_THREADS=2 taskflow train reading_comprehension --data-dir ../shared/data/mrc/cmrc2018 \\
        --out resources/reading_comprehension/drqa_char --minutes 40

Data (SQuAD-format JSON; CMRC 2018, Cui et al., EMNLP 2019, CC BY-SA 4.0):

* training: ``train.json`` (10,142 questions);
* model selection (the epoch): ``trial.json`` (1,002 questions);
* report only: ``dev.json`` (3,219 questions), never trained or selected on.

Each training example is a window of ``--window`` chars of its context with
a random offset that keeps the answer inside; with probability
``--neg-rate`` the example also yields a window of the same context without
the answer, whose target is the NULL position.  Windows are re-drawn every
epoch.  Selection and report figures run the task's own inference (sliding
windows of ``--max-seq-len`` chars, ``--doc-stride`` overlap, spans merged
across windows) and CMRC 2018's official scoring (``metrics.py``).

``--minutes`` is a wall-clock budget for the training loop: after a few
steps the recipe measures its speed and fits the steps (and the learning-rate
schedule) into it.  ``--no-features`` / ``--no-align`` train the ablations.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from taskflow.training import (PackageDraft, Schedule, fast_cpu_math, fit, framework_versions, jieba_cut,
                               length_batches, log, portable_path, recipe_parser, seed_all)

from .data import FEATURES, NORMALIZATION, Vocab, encode, merge, normalise, prepare, segment_context, windows, best_spans
from .metrics import evaluate

SOURCE = ("CMRC 2018 (Yiming Cui et al., A Span-Extraction Dataset for Chinese Machine Reading Comprehension, "
          "EMNLP-IJCNLP 2019), CC BY-SA 4.0; github.com/ymcui/cmrc2018")


def parse_args(argv):
    parser = recipe_parser("reading_comprehension", __doc__, name="drqa_char", seed=1234,
                           data="folder with train.json, trial.json, dev.json (CMRC 2018)")
    parser.add_argument("--train", help="default: DATA_DIR/train.json")
    parser.add_argument("--selection", help="default: DATA_DIR/trial.json")
    parser.add_argument("--report", help="default: DATA_DIR/dev.json ('' to skip)")
    parser.add_argument("--char-dim", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=96)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--question-layers", type=int, default=1)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--no-features", action="store_true", help="ablation: no match / word features")
    parser.add_argument("--no-align", action="store_true", help="ablation: no aligned question embedding")
    parser.add_argument("--pretrain-files", nargs="*", default=[],
                        help="raw text files whose chars (with the training texts) pre-train the char vectors")
    parser.add_argument("--no-pretrain", action="store_true", help="random char vectors")
    parser.add_argument("--min-char", type=int, default=2)
    parser.add_argument("--min-word", type=int, default=2)
    parser.add_argument("--window", type=int, default=256, help="training window, chars")
    parser.add_argument("--neg-rate", type=float, default=0.3, help="share of examples that add a no-answer window")
    parser.add_argument("--max-seq-len", type=int, default=512, help="inference window (stored in the manifest)")
    parser.add_argument("--doc-stride", type=int, default=128, help="inference window overlap")
    parser.add_argument("--max-answer-len", type=int, default=64)
    parser.add_argument("--max-question-len", type=int, default=64)
    parser.add_argument("--max-train", type=int, help="train on the first N questions (quick comparisons)")
    parser.add_argument("--epochs", type=float, default=8.0)
    parser.add_argument("--minutes", type=float, help="wall-clock budget for the training loop")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--evals", type=int, default=8, help="selection evaluations over the run")
    return parser.parse_args(argv)


# ---------------------------------------------------------------------- data

def read_squad(path) -> list[dict]:
    """Questions of a SQuAD-format file: ``{id, context, question, answers: [str], start}``."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)["data"]
    out = []
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                out.append({"id": qa["id"], "context": paragraph["context"], "question": qa["question"],
                            "answers": answers, "start": qa["answers"][0]["answer_start"] if answers else -1})
    return out


class Examples:
    """Questions with their prepared contexts (features computed once, windows drawn per epoch)."""

    def __init__(self, rows: list[dict], vocab: Vocab, max_question_len: int, words_cache: dict):
        self.rows = rows
        self.prepared = []
        for row in rows:
            context = normalise(row["context"])
            if context not in words_cache:
                words_cache[context] = segment_context(context, vocab)
            self.prepared.append(prepare(row["context"], row["question"], vocab, max_question_len,
                                         context_words=words_cache[context]))


def training_windows(examples: Examples, window: int, neg_rate: float, rng: random.Random):
    """``(prepared, start, end, target_start, target_end)`` for one epoch; targets index the
    network's positions (0 = NULL, window char i at i + 1)."""
    out = []
    for row, p in zip(examples.rows, examples.prepared):
        s = row["start"]
        e = s + len(row["answers"][0])
        n = len(p.context)
        if s < 0 or e - s > window:
            continue
        if n <= window:
            out.append((p, 0, n, s + 1, e))
            continue
        offset = rng.randint(max(0, e - window), min(s, n - window))
        out.append((p, offset, offset + window, s - offset + 1, e - offset))
        if rng.random() < neg_rate:
            choices = []
            if s >= window:
                choices.append(rng.randint(0, s - window))
            if n - e >= window:
                choices.append(rng.randint(e, n - window))
            if choices:
                offset = rng.choice(choices)
                out.append((p, offset, offset + window, 0, 0))
    return out


# --------------------------------------------------------- char embeddings

def read_plain_texts(paths) -> list[str]:
    """Lines of raw text files for embedding pre-training (``word/tag`` tags and whitespace removed)."""
    import re

    tag = re.compile(r"/[A-Za-z]+(?=\s|$)")
    out = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = "".join(tag.sub("", line).split())
                if line:
                    out.append(normalise(line))
    return out


def char_vectors(texts, vocab: Vocab, dim: int, window: int = 3, seed: int = 0) -> np.ndarray:
    """Char vectors [V, dim] from the SVD of the shifted positive PMI matrix of char
    co-occurrences within ``window`` (Levy & Goldberg 2014: what skip-gram factorises),
    rows scaled to unit length; pad, unknown and NULL rows are zero."""
    from sklearn.utils.extmath import randomized_svd

    size = len(vocab.char_list)
    counts = np.zeros(size * size, dtype=np.float64)
    gap = [0] * window    # pads between texts: no pair crosses from one text into the next
    ids = np.asarray([i for text in texts for i in vocab.ids(text) + gap], dtype=np.int64)
    for d in range(1, window + 1):
        a, b = ids[:-d], ids[d:]
        keep = (a > 2) & (b > 2)
        counts += np.bincount(a[keep] * size + b[keep], minlength=size * size) / d
    matrix = counts.reshape(size, size)
    matrix = matrix + matrix.T
    total = matrix.sum()
    row = matrix.sum(axis=1, keepdims=True)
    col = matrix.sum(axis=0, keepdims=True) ** 0.75          # context distribution smoothing
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(matrix * (col.sum() / total) / (row * col / total))
    pmi = np.nan_to_num(np.maximum(pmi, 0.0), posinf=0.0).astype(np.float32)
    u, sigma, _ = randomized_svd(pmi, n_components=dim, random_state=seed)
    vectors = u * np.sqrt(sigma)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = np.where(norms > 0, vectors / np.maximum(norms, 1e-8), 0.0)
    vectors[:3] = 0.0
    return vectors.astype(np.float32)


# ---------------------------------------------------------------- inference

def predict(network, examples: Examples, max_seq_len: int, doc_stride: int, max_answer_len: int,
            batch_size: int = 64) -> list[str]:
    """The best answer of each question, by the task's own windowing and merging (dynamic graph)."""
    import paddle

    units = [(i, p, a, b) for i, p in enumerate(examples.prepared)
             for a, b in windows(len(p.context), max_seq_len, doc_stride)]
    units.sort(key=lambda u: u[3] - u[2])
    per_item: list[list] = [[] for _ in examples.prepared]
    was_training = network.training
    network.eval()
    with paddle.no_grad():
        for start in range(0, len(units), batch_size):
            batch = units[start:start + batch_size]
            feeds = encode([(p, a, b) for _, p, a, b in batch])
            p_start, p_end = network(*[paddle.to_tensor(feeds[k]) for k in
                                       ("context_ids", "context_features", "question_ids")])
            p_start, p_end = p_start.numpy(), p_end.numpy()
            for row, (i, _, a, b) in enumerate(batch):
                spans, null = best_spans(p_start[row], p_end[row], b - a, max_answer_len, 1)
                per_item[i].append((a, spans, null))
    if was_training:
        network.train()
    answers = []
    for row, p, found in zip(examples.rows, examples.prepared, per_item):
        best, _ = merge(p.context, found, 1)
        answers.append(row["context"][best[0][0]:best[0][1]] if best else "")
    return answers


def score(network, examples: Examples, args) -> dict:
    predictions = predict(network, examples, args.max_seq_len, args.doc_stride, args.max_answer_len)
    return evaluate([r["answers"] for r in examples.rows], predictions)


# ------------------------------------------------------------------ training

def span_loss(network, batch):
    """Cross-entropy of the answer's start and end positions over a batch of training windows."""
    import paddle
    import paddle.nn.functional as F

    feeds = encode([(p, a, b) for p, a, b, _, _ in batch])
    start_logits, end_logits = network.logits(*[paddle.to_tensor(feeds[k]) for k in
                                                ("context_ids", "context_features", "question_ids")])
    starts = paddle.to_tensor(np.array([x[3] for x in batch], dtype=np.int64))
    ends = paddle.to_tensor(np.array([x[4] for x in batch], dtype=np.int64))
    return F.cross_entropy(start_logits, starts) + F.cross_entropy(end_logits, ends)


def data_files(args) -> dict[str, Path | None]:
    def path(given, default):
        if given is not None:
            return Path(given) if given else None
        if not args.data_dir:
            raise SystemExit(f"give --data-dir or the file itself (missing {default})")
        return Path(args.data_dir) / default

    return {"train": path(args.train, "train.json"), "selection": path(args.selection, "trial.json"),
            "report": path(args.report, "dev.json")}


def pretrain_chars(network, texts: list[str], vocab: Vocab, args) -> dict:
    """Start the char vectors from co-occurrences in ``texts`` and ``--pretrain-files``; what the manifest says of it."""
    t = time.time()
    corpus = texts + read_plain_texts(args.pretrain_files)
    network.embed.weight.set_value(char_vectors(corpus, vocab, args.char_dim, seed=args.seed))
    pretrain = {"method": "SVD of shifted PPMI char co-occurrences, window 3, unit rows",
                "files": [portable_path(f, args.data_dir) for f in args.pretrain_files] + ["training contexts and questions"],
                "chars": sum(len(t) for t in corpus)}
    log(f"char vectors from {pretrain['chars']:,} chars in {time.time() - t:.0f}s")
    return pretrain


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    fast_cpu_math()
    from .model import ReaderNet

    started = time.time()
    rng = seed_all(args.seed)
    files = data_files(args)
    train_rows = read_squad(files["train"])[: args.max_train or None]
    selection_rows = read_squad(files["selection"])
    report_rows = read_squad(files["report"]) if files["report"] else []
    log(f"{len(train_rows)} training, {len(selection_rows)} selection, {len(report_rows)} report questions")

    texts = list(dict.fromkeys(normalise(t) for r in train_rows for t in (r["context"], r["question"])))
    vocab = Vocab.build(texts, jieba_cut(), min_char=args.min_char, min_word=args.min_word)
    log(f"vocabulary: {len(vocab.char_list)} chars, {len(vocab.segmenter.logp)} words ({time.time() - started:.0f}s)")

    words_cache: dict = {}
    train = Examples(train_rows, vocab, args.max_question_len, words_cache)
    selection = Examples(selection_rows, vocab, args.max_question_len, words_cache)
    log(f"prepared features in {time.time() - started:.0f}s")

    architecture = {"vocab_size": len(vocab.char_list), "num_features": len(FEATURES), "char_dim": args.char_dim,
                    "hidden_size": args.hidden, "num_layers": args.layers, "question_layers": args.question_layers,
                    "dropout": args.dropout, "align": not args.no_align, "use_features": not args.no_features}
    network = ReaderNet(**architecture)
    pretrain = None if args.no_pretrain else pretrain_chars(network, texts, vocab, args)
    log(f"{sum(int(np.prod(p.shape)) for p in network.parameters()):,} parameters")

    def epoch():
        items = training_windows(train, args.window, args.neg_rate, rng)   # windows drawn afresh each epoch
        lengths = [end - start for _, start, end, _, _ in items]
        return [[items[k] for k in index] for index in length_batches(lengths, args.batch_size, rng)]

    epoch_size = len(training_windows(train, args.window, args.neg_rate, random.Random(0)))
    schedule = Schedule(lr=args.lr, steps_per_epoch=-(-epoch_size // args.batch_size), epochs=args.epochs,
                        warmup=args.warmup, floor=0.02, evals=args.evals, minutes=args.minutes, eval_guess=40.0)
    run = fit(network, epoch, lambda batch: span_loss(network, batch), lambda: score(network, selection, args),
              schedule=schedule, select="f1", optimizer="Adamax", grad_clip=10.0, log_every=50)

    with PackageDraft(args, "reading_comprehension", started=started) as draft:
        draft.ship_weights(network, float16=lambda name: name.startswith("embed."))    # and evaluate exactly what ships
        metrics = {"selection": {"file": files["selection"].name, **score(network, selection, args)}}
        if report_rows:
            report = Examples(report_rows, vocab, args.max_question_len, words_cache)
            metrics["report"] = {"file": files["report"].name, **score(network, report, args)}
        log("metrics: " + json.dumps(metrics))
        vocab.save(draft / "vocab.json")
        draft.write({
            "description": "DrQA-style char reader (BiGRU, aligned question embedding, exact-match and word "
                           "features, NULL position for no-answer windows), trained from scratch on CMRC 2018",
            "architecture": {"type": "drqa_reader", **architecture},
            "normalization": list(NORMALIZATION),
            "features": list(FEATURES),
            "max_seq_len": args.max_seq_len,
            "doc_stride": args.doc_stride,
            "max_answer_len": args.max_answer_len,
            "max_question_len": args.max_question_len,
            "training": {
                "train_file": portable_path(files["train"], args.data_dir),
                "selection_file": portable_path(files["selection"], args.data_dir),
                "questions": len(train_rows), "source": SOURCE, "char_vectors": pretrain, "window": args.window, "neg_rate": args.neg_rate,
                "vocab": {"chars": len(vocab.char_list), "words": len(vocab.segmenter.logp),
                          "min_char": args.min_char, "min_word": args.min_word,
                          "segmenter": "word list from jieba (HMM) over the training texts, max-probability path"},
                **run.summary(), "batch_size": args.batch_size, "seed": args.seed,
            },
            "metrics": metrics,
            "framework": framework_versions("paddlepaddle", "numpy"),
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
