"""Where a lexical_analysis call spends its time: Paddle Inference's own op timings.

    OMP_NUM_THREADS=2 python benchmarks/profile_lexical.py --data ../shared/data     # writes RESULTS.md

RESULTS.md keeps one section per kind of CPU (``common.cpu_kind``: vendor and widest vector unit),
``lexical_profile_<kind>``: a run on another kind adds its own instead of replacing the last.

One process (``--child``) runs the shipped model over the MSRA dev sentences (110k chars, one call,
batch 64, as the speed benchmarks do) ``--calls`` times with ``Config.enable_profile()`` on its
predictors; Paddle prints its profiling report when a predictor is freed, on the process's stdout,
which the parent reads.  Beside the op table: the share of the call's wall time spent inside
``Predictor.run`` (the rest is Python: tokenising, features, decoding), the padding share of the
batches the network got (sorted by length, so small); the machine line names the CPU's vector
extensions, by which oneDNN picks its kernels.  The first call is included (it builds oneDNN's primitives); the
report sums every call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from common import cpu_kind, load_note, machine, quiet_load, table, update_section  # noqa: E402

MARK = "PROFILE_JSON "


def child(data: Path, calls: int, sentences: int | None) -> None:
    """Run the profiled calls and print the wall-time figures as one JSON line; the profiling
    report follows, from Paddle, when the predictors are freed at exit."""
    import taskflow.predictor as predictor_module
    from bench_lexical import msra_dev

    texts, _ = msra_dev(data, sentences)
    plain = predictor_module.build_config

    def profiled(*args, **kwargs):
        config = plain(*args, **kwargs)
        config.enable_profile()
        return config

    predictor_module.build_config = profiled
    inside, cells = [0.0], [0]
    run = predictor_module.Predictor.run

    def timed_run(self, feeds):
        arrays = [a for a in feeds.values() if getattr(a, "ndim", 0) == 2]
        if arrays:
            cells[0] += arrays[0].shape[0] * arrays[0].shape[1]
        start = time.perf_counter()
        try:
            return run(self, feeds)
        finally:
            inside[0] += time.perf_counter() - start

    predictor_module.Predictor.run = timed_run
    from taskflow import Taskflow

    flow = Taskflow("lexical_analysis", batch_size=64, num_threads=int(os.environ.get("OMP_NUM_THREADS", "2")))
    wall = 0.0
    for _ in range(calls):
        start = time.perf_counter()
        flow(texts)
        wall += time.perf_counter() - start
    chars = sum(map(len, texts)) * calls
    print(MARK + json.dumps({"wall_s": wall, "inside_s": inside[0], "chars": chars, "cells": cells[0],
                             "sentences": len(texts), "calls": calls}), flush=True)
    del flow      # the predictors go, and Paddle prints their reports


def parse_report(text: str) -> list[dict]:
    """The top-level rows of Paddle's "Event Summary" (an op, not its indented infermeta), with
    calls and total ms, summed over the reports (one per predictor)."""
    ops: dict[str, dict] = {}
    for block in text.split("Event Summary")[1:]:
        for line in block.splitlines()[1:]:
            if not line.strip() or line.startswith("-"):
                if ops and line.startswith("-"):
                    break
                continue
            if line.startswith(" ") or line.startswith("Event") or "::" in line.split(" ", 1)[0]:
                continue
            parts = line.split()
            if len(parts) < 3 or not re.fullmatch(r"[\d.]+", parts[2]):
                continue
            row = ops.setdefault(parts[0], {"op": parts[0], "calls": 0, "ms": 0.0})
            row["calls"] += int(parts[1])
            row["ms"] += float(parts[2])
    return sorted(ops.values(), key=lambda r: -r["ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the shared data folder (lexical/msra_seg_propn/dev.txt under it)")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--sentences", type=int, help="only the first N dev sentences (trials; not written)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(Path(args.data), args.calls, args.sentences)
    load = quiet_load()
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--data", str(Path(args.data).resolve()),
               "--calls", str(args.calls)]
    if args.sentences:
        command += ["--sentences", str(args.sentences)]
    with tempfile.TemporaryDirectory(prefix="profile-lexical-") as scratch:   # Paddle writes profile.log in the cwd
        out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=scratch)
    figures = json.loads(next(l for l in out.stdout.splitlines() if l.startswith(MARK))[len(MARK):])
    ops = parse_report(out.stdout)
    if not ops:
        raise SystemExit("no profiling report in the child's output:\n" + out.stdout[-2000:] + out.stderr[-2000:])
    total = sum(r["ms"] for r in ops)
    rows = [[f"`{r['op']}`", r["calls"], f"{r['ms']:,.1f}", f"{r['ms'] / total:.1%}"] for r in ops[:10]]
    rest = ops[10:]
    if rest:
        rows.append([f"{len(rest)} other ops", sum(r["calls"] for r in rest), f"{sum(r['ms'] for r in rest):,.1f}",
                     f"{sum(r['ms'] for r in rest) / total:.1%}"])
    wall, inside = figures["wall_s"], figures["inside_s"]
    body = (f"Machine: {machine()}; {load_note(load)}. The shipped model, "
            f"`Taskflow(\"lexical_analysis\", batch_size=64, num_threads=2)`, {figures['calls']} calls over MSRA dev "
            f"({figures['sentences']:,} sentences, {figures['chars'] // figures['calls']:,} chars a call; the first "
            f"call, which builds oneDNN's primitives, included), `Config.enable_profile()` on its predictors. "
            f"Command: `OMP_NUM_THREADS=2 python benchmarks/profile_lexical.py --data DIR`.\n\n"
            f"Wall time {wall:.2f} s ({figures['chars'] / wall:,.0f} chars/s); inside `Predictor.run` "
            f"{inside / wall:.1%} of it, the rest Python (tokens, features, decoding). Padding: "
            f"{1 - figures['chars'] / max(figures['cells'], 1):.1%} of the positions the network read "
            f"(units sorted by length before batching).\n\n"
            "Paddle Inference's op timings, summed over the calls and the predictors:\n\n"
            + table(["op", "calls", "total ms", "share"], rows))
    print(body)
    if not args.sentences:
        key, label = cpu_kind()    # one section per kind of CPU: oneDNN and MKL pick kernels by it
        update_section(f"lexical_profile_{key}", f"## lexical_analysis: where a call's time goes ({label})\n\n" + body)


if __name__ == "__main__":
    main()
