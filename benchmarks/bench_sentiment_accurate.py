"""sentiment_analysis mode="accurate": its speed beside the fast mode's, what running its encoder's
small batches on oneDNN buys, and its memory over many calls.

    OMP_NUM_THREADS=2 python benchmarks/bench_sentiment_accurate.py --data ../shared/data/sentiment   # writes RESULTS.md

The accurate mode's cascade hands its encoder only the reviews the fast network is unsure of: a
few rows a batch.  Where the encoder runs in bf16 (``precision="auto"`` on a CPU with AVX512-BF16
or AMX), batches of 2-16 rows run on oneDNN padded to a few shapes (``taskflow.predictor``,
``bucket_shape``); before, every batch of at most 16 rows ran on the plain fp32 kernels.  The two
rules are timed on the same Taskflow in alternating rounds (the earlier one by setting its
predictors back to it), beside the fast mode, on ChnSentiCorp test at batch 32 and batch 1.  Then
a fresh process makes calls of 1-32 texts drawn from the five dev splits and reads its RSS as the
calls go: oneDNN keeps kernels for every shape it meets, and this is where that would show.
RESULTS.md keeps one section per kind of CPU (``common.cpu_kind``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_kind, load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402
from bench_padding import soak  # noqa: E402


def predictors(flow) -> list:
    """Every predictor a Taskflow's task has made or can make (the package's and its members')."""
    return [p for p in flow.task.predictors if p is not None]


def small_batches_plain(flow, plain: bool) -> None:
    """Set the rule a flow's predictors follow for batches of 2-16 rows: the plain fp32 kernels
    (``plain``, the rule before bucketing) or, for a bf16 network that can be padded, oneDNN."""
    from taskflow.predictor import SMALL_BATCH

    for predictor in predictors(flow):
        if predictor._bucketed:
            predictor._plain_rows = SMALL_BATCH if plain else 1


def rate(flow, texts: list[str], batch: int, seconds: float) -> float:
    """Texts/s of ``flow`` over ``texts`` in calls of ``batch``, for at least ``seconds``."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for i in range(0, len(texts), batch):
            flow(texts[i:i + batch])
        done += len(texts)
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with chnsenticorp/test.tsv and the five dev splits")
    parser.add_argument("--seconds", type=float, default=10.0, help="time per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (the fastest is kept)")
    parser.add_argument("--calls", type=int, default=4000, help="calls of the memory soak (0: none)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args()

    from taskflow import Taskflow
    from taskflow.predictor import Precision

    data = Path(args.data)
    texts, _ = read_labelled_tsv(data / "chnsenticorp" / "test.tsv")
    fast, accurate = Taskflow("sentiment_analysis"), Taskflow("sentiment_analysis", mode="accurate")
    bf16 = [p for p in predictors(accurate) if p.options.precision is Precision.BF16]
    if not any(p._bucketed for p in bf16):
        print("no network of the accurate mode runs in bf16 with padded small batches on this machine "
              "(a CPU without AVX512-BF16 or AMX): nothing to compare, nothing written")
        return
    lines = [f"Machine: {machine()}; {load_note(quiet_load())}. Texts: ChnSentiCorp test ({len(texts)} reviews, "
             f"mean {sum(map(len, texts)) / len(texts):.0f} chars), the accurate mode's reviews route (its "
             "encoder reads what the reviews network is unsure of). One process, the default precision "
             f"(`auto`: the encoder in bf16), {args.rounds} alternating rounds of >= {args.seconds:.0f} s per "
             "cell, the fastest kept. Command: `OMP_NUM_THREADS=2 python benchmarks/bench_sentiment_accurate.py "
             "--data ../shared/data/sentiment`.", ""]
    labels = {"plain": None, "padded": None}
    for _ in range(2):      # warm-up: each rule's kernels, each batch size
        for plain in (True, False):
            small_batches_plain(accurate, plain)
            rate(accurate, texts[:256], 32, 0)
    small_batches_plain(accurate, True)
    labels["plain"] = accurate(texts)
    small_batches_plain(accurate, False)
    labels["padded"] = accurate(texts)
    changed = sum(a["label"] != b["label"] for a, b in zip(labels["plain"], labels["padded"]))
    rows, ratios = [], {}
    for batch in (32, 1):
        sample = texts[:256] if batch == 32 else texts[:64]
        best = {"fast": 0.0, "plain": 0.0, "padded": 0.0}
        for _ in range(args.rounds):
            best["fast"] = max(best["fast"], rate(fast, sample, batch, args.seconds))
            for name, plain in (("plain", True), ("padded", False)):
                small_batches_plain(accurate, plain)
                best[name] = max(best[name], rate(accurate, sample, batch, args.seconds))
        ratios[batch] = best
        rows.append([batch, f"{best['fast']:.0f}", f"{best['plain']:.0f}", f"{best['padded']:.0f}",
                     f"{best['padded'] / best['plain']:.2f}x", f"1/{best['fast'] / best['plain']:.1f}",
                     f"1/{best['fast'] / best['padded']:.1f}"])
    lines += [table(["batch", "fast texts/s", "accurate, small batches plain fp32", "accurate, small batches "
                     "padded, oneDNN bf16", "padded / plain", "plain / fast", "padded / fast"], rows), "",
              f"Labels of the 1,200 reviews that differ between the two rules: {changed}.", ""]
    if args.calls:
        soaks = []
        for rule in ("plain", "padded"):
            found = soak(data, "accurate", args.calls, small_batches=rule)
            marks, peak = found["rss"], found["peak"]
            soaks.append([f"small batches {rule}", *(f"{mb:.0f}" for _, mb in marks),
                          f"{marks[-1][1] - marks[0][1]:+.1f}", f"{peak:.0f}"])
        lines += [f"Memory: a fresh process for each rule, `mode=\"accurate\"`, {args.calls:,} calls of 1-32 texts "
                  "(uniform) drawn from the five dev splits (the same seeded draw), RSS in MB after so many calls:", "",
                  table(["rule", *(f"after {call:,}" for call, _ in marks), f"growth after {marks[0][0]}", "peak"],
                        soaks), ""]
    key, label = cpu_kind()     # one section per kind of CPU: oneDNN picks its bf16 kernels by it
    body = f"## sentiment_analysis: the accurate mode's speed, encoder in bf16 ({label})\n\n" + "\n".join(lines)
    if not args.no_write:
        update_section(f"bf16_sentiment_{key}", body)
    print(body)


if __name__ == "__main__":
    main()
