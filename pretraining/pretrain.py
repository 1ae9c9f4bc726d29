"""Pretrain the encoder (MLM or ELECTRA) on corpus parts, in pieces that resume exactly.

    python -m pretraining.pretrain --corpus ../shared/data/corpus/*.txt.gz --vocab runs/vocab.txt \\
        --out runs/base --layers 6 --hidden 384 --heads 6 --ffn 1536 --seq-len 256 --batch-size 256 \\
        --lr 6e-4 --total-steps 30000 --max-minutes 9
    python -m pretraining.pretrain --resume runs/base/checkpoint.pt --corpus ... --max-minutes 9

A run stops when ``--total-steps`` are done, or this piece's ``--max-minutes`` have passed since the
process started, or its ``--max-steps`` are done (GPU calls are cut into 10-minute pieces), saving ``OUT/checkpoint.pt`` then, and every
``--save-minutes`` before.  ``--resume`` continues the run where the checkpoint left it: model,
optimizer, learning-rate schedule, step, position in the data and every random generator, so
pieces add up to the run one long call would have made.  The schedule is laid out over
``--total-steps`` (warm-up, then linear decay), not over minutes, for that reason.

``OUT/loss.jsonl`` gets a line every ``--log-every`` steps (step, tokens, minutes, learning rate,
losses, accuracies, tokens/s) and an ``"eval"`` line at each save with the loss on held-out
sequences: the README's curve is drawn from it.

On CUDA, bf16 autocast, ``torch.compile`` and fused AdamW are on by default (``--no-bf16``,
``--no-compile``, ``--no-fused-adam``); on CPU they are off.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from taskflow.encoder import CharVocab

from .data import SEGMENTERS, PackedCorpus, load_part, mask_batch
from .model import EncoderConfig, PretrainConfig, Pretrainer

CHECKPOINT = "checkpoint.pt"
LOSS_LOG = "loss.jsonl"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    data = parser.add_argument_group("data")
    data.add_argument("--corpus", nargs="+", required=True, help="corpus parts (gzip UTF-8, one document a line)")
    data.add_argument("--vocab", help="vocab.txt from pretraining.vocab (a resumed run uses the checkpoint's)")
    data.add_argument("--cache-dir", help="where tokenised parts are kept (default: OUT/cache)")
    data.add_argument("--segmenter", choices=sorted(SEGMENTERS), help="whole-word masking over this segmenter's words")
    data.add_argument("--workers", type=int, default=1, help="processes for segmenting the corpus")
    data.add_argument("--seq-len", type=int, help="ids per sequence, [CLS] and [SEP] included (default: 128, or a "
                      "resumed run's own; a longer one for the last phase trains the later positions)")
    data.add_argument("--heldout", type=int, default=256, help="sequences kept out of training for the eval loss")
    data.add_argument("--mask-rate", type=float, default=0.15)

    model = parser.add_argument_group("model (a resumed run keeps the checkpoint's)")
    model.add_argument("--layers", type=int, default=6)
    model.add_argument("--hidden", type=int, default=384)
    model.add_argument("--heads", type=int, default=6)
    model.add_argument("--ffn", type=int, default=1536)
    model.add_argument("--max-len", type=int, default=512, help="position table size (fine-tuning windows)")
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--objective", choices=["mlm", "electra"], default="mlm")
    model.add_argument("--generator-fraction", type=float, default=0.25)
    model.add_argument("--discriminator-weight", type=float, default=50.0)

    train = parser.add_argument_group("training")
    train.add_argument("--out", help="run folder: checkpoint, loss log, vocab (default: the --resume checkpoint's)")
    train.add_argument("--resume", help="a checkpoint.pt to continue")
    train.add_argument("--init-encoder", help="a new run whose encoder starts from this checkpoint's (checkpoint.pt "
                       "or a packed folder; its vocabulary and sizes too): e.g. ELECTRA's discriminator from an MLM "
                       "run, with a fresh generator")
    train.add_argument("--evaluate-only", action="store_true",
                       help="with --resume: print the checkpoint's held-out loss on these --corpus parts and stop, "
                            "writing nothing (two checkpoints compared on the same text)")
    train.add_argument("--batch-size", type=int, help="sequences per step (default: 128, or a resumed run's own)")
    train.add_argument("--lr", type=float, default=6e-4)
    train.add_argument("--min-lr-ratio", type=float, default=0.1, help="the decay ends at lr * this")
    train.add_argument("--warmup-steps", type=int, default=1000)
    train.add_argument("--total-steps", type=int, help="the whole run's length, over all pieces (default: 30000, "
                       "or a resumed run's own)")
    train.add_argument("--rewarm-steps", type=int, default=500,
                       help="after resuming a packed checkpoint (no optimizer state, see portable.py), warm "
                            "the learning rate up again over so many steps")
    train.add_argument("--weight-decay", type=float, default=0.01)
    train.add_argument("--grad-clip", type=float, default=1.0)
    train.add_argument("--max-minutes", type=float, default=None, help="stop this piece after so long (wall clock)")
    train.add_argument("--max-steps", type=int, default=None,
                       help="stop this piece after so many steps (the schedule still spans --total-steps)")
    train.add_argument("--save-minutes", type=float, default=5.0, help="save a checkpoint this often")
    train.add_argument("--log-every", type=int, help="steps per loss-log line (default: 50, or a resumed run's own)")
    train.add_argument("--seed", type=int, default=1)
    train.add_argument("--device", default="auto", help="auto (cuda when there is one), cpu, cuda")
    train.add_argument("--threads", type=int, help="CPU threads for torch")
    for flag in ("bf16", "compile", "fused-adam"):
        train.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, default=None,
                           help="default: on with CUDA, off on CPU")
    args = parser.parse_args(argv)
    if args.evaluate_only and not args.resume:
        parser.error("--evaluate-only scores a checkpoint: give --resume")
    if args.init_encoder and args.resume:
        parser.error("--init-encoder starts a new run; --resume continues one: give one of them")
    if not args.resume and not (args.out and (args.vocab or args.init_encoder)):
        parser.error("a new run needs --out and --vocab (or --init-encoder)")
    return args


# -------------------------------------------------------------- checkpoint
def save_checkpoint(path: Path, state: dict) -> None:
    """Readers see the old checkpoint or the new one, never half of one (a piece may be killed mid-save)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def rng_state() -> dict:
    # numpy's state as plain Python (its array as a list), so the checkpoint loads with weights_only=True.
    name, keys, position, has_gauss, cached = np.random.get_state(legacy=True)
    numpy_state = (name, keys.tolist(), int(position), int(has_gauss), float(cached))
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    name, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), position, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def trim_log(path: Path, step: int) -> None:
    """Drop log lines written after the checkpoint being resumed (a piece killed between saves
    logged steps that the resumed run takes again)."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text(encoding="utf-8").splitlines() if json.loads(line)["step"] <= step]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------ setup
def lr_factor(step: int, warmup: int, total: int, floor: float, rewarm_from: int | None = None,
              rewarm_steps: int = 0) -> float:
    """Warm-up, then linear decay to ``floor``; after a resume without optimizer state, the same
    curve scaled by a second warm-up that starts at ``rewarm_from``."""
    factor = (step + 1) / warmup if step < warmup else \
        max(floor, 1.0 - (1.0 - floor) * (step - warmup) / max(1, total - warmup))
    if rewarm_from is not None and rewarm_steps > 0 and step >= rewarm_from:
        factor *= min(1.0, (step - rewarm_from + 1) / rewarm_steps)
    return factor


def step_of_rewarm(checkpoint: dict, kept: dict) -> int | None:
    """Where the learning rate's second warm-up starts: at this checkpoint when it holds no
    optimizer state (a packed one), else wherever an earlier resume started one."""
    if "optimizer" not in checkpoint:
        return checkpoint["step"]
    return kept.get("rewarm_from")


def make_optimizer(model: torch.nn.Module, args, fused: bool):
    # Decay on matrices (Linear weights, embeddings); none on biases and norms, as BERT does.
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.98), eps=1e-6, fused=fused or None)


def evaluate(model, corpus: PackedCorpus, args, device, autocast) -> dict:
    """Loss on the held-out sequences, masked the same way at every evaluation (a fixed seed)."""
    if not len(corpus.heldout):
        return {}
    rng = np.random.default_rng([args.seed, 0xE7A1])
    totals: dict[str, float] = {}
    batches = 0
    was_training = model.training
    model.eval()
    # The generator's sampling (ELECTRA) draws from torch's generator: forked, so that an
    # evaluation leaves training's random stream as it was and a resumed run matches.
    devices = list(range(torch.cuda.device_count())) if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad(), autocast():
        for begin in range(0, len(corpus.heldout), args.batch_size):
            ids, starts = corpus.sequences(corpus.heldout[begin:begin + args.batch_size])
            inputs, labels = mask_batch(ids, starts, rng, args.vocab_size, args.mask_rate)
            out = model(torch.from_numpy(inputs).to(device), torch.from_numpy(labels).to(device), padded=False)
            for key, value in out.items():
                totals[key] = totals.get(key, 0.0) + float(value)
            batches += 1
    model.train(was_training)
    return {f"eval_{k}": round(v / batches, 5) for k, v in totals.items()}


def main(argv=None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    checkpoint = None
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu", weights_only=True)   # tensors and plain data, no code
        kept = checkpoint["args"]
        # What defines the run comes from the checkpoint; what this piece does (its budget, its
        # corpus files, where they are) from the command line.
        for name in ("layers", "hidden", "heads", "ffn", "max_len", "dropout", "objective", "generator_fraction",
                     "discriminator_weight", "lr", "min_lr_ratio", "warmup_steps", "weight_decay",
                     "grad_clip", "seed", "segmenter", "mask_rate", "heldout"):
            setattr(args, name, kept[name])
        # These may change between pieces, e.g. a last phase at --seq-len 512 with a smaller batch.
        for name in ("total_steps", "seq_len", "batch_size", "log_every"):
            if getattr(args, name) is None:
                setattr(args, name, kept[name])
        # A re-warm-up begun by an earlier resume goes on, whoever resumes next.
        args.rewarm_from = step_of_rewarm(checkpoint, kept)
        if "optimizer" in checkpoint and kept.get("rewarm_from") is not None:
            args.rewarm_steps = kept["rewarm_steps"]
        args.out = args.out or str(Path(args.resume).parent)
    args.total_steps = args.total_steps or 30000
    args.seq_len = args.seq_len or 128
    args.log_every = args.log_every or 50
    args.batch_size = args.batch_size or 128
    out = Path(args.out)
    init = None
    if args.init_encoder:
        from .portable import load

        init = load(args.init_encoder)
        sizes = init["config"]["encoder"]
        args.layers, args.hidden, args.heads = sizes["num_layers"], sizes["hidden_size"], sizes["num_heads"]
        args.ffn, args.max_len = sizes["ffn_size"], sizes["max_len"]
    vocab = CharVocab((checkpoint or init)["vocab"]) if (checkpoint or init) else CharVocab.load(args.vocab)
    if not args.evaluate_only:
        out.mkdir(parents=True, exist_ok=True)
        vocab.save(out / "vocab.txt")
    args.vocab_size = len(vocab)

    cuda = torch.cuda.is_available() if args.device == "auto" else args.device.startswith("cuda")
    device = torch.device("cuda" if cuda else "cpu") if args.device == "auto" else torch.device(args.device)
    use_bf16 = cuda if args.bf16 is None else args.bf16
    # One evaluation does not repay a compile.
    use_compile = (cuda and not args.evaluate_only) if args.compile is None else args.compile
    fused = cuda if args.fused_adam is None else args.fused_adam
    if args.threads:
        torch.set_num_threads(args.threads)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    cache_dir = args.cache_dir or (None if args.evaluate_only else out / "cache")
    parts = [load_part(p, vocab, segmenter=args.segmenter, cache_dir=cache_dir, workers=args.workers, log=log)
             for p in args.corpus]
    corpus = PackedCorpus(parts, args.seq_len, args.seed, heldout=args.heldout)
    log(f"corpus: {len(corpus.ids)} ids in {len(parts)} parts, {len(corpus)} training sequences of {args.seq_len}"
        f"{', whole-word masking (' + args.segmenter + ')' if args.segmenter else ''}")

    config = PretrainConfig(
        EncoderConfig(vocab_size=len(vocab), hidden_size=args.hidden, num_layers=args.layers, num_heads=args.heads,
                      ffn_size=args.ffn, max_len=args.max_len, dropout=args.dropout),
        objective=args.objective, generator_fraction=args.generator_fraction,
        discriminator_weight=args.discriminator_weight)
    if args.seq_len > config.encoder.max_len:
        raise SystemExit(f"--seq-len {args.seq_len} exceeds the position table (--max-len {config.encoder.max_len})")
    model = Pretrainer(config).to(device)
    optimizer = make_optimizer(model, args, fused)
    args.rewarm_from = getattr(args, "rewarm_from", None)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, args.warmup_steps, args.total_steps, args.min_lr_ratio,
                                       args.rewarm_from, args.rewarm_steps))
    step, tokens, train_seconds = 0, 0, 0.0
    if init:
        # The encoder, and whatever else has the same name and shape (an MLM run's head, for an MLM run);
        # ELECTRA's generator and detector start afresh.
        own = model.state_dict()
        taken = {k: v for k, v in init["model"].items() if k in own and own[k].shape == v.shape}
        if not all(f"encoder.{k}" in taken for k in model.encoder.state_dict()):
            raise SystemExit(f"{args.init_encoder}: its encoder does not fit this run's")
        model.load_state_dict(taken, strict=False)
        log(f"from {args.init_encoder} (step {init['step']}, {init['config']['objective']}): {len(taken)} of "
            f"{len(own)} tensors; the rest afresh")
    if checkpoint:
        model.load_state_dict(checkpoint["model"])     # float16 weights of a packed checkpoint become float32
        if "optimizer" in checkpoint:
            optimizer.load_state_dict(checkpoint["optimizer"])
        else:
            log(f"{args.resume} holds no optimizer state (a packed checkpoint): AdamW starts afresh and the "
                f"learning rate warms up again over {args.rewarm_steps} steps; this resume is not exact")
        scheduler.load_state_dict(checkpoint["scheduler"])
        if "optimizer" not in checkpoint:
            # A fresh optimizer holds the base rate; the first step must already take the schedule's.
            for group, base in zip(optimizer.param_groups, scheduler.base_lrs):
                group["lr"] = base * scheduler.lr_lambdas[0](checkpoint["step"])
        step, tokens, train_seconds = checkpoint["step"], checkpoint["tokens"], checkpoint["train_seconds"]
        if corpus.restore(checkpoint["data"]):
            log(f"resumed at step {step}, epoch {corpus.epoch}, sequence {corpus.offset} of {len(corpus)}")
        else:
            log(f"resumed at step {step}; the corpus or sequence length differs from the checkpoint's, "
                "so its data order starts afresh")
        set_rng_state(checkpoint["rng"])
        if not args.evaluate_only:
            trim_log(out / LOSS_LOG, step)
    parameters = sum(p.numel() for p in model.encoder.parameters())
    log(f"{config.objective} on {device}: encoder {parameters / 1e6:.2f}M parameters, bf16 {use_bf16}, "
        f"compile {use_compile}, fused AdamW {fused}; step {step} of {args.total_steps}")

    if use_compile:
        # The encoders only: their shapes are fixed, while the heads pick the masked positions
        # (a data-dependent shape that would break the graph anyway).  Module.compile keeps the
        # parameter names, so checkpoints do not depend on it.
        for name in ("encoder", "generator"):
            if hasattr(model, name):
                getattr(model, name).compile()

    def autocast():
        return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)

    if args.evaluate_only:
        # The held-out sequences are the corpus's own (seeded by the run's seed), so two checkpoints
        # of one run, given the same parts, are scored on the same masked text.
        print(json.dumps({"checkpoint": args.resume, "step": step, "tokens": tokens,
                          "corpus": [Path(p).name for p in args.corpus], "heldout_sequences": len(corpus.heldout),
                          **evaluate(model, corpus, args, device, autocast)}))
        return 0

    def state() -> dict:
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "step": step, "tokens": tokens, "train_seconds": train_seconds, "data": corpus.state(),
                # The steps since the last log line, so a resumed piece's first line averages the same steps.
                "log_window": [{k: float(v) for k, v in w.items()} for w in window],
                "rng": rng_state(), "vocab": vocab.tokens, "config": asdict(config), "args": vars(args),
                "torch": str(torch.__version__)}

    def save(reason: str) -> None:
        nonlocal last_save
        save_checkpoint(out / CHECKPOINT, state())
        with open(out / LOSS_LOG, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "tokens": tokens, "minutes": round(train_seconds / 60, 3),
                                     **evaluate(model, corpus, args, device, autocast)}) + "\n")
        last_save = time.monotonic()
        log(f"saved {out / CHECKPOINT} at step {step} ({reason})")

    model.train()
    window = list(checkpoint["log_window"]) if checkpoint else []
    last_save = window_start = time.monotonic()
    window_tokens = 0   # this piece's, for the speed
    budget = args.max_minutes * 60 if args.max_minutes else None
    stop = min(args.total_steps, step + args.max_steps) if args.max_steps else args.total_steps
    while step < stop:
        if budget is not None and time.monotonic() - started >= budget:
            break
        tic = time.monotonic()
        ids, starts = corpus.sequences(corpus.next_indices(args.batch_size))
        inputs, labels = mask_batch(ids, starts, np.random.default_rng([args.seed, step]), len(vocab), args.mask_rate)
        with autocast():
            out_step = model(torch.from_numpy(inputs).to(device, non_blocking=True),
                             torch.from_numpy(labels).to(device, non_blocking=True), padded=False)
        out_step["loss"].backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        step += 1
        tokens += ids.size
        window_tokens += ids.size
        window.append({k: v.detach() for k, v in out_step.items()} | {"grad_norm": grad_norm.detach()})
        train_seconds += time.monotonic() - tic
        if step % args.log_every == 0 or step == args.total_steps:
            means = {k: round(sum(float(w[k]) for w in window) / len(window), 5) for k in window[0]}
            elapsed = time.monotonic() - window_start
            record = {"step": step, "tokens": tokens, "minutes": round(train_seconds / 60, 3),
                      "lr": scheduler.get_last_lr()[0], **means,
                      "tokens_per_s": round(window_tokens / max(elapsed, 1e-9))}
            with open(out / LOSS_LOG, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            log(" ".join(f"{k} {v}" for k, v in record.items()))
            window, window_start, window_tokens = [], time.monotonic(), 0
        if time.monotonic() - last_save >= args.save_minutes * 60:
            save("every --save-minutes")
    save("finished" if step >= args.total_steps else "end of this piece")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
