"""One call per text against one call per list: what the README's "call with lists" advice rests on.

    python benchmarks/bench_calls.py --data ../shared/data/sentiment

sentiment_analysis on ChnSentiCorp test reviews, one process, all cores: ``flow(text)`` for each
text, ``flow(texts)`` once, and ``flow.stream(texts)``.  Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402


def rate(run, count: int, repeats: int = 3) -> float:
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = max(best, count / (time.perf_counter() - start))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with chnsenticorp/test.tsv")
    parser.add_argument("--texts", type=int, default=1000)
    args = parser.parse_args()
    from taskflow import Taskflow

    texts, _ = read_labelled_tsv(Path(args.data) / "chnsenticorp" / "test.tsv")
    texts = texts[: args.texts]
    load = quiet_load()
    flow = Taskflow("sentiment_analysis")
    flow(texts[:64])   # warm-up
    single = rate(lambda: [flow(t) for t in texts], len(texts))
    listed = rate(lambda: flow(texts), len(texts))
    streamed = rate(lambda: list(flow.stream(iter(texts))), len(texts))
    rows = [["one call per text", f"{single:,.0f}", "1.00x"],
            ["one call with the list", f"{listed:,.0f}", f"{listed / single:.2f}x"],
            ["flow.stream(iterable)", f"{streamed:,.0f}", f"{streamed / single:.2f}x"]]
    body = (f"### One call per text vs one call per list\n\n`python benchmarks/bench_calls.py --data {args.data}` "
            f"({machine()}; {load_note(load)}): sentiment_analysis (char_cnn), {len(texts):,} ChnSentiCorp test "
            f"reviews, best of 3 passes, texts/s:\n\n" + table(["how", "texts/s", "vs one per text"], rows))
    update_section("calls", body)
    print(body)


if __name__ == "__main__":
    main()
