"""Recipe: CMRC 2018 train -> DrQA-style char reader -> model package.

    OMP_NUM_THREADS=2 python -m recipes.reading_comprehension.train --data-dir ../shared/data/mrc/cmrc2018 \\
        --out resources/reading_comprehension/drqa_char --minutes 40

Data (SQuAD-format JSON; CMRC 2018, Cui et al., EMNLP 2019, CC BY-SA 4.0):

* training: ``train.json`` (10,142 questions) less the held-out slice;
* model selection (the step) and the null threshold's answerable side: ``--holdout`` questions
  (whole articles, seeded) held out of train, whose answers (20 chars on average) are nearer
  dev's (11) than trial's (31, which made the 1.0.0 selection reward long answers);
  ``--selection FILE`` selects on a file instead;
* report only, never trained or selected on: ``dev.json`` (3,219 questions) and ``trial.json``
  (1,002);
* the null threshold's unanswerable side: ``dev/unanswerable_tune.jsonl`` (trial questions paired
  with other articles' passages; ``calibrate.py``).

``--span-loss joint`` (the default) trains a length scorer with the start and end: one softmax
over every span of at most ``--max-answer-len`` chars in the window and NULL, ``score(s, e) =
start[s] + end[e] + length[e - s + 1]`` (the task's ``model.py``; the length scores depend on the question
unless ``--length-prior global``); ``independent`` is 1.0.0's loss (a cross-entropy of the start
and one of the end, no length scorer), decoded (selection included) with the training answers'
length histogram as a fixed prior, written to the manifest as ``length_prior`` (see
``calibrate.py``); ``both`` adds the two losses.

Each training example is a window of ``--window`` chars of its context with
a random offset that keeps the answer inside; with probability
``--neg-rate`` the example also yields a window of the same context without
the answer, whose target is the NULL position.  Windows are re-drawn every
epoch.  Selection and report figures run the task's own inference (sliding
windows of ``--max-seq-len`` chars, ``--doc-stride`` overlap, spans merged
across windows) and CMRC 2018's official scoring (the task's ``metrics.py``).

``--minutes`` is a wall-clock budget for the training loop: after a few
steps the recipe measures its speed and fits the steps (and the learning-rate
schedule) into it.  ``--no-features`` / ``--no-align`` train the ablations.
``--vectors DIR`` starts the char table from corpus char vectors (``python -m
pretraining.vectors``) instead of the SVD of ``--pretrain-files``, rows at the
same unit length; ``--word-vectors`` also gives each char its (multi-char) word's corpus word vector,
a frozen table over the package's word list (the task's ``model.py``).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import numpy as np

from taskflow.corpus_vectors import jieba_cut, load_vectors, pretrained_embeddings, vectors_report
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import recipe_parser
from taskflow.training import Schedule, fast_cpu_math, fit, length_batches, log, seed_all

from taskflow.tasks.reading_comprehension.data import (FEATURES, NORMALIZATION, NULL, Vocab, encode, merge, normalise,
                                                      prepare, segment_context, windows, best_spans)
from taskflow.tasks.reading_comprehension.metrics import evaluate, f1_score
from taskflow.tasks.reading_comprehension.squad import read_squad

from .calibrate import (DEFAULT_UNANSWERABLE, length_log_prior, length_prior_fields, read_unanswerable,
                        tune_null_threshold)

SOURCE = ("CMRC 2018 (Yiming Cui et al., A Span-Extraction Dataset for Chinese Machine Reading Comprehension, "
          "EMNLP-IJCNLP 2019), CC BY-SA 4.0; github.com/ymcui/cmrc2018")


def parse_args(argv):
    parser = recipe_parser("reading_comprehension", __doc__, name="drqa_char", seed=1234,
                           data="folder with train.json, trial.json, dev.json (CMRC 2018)")
    parser.prog = "python -m recipes.reading_comprehension.train"
    parser.add_argument("--train", help="default: DATA_DIR/train.json")
    parser.add_argument("--selection", help="select on this file (default: --holdout questions held out of train)")
    parser.add_argument("--holdout", type=int, default=1000,
                        help="questions (whole articles, at most a tenth of train) held out of train to select on")
    parser.add_argument("--report", nargs="*",
                        help="files reported on, never selected on (default: DATA_DIR/dev.json DATA_DIR/trial.json; "
                             "'' for none)")
    parser.add_argument("--span-loss", choices=["joint", "independent", "both"], default="joint",
                        help="joint: one softmax over spans with a length scorer (default); independent: 1.0.0's "
                             "start and end cross-entropies; both: their sum")
    parser.add_argument("--length-prior", choices=["question", "global"], default="question",
                        help="the length scores: a bias plus a map of the question vector, or the bias alone")
    parser.add_argument("--unanswerable", default=str(DEFAULT_UNANSWERABLE),
                        help="unanswerable questions to tune null_threshold on ('' to skip; default: %(default)s)")
    parser.add_argument("--max-f1-drop", type=float, default=0.75,
                        help="selection-set F1 points the tuned null_threshold may cost")
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
    parser.add_argument("--vectors", metavar="DIR",
                        help="corpus vectors (python -m pretraining.vectors --out DIR): the char table starts from "
                             "their char vectors instead of the SVD of --pretrain-files")
    parser.add_argument("--word-vectors", action="store_true",
                        help="each char also reads its word's corpus vector (from --vectors; a frozen table of the "
                             "package's word list)")
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
    args = parser.parse_args(argv)
    if args.vectors and (args.no_pretrain or args.pretrain_files):
        parser.error("--vectors replaces the SVD char vectors: give it without --no-pretrain and --pretrain-files")
    if args.word_vectors and not args.vectors:
        parser.error("--word-vectors reads the word vectors of --vectors DIR: give both")
    return args


# ---------------------------------------------------------------------- data

def hold_out(rows: list[dict], questions: int, seed: int) -> tuple[list[dict], list[dict]]:
    """``(kept, held_out)``: whole contexts (a question never leaves its passage in training) drawn
    by a seeded shuffle until ``questions`` are held out, at most a tenth of ``rows``' questions
    (at least one context)."""
    contexts = sorted({r["context"] for r in rows})
    random.Random(seed).shuffle(contexts)
    per_context: dict[str, int] = {}
    for r in rows:
        per_context[r["context"]] = per_context.get(r["context"], 0) + 1
    budget, chosen, taken = min(questions, len(rows) // 10), set(), 0
    for context in contexts:
        if taken >= budget and chosen:
            break
        chosen.add(context)
        taken += per_context[context]
    kept = [r for r in rows if r["context"] not in chosen]
    held = [r for r in rows if r["context"] in chosen]
    assert not {r["context"] for r in kept} & {r["context"] for r in held}
    return kept, held


class Examples:
    """Questions with their prepared contexts (features computed once, windows drawn per epoch)."""

    def __init__(self, rows: list[dict], vocab: Vocab, max_question_len: int, words_cache: dict,
                 word_ids: bool = False):
        self.rows = rows
        self.prepared = []
        for row in rows:
            context = normalise(row["context"])
            if context not in words_cache:
                words_cache[context] = segment_context(context, vocab)
            self.prepared.append(prepare(row["context"], row["question"], vocab, max_question_len,
                                         context_words=words_cache[context], word_ids=word_ids))


def training_windows(examples: Examples, window: int, neg_rate: float, rng: random.Random,
                     longest: int | None = None):
    """``(prepared, start, end, target_start, target_end)`` for one epoch; targets index the
    network's positions (0 = NULL, window char i at i + 1).  Answers longer than ``longest``
    (a joint model's longest span) are left out."""
    out = []
    for row, p in zip(examples.rows, examples.prepared):
        s = row["start"]
        e = s + len(row["answers"][0])
        n = len(p.context)
        if s < 0 or e - s > min(window, longest or window):
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


def start_from_vectors(network, vectors: str, vocab: Vocab, seed: int) -> dict:
    """The char table from the corpus char vectors (``pretraining/vectors.py``) instead of the SVD
    step, at the SVD step's scale: unit rows (a random direction for a char the corpus lacks), pad,
    unknown and NULL rows zero, so the learning rate and the rest of the recipe stay as tuned.
    What the manifest says of it: the vectors, their sources and the share of the chars covered."""
    tokens, matrix = load_vectors(vectors, "char")
    # The reader normalises as the vectors were (t2s width lower space): a char is its own key.
    table, coverage = pretrained_embeddings(vocab.char_list, tokens, matrix, network.embed.weight.shape[1],
                                            scale=1.0, seed=seed)
    norms = np.linalg.norm(table, axis=1, keepdims=True)
    table = np.where(norms > 0, table / np.maximum(norms, 1e-8), 0.0).astype(np.float32)
    table[: NULL + 1] = 0.0
    network.embed.weight.set_value(table)
    log(f"char vectors from {vectors}: {coverage:.1%} of the {len(vocab.char_list)} chars")
    return {"method": "corpus skip-gram char vectors (pretraining/vectors.py), centred, unit rows",
            "vectors": portable_path(vectors), "sources": vectors_report(vectors).get("sources"), "coverage": round(coverage, 4)}


def word_table(vectors: str, vocab: Vocab) -> tuple[np.ndarray, dict]:
    """The frozen word table of a ``--word-vectors`` network: row ``1 + i`` the corpus vector of
    the word list's ``i``-th word (centred, unit rows, the char rows' scale), zero where the corpus
    has none and in row 0 (no multi-char word); and what the manifest says of it."""
    tokens, matrix = load_vectors(vectors, "word")
    matrix = matrix.astype(np.float32)
    matrix -= matrix.mean(axis=0, keepdims=True)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-8)
    index = {token: row for row, token in enumerate(tokens)}
    table = np.zeros((len(vocab.word_list) + 1, matrix.shape[1]), dtype=np.float32)
    hits = 0
    for row, word in enumerate(vocab.word_list, 1):
        found = index.get(word)
        if found is not None:
            table[row] = matrix[found]
            hits += 1
    coverage = hits / max(1, len(vocab.word_list))
    log(f"word vectors from {vectors}: {coverage:.1%} of the {len(vocab.word_list)} words")
    return table, {"method": "corpus skip-gram word vectors (pretraining/vectors.py), centred, unit rows, frozen",
                   "vectors": portable_path(vectors), "coverage": round(coverage, 4)}


