"""Fine-tune the pretrained encoder with a classification head, score it, and write the package that
``Taskflow`` runs: the accurate tier's recipe for sentiment (one text) and text similarity (a pair,
read together as a cross-encoder).

    python -m pretraining.finetune_classifier sentiment --encoder CHECKPOINT \\
        --data-dir ../shared/data/sentiment --out PACKAGE [--augment] [--float16]
    python -m pretraining.finetune_classifier similarity --encoder CHECKPOINT \\
        --data-dir ../shared/data/matching --out PACKAGE [--hard-negatives N [--kinds K,...]] [--ocnli] [--float16]

The data are the fast recipes' own, read by their code, so the figures sit beside theirs:

* sentiment: the train splits of ChnSentiCorp, online_shopping_10_cats and waimai_10k
  (``--augment``: plus ``augment.py``'s sentences, as the char CNN's recipe adds them); reported on
  each set's dev and test split, and on the robustness suite's labelled kinds (negation, contrast,
  slang; ``robustness.generate_cases``, seed 0, 300 a kind, words held out from the augmentation).
* similarity: BQ train, AFQMC train and the LCQMC dev training part, pairs shared with an evaluation
  split dropped (``recipes.text_similarity.train.load_pairs``; ``--hard-negatives``, ``--kinds``,
  ``--framed-questions`` and ``--ocnli`` add what the fast recipe's options add); the threshold is
  picked on the selection splits (LCQMC dev held-out part + BQ dev), then LCQMC test, BQ test, AFQMC
  dev, the swap dev set and the contrast dev set (whole and per kind) are scored with it.

Input ids are ``[CLS] text [SEP]`` or ``[CLS] text1 [SEP] text2 [SEP]``; the head reads the final
``[CLS]`` state.  A pair is trained in a random order each time it is drawn and scored as the mean
of both orders, which is how ``text_similarity`` runs the package (a symmetric score).  No epoch is
selected (a fixed schedule: warm-up, linear decay).  ``--out`` gets a package of
``architecture.type: transformer_classifier`` (``taskflow.encoder.network.TransformerClassifier``)
for ``sentiment_analysis`` or ``text_similarity``, the figures in its manifest's ``metrics``;
``--checkpoint`` also keeps the PyTorch state dict.  Runs on a GPU where there is one
(``--device``, bf16 autocast by default there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from taskflow.encoder import CLASSIFIER_TYPE, NORMALIZATION, CharVocab, frame
from taskflow.packages import write_package
from taskflow.tasks.text_similarity.features import NORMALIZATION as PAIR_NORMALIZATION, model_text
from taskflow.text import Normalizer

from .convert import paddle_arrays, write_weights
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
    """Texts (or pairs) -> padded id batches, each text read as the task reads it: normalised by
    ``normalization`` and cut to ``max_chars`` chars (a pair's texts by ``text_similarity``'s
    ``model_text``, which also drops punctuation and whitespace when the normalisation says so)."""

    def __init__(self, vocab: CharVocab, max_chars: int, normalization=NORMALIZATION):
        self.vocab, self.max_chars, self.normalize = vocab, max_chars, Normalizer(normalization)

    def segments(self, item) -> list[np.ndarray]:
        if isinstance(item, str):
            return [self.vocab.encode_array(self.normalize(item)[:self.max_chars])]
        return [self.vocab.encode_array(model_text(text, self.max_chars, self.normalize)) for text in item]

    def batch(self, items) -> torch.Tensor:
        return torch.from_numpy(frame([self.segments(item) for item in items]))


def text_length(item) -> int:
    """Chars in a text, or in a pair's two texts."""
    return len(item) if isinstance(item, str) else sum(map(len, item))


