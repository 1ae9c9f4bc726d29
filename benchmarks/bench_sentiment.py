"""sentiment_analysis speed and memory: static vs dynamic graph, batch sizes,
construction time, thread modes, RSS over 20,000 calls.

    python benchmarks/bench_sentiment.py --data ../shared/data/sentiment [--compare PACKAGE]

Texts are ChnSentiCorp test reviews (and, for the fast package's router, SMP2020 usual test posts).
Figures go to benchmarks/RESULTS.md.  ``--compare`` adds
another package's static throughput beside the shipped model's in the same run (e.g. an encoder
package of ``pretraining/finetune_classifier.py``: the accurate tier's price in texts/s).
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory in MB (``VmHWM``: its peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def throughput(flow, texts: list[str], seconds: float = 8.0) -> tuple[float, float]:
    flow(texts[:64])  # warm-up: first-run kernels, oneDNN primitive caches
    done = chars = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        flow(texts)
        done += len(texts)
        chars += sum(map(len, texts))
    elapsed = time.perf_counter() - start
    return done / elapsed, chars / elapsed


MEMORY = """
import json, sys
sys.path.insert(0, sys.argv[1])
from common import read_labelled_tsv
from bench_sentiment import rss_mb
from taskflow import Taskflow
texts, _ = read_labelled_tsv(sys.argv[2])
flow = Taskflow("sentiment_analysis")
for text in texts[:200]:
    flow(text)
before = rss_mb()
for i in range(int(sys.argv[3])):
    flow(texts[i % len(texts)])