# ---------------------------------------------------------------- inference

def predict(network, examples: Examples, max_seq_len: int, doc_stride: int, max_answer_len: int,
            batch_size: int = 64, length_prior: np.ndarray | None = None) -> list[tuple[str, float | None, float]]:
    """``(best answer, its score or None, null score)`` of each question, by the task's own
    windowing, decoding and merging (dynamic graph); ``length_prior`` is the manifest's, for a
    network without a length scorer."""
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
            outputs = [out.numpy() for out in network(*[paddle.to_tensor(feeds[k]) for k in network.input_names])]
            p_start, p_end = outputs[0], outputs[1]
            length_scores = outputs[2] if len(outputs) > 2 else None
            for row, (i, _, a, b) in enumerate(batch):
                spans, null = best_spans(p_start[row], p_end[row], b - a, max_answer_len, 1,
                                         length_prior if length_scores is None else length_scores[row])
                per_item[i].append((a, spans, null))
    if was_training:
        network.train()
    out = []
    for row, p, found in zip(examples.rows, examples.prepared, per_item):
        best, null = merge(p.context, found, 1)
        out.append((row["context"][best[0][0]:best[0][1]], best[0][2], null) if best else ("", None, null))
    return out


def figures(rows: list[dict], predicted: list[tuple[str, float | None, float]]) -> dict:
    """F1 / EM and the mean lengths of the answers and of the references (each question's mean)."""
    answers = [answer for answer, _, _ in predicted]
    return {**evaluate([r["answers"] for r in rows], answers),
            "mean_answer_len": round(float(np.mean([len(a) for a in answers])), 2),
            "mean_reference_len": round(float(np.mean([np.mean([len(x) for x in r["answers"]]) for r in rows])), 2)}


