"""Fine-tune the pretrained encoder for extractive reading comprehension, and write the package.

    python -m pretraining.finetune_span --encoder pretraining/runs/base/checkpoint.pt \\
        --train ../shared/data/mrc/cmrc2018/train.json --select ../shared/data/mrc/cmrc2018/trial.json \\
        --report ../shared/data/mrc/cmrc2018/dev.json --out pretraining/runs/mrc_span --epochs 3

SQuAD-format files (CMRC 2018's).  Each question becomes windows ``[CLS] question [SEP] context
window [SEP]`` of at most ``--max-seq-len`` ids, consecutive windows overlapping by ``--doc-stride``
context chars; a window without the answer is trained to point at ``[CLS]`` (position 0).  Text is
read as the encoder was pretrained (``taskflow.encoder.NORMALIZATION``, char for char), so a span's
positions are offsets into the caller's own context.  A question's answer is the best-scoring span
(start logit + end logit, at most ``--max-answer-len`` chars) over its windows.

The model is selected on ``--select`` after each epoch; ``--report`` is scored once, with the
selected weights.  F1 / EM are CMRC 2018's (``taskflow.tasks.reading_comprehension.metrics``).
The package (``--out``) is a ``transformer_span`` network for the ``reading_comprehension`` task,
with the window settings in its manifest; the task code that runs it is still to be written.

This is the pilot's downstream score too: fine-tune each pretrained candidate briefly and compare
``--select`` F1.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from taskflow.encoder import CLS, NORMALIZATION, SEP, CharVocab
from taskflow.packages import write_package
from taskflow.text import Normalizer

from .convert import paddle_arrays, write_weights
from .model import EncoderConfig, SpanExtractor

SPAN_TYPE = "transformer_span"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def task_module(name: str):
    """A module of the reading_comprehension task that needs only the standard library (``squad``,
    ``metrics``): imported, or on a checkout that is not installed (the GPU machine, where
    taskflow.tasks is mapped onto tasks/ only by an install) loaded from its file."""
    try:
        return importlib.import_module(f"taskflow.tasks.reading_comprehension.{name}")
    except ImportError:
        path = Path(__file__).resolve().parent.parent / "tasks" / "reading_comprehension" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"reading_comprehension_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


read_squad = task_module("squad").read_squad     # the task's reader of SQuAD-format files


def answer_span(example: dict) -> tuple[int, int] | None:
    """The first answer's ``(start, end)`` in the context; where the given offset does not hold the
    text, its nearest occurrence; None when the context does not contain it."""
    if not example["answers"]:
        return None
    text, start, context = example["answers"][0], example["start"], example["context"]
    if context[start:start + len(text)] != text:
        found = [i for i in range(len(context)) if context.startswith(text, i)]
        if not found:
            return None
        start = min(found, key=lambda i: abs(i - start))
    return start, start + len(text)


@dataclass
class Window:
    example: int          # index of the question
    ids: np.ndarray       # [CLS] question [SEP] context[begin:end] [SEP]
    offset: int           # where the context window starts in ids
    begin: int            # the window's first context char
    end: int
    start_label: int = 0  # positions in ids; 0 ([CLS]) when the answer is not in this window
    end_label: int = 0


def make_windows(examples: list[dict], vocab: CharVocab, *, max_seq_len: int, doc_stride: int,
                 max_question_len: int) -> list[Window]:
    normalize = Normalizer(NORMALIZATION)
    out = []
    for index, example in enumerate(examples):
        question = vocab.encode_array(normalize(example["question"]))[:max_question_len]
        context = vocab.encode_array(normalize(example["context"]))
        offset = len(question) + 2
        width = max_seq_len - offset - 1
        if width < 1:
            raise ValueError(f"--max-seq-len {max_seq_len} leaves no room for the context after the question")
        step = max(1, width - doc_stride)
        span = answer_span(example)
        begin = 0
        while True:
            end = min(len(context), begin + width)
            ids = np.concatenate([[CLS], question, [SEP], context[begin:end], [SEP]]).astype(np.int64)
            window = Window(index, ids, offset, begin, end)
            if span and begin <= span[0] and span[1] <= end:
                window.start_label, window.end_label = span[0] - begin + offset, span[1] - 1 - begin + offset
            out.append(window)
            if end >= len(context):
                break
            begin += step
    return out


def epoch_order(windows: list[Window], negatives: float, rng: random.Random) -> list[int]:
    """One epoch's windows, shuffled: every window that holds its answer, and each other window
    with probability ``negatives`` (drawn afresh each epoch, so all of them are seen over a run)."""
    drawn = [i for i, w in enumerate(windows) if w.start_label or negatives >= 1.0 or rng.random() < negatives]
    rng.shuffle(drawn)
    return drawn


def collate(windows: list[Window]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = np.zeros((len(windows), max(len(w.ids) for w in windows)), dtype=np.int64)
    for row, window in enumerate(windows):
        ids[row, :len(window.ids)] = window.ids
    return (torch.from_numpy(ids), torch.tensor([w.start_label for w in windows]),
            torch.tensor([w.end_label for w in windows]))


def best_span(start: np.ndarray, end: np.ndarray, window: Window, max_answer_len: int) -> tuple[float, int, int]:
    """``(score, begin, end)`` of the window's best span, in context chars (end exclusive)."""
    length = window.end - window.begin
    s = start[window.offset:window.offset + length].astype(np.float64)
    e = end[window.offset:window.offset + length].astype(np.float64)
    best = (-math.inf, 0, 0)
    for width in range(min(max_answer_len, length)):
        scores = s[:length - width] + e[width:]
        i = int(scores.argmax())
        if scores[i] > best[0]:
            best = (float(scores[i]), window.begin + i, window.begin + i + width + 1)
    return best


