"""text_similarity speed of both modes: pairs/s at batch 1, 32 and 128, static vs dynamic
graph, and construction time.

    python benchmarks/bench_similarity.py --data ../shared/data/matching

Pairs are LCQMC test pairs.  Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, table, update_section  # noqa: E402


def throughput(flow, pairs, seconds: float) -> float:
    flow(pairs[:64])  # warm-up: first-run kernels, oneDNN primitive caches
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        flow(pairs)
        done += len(pairs)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with lcqmc/test.tsv")
    parser.add_argument("--seconds", type=float, default=6.0, help="time per throughput cell")
    args = parser.parse_args()

    from taskflow import Taskflow
    from taskflow.tasks.text_similarity.pairs import read_pairs

    pairs = [[p.text1, p.text2] for p in read_pairs(Path(args.data) / "lcqmc" / "test.tsv")]
    mean_chars = sum(len(a) + len(b) for a, b in pairs) / len(pairs)

    with tempfile.TemporaryDirectory() as home:
        start = time.perf_counter()
        Taskflow("text_similarity", home=home)(pairs[:1])
        cold = time.perf_counter() - start
        start = time.perf_counter()
        Taskflow("text_similarity", home=home)(pairs[:1])
        warm = time.perf_counter() - start

    rows, ratios, static_at, names = [], {}, {}, {}
    for mode in ("fast", "accurate"):
        for batch in (1, 32, 128):
            sample = pairs[: max(4 * batch, 512)]
            flow = Taskflow("text_similarity", mode=mode, batch_size=batch)
            names[mode] = f"`{flow.task.manifest.name}` {flow.task.manifest.version}"
            static = throughput(flow, sample, args.seconds)
            dynamic = throughput(Taskflow("text_similarity", mode=mode, batch_size=batch, static=False), sample,
                                 args.seconds)
            ratios[mode, batch], static_at[mode, batch] = static / dynamic, static
            rows.append([mode, batch, f"{static:.0f}", f"{dynamic:.0f}", f"{static / dynamic:.2f}x",
                         f"{1000 / static * batch:.1f}" if batch > 1 else f"{1000 / static:.2f}"])

    body = "\n".join([
        "## text_similarity: speed",
        "",
        f"Models: {names['fast']} (default, `mode=\"fast\"`) and {names['accurate']} (`mode=\"accurate\"`), in one "
        f"run. Machine: {machine()}. Pairs: LCQMC test ({len(pairs):,} pairs, mean {mean_chars:.0f} chars per pair, "
        "both texts). Command: `python benchmarks/bench_similarity.py --data ../shared/data/matching`.",
        "",
        f"Construction of the default including the first call: {cold:.2f} s cold (empty cache, static export "
        f"included), {warm:.2f} s warm (export cached).",
        "",
        "Throughput, one process, all cores (static = Paddle Inference with oneDNN; dynamic = the paddle.nn.Layer "
        "in eval mode); a batch of 1 is one call per pair:",
        "",
        table(["mode", "batch", "static pairs/s", "dynamic pairs/s", "static/dynamic", "ms per batch (static)"], rows),
        "",
        f"Static / dynamic at batch 32: **{ratios['fast', 32]:.2f}x** (fast), {ratios['accurate', 32]:.2f}x "
        f"(accurate). Accurate / fast at batch 32 (static): {static_at['accurate', 32] / static_at['fast', 32]:.2f}x.",
    ])
    update_section("similarity_speed", body)
    print(body)


if __name__ == "__main__":
    main()