def score(network, examples: Examples, args, length_prior: np.ndarray | None = None) -> dict:
    return figures(examples.rows, predict(network, examples, args.max_seq_len, args.doc_stride, args.max_answer_len,
                                          length_prior=length_prior))


# ------------------------------------------------------------------ training

def span_loss(network, batch, kind: str = "independent"):
    """The loss of a batch of training windows: ``independent``, the cross-entropy of the answer's
    start and of its end position; ``joint``, the cross-entropy of the whole span among every span
    the length scorer covers (:func:`joint_span_loss`); ``both``, their sum."""
    import paddle
    import paddle.nn.functional as F

    feeds = encode([(p, a, b) for p, a, b, _, _ in batch])
    start_logits, end_logits, length = network.logits(*[paddle.to_tensor(feeds[k]) for k in network.input_names])
    starts = np.array([x[3] for x in batch], dtype=np.int64)
    ends = np.array([x[4] for x in batch], dtype=np.int64)
    loss = 0.0
    if kind in ("independent", "both"):
        loss = F.cross_entropy(start_logits, paddle.to_tensor(starts)) + F.cross_entropy(end_logits,
                                                                                        paddle.to_tensor(ends))
    if kind in ("joint", "both"):
        loss = loss + joint_span_loss(start_logits, end_logits, length, starts, ends)
    return loss


