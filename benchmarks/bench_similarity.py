"""text_similarity speed of both modes: pairs/s at batch 1, 32 and 128, static vs dynamic
graph, and construction time.

    python benchmarks/bench_similarity.py --data ../shared/data/matching [--compare PACKAGE]

Pairs are LCQMC test pairs.  Figures go to benchmarks/RESULTS.md.  ``--compare`` adds another
package's static throughput beside the fast mode's, in alternating rounds of the same run (e.g. a
cross-encoder of ``pretraining/finetune_classifier.py``: what it would cost as the accurate mode,
which may take no less than 1/5 of the fast mode's pairs/s).
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
    parser.add_argument("--compare", help="another package to measure beside the fast mode (static graph)")
    parser.add_argument("--rounds", type=int, default=5, help="--compare: alternating rounds of each")
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
        "both texts). Command: `python benchmarks/bench_similarity.py --data ../shared/data/matching"
        f"{' --compare ' + args.compare if args.compare else ''}`.",
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
    if args.compare:
        body += "\n\n" + compare(pairs, args.compare, args.rounds)
    update_section("similarity_speed", body)
    print(body)


def compare(pairs: list, package: str, rounds: int) -> str:
    """The fast mode and ``package`` over the same 1,024 pairs, alternating round by round (the
    machine's drift falls on both), at batch 32 and 128: medians and the median of the round ratios."""
    import statistics

    from taskflow import Taskflow

    sample = pairs[:1024]
    rows = []
    for batch in (32, 128):
        flows = {"fast": Taskflow("text_similarity", batch_size=batch),
                 "other": Taskflow("text_similarity", task_path=package, batch_size=batch)}
        rates = {name: [] for name in flows}
        for flow in flows.values():
            flow(sample[:64])
        for _ in range(rounds):
            for name, flow in flows.items():
                start = time.perf_counter()
                flow(sample)
                rates[name].append(len(sample) / (time.perf_counter() - start))
        ratio = statistics.median(o / f for o, f in zip(rates["other"], rates["fast"]))
        rows.append([batch, f"{statistics.median(rates['fast']):.0f}", f"{statistics.median(rates['other']):.0f}",
                     f"{ratio:.3f}x (1/{1 / ratio:.1f})"])
    fast = Taskflow("text_similarity").task.manifest
    other = Taskflow("text_similarity", task_path=package).task.manifest
    return "\n".join([
        f"Beside `{other.name}` {other.version} ({other['architecture']['type']}, `--compare {package}`), static, "
        f"{rounds} alternating rounds over 1,024 pairs:", "",
        table(["batch", f"`{fast.name}` {fast.version} pairs/s", f"`{other.name}` pairs/s", "ratio (median of rounds)"],
              rows)])


if __name__ == "__main__":
    main()
