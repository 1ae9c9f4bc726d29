"""sentiment_analysis over calls of every size: memory, speed and results of the shipped tree
beside another checkout of the project (``--baseline``: e.g. a ``git worktree`` of an earlier commit).

    OMP_NUM_THREADS=2 python benchmarks/bench_padding.py --data ../shared/data/sentiment --baseline ../before

oneDNN builds and keeps kernels for every input shape it meets; a network whose input declares its
``pad_id`` has each batch it runs on oneDNN padded to one of a few shapes
(``taskflow.predictor.bucket_shape``), so that a process answering calls of 1-32 texts of every
length does not grow with each new shape.  For each mode a fresh process per tree makes the same
seeded calls (1-32 texts, uniform, drawn from the five dev splits) and reads its RSS as they go;
then shorter fresh processes of both trees alternate for the speed (the median of the rounds), and
every text's label and score are compared between the trees.  Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, table, update_section  # noqa: E402

DEV = ["chnsenticorp/dev.tsv", "online_shopping_10_cats/dev.tsv", "waimai_10k/dev.tsv",
       "smp2020_ewect/usual/dev.tsv", "smp2020_ewect/virus/dev.tsv"]

CHILD = """
import array, csv, json, random, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from bench_sentiment import rss_mb
from bench_sentiment_accurate import small_batches_plain
from taskflow import Taskflow
paths, mode, calls, marks, small, out = json.loads(sys.argv[2])
texts = []
for path in paths:     # the reviews' column is text, the posts' text_a
    with open(path, encoding="utf-8", newline="") as handle:
        texts += [r.get("text") or r["text_a"] for r in csv.DictReader(handle, delimiter="\\t", quoting=csv.QUOTE_NONE)]
flow, rng, rss = Taskflow("sentiment_analysis", mode=mode), random.Random(0), []
small_batches_plain(flow, small == "plain")
flow(texts[:32])
# Each text's label and score, kept in flat arrays: a list of result dicts would grow by ~100 MB
# over the calls and be read as the process's growth.
labels, label_ids, scores = {}, array.array("b"), array.array("d")
start = time.perf_counter()
for call in range(1, calls + 1):
    for result in flow(rng.sample(texts, rng.randint(1, 32))):
        label_ids.append(labels.setdefault(result["label"], len(labels)))
        scores.append(result["score"])
    if call in marks:
        rss.append([call, rss_mb()])
seconds = time.perf_counter() - start
if out:
    names = sorted(labels)     # ids by label name, the same in every process
    ids = np.array([names.index(n) for n in sorted(labels, key=labels.get)])[np.array(label_ids)]
    np.save(out, np.stack([ids, np.array(scores)], axis=1))
print(json.dumps({"rss": rss, "peak": rss_mb("VmHWM"), "texts_per_s": len(scores) / seconds,
                  "taskflow": __import__("taskflow").__file__}))