def predict(model, examples: list[dict], windows: list[Window], *, batch_size: int, max_answer_len: int,
            device, autocast) -> list[str]:
    best: dict[int, tuple[float, int, int]] = {}
    model.eval()
    with torch.no_grad(), autocast():
        for begin in range(0, len(windows), batch_size):
            chunk = windows[begin:begin + batch_size]
            ids, _, _ = collate(chunk)
            start, end = (t.float().cpu().numpy() for t in model(ids.to(device)))
            for row, window in enumerate(chunk):
                candidate = best_span(start[row], end[row], window, max_answer_len)
                if candidate[0] > best.get(window.example, (-math.inf,))[0]:
                    best[window.example] = candidate
    model.train()
    return [examples[i]["context"][best[i][1]:best[i][2]] if i in best else "" for i in range(len(examples))]


def cmrc_evaluate():
    """CMRC 2018's scoring, from the task's own module."""
    return task_module("metrics").evaluate


def score(model, examples, windows, args, device, autocast) -> dict:
    evaluate = cmrc_evaluate()
    predictions = predict(model, examples, windows, batch_size=args.batch_size * 2,
                          max_answer_len=args.max_answer_len, device=device, autocast=autocast)
    result = evaluate([e["answers"] for e in examples], predictions)
    result["mean_answer_len"] = round(sum(map(len, predictions)) / max(1, len(predictions)), 2)
    result["mean_gold_len"] = round(sum(len(e["answers"][0]) for e in examples if e["answers"])
                                    / max(1, sum(1 for e in examples if e["answers"])), 2)
    return result


def add_optimizer_options(parser: argparse.ArgumentParser, *, epochs: float) -> None:
    """The fine-tuning schedule's options, shared by every fine-tuning recipe (see adamw_with_warmup)."""
    parser.add_argument("--epochs", type=float, default=epochs)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--warmup", type=float, default=0.1, help="share of the steps")
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--dropout", type=float, default=0.1)