def joint_span_loss(start_logits, end_logits, length, starts: np.ndarray, ends: np.ndarray):
    """Cross-entropy of the answer span under one softmax over the NULL span (0, 0), scored
    ``start[0] + end[0] + length[:, 0]``, and every span ``(s, e)`` with ``1 <= s <= e < s + L``,
    scored ``start[s] + end[e] + length[:, e - s + 1]`` (``L = length.shape[1] - 1``; network
    positions, ``e`` inclusive).  Pads carry -1e4 in the start / end scores, so spans reaching
    into them get no mass: this is exactly the distribution ``data.best_spans`` decodes."""
    import paddle
    import paddle.nn.functional as F

    batch, width = start_logits.shape
    longest = length.shape[1] - 1
    padded_end = paddle.concat([end_logits, paddle.full([batch, longest], -1e4, dtype=end_logits.dtype)], axis=1)
    end_at = paddle.stack([padded_end[:, j:j + width] for j in range(longest)], axis=2)    # [B, T, L]: end s + j
    spans = start_logits.unsqueeze(2) + end_at + length[:, 1:].unsqueeze(1)
    no_null_start = np.zeros((1, width, 1), dtype=np.float32)
    no_null_start[0, 0, 0] = -1e4                          # a span cannot start at NULL
    spans = spans + paddle.to_tensor(no_null_start)
    null = start_logits[:, :1] + end_logits[:, :1] + length[:, :1]
    scores = paddle.concat([null, spans.reshape([batch, width * longest])], axis=1)
    target = np.where(starts == 0, 0, 1 + starts * longest + (ends - starts))
    return F.cross_entropy(scores, paddle.to_tensor(target.astype(np.int64)))