"""


def soak(data: Path, mode: str, calls: int, *, tree: Path | None = None, small_batches: str = "padded",
         results: Path | None = None) -> dict:
    """A fresh process's ``{"rss": [[calls, MB], ...], "peak": MB, "texts_per_s": ...}`` over
    ``calls`` seeded calls of 1-32 dev texts in ``mode``; ``tree``: run that checkout's taskflow
    instead of the installed one; ``small_batches``: ``plain`` puts a bf16 network's 2-16-row
    batches back on the plain fp32 kernels; ``results``: save each text's label and score there."""
    marks = sorted({min(200, calls), calls // 4, calls // 2, calls} - {0})
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    argument = json.dumps([[str(data.resolve() / p) for p in DEV], mode, calls, marks, small_batches,
                           str(results) if results else ""])
    out = subprocess.run([sys.executable, "-c", CHILD, str(Path(__file__).parent), argument],
                         capture_output=True, text=True, env=env, cwd=Path(__file__).parent)  # not a checkout's root
    if out.returncode:
        raise SystemExit(f"the soak process failed:\n{out.stderr[-3000:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if tree is not None and not found["taskflow"].startswith(str(tree.resolve())):
        raise SystemExit(f"--baseline {tree} did not take: the process ran {found['taskflow']}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with the five sentiment dev splits")
    parser.add_argument("--baseline", required=True, type=Path, help="another checkout of the project to compare")
    parser.add_argument("--baseline-name", help="what to call it in the table (default: its git commit)")
    parser.add_argument("--calls", default="fast=20000,accurate=3000", help="soak calls per mode")
    parser.add_argument("--speed-calls", default="fast=1500,accurate=500", help="calls of each speed process")
    parser.add_argument("--rounds", type=int, default=3, help="alternating speed rounds")
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args()

    data, baseline = Path(args.data), args.baseline.resolve()
    name = args.baseline_name or subprocess.run(["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"],
                                                capture_output=True, text=True).stdout.strip() or str(baseline)
    soak_calls = {k: int(v) for k, v in (p.split("=") for p in args.calls.split(","))}
    speed_calls = {k: int(v) for k, v in (p.split("=") for p in args.speed_calls.split(","))}
    lines = [f"Machine: {machine()}; {load_note(quiet_load())}. Calls of 1-32 texts (uniform, the same seeded "
             "draw) from the five sentiment dev splits, a fresh process per tree and mode, the default options "
             f"of each mode. This tree beside `{name}` (the tree without the padding of every oneDNN batch). "
             f"Command: `OMP_NUM_THREADS=2 python benchmarks/bench_padding.py --data ../shared/data/sentiment "
             f"--baseline CHECKOUT_OF_{name}`.", ""]
    memory, speed, agree = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for mode, calls in soak_calls.items():
            found = {}
            for tree_name, tree in (("this tree", None), (name, baseline)):
                found[tree_name] = soak(data, mode, calls, tree=tree, results=Path(tmp) / f"{mode}-{tree_name}.npy")
                marks = found[tree_name]["rss"]
                memory.append([mode, tree_name, *(f"{mb:.0f}" for _, mb in marks),
                               f"{marks[-1][1] - marks[0][1]:+.0f}", f"{found[tree_name]['peak']:.0f}"])
            ours, theirs = (np.load(Path(tmp) / f"{mode}-{t}.npy") for t in ("this tree", name))
            same = ours[:, 0] == theirs[:, 0]
            agree.append([mode, f"{len(ours):,}", int((~same).sum()),
                          f"{np.abs(ours[same, 1] - theirs[same, 1]).max():.1e}"])
            memory_header = [f"after {call:,}" for call, _ in marks]
            rates: dict[str, list[float]] = {"this tree": [], name: []}
            for _ in range(args.rounds):
                for tree_name, tree in (("this tree", None), (name, baseline)):
                    rates[tree_name].append(soak(data, mode, speed_calls[mode], tree=tree)["texts_per_s"])
            ours_rate, theirs_rate = (statistics.median(rates[t]) for t in ("this tree", name))
            speed.append([mode, f"{speed_calls[mode]:,}", f"{ours_rate:.0f}", f"{theirs_rate:.0f}",
                          f"{ours_rate / theirs_rate:.2f}x"])
            lines += [f"RSS in MB, mode {mode!r}, {calls:,} calls, after so many calls:", "",
                      table(["mode", "tree", *memory_header, f"growth after {marks[0][0]}", "peak"],
                            [row for row in memory if row[0] == mode]), ""]
    lines += [f"Speed: {args.rounds} alternating rounds of a fresh process per tree, texts/s over its calls "
              "(after one warm-up call), the median:", "",
              table(["mode", "calls", "this tree texts/s", f"`{name}` texts/s", "ratio"], speed), "",
              "Results of every text of the soaks, this tree against the other:", "",
              table(["mode", "texts", "labels that differ", "largest score difference (same label)"], agree), ""]
    body = "## sentiment_analysis: memory and speed over calls of every size\n\n" + "\n".join(lines)
    print(body)
    if not args.no_write:
        update_section("sentiment_padding", body)


if __name__ == "__main__":
    main()