# VmHWM, not getrusage's ru_maxrss: that one keeps the parent's peak across fork and exec, so it
# reported this benchmark's own memory (every model it had loaded), not the fresh process's.
print(json.dumps([before, rss_mb(), rss_mb("VmHWM")]))
"""


def memory_in_fresh_process(data: str, calls: int) -> tuple[float, float, float]:
    import json

    test = str(Path(data) / "chnsenticorp" / "test.tsv")
    out = subprocess.run([sys.executable, "-c", MEMORY, str(Path(__file__).parent), test, str(calls)],
                         capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def fresh_process_seconds(home: str) -> tuple[float, float]:
    """A new process's seconds to its first result: from its start (``import paddle`` and ``taskflow``
    included), and from the moment ``import paddle`` returned (what the package itself costs)."""
    code = (
        "import time; t = time.perf_counter(); import paddle; p = time.perf_counter(); "
        "from taskflow import Taskflow; f = Taskflow('sentiment_analysis'); f(['很好']); "
        "e = time.perf_counter(); print(e - t, e - p)"
    )
    out = subprocess.run([sys.executable, "-c", code], env={"PPNLP_HOME": home, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    whole, after_paddle = map(float, out.stdout.strip().splitlines()[-1].split())
    return whole, after_paddle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with chnsenticorp/test.tsv")
    parser.add_argument("--seconds", type=float, default=8.0, help="time per throughput cell")
    parser.add_argument("--calls", type=int, default=20000, help="single-text calls for the RSS check")
    parser.add_argument("--compare", help="another package to measure beside the shipped model (static graph)")
    args = parser.parse_args()

    from taskflow import Taskflow

    texts, _ = read_labelled_tsv(Path(args.data) / "chnsenticorp" / "test.tsv")
    lines = [f"Machine: {machine()}; {load_note(quiet_load())}. Texts: ChnSentiCorp test ({len(texts)} reviews, "
             f"mean {sum(map(len, texts)) / len(texts):.0f} chars). Command: "
             f"`python benchmarks/bench_sentiment.py --data ../shared/data/sentiment"
             f"{' --compare ' + args.compare if args.compare else ''}`.", ""]

    with tempfile.TemporaryDirectory() as home:
        start = time.perf_counter()
        flow = Taskflow("sentiment_analysis", home=home)
        flow(["很好"])
        cold = time.perf_counter() - start
        start = time.perf_counter()
        Taskflow("sentiment_analysis", home=home)(["很好"])
        warm = time.perf_counter() - start
        runs = [fresh_process_seconds(home) for _ in range(3)]
        fresh, after_paddle = min(r[0] for r in runs), min(r[1] for r in runs)
    lines += ["Construction (including the first call):", "", table(
        ["case", "seconds"],
        [["cold: empty cache, static export included", f"{cold:.2f}"],
         ["warm: export cached, same process", f"{warm:.2f}"],
         ["warm: fresh process, `import taskflow` included", f"{fresh:.2f}"],
         ["warm: fresh process, from the end of `import paddle`", f"{after_paddle:.2f}"]]), ""]

    rows, ratio32 = [], None
    for batch in (1, 8, 32, 128):
        sample = texts[: max(batch, 256)]
        static = throughput(Taskflow("sentiment_analysis", batch_size=batch), sample, args.seconds)
        dynamic = throughput(Taskflow("sentiment_analysis", batch_size=batch, static=False), sample, args.seconds)
        if batch == 32:
            ratio32 = static[0] / dynamic[0]
        rows.append([batch, f"{static[0]:.0f}", f"{static[1]:.0f}", f"{dynamic[0]:.0f}", f"{dynamic[1]:.0f}",
                     f"{static[0] / dynamic[0]:.2f}x"])
    lines += ["Throughput, one process, all cores (static = Paddle Inference with oneDNN; "
              "dynamic = the paddle.nn.Layer in eval mode):", "",
              table(["batch", "static texts/s", "static chars/s", "dynamic texts/s", "dynamic chars/s", "static/dynamic"], rows),
              "", f"Static / dynamic at batch 32: **{ratio32:.2f}x**.", ""]

    fast = Taskflow("sentiment_analysis").task
    if fast.ensemble.router is not None:
        # The router's price: each text through the router and the one network it picks, against the
        # package's own network alone (ensemble=False), on reviews and on posts (where the other one runs).
        with open(Path(args.data) / "smp2020_ewect" / "usual" / "test.tsv", encoding="utf-8", newline="") as handle:
            posts = [row["text_a"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
        route_rows = []
        for genre, pool in (("reviews (ChnSentiCorp test)", texts), ("Weibo posts (SMP2020 usual test)", posts)):
            for batch in (1, 32):
                sample = pool[: max(batch, 256)]
                routed = throughput(Taskflow("sentiment_analysis", batch_size=batch), sample, args.seconds)[0]
                alone = throughput(Taskflow("sentiment_analysis", batch_size=batch, ensemble=False), sample,
                                   args.seconds)[0]
                route_rows.append([genre, batch, f"{routed:.0f}", f"{alone:.0f}", f"{routed / alone:.2f}x"])
        lines += [f"The fast package's router (`{fast.ensemble.router.model.name}`): every text through it and the "
                  "one network it picks, against the package's own network alone (`ensemble=False`), static, same run:",
                  "", table(["texts", "batch", "routed texts/s", "own network alone texts/s", "routed / alone"],
                            route_rows), ""]

    if args.compare:
        shipped = Taskflow("sentiment_analysis").task.manifest
        other = Taskflow("sentiment_analysis", task_path=args.compare).task.manifest
        compare_rows = []
        for batch in (1, 32):
            sample = texts[: max(batch, 256)]
            ours = throughput(Taskflow("sentiment_analysis", batch_size=batch), sample, args.seconds)[0]
            theirs = throughput(Taskflow("sentiment_analysis", task_path=args.compare, batch_size=batch), sample,
                                args.seconds)[0]
            compare_rows.append([batch, f"{ours:.0f}", f"{theirs:.0f}", f"{theirs / ours:.3f}x"])
        lines += [f"Beside `{other.name}` {other.version} ({other['architecture']['type']}, `--compare`), static, "
                  "same run:", "",
                  table(["batch", f"`{shipped.name}` {shipped.version} texts/s", f"`{other.name}` texts/s",
                         "ratio"], compare_rows), ""]

    # Thread safety costs: per-thread predictor clones (what taskflow does) vs one predictor behind a lock.
    flow = Taskflow("sentiment_analysis", batch_size=8, num_threads=1)
    chunks = [texts[i:i + 8] for i in range(0, 512, 8)]
    lock = threading.Lock()

    def locked(chunk):
        with lock:
            return flow(chunk)

    thread_rows = []
    for label, fn in (("clone per thread", flow), ("one predictor + lock", locked)):
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(fn, chunks[:8]))
            start = time.perf_counter()
            for _ in range(3):
                list(pool.map(fn, chunks))
            elapsed = time.perf_counter() - start
        thread_rows.append([label, f"{3 * 512 / elapsed:.0f}"])
    lines += ["Two threads sharing one instance (1 Paddle thread each, batch 8):", "",
              table(["mode", "texts/s"], thread_rows), ""]

    before, after, peak = memory_in_fresh_process(args.data, args.calls)
    lines += [f"Memory, in a fresh process holding one instance: {args.calls:,} single-text calls take RSS from "
              f"{before:.0f} MB (after 200 warm-up calls) to {after:.0f} MB (growth **{after - before:+.1f} MB**); "
              f"peak RSS {peak:.0f} MB.", ""]

    body = "## sentiment_analysis: speed and memory\n\n" + "\n".join(lines)
    update_section("sentiment_speed", body)
    print(body)


if __name__ == "__main__":
    main()