def data_files(args) -> dict:
    """``{"train": path, "selection": path or None (the held-out slice), "report": [paths]}``."""
    def path(given, default):
        if given is not None:
            return Path(given) if given else None
        if not args.data_dir:
            raise SystemExit(f"give --data-dir or the file itself (missing {default})")
        return Path(args.data_dir) / default

    if args.report is None:
        report = [path(None, "dev.json"), path(None, "trial.json")]
        report = [f for f in report if f.is_file()]
    else:
        report = [Path(f) for f in args.report if f]
    return {"train": path(args.train, "train.json"), "selection": Path(args.selection) if args.selection else None,
            "report": report}


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
    from taskflow.tasks.reading_comprehension.model import ReaderNet

    started = time.time()
    rng = seed_all(args.seed)
    files = data_files(args)
    train_rows = read_squad(files["train"])[: args.max_train or None]
    if files["selection"]:
        selection_rows, selection_name = read_squad(files["selection"]), files["selection"].name
    else:
        # Selection on questions removed from training, whose answers are nearer dev's in length
        # than trial's: every figure the selection sees is one the model could not learn.
        train_rows, selection_rows = hold_out(train_rows, args.holdout, args.seed)
        selection_name = (f"{files['train'].name}, {len(selection_rows)} questions of "
                          f"{len({r['context'] for r in selection_rows})} passage(s) held out (seed {args.seed})")
    reports = {f.name: read_squad(f) for f in files["report"]}
    log(f"{len(train_rows)} training, {len(selection_rows)} selection ({selection_name}), "
        + ", ".join(f"{len(rows)} {name}" for name, rows in reports.items()) + " report questions")

    texts = list(dict.fromkeys(normalise(t) for r in train_rows for t in (r["context"], r["question"])))
    vocab = Vocab.build(texts, jieba_cut(), min_char=args.min_char, min_word=args.min_word)
    log(f"vocabulary: {len(vocab.char_list)} chars, {len(vocab.segmenter.logp)} words ({time.time() - started:.0f}s)")

    words_cache: dict = {}
    def examples(rows):      # each char's word id too, when the network reads word vectors
        return Examples(rows, vocab, args.max_question_len, words_cache, word_ids=args.word_vectors)

    train, selection = examples(train_rows), examples(selection_rows)
    log(f"prepared features in {time.time() - started:.0f}s")

    joint = args.span_loss != "independent"
    architecture = {"vocab_size": len(vocab.char_list), "num_features": len(FEATURES), "char_dim": args.char_dim,
                    "hidden_size": args.hidden, "num_layers": args.layers, "question_layers": args.question_layers,
                    "dropout": args.dropout, "align": not args.no_align, "use_features": not args.no_features}
    words = None
    if args.word_vectors:
        words, word_report = word_table(args.vectors, vocab)
        architecture.update(word_vocab_size=words.shape[0], word_dim=words.shape[1])
    if joint:
        # The longest span the model scores is the longest answer it gives (the manifest's max_answer_len).
        architecture.update(max_span=args.max_answer_len, span_by_question=args.length_prior == "question")
    network = ReaderNet(**architecture)
    if words is not None:
        network.word_embed.weight.set_value(words)
    if joint:
        network.length_bias.set_value(length_log_prior(train_rows, args.max_answer_len))
        prior_fields, length_prior = {}, None
    else:
        # Start and end chosen independently make answers long (1.0.0); the training answers'
        # length histogram as a fixed prior at decoding is the cheap cure (calibrate.py).
        prior_fields = length_prior_fields(train_rows, args.max_answer_len, files["train"].name)
        length_prior = np.asarray(prior_fields["length_prior"])
    if args.vectors:
        pretrain = start_from_vectors(network, args.vectors, vocab, args.seed)
    else:
        pretrain = None if args.no_pretrain else pretrain_chars(network, texts, vocab, args)
    log(f"{sum(int(np.prod(p.shape)) for p in network.parameters()):,} parameters")

    longest = args.max_answer_len if joint else None
    if joint:
        too_long = sum(1 for r in train_rows if r["answers"] and len(r["answers"][0]) > longest)
        log(f"{too_long} training answers longer than --max-answer-len {longest} are left out (the joint "
            "model scores no longer span)")

    def epoch():
        items = training_windows(train, args.window, args.neg_rate, rng, longest)   # windows drawn afresh each epoch
        lengths = [end - start for _, start, end, _, _ in items]
        return [[items[k] for k in index] for index in length_batches(lengths, args.batch_size, rng)]

    epoch_size = len(training_windows(train, args.window, args.neg_rate, random.Random(0), longest))
    schedule = Schedule(lr=args.lr, steps_per_epoch=-(-epoch_size // args.batch_size), epochs=args.epochs,
                        warmup=args.warmup, floor=0.02, evals=args.evals, minutes=args.minutes, eval_guess=40.0)
    run = fit(network, epoch, lambda batch: span_loss(network, batch, args.span_loss),
              lambda: score(network, selection, args, length_prior), schedule=schedule, select="f1",
              optimizer="Adamax", grad_clip=10.0, average=args.average_weights, log_every=50)

    with PackageDraft(args, "reading_comprehension", started=started) as draft:
        # The frozen corpus word table as int8 rows (a quarter of float32, half of float16): it is
        # most of the package, and the ensemble with drqa_char must fit one 15 MB budget.
        draft.ship_weights(network, float16=lambda name: name.startswith("embed."),
                           int8=lambda name: name.startswith("word_embed."))    # and evaluate exactly what ships
        selected = predict(network, selection, args.max_seq_len, args.doc_stride, args.max_answer_len,
                           length_prior=length_prior)
        metrics = {"selection": {"file": selection_name, **figures(selection_rows, selected)},
                   "report": {name: score(network, examples(rows), args,
                                          length_prior) for name, rows in reports.items()}}
        null_fields = {}
        if args.unanswerable:
            unanswerable = examples(read_unanswerable(args.unanswerable))
            refused = predict(network, unanswerable, args.max_seq_len, args.doc_stride, args.max_answer_len,
                              length_prior=length_prior)
            answered = [(s, n, f1_score(r["answers"], a)) for r, (a, s, n) in zip(selection_rows, selected)]
            tuned = tune_null_threshold(answered, [(s, n) for _, s, n in refused], args.max_f1_drop)
            null_fields = {"null_threshold": tuned["null_threshold"],
                           "null_tuning": {**tuned, "answerable_file": selection_name,
                                           "unanswerable_file": Path(args.unanswerable).name}}
            log(f"null_threshold {tuned['null_threshold']}: {tuned['unanswerable_no_answer']}% of the unanswerable "
                f"said no answer, selection F1 -{tuned['answerable_f1_drop']}")
        log("metrics: " + json.dumps(metrics, ensure_ascii=False))
        vocab.save(draft / "vocab.json")
        draft.write({
            "description": "DrQA-style char reader (BiGRU, aligned question embedding, exact-match and word "
                           "features, NULL position for no-answer windows"
                           + (", a length scorer trained jointly with start and end" if joint else "")
                           + "), trained from scratch on CMRC 2018",
            "architecture": {"type": "drqa_reader", **architecture},
            "normalization": list(NORMALIZATION),
            "features": list(FEATURES),
            "max_seq_len": args.max_seq_len,
            "doc_stride": args.doc_stride,
            "max_answer_len": args.max_answer_len,
            "max_question_len": args.max_question_len,
            **prior_fields,
            **null_fields,
            "training": {
                "train_file": portable_path(files["train"], args.data_dir),
                "selection_file": (portable_path(files["selection"], args.data_dir) if files["selection"]
                                   else selection_name),
                "questions": len(train_rows), "source": SOURCE, "char_vectors": pretrain,
                **({"word_vectors": word_report} if words is not None else {}), "window": args.window,
                "neg_rate": args.neg_rate, "span_loss": args.span_loss,
                **({"length_prior": args.length_prior} if joint else {}),
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
