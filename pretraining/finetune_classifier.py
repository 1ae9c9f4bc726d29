"""Fine-tune the pretrained encoder with a classification head, and score it: the accurate tier's
probe for sentiment (one text) and text similarity (a pair, read together as a cross-encoder).

    python -m pretraining.finetune_classifier sentiment --encoder CHECKPOINT \\
        --data-dir ../shared/data/sentiment --out pretraining/runs/ft_sentiment [--augment]
    python -m pretraining.finetune_classifier similarity --encoder CHECKPOINT \\
        --data-dir ../shared/data/matching --out pretraining/runs/ft_similarity [--hard-negatives N]

The data are the fast recipes' own, read by their code, so the figures sit beside theirs:

* sentiment: the train splits of ChnSentiCorp, online_shopping_10_cats and waimai_10k
  (``--augment``: plus ``augment.py``'s sentences, as the char CNN's recipe adds them); reported on
  each set's dev and test split, and on the robustness suite's labelled kinds (negation, contrast,
  slang; ``robustness.generate_cases``, seed 0, 300 a kind, words held out from the augmentation).
* similarity: BQ train, AFQMC train and the LCQMC dev training part, pairs shared with an evaluation
  split dropped (``text_similarity.train.load_pairs``); the threshold is picked on the selection
  splits (LCQMC dev held-out part + BQ dev), then LCQMC test, BQ test, AFQMC dev and the swap dev set
  are scored with it.

Input ids are ``[CLS] text [SEP]`` or ``[CLS] text1 [SEP] text2 [SEP]``; the head reads the final
``[CLS]`` state.  No epoch is selected (a fixed schedule: warm-up, linear decay).  The result is a
PyTorch state dict and ``report.json``; there is no Paddle package yet, since no run has beaten a fast
model on dev (pretraining/README.md, *CPU fine-tuning probes*).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from taskflow.encoder import CLS, NORMALIZATION, SEP, CharVocab
from taskflow.text import Normalizer

from .finetune_span import adamw_with_warmup, add_optimizer_options, update
from .model import Encoder, EncoderConfig


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Classifier(nn.Module):
    """The encoder and a linear head on the final ``[CLS]`` state."""

    def __init__(self, config: EncoderConfig, num_labels: int = 2):
        super().__init__()
        self.encoder = Encoder(config)
        self.head = nn.Linear(config.hidden_size, num_labels)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(input_ids)[:, 0])


class Inputs:
    """Texts (or pairs) -> padded id batches, each text cut to ``max_chars`` chars."""

    def __init__(self, vocab: CharVocab, max_chars: int):
        self.vocab, self.max_chars, self.normalize = vocab, max_chars, Normalizer(NORMALIZATION)

    def ids(self, item) -> np.ndarray:
        texts = (item,) if isinstance(item, str) else item
        parts = [[CLS]]
        for text in texts:
            parts += [self.vocab.encode_array(self.normalize(text))[:self.max_chars], [SEP]]
        return np.concatenate(parts).astype(np.int64)

    def batch(self, items) -> torch.Tensor:
        rows = [self.ids(item) for item in items]
        out = np.zeros((len(rows), max(map(len, rows))), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i, :len(row)] = row
        return torch.from_numpy(out)


def positive_probability(model: Classifier, inputs: Inputs, items: list, batch_size: int = 128) -> np.ndarray:
    model.eval()
    out = []
    with torch.no_grad():
        for begin in range(0, len(items), batch_size):
            out.append(F.softmax(model(inputs.batch(items[begin:begin + batch_size])), -1)[:, 1].numpy())
    model.train()
    return np.concatenate(out) if out else np.zeros(0)


def sentiment_data(args) -> tuple[list, dict]:
    """(training items, evaluation splits): items are ``(text, label)``."""
    from taskflow.tasks.sentiment_analysis.train import DEFAULT_AUGMENT, augmented, read_tsv

    root = Path(args.data_dir)
    texts, labels = [], []
    for name in ("chnsenticorp", "online_shopping_10_cats", "waimai_10k"):
        t, y = read_tsv(root / name / "train.tsv")
        texts += t
        labels += y
    if args.augment:
        made, made_labels, _ = augmented(texts, labels, list(DEFAULT_AUGMENT), seed=0, scale=1.0)
        log(f"augmentation: {len(made)} sentences")
        texts, labels = texts + made, labels + made_labels
    splits = {f"{name}/{split}": list(zip(*read_tsv(root / name / f"{split}.tsv")))
              for name in ("chnsenticorp", "online_shopping_10_cats", "waimai_10k") for split in ("dev", "test")}
    return list(zip(texts, labels)), splits


def similarity_data(args) -> tuple[list, dict, dict]:
    """(training items, selection splits, report splits): items are ``((text1, text2), label)``."""
    from taskflow.tasks.text_similarity import train as recipe

    recipe_args = recipe.parse_args(["--data-dir", args.data_dir, "--out", str(args.out),
                                     "--hard-negatives", str(args.hard_negatives)])
    _, parts, _, selection, report, _ = recipe.load_pairs(recipe_args)
    train = []
    for name, pairs in parts.items():
        repeat = recipe_args.lcqmc_repeat if name == "lcqmc_dev_train_part" else 1
        train += [((p.text1, p.text2), p.label) for p in pairs] * repeat
    as_items = lambda pairs: [((p.text1, p.text2), p.label) for p in pairs]  # noqa: E731
    report = {name: as_items(pairs) for name, pairs in report.items()}
    if recipe.SWAP_DEV.is_file():
        report["swap_dev"] = as_items(recipe.read_generated(recipe.SWAP_DEV))
    return train, {name: as_items(pairs) for name, pairs in selection.items()}, report


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=("sentiment", "similarity"))
    parser.add_argument("--encoder", required=True, help="a pretraining checkpoint.pt (portable.py unpack)")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", required=True, type=Path, help="folder for model.pt and report.json")
    parser.add_argument("--augment", action="store_true", help="sentiment: add augment.py's sentences")
    parser.add_argument("--hard-negatives", type=int, default=0, help="similarity: as the fast recipe's option")
    parser.add_argument("--max-chars", type=int, default=None, help="chars per text (default: 126 / 62 a pair text)")
    add_optimizer_options(parser, epochs=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    checkpoint = torch.load(args.encoder, map_location="cpu", weights_only=True)
    config = EncoderConfig(**{**checkpoint["config"]["encoder"], "dropout": args.dropout})
    model = Classifier(config)
    state = {k[len("encoder."):]: v for k, v in checkpoint["model"].items() if k.startswith("encoder.")}
    model.encoder.load_state_dict(state)
    inputs = Inputs(CharVocab(checkpoint["vocab"]),
                    args.max_chars or (126 if args.task == "sentiment" else 62))

    if args.task == "sentiment":
        train, report_splits = sentiment_data(args)
        selection = {}
    else:
        train, selection, report_splits = similarity_data(args)
    log(f"{len(train)} training items")

    # Batches of similar length (fewer padded positions: CPU time is the budget), in a shuffled order.
    def length(item):
        return len(item[0]) if isinstance(item[0], str) else sum(map(len, item[0]))
    order = sorted(range(len(train)), key=lambda i: length(train[i]))
    batches = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    total = max(1, round(len(batches) * args.epochs))
    optimizer, scheduler, _ = adamw_with_warmup(model, args, total)
    step, tokens = 0, 0
    model.train()
    while step < total:
        rng.shuffle(batches)
        for batch in batches[:total - step]:
            ids = inputs.batch([train[i][0] for i in batch])
            loss = F.cross_entropy(model(ids), torch.tensor([train[i][1] for i in batch]))
            update(model, loss, optimizer, scheduler)
            step += 1
            tokens += ids.numel()
            if step % 200 == 0:
                minutes = (time.monotonic() - started) / 60
                log(f"step {step}/{total} loss {loss.item():.4f} {tokens / minutes / 60:.0f} tokens/s")
    train_minutes = (time.monotonic() - started) / 60

    def accuracy(items, threshold):
        p = positive_probability(model, inputs, [x for x, _ in items])
        return float(((p >= threshold) == np.array([y for _, y in items])).mean()) if items else None

    threshold, figures = 0.5, {}
    if selection:   # the fast recipe's rule: the threshold best on the selection splits together
        pooled = [item for items in selection.values() for item in items]
        p = positive_probability(model, inputs, [x for x, _ in pooled])
        y = np.array([label for _, label in pooled])
        candidates = np.unique(np.round(p, 4))
        threshold = float(max(candidates, key=lambda t: ((p >= t) == y).mean()))
        figures.update({name: accuracy(items, threshold) for name, items in selection.items()})
    figures.update({name: accuracy(items, threshold) for name, items in report_splits.items()})
    if args.task == "sentiment":
        from taskflow.tasks.sentiment_analysis.robustness import LABELLED_KINDS, LABELS, generate_cases, run_suite

        cases = [c for c in generate_cases(seed=0, per_kind=300) if c.kind in LABELLED_KINDS]
        suite = run_suite(lambda texts: [LABELS[int(p >= 0.5)] for p in positive_probability(model, inputs, texts)],
                          cases)
        figures.update({f"suite_{kind}": r["held"] for kind, r in suite.items()})
    for name, value in figures.items():
        log(f"{name}: {value:.4f}")

    args.out.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "config": config.__dict__, "vocab": checkpoint["vocab"]},
               args.out / "model.pt")
    report = {"task": args.task, "encoder": {"file": str(args.encoder), "step": checkpoint["step"]},
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "training_items": len(train), "steps": step, "train_minutes": round(train_minutes, 1),
              "tokens_per_s": round(tokens / max(train_minutes * 60, 1e-9)), "threshold": threshold,
              "figures": {k: round(v, 4) for k, v in figures.items()}}
    (args.out / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
