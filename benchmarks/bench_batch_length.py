"""Batches by length against batches by count, for the lexical network.

    OMP_NUM_THREADS=2 python benchmarks/bench_batch_length.py --data ../shared/data     # writes RESULTS.md

The shipped lexical model (``Taskflow("lexical_analysis", batch_size=64, num_threads=2)``) over the
MSRA dev sentences (110k chars, one call), in one process, the task's ``batch_length`` (at most
``batch_size * batch_length`` positions a batch, so a long sentence sorted first no longer pads 63
shorter ones to its length) set to each value in turn, round after round, so that a drift of the
machine falls on every setting alike.  Each setting's outputs must equal the count-only batches';
beside chars/s, the share of padded positions each gives.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from common import load_note, machine, quiet_load, table, update_section  # noqa: E402


def padding_share(task, texts: list[str]) -> float:
    """The share of padded positions in the batches ``task`` makes of ``texts`` (its own rule)."""
    units = [unit for text in texts for unit in task.split(text)]
    order = sorted(range(len(units)), key=lambda k: -task.unit_length(units[k]))
    lengths = [task.unit_length(u) for u in units]
    read = sum(lengths[batch[0]] * len(batch) for batch in task._batches(order, units))
    return 1 - sum(lengths) / read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, type=Path, help="the shared data folder (lexical/msra_seg_propn/dev.txt)")
    parser.add_argument("--lengths", default="0,48,64,96", help="batch_length values; 0: batches by count only")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args()
    from bench_lexical import msra_dev
    from taskflow import Taskflow

    texts, _ = msra_dev(args.data)
    chars = sum(map(len, texts))
    settings = [int(v) for v in args.lengths.split(",")]
    load = quiet_load()
    flow = Taskflow("lexical_analysis", batch_size=64, num_threads=2)
    shipped = flow.task.batch_length
    flow(texts[:64])
    reference = None
    rates: dict[int, list[float]] = {v: [] for v in settings}
    for _ in range(args.rounds):
        for value in settings:
            flow.task.batch_length = value or None
            start = time.perf_counter()
            out = flow(texts)
            rates[value].append(chars / (time.perf_counter() - start))
            if reference is None and not value:
                reference = out
            elif reference is not None and out != reference:
                raise SystemExit(f"batch_length={value} changed the output")
    padded = {}
    for value in settings:
        flow.task.batch_length = value or None
        padded[value] = padding_share(flow.task, texts)
    base = statistics.median(rates[0]) if 0 in rates else None
    rows = []
    for value in settings:
        median = statistics.median(rates[value])
        rows.append([f"{value}" + (" (shipped)" if value == shipped else "") if value else "none (batches of 64)",
                     f"{padded[value]:.1%}",
                     f"{median:,.0f} ({min(rates[value]):,.0f}-{max(rates[value]):,.0f})",
                     f"{median / base:.2f}x" if base else ""])
    body = "\n".join([
        "## lexical_analysis: batches by length",
        "",
        f"Machine: {machine()}; {load_note(load)}. The shipped model, `Taskflow(\"lexical_analysis\", batch_size=64, "
        f"num_threads=2)`, MSRA dev ({len(texts):,} sentences, {chars:,} chars, one call), the task's `batch_length` "
        "set in turn in one process (a batch holds at most 64 x batch_length positions, its longest unit first); "
        f"median of {args.rounds} alternating rounds (range in brackets); every setting's tags equal those of batches "
        "by count. Command: `OMP_NUM_THREADS=2 python benchmarks/bench_batch_length.py --data ../shared/data`.",
        "",
        table(["batch_length", "padded positions", "chars/s", "vs batches by count"], rows),
    ])
    if not args.no_results:
        update_section("lexical_batch_length", body)
    print(body)


if __name__ == "__main__":
    main()
