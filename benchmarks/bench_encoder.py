"""The encoder's CPU inference cost by size: what each candidate of the pretraining pilot would cost
to run, before any of them is trained.

    python benchmarks/bench_encoder.py            # figures to benchmarks/RESULTS.md (section encoder_speed)

Speed does not depend on the weights' values, so each size runs with random weights (fixed seed),
packaged as ``pretraining/convert.py`` writes packages and run through ``taskflow.model.Model``
(static program with Paddle Inference, oneDNN on and off; the dynamic graph for comparison).
Inputs are random ids with no padding; tokens/s counts every position of the batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, table, update_section  # noqa: E402

# (layers, hidden, heads, ffn): the candidates, smallest first.
SIZES = [(4, 256, 4, 1024), (6, 384, 6, 1536), (12, 384, 6, 1536)]
VOCAB = 8000


def make_package(folder: Path, layers: int, hidden: int, heads: int, ffn: int, max_len: int) -> Path:
    import paddle

    from taskflow.encoder import SPECIAL_TOKENS, CharVocab
    from taskflow.encoder.network import TransformerEncoder
    from taskflow.packages import write_package
    from taskflow.weights import save_weights

    architecture = {"vocab_size": VOCAB, "hidden_size": hidden, "num_layers": layers, "num_heads": heads,
                    "ffn_size": ffn, "max_len": max_len}
    paddle.seed(1)
    folder.mkdir(parents=True)
    save_weights(TransformerEncoder(**architecture), folder / "weights.npz")
    CharVocab([*SPECIAL_TOKENS, *(chr(0x4E00 + i) for i in range(VOCAB - len(SPECIAL_TOKENS)))]).save(folder / "vocab.txt")
    write_package(folder, {"task": "encoder", "name": folder.name, "version": "0.0.0",
                           "architecture": {"type": "transformer_encoder", **architecture},
                           "normalization": ["width", "lower", "space"]},
                  {"weights.npz": folder / "weights.npz", "vocab.txt": folder / "vocab.txt"})
    return folder


def tokens_per_second(predictor, batch: int, length: int, seconds: float, rounds: int = 3) -> float:
    """The best of ``rounds`` timed windows: on cores shared with other work, the best window is
    the one least disturbed, so it is the closest to the network's own speed."""
    ids = np.random.default_rng(0).integers(5, VOCAB, size=(batch, length)).astype("int64")
    for _ in range(2):
        predictor.run({"input_ids": ids})
    best = 0.0
    for _ in range(rounds):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / rounds or calls < 2:
            predictor.run({"input_ids": ids})
            calls += 1
        best = max(best, calls * batch * length / (time.perf_counter() - start))
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=128, help="positions per sequence")
    parser.add_argument("--batches", default="1,8,32")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed per measurement (the best of 3 windows)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print, leave RESULTS.md alone")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]

    from taskflow.model import Model
    from taskflow.predictor import InputSpec, PredictorOptions

    load = quiet_load()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for layers, hidden, heads, ffn in SIZES:
            package = make_package(Path(scratch) / f"enc{layers}x{hidden}", layers, hidden, heads, ffn, max(512, args.length))
            parameters = layers * (4 * hidden * hidden + 2 * hidden * ffn) + (VOCAB + 512) * hidden
            speeds = {}
            for mode, options in (("static", PredictorOptions(num_threads=args.threads)),
                                  ("static, oneDNN off", PredictorOptions(num_threads=args.threads, onednn=False)),
                                  ("dynamic", PredictorOptions(num_threads=args.threads, static=False))):
                model = Model.load("encoder", None, task_path=package, home=Path(scratch) / "home", options=options)
                predictor = model.predictor([InputSpec("input_ids", "int64", (max(batches), args.length))])
                for batch in batches:
                    speeds[mode, batch] = tokens_per_second(predictor, batch, args.length, args.seconds)
                    print(f"{layers}x{hidden} {mode} batch {batch}: {speeds[mode, batch]:.0f} tokens/s", flush=True)
            for batch in batches:
                rows.append([f"{layers} x {hidden} (ffn {ffn})", f"{parameters / 1e6:.1f}M", batch,
                             f"{speeds['static', batch]:.0f}", f"{speeds['static, oneDNN off', batch]:.0f}",
                             f"{speeds['dynamic', batch]:.0f}",
                             f"{speeds['static', batch] / speeds['dynamic', batch]:.2f}x"])
    body = "\n\n".join([
        "## encoder: CPU inference cost by size (random weights)",
        f"Machine: {machine()}; {load_note(load)}, at the end {os.getloadavg()[0]:.1f}. {args.threads} threads, "
        f"sequences of {args.length} positions, best of 3 windows per figure, "
        f"vocabulary {VOCAB}. Command: `python benchmarks/bench_encoder.py`. Speed does not depend on the weights, so "
        "these are the costs of the pretraining pilot's candidate sizes before any is trained.",
        table(["layers x hidden", "parameters", "batch", "static tokens/s", "static, oneDNN off", "dynamic tokens/s",
               "static/dynamic"], rows),
    ])
    print(body)
    if not args.no_write:
        update_section("encoder_speed", body)


if __name__ == "__main__":
    main()
