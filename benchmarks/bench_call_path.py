"""The call path against another checkout's, in-process, in alternating runs; and the time to the
first result.

    python benchmarks/bench_call_path.py --data ../shared/data --other /path/to/older/checkout [--rounds 4]

Each round starts one process per checkout (this one first, then ``--other``, alternately), each
importing ``taskflow`` from its own checkout (``--other`` needs ``tasks`` and ``resources``
importable from its root: `git worktree add` gives that, with the ``taskflow/tasks`` and
``taskflow/resources`` links this script makes in it when they are missing).  In each process, after
a warm-up: sentiment_analysis (fast) and lexical_analysis on ChnSentiCorp test reviews, one text a
call (what a server or a loop over rows costs) and 64 texts a call, texts/s, best of 3 passes.  The
ratio this/other is taken round by round, so that a machine whose speed drifts compares like with
like; the median of the rounds is reported.  Also, in a fresh process of this checkout: seconds from
``import paddle`` to the first sentiment result (``Taskflow(...)`` and one call), without the
interpreter's start.  Figures go to benchmarks/RESULTS.md (``call_path``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("sentiment_analysis", "lexical_analysis")
SHAPES = (("one text a call", 1), ("64 texts a call", 64))


def _worker(root: str, data: str, texts_n: int, pin: int | None) -> None:
    if pin is not None:     # one core of its own: the other's noise (a neighbour, an interrupt) stays out
        os.sched_setaffinity(0, {pin})
    sys.path.insert(0, root)
    from taskflow import Taskflow

    texts, _ = read_labelled_tsv(Path(data) / "sentiment" / "chnsenticorp" / "test.tsv")
    texts = texts[:texts_n]
    figures = {}
    for task in TASKS:
        flow = Taskflow(task)
        flow(texts[:64])
        for name, size in SHAPES:
            count = min(len(texts), 300) if size == 1 else len(texts)
            best = 0.0
            for _ in range(3):
                start = time.perf_counter()
                for i in range(0, count, size):
                    flow(texts[i] if size == 1 else texts[i:i + size])
                best = max(best, count / (time.perf_counter() - start))
            figures[f"{task}: {name}"] = best
    print(json.dumps(figures))


def _first_result() -> None:
    start = time.perf_counter()
    import paddle  # noqa: F401  (timed: the import itself)

    imported = time.perf_counter()
    from taskflow import Taskflow

    Taskflow("sentiment_analysis")("这家店的菜很好吃")
    print(json.dumps({"import_paddle": imported - start, "first_result": time.perf_counter() - imported}))


def _run(args: list[str], cwd: Path, threads: str | None = None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": threads or os.environ.get("OMP_NUM_THREADS", "2")}
    done = subprocess.run([sys.executable, __file__, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"a worker failed in {cwd}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _link_folders(other: Path) -> None:
    """An older checkout imports ``taskflow.tasks`` / ``taskflow.resources`` from its root through these links."""
    for name in ("tasks", "resources"):
        link = other / "taskflow" / name
        if not link.exists():
            link.symlink_to(Path("..") / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the data folder (sentiment/chnsenticorp/test.tsv under it)")
    parser.add_argument("--other", required=True, help="another checkout of this repository to compare with")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--texts", type=int, default=640)
    parser.add_argument("--pin", type=int, metavar="CPU",
                        help="run each worker on this one CPU with one math thread (steadier one-text figures)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--first-result", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-results", action="store_true", help="print only; do not write RESULTS.md")
    args = parser.parse_args()
    if args.worker:
        return _worker(args.worker, args.data, args.texts, args.pin)
    if args.first_result:
        return _first_result()
    other = Path(args.other).resolve()
    _link_folders(other)
    data = str(Path(args.data).resolve())
    load = quiet_load()
    ratios: dict[str, list[float]] = {}
    this_rates: dict[str, list[float]] = {}
    other_rates: dict[str, list[float]] = {}
    pinned = [] if args.pin is None else ["--pin", str(args.pin)]
    threads = None if args.pin is None else "1"
    for _ in range(args.rounds):
        mine = _run(["--worker", str(ROOT), "--data", data, "--other", str(other), "--texts", str(args.texts),
                     *pinned], Path("/tmp"), threads)
        theirs = _run(["--worker", str(other), "--data", data, "--other", str(other), "--texts", str(args.texts),
                       *pinned], Path("/tmp"), threads)
        for key in mine:
            ratios.setdefault(key, []).append(mine[key] / theirs[key])
            this_rates.setdefault(key, []).append(mine[key])
            other_rates.setdefault(key, []).append(theirs[key])
    first = [_run(["--first-result", "--data", data, "--other", str(other)], Path("/tmp")) for _ in range(3)]
    rows = [[key, f"{statistics.median(this_rates[key]):,.0f}", f"{statistics.median(other_rates[key]):,.0f}",
             f"{statistics.median(ratios[key]):.2f}x ({min(ratios[key]):.2f}-{max(ratios[key]):.2f})"]
            for key in ratios]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=other, capture_output=True, text=True).stdout
    how = "" if args.pin is None else f" --pin {args.pin}"
    body = (f"`python benchmarks/bench_call_path.py --data ../shared/data --other CHECKOUT{how}` ({machine()}; "
            f"{load_note(load)}; CHECKOUT at {commit.strip() or 'an older commit'}; {args.rounds} rounds, "
            f"alternating, {args.texts} ChnSentiCorp test reviews, texts/s best of 3 passes per process"
            f"{'' if args.pin is None else f', each process on CPU {args.pin} alone with one math thread'}):\n\n"
            + table(["call", "this checkout", "other checkout", "ratio, median of rounds (range)"], rows)
            + "\n\nFrom `import paddle` to the first sentiment result (`Taskflow(\"sentiment_analysis\")` and one "
            f"call, a fresh process, 3 runs): median {statistics.median(f['first_result'] for f in first):.2f} s "
            f"(`import paddle` itself {statistics.median(f['import_paddle'] for f in first):.2f} s).\n")
    print(body)
    if not args.no_results:
        update_section("call_path" + ("" if args.pin is None else "_pinned"), body)


if __name__ == "__main__":
    main()