def adamw_with_warmup(model: torch.nn.Module, args: argparse.Namespace, total: int, *, fused: bool = False):
    """(optimizer, scheduler, warm-up steps): AdamW with weight decay on matrices only, the learning
    rate warmed up linearly over ``args.warmup`` of ``total`` steps, then decayed linearly to 0."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=args.lr, fused=fused or None)
    warmup = max(1, round(args.warmup * total))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    return optimizer, scheduler, warmup


def update(model: torch.nn.Module, loss: torch.Tensor, optimizer, scheduler) -> None:
    """One step: gradients of ``loss``, clipped to norm 1, applied; the learning rate moves on."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", required=True, help="a pretraining checkpoint.pt")
    parser.add_argument("--train", required=True)
    parser.add_argument("--select", required=True, help="the file the model is selected on (CMRC 2018 trial)")
    parser.add_argument("--report", help="scored once with the selected model (CMRC 2018 dev)")
    parser.add_argument("--out", required=True, help="the package folder to write")
    parser.add_argument("--name", help="model name (default: the --out folder's name)")
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-question-len", type=int, default=64)
    parser.add_argument("--max-answer-len", type=int, default=64)
    parser.add_argument("--negatives", type=float, default=1.0,
                        help="share of the windows without the answer drawn afresh each epoch (default all; "
                             "0.3 makes a CPU epoch about 3x cheaper on CMRC at --max-seq-len 256)")
    add_optimizer_options(parser, epochs=3.0)
    parser.add_argument("--max-minutes", type=float, help="stop training after so long")
    parser.add_argument("--float16", action="store_true", help="store matrices as float16")
    parser.add_argument("--checkpoint", help="also save the selected model's PyTorch state dict here")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None, help="default: on with CUDA")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    cuda = torch.cuda.is_available() if args.device == "auto" else args.device.startswith("cuda")
    device = torch.device("cuda" if cuda else "cpu") if args.device == "auto" else torch.device(args.device)
    use_bf16 = cuda if args.bf16 is None else args.bf16
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)

    checkpoint = torch.load(args.encoder, map_location="cpu", weights_only=True)
    config = EncoderConfig(**{**checkpoint["config"]["encoder"], "dropout": args.dropout})
    if not 0.0 <= args.negatives <= 1.0:
        raise SystemExit(f"--negatives {args.negatives}: give a share between 0 and 1")
    if args.max_seq_len > config.max_len:
        raise SystemExit(f"--max-seq-len {args.max_seq_len} exceeds the encoder's positions ({config.max_len})")
    model = SpanExtractor(config)
    encoder_state = {k[len("encoder."):]: v for k, v in checkpoint["model"].items() if k.startswith("encoder.")}
    missing, unexpected = model.load_state_dict(encoder_state, strict=False)
    if unexpected or sorted(missing) != ["span.bias", "span.weight"]:
        raise SystemExit(f"{args.encoder} does not fit the encoder: missing {missing}, unexpected {unexpected}")
    model.to(device).train()
    vocab = CharVocab(checkpoint["vocab"])

    shape = dict(max_seq_len=args.max_seq_len, doc_stride=args.doc_stride, max_question_len=args.max_question_len)
    train_examples = read_squad(args.train)
    train = make_windows(train_examples, vocab, **shape)
    select_examples = read_squad(args.select)
    select = make_windows(select_examples, vocab, **shape)
    answered = sum(1 for w in train if w.start_label)
    log(f"train: {len(train_examples)} questions, {len(train)} windows ({answered} holding the answer); "
        f"select: {len(select_examples)} questions")

    steps_per_epoch = math.ceil((answered + args.negatives * (len(train) - answered)) / args.batch_size)
    total = max(1, round(args.epochs * steps_per_epoch))
    optimizer, scheduler, warmup = adamw_with_warmup(model, args, total, fused=cuda)

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)

    history, best_state, best_f1 = [], None, -1.0
    step, stop = 0, False
    while step < total and not stop:
        order = epoch_order(train, args.negatives, rng)
        for begin in range(0, len(order), args.batch_size):
            ids, start_labels, end_labels = collate([train[i] for i in order[begin:begin + args.batch_size]])
            with autocast():
                start, end = model(ids.to(device))
            loss = (F.cross_entropy(start.float(), start_labels.to(device))
                    + F.cross_entropy(end.float(), end_labels.to(device))) / 2
            update(model, loss, optimizer, scheduler)
            step += 1
            if step % 50 == 0:
                log(f"step {step}/{total} loss {loss.item():.4f}")
            if args.max_minutes and time.monotonic() - started > args.max_minutes * 60:
                stop = True
            if begin + args.batch_size >= len(order) or step == total or stop:
                result = score(model, select_examples, select, args, device, autocast)
                history.append({"step": step, "epoch": round(step / steps_per_epoch, 2), **result})
                log(f"select at step {step}: {result}")
                if result["f1"] > best_f1:
                    best_f1 = result["f1"]
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            if step >= total or stop:
                break

    train_minutes = round((time.monotonic() - started) / 60, 1)   # loading and selection scoring included
    model.load_state_dict(best_state)
    metrics = {"selection": {"file": Path(args.select).name, **max(history, key=lambda h: h["f1"])}}
    if args.report:
        report_examples = read_squad(args.report)
        metrics["report"] = {"file": Path(args.report).name,
                             **score(model, report_examples, make_windows(report_examples, vocab, **shape), args,
                                     device, autocast)}
        log(f"report: {metrics['report']}")

    model.cpu().eval()
    if args.checkpoint:
        torch.save({"model": model.state_dict(), "config": config.__dict__}, args.checkpoint)
    with tempfile.TemporaryDirectory(prefix="taskflow-span-") as scratch:
        scratch = Path(scratch)
        write_weights(scratch / "weights.npz", paddle_arrays(model, float16=args.float16))
        vocab.save(scratch / "vocab.txt")
        manifest = write_package(args.out, {
            "task": "reading_comprehension", "name": args.name or Path(args.out).name, "version": args.version,
            "description": "the project's pretrained char encoder with a start/end head, fine-tuned for extractive QA",
            "architecture": {"type": SPAN_TYPE, **config.architecture()},
            "normalization": list(NORMALIZATION),
            "max_seq_len": args.max_seq_len, "doc_stride": args.doc_stride,
            "max_question_len": args.max_question_len, "max_answer_len": args.max_answer_len,
            "training": {"encoder": {"steps": checkpoint["step"], "tokens": checkpoint["tokens"],
                                     "objective": checkpoint["config"]["objective"]},
                         "train_file": Path(args.train).name, "questions": len(train_examples), "windows": len(train),
                         "train_minutes": train_minutes, "device": device.type, "bf16": use_bf16,
                         "negatives": args.negatives,
                         "optimizer": {"name": "AdamW", "lr": args.lr, "warmup": warmup, "schedule": "linear decay",
                                       "batch_size": args.batch_size, "seed": args.seed},
                         "steps": step, "epochs": round(step / steps_per_epoch, 2), "history": history},
            "metrics": metrics,
            "framework": {"torch": torch.__version__, "numpy": np.__version__},
        }, {"weights.npz": scratch / "weights.npz", "vocab.txt": scratch / "vocab.txt"})
    log(f"wrote {args.out}: {manifest.name} {manifest.version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
