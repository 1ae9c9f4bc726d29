"""reading_comprehension speed: questions/s for 500-char and 5,000-char contexts,
batch 1 and 16 (windows per forward call), static vs dynamic graph, in one run.

    python benchmarks/bench_mrc.py --data ../shared/data/mrc/cmrc2018 [--compare OTHER_PACKAGE]

Items are CMRC 2018 dev questions; each context is the question's own context
followed by the next dev contexts, cut to exactly 500 or 5,000 chars (the
shipped model reads 5,000 chars as about a dozen overlapping windows); a
20,000-char row shows that long contexts run (static graph, batch 16).
``--compare`` times another package (e.g. the reader it replaced) in the same
run, static graph, on the same items.  Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, table, update_section  # noqa: E402


def items_of_length(rows, length: int, count: int) -> list[dict]:
    contexts = list(dict.fromkeys(r["context"] for r in rows))
    position = {c: i for i, c in enumerate(contexts)}
    out = []
    for row in rows[:count]:
        text, k = "", position[row["context"]]
        while len(text) < length:
            text += contexts[k % len(contexts)]
            k += 1
        out.append({"context": text[:length], "question": row["question"]})
    return out


def throughput(flow, items, seconds: float) -> float:
    flow(items[:2])  # warm-up: first-run kernels, oneDNN primitive caches
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        flow(items)
        done += len(items)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with dev.json (CMRC 2018)")
    parser.add_argument("--seconds", type=float, default=6.0, help="time per throughput cell")
    parser.add_argument("--compare", metavar="PACKAGE", help="another reading_comprehension package to time beside")
    args = parser.parse_args()

    from taskflow import Taskflow
    from taskflow.tasks.reading_comprehension.squad import read_squad

    rows = read_squad(Path(args.data) / "dev.json")
    load = quiet_load()
    with tempfile.TemporaryDirectory() as home:
        start = time.perf_counter()
        flow = Taskflow("reading_comprehension", home=home)
        flow(items_of_length(rows, 500, 1))
        cold = time.perf_counter() - start
        start = time.perf_counter()
        Taskflow("reading_comprehension", home=home)(items_of_length(rows, 500, 1))
        warm = time.perf_counter() - start
    manifest = flow.task.manifest

    other = Taskflow("reading_comprehension", task_path=args.compare).task.manifest if args.compare else None
    cells = []
    for length, count, batches in ((500, 48, (1, 16)), (5000, 8, (1, 16)), (20000, 2, (16,))):
        items = items_of_length(rows, length, count)
        for batch in batches:
            static = throughput(Taskflow("reading_comprehension", batch_size=batch), items, args.seconds)
            dynamic = (throughput(Taskflow("reading_comprehension", batch_size=batch, static=False), items, args.seconds)
                       if length <= 5000 else None)
            row = [f"{length:,}", batch, f"{static:.2f}", f"{dynamic:.2f}" if dynamic else "",
                   f"{static / dynamic:.2f}x" if dynamic else "", f"{1000 / static:.0f}"]
            if other:
                theirs = throughput(Taskflow("reading_comprehension", batch_size=batch, task_path=args.compare),
                                    items, args.seconds)
                row += [f"{theirs:.2f}", f"{static / theirs:.2f}x"]
            cells.append(row)

    body = "\n".join([
        "## reading_comprehension: speed",
        "",
        f"Model `{manifest.name}` {manifest.version}, windows of {flow.task.max_seq_len} chars with "
        f"{flow.task.doc_stride} overlap. Machine: {machine()}; {load_note(load)}. Command: "
        "`python benchmarks/bench_mrc.py --data ../shared/data/mrc/cmrc2018"
        + (f" --compare {args.compare}`; compared: `{other.name}` {other.version}, static graph." if other else "`."),
        "",
        f"Construction including the first call: {cold:.2f} s cold (empty cache, static export included), "
        f"{warm:.2f} s warm (export cached).",
        "",
        "Throughput, one process, all cores (static = Paddle Inference with oneDNN; dynamic = the paddle.nn.Layer "
        "in eval mode). `batch` is windows per forward call (`batch_size`); a 500-char context is one window, "
        "a 5,000-char one about a dozen, so batch 16 packs several questions or one long context per call:",
        "",
        table(["context chars", "batch", "static questions/s", "dynamic questions/s", "static/dynamic",
               "ms per question (static)"] + ([f"`{other.name}` {other.version} static questions/s", "ratio (shipped / compared)"] if other else []),
              cells),
    ])
    update_section("mrc_speed", body)
    print(body)


if __name__ == "__main__":
    main()