def positive_probability(model: Classifier, inputs: Inputs, items: list, *, batch_size: int = 128,
                         device=torch.device("cpu"), autocast=None) -> np.ndarray:
    """The probability of label 1 for each text, or each pair as the mean over its two orders
    (``autocast``: a context to run the model in, e.g. bf16 autocast)."""
    pairs = bool(items) and not isinstance(items[0], str)
    if pairs:
        items = list(items) + [(b, a) for a, b in items]
    model.eval()
    # Batches of similar length (a batch is padded to its longest text: on a CPU, unsorted reviews
    # of up to 254 chars made scoring take half as long as the training), scores in the items' order.
    order = sorted(range(len(items)), key=lambda i: text_length(items[i]))
    p = np.zeros(len(items))
    with torch.no_grad(), autocast or contextlib.nullcontext():
        for begin in range(0, len(items), batch_size):
            chosen = order[begin:begin + batch_size]
            logits = model(inputs.batch([items[i] for i in chosen]).to(device)).float()
            p[chosen] = F.softmax(logits, -1)[:, 1].cpu().numpy()
    model.train()
    return (p[:len(p) // 2] + p[len(p) // 2:]) / 2 if pairs else p


def load_package_weights(model: Classifier, package: Path, vocab: CharVocab) -> None:
    """Load a ``transformer_classifier`` package (what this script writes) into ``model``: the
    inverse of :func:`convert.paddle_arrays` (Paddle names without "encoder.", ``Linear`` weights
    transposed; float16 matrices read back as float32).  Its vocabulary must be the encoder's."""
    if list(CharVocab.load(package / "vocab.txt").tokens) != list(vocab.tokens):
        raise ValueError(f"{package}: its vocab.txt is not the --encoder checkpoint's; start from a package "
                         "fine-tuned on this encoder")
    linear_weights = {f"{name}.weight" for name, sub in model.named_modules() if isinstance(sub, nn.Linear)}
    with np.load(package / "weights.npz") as arrays:
        state = {}
        for name, tensor in model.state_dict().items():
            key = name.removeprefix("encoder.")
            if key not in arrays:
                raise ValueError(f"{package}/weights.npz has no {key!r}: not a transformer_classifier package "
                                 "of this encoder's shape")
            array = arrays[key].astype(np.float32)
            state[name] = torch.from_numpy(np.ascontiguousarray(array.T if name in linear_weights else array))
            if state[name].shape != tensor.shape:
                raise ValueError(f"{package}: {key} is {tuple(state[name].shape)}, the encoder's is "
                                 f"{tuple(tensor.shape)}")
    model.load_state_dict(state)


SENTIMENT_SETS = ("chnsenticorp", "online_shopping_10_cats", "waimai_10k")
SOCIAL_SETS = ("smp2020_ewect/usual", "smp2020_ewect/virus")   # Weibo posts, read as polarity (--social)


def sentiment_data(args) -> tuple[list, dict]:
    """(training items, evaluation splits): items are ``(text, label)``."""
    from recipes.sentiment_analysis.augment import SIZES
    from recipes.sentiment_analysis.train import augmented, read_smp2020, read_statements, read_tsv

    root = Path(args.data_dir)
    texts, labels = [], []
    for name in SENTIMENT_SETS:
        t, y = read_tsv(root / name / "train.tsv")
        texts += t
        labels += y
    reviews = len(texts)
    for name in SOCIAL_SETS if args.social else ():
        t, y = read_smp2020(root / name / "train.tsv")
        texts += t
        labels += y
    if args.augment:
        # As the char recipe reads them: the opinion-free real sentences scale with the rest.
        statements = (read_statements(args.neutral_text, round(SIZES["no_opinion_real"] * args.augment_scale))
                      if args.neutral_text else [])
        made, made_labels, _ = augmented(texts[:reviews], labels[:reviews], args.augment_kinds, seed=0, scale=args.augment_scale,
                                         statements=statements)
        neutral = sum(y < 0 for y in made_labels)
        log(f"augmentation: {len(made)} sentences ({', '.join(args.augment_kinds)}; {neutral} without an opinion, "
            "trained towards equal probabilities)")
        texts, labels = texts + made, labels + made_labels
    splits = {f"{name}/{split}": list(zip(*read_tsv(root / name / f"{split}.tsv")))
              for name in SENTIMENT_SETS for split in ("dev", "test")}
    for name in SOCIAL_SETS if args.social else ():
        splits.update({f"{name}/{split}": list(zip(*read_smp2020(root / name / f"{split}.tsv")))
                       for split in ("dev", "test")})
    return list(zip(texts, labels)), splits


def similarity_data(args) -> tuple[list, dict, dict]:
    """(training items, selection splits, report splits): items are ``((text1, text2), label)``."""
    from recipes.text_similarity import train as recipe

    from recipes.text_similarity.data import read_contrast_dev

    recipe_args = recipe.parse_args(["--data-dir", args.data_dir, "--out", str(args.out),
                                     "--hard-negatives", str(args.hard_negatives),
                                     *(["--lcqmc-held-out", str(args.lcqmc_held_out)] if args.lcqmc_held_out else []),
                                     *(["--kinds", args.kinds] if args.kinds else []),
                                     *(["--framed-questions", str(args.framed_questions)] if args.framed_questions else []),
                                     *(["--ocnli"] if args.ocnli else [])])
    _, parts, _, selection, report, _ = recipe.load_pairs(recipe_args)
    train = []
    for name, pairs in parts.items():
        repeat = recipe_args.lcqmc_repeat if name == "lcqmc_dev_train_part" else 1
        train += [((p.text1, p.text2), p.label) for p in pairs] * repeat
    as_items = lambda pairs: [((p.text1, p.text2), p.label) for p in pairs]  # noqa: E731
    report = {name: as_items(pairs) for name, pairs in report.items()}
    if recipe.SWAP_DEV.is_file():
        report["swap_dev"] = as_items(recipe.read_generated(recipe.SWAP_DEV))
    # The everyday contrast set, whole and per kind (report only: it picks neither epoch nor threshold).
    contrast = read_contrast_dev()
    report["contrast_dev"] = [((r["text1"], r["text2"]), r["label"]) for r in contrast]
    for kind in dict.fromkeys(r["kind"] for r in contrast):
        report[f"contrast_dev/{kind}"] = [((r["text1"], r["text2"]), r["label"]) for r in contrast if r["kind"] == kind]
    return train, {name: as_items(pairs) for name, pairs in selection.items()}, report


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("task", choices=("sentiment", "similarity"))
    parser.add_argument("--encoder", required=True, help="a pretraining checkpoint.pt (portable.py unpack)")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", required=True, type=Path, help="the package folder to write")
    parser.add_argument("--name", help="model name (default: the --out folder's name)")
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--float16", action="store_true", help="store matrices as float16 (half the size)")
    parser.add_argument("--checkpoint", type=Path, help="also save the PyTorch state dict here")
    parser.add_argument("--augment", action="store_true", help="sentiment: add augment.py's sentences")
    parser.add_argument("--augment-kinds", help="sentiment: which kinds, comma-separated (default: the char CNN "
                                                "recipe's DEFAULT_AUGMENT; add no_opinion for statements of fact)")
    parser.add_argument("--augment-scale", type=float, default=1.0,
                        help="sentiment: how many of augment.py's sentences, as a share of its SIZES (the char "
                             "recipe's --augment-scale; below 1 the reviews weigh more)")
    parser.add_argument("--neutral-text", nargs="*", default=[],
                        help="sentiment, no_opinion: files of real sentences without an opinion (as the char recipe's)")
    parser.add_argument("--neutral-weight", type=float, default=0.5,
                        help="sentiment, no_opinion: weight of its loss (cross-entropy to equal probabilities)")
    parser.add_argument("--social", action="store_true",
                        help="sentiment: also train on SMP2020-EWECT's polar Weibo posts (happy positive; angry, sad, "
                             "fear negative) and score its dev and test splits")
    parser.add_argument("--init", type=Path, help="start from this fine-tuned package's weights (encoder and head; "
                                                  "a transformer_classifier package of the same encoder) instead "
                                                  "of the bare encoder: a second stage of fine-tuning")
    parser.add_argument("--hard-negatives", type=int, default=0, help="similarity: as the fast recipe's option")
    parser.add_argument("--lcqmc-held-out", type=int, help="similarity: as the fast recipe's option (default: its own)")
    parser.add_argument("--kinds", help="similarity, with --hard-negatives: the generated kinds, as the fast recipe's "
                                        "option (the everyday contrasts: antonym, question, setting)")
    parser.add_argument("--framed-questions", type=int, default=0,
                        help="similarity, with --hard-negatives: as the fast recipe's option")
    parser.add_argument("--ocnli", action="store_true",
                        help="similarity: OCNLI train's contradictions join the pairs as label 0 (the fast recipe's option)")
    parser.add_argument("--max-chars", type=int, default=None,
                        help="chars per text in fine-tuning and scoring (default: 126 / 62 a pair text)")
    parser.add_argument("--package-max-length", type=int, default=None,
                        help="the package's max_length, what the task reads of a text (default: sentiment 254, "
                             "the pretraining length less [CLS] and [SEP]; a pair text: --max-chars)")
    add_optimizer_options(parser, epochs=1.0)
    parser.add_argument("--max-minutes", type=float, help="stop training after so long (a guard for a time-limited "
                                                           "machine: the schedule is not shortened)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 ... (auto: cuda where there is one)")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None, help="default: on with CUDA")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    if (args.augment_kinds or args.neutral_text) and not (args.augment and args.task == "sentiment"):
        parser.error("--augment-kinds and --neutral-text choose what sentiment's --augment adds: give --augment")
    if args.augment_scale != 1.0 and not (args.augment and args.task == "sentiment"):
        parser.error("--augment-scale sizes what sentiment's --augment adds: give --augment")
    if (args.kinds or args.framed_questions or args.ocnli) and args.task != "similarity":
        parser.error("--kinds, --framed-questions and --ocnli choose similarity's training pairs")
    if args.augment_scale <= 0:
        parser.error("--augment-scale must be above 0 (leave out --augment for none)")
    if args.neutral_text and "no_opinion" not in (args.augment_kinds or "").split(","):
        parser.error("--neutral-text feeds the no_opinion augmentation kind: add it to --augment-kinds")
    from recipes.sentiment_analysis.train import DEFAULT_AUGMENT

    # The kinds sentiment's --augment adds ([] without it).
    args.augment_kinds = (args.augment_kinds.split(",") if args.augment_kinds else list(DEFAULT_AUGMENT)) \
        if args.augment else []
    return args


# What each recipe task's package is for, and its labels in output order.
PACKAGE_TASKS = {"sentiment": ("sentiment_analysis", ["negative", "positive"]),
                 "similarity": ("text_similarity", [0, 1])}
# How each reads text: the encoder's own normalisation; pairs as the fast matcher reads them, also
# without punctuation and spaces (its "strip" step keeps every char the encoder's vocabulary knows).
READING = {"sentiment": NORMALIZATION, "similarity": PAIR_NORMALIZATION}


def main(argv=None) -> int:
    from recipes.sentiment_analysis.train import targets

    args = parse_args(argv)
    started = time.monotonic()
    cuda = torch.cuda.is_available() if args.device == "auto" else args.device.startswith("cuda")
    device = torch.device("cuda" if cuda else "cpu") if args.device == "auto" else torch.device(args.device)
    use_bf16 = cuda if args.bf16 is None else args.bf16
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    checkpoint = torch.load(args.encoder, map_location="cpu", weights_only=True)
    config = EncoderConfig(**{**checkpoint["config"]["encoder"], "dropout": args.dropout})
    model = Classifier(config)
    state = {k[len("encoder."):]: v for k, v in checkpoint["model"].items() if k.startswith("encoder.")}
    model.encoder.load_state_dict(state)
    vocab = CharVocab(checkpoint["vocab"])
    if args.init:
        load_package_weights(model, args.init, vocab)
        init = json.loads((args.init / "manifest.json").read_text(encoding="utf-8"))
        log(f"started from {args.init}: {init['name']} {init['version']}")
    model.to(device).train()
    max_chars = args.max_chars or (126 if args.task == "sentiment" else 62)
    inputs = Inputs(vocab, max_chars, READING[args.task])

    if args.task == "sentiment":
        train, report_splits = sentiment_data(args)
        selection = {}
    else:
        train, selection, report_splits = similarity_data(args)
    log(f"{len(train)} training items")

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)

    def probability(items):
        return positive_probability(model, inputs, items, device=device, autocast=autocast())

    def drawn(item):   # a pair in a random order each time, so the model learns no side
        return item if isinstance(item, str) or rng.random() < 0.5 else item[::-1]

    # Batches of similar length (fewer padded positions: CPU time is the budget), in a shuffled order.
    order = sorted(range(len(train)), key=lambda i: text_length(train[i][0]))
    batches = [order[i:i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    total = max(1, round(len(batches) * args.epochs))
    optimizer, scheduler, warmup = adamw_with_warmup(model, args, total, fused=cuda)
    step, tokens = 0, 0
    while step < total:
        rng.shuffle(batches)
        for batch in batches[:total - step]:
            ids = inputs.batch([drawn(train[i][0]) for i in batch]).to(device)
            with autocast():
                logits = model(ids)
            # A labelled text's one-hot, or for a text without an opinion (label -1) neutral_weight
            # times equal halves: the char recipe's outlier exposure (recipes.sentiment_analysis.train.targets).
            weights = torch.from_numpy(targets(np.array([train[i][1] for i in batch]), args.neutral_weight))
            loss = -(weights.to(device) * F.log_softmax(logits.float(), -1)).sum(-1).mean()
            update(model, loss, optimizer, scheduler)
            step += 1
            tokens += ids.numel()
            if step % 200 == 0:
                minutes = (time.monotonic() - started) / 60
                log(f"step {step}/{total} loss {loss.item():.4f} {tokens / minutes / 60:.0f} tokens/s")
            if args.max_minutes and time.monotonic() - started > args.max_minutes * 60:
                log(f"--max-minutes {args.max_minutes}: stopping at step {step}/{total}")
                total = step
                break
    train_minutes = (time.monotonic() - started) / 60

    def accuracy(items, threshold):
        p = probability([x for x, _ in items])
        return float(((p >= threshold) == np.array([y for _, y in items])).mean()) if items else None

    threshold, figures = 0.5, {}
    if selection:   # the fast recipe's rule: the threshold best on the selection splits together
        pooled = [item for items in selection.values() for item in items]
        p = probability([x for x, _ in pooled])
        y = np.array([label for _, label in pooled])
        candidates = np.unique(np.round(p, 4))
        threshold = float(max(candidates, key=lambda t: ((p >= t) == y).mean()))
        figures.update({name: accuracy(items, threshold) for name, items in selection.items()})
    figures.update({name: accuracy(items, threshold) for name, items in report_splits.items()})
    if args.task == "sentiment":
        from recipes.sentiment_analysis.robustness import LABELLED_KINDS, LABELS, generate_cases, run_suite

        cases = [c for c in generate_cases(seed=0, per_kind=300) if c.kind in LABELLED_KINDS]
        suite = run_suite(lambda texts: [LABELS[int(p >= 0.5)] for p in probability(texts)], cases)
        figures.update({f"suite_{kind}": r["held"] for kind, r in suite.items()})
    for name, value in figures.items():
        log(f"{name}: {value:.4f}")

    model.cpu().eval()
    if args.checkpoint:
        torch.save({"model": model.state_dict(), "config": config.__dict__, "vocab": checkpoint["vocab"]},
                   args.checkpoint)
    task, labels = PACKAGE_TASKS[args.task]
    fields = {
        "task": task, "name": args.name or args.out.name, "version": args.version,
        "description": "the project's pretrained char encoder with a classification head on [CLS], fine-tuned "
                       + ("for sentiment" if args.task == "sentiment" else "as a cross-encoder of the two texts"),
        "architecture": {"type": CLASSIFIER_TYPE, **config.architecture(), "num_labels": len(labels)},
        "labels": labels, "normalization": list(READING[args.task]),
        # Sentiment: the task cuts longer texts at sentence ends and averages the chunks; reading up to
        # the pretraining length whole scored ChnSentiCorp dev 0.9050 against 0.8925 in 126-char chunks.
        "max_length": args.package_max_length or (254 if args.task == "sentiment" else max_chars),
        "training": {"encoder": {"steps": checkpoint["step"], "tokens": checkpoint["tokens"],
                                 "objective": checkpoint["config"]["objective"]},
                     **({"train_files": [f"{name}/train.tsv" for name in SENTIMENT_SETS + (SOCIAL_SETS if args.social else ())]}
                        if args.task == "sentiment"
                        else {}),
                     **({"init": {"package": args.init.name, "name": init["name"], "version": init["version"]}}
                        if args.init else {}),
                     "items": len(train), "augment": args.augment_kinds, "augment_scale": args.augment_scale,
                     "hard_negatives": args.hard_negatives,
                     **({"kinds": args.kinds.split(",") if args.kinds else None, "framed_questions": args.framed_questions, "ocnli": args.ocnli}
                        if args.task == "similarity" else {}),
                     "optimizer": {"name": "AdamW", "lr": args.lr, "warmup": warmup, "schedule": "linear decay",
                                   "batch_size": args.batch_size, "seed": args.seed},
                     "steps": step, "epochs": round(step / len(batches), 2), "minutes": round(train_minutes, 1),
                     "tokens_per_s": round(tokens / max(train_minutes * 60, 1e-9)),
                     "device": device.type, "bf16": use_bf16},
        "metrics": {k: round(v, 4) for k, v in figures.items()},
        "framework": {"torch": torch.__version__, "numpy": np.__version__},
    }
    if args.task == "similarity":
        fields["threshold"] = threshold
    with tempfile.TemporaryDirectory(prefix="taskflow-classifier-") as scratch:
        scratch = Path(scratch)
        # The Paddle network is the encoder itself with the head beside it: no "encoder." prefix.
        arrays = paddle_arrays(model, float16=args.float16)
        write_weights(scratch / "weights.npz",
                      {name.removeprefix("encoder."): array for name, array in arrays.items()})
        vocab.save(scratch / "vocab.txt")
        manifest = write_package(args.out, fields, {"weights.npz": scratch / "weights.npz",
                                                    "vocab.txt": scratch / "vocab.txt"})
    log(f"wrote {args.out}: {manifest.name} {manifest.version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
