"""Batch jobs over files: items/s of the CLI with 1 and 2 workers against one
process with 1 and 2 Paddle threads, peak RSS for 10k vs 100k lines (flat in
file size), and the Ray backend on 2 local CPUs against the local CLI.

    python benchmarks/bench_jobs.py --data ../shared/data/sentiment [--lines 100000]

Each case is a fresh `taskflow` CLI process (sentiment_analysis, shipped
model) over a .txt file of ChnSentiCorp reviews repeated to --lines lines.
Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402

# Runs the CLI in-process and reports its peak RSS and that of its worker processes.
RUNNER = """
import json, resource, sys, time
from taskflow.cli import main
start = time.perf_counter()
code = main(sys.argv[1:])
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"code": code, "seconds": time.perf_counter() - start, "rss_mb": own, "child_rss_mb": children}))
"""


def run_cli(args: list[str], env_home: str) -> dict:
    env = dict(os.environ, PPNLP_HOME=env_home)
    out = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()

    load = quiet_load()
    texts, _ = read_labelled_tsv(Path(args.data) / "chnsenticorp" / "train.tsv")
    rows, rss_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        big, small = tmp / "big.txt", tmp / "small.txt"
        big.write_text("".join(texts[i % len(texts)] + "\n" for i in range(args.lines)), encoding="utf-8")
        small.write_text("".join(texts[i % len(texts)] + "\n" for i in range(args.lines // 10)), encoding="utf-8")
        home = str(tmp / "home")
        run_cli(["sentiment_analysis", "预热"], home)  # export the static graph once, outside the timings

        cases = [
            ("1 process, 1 Paddle thread", ["--workers", "1", "--threads", "1"]),
            ("1 process, 2 Paddle threads (default)", ["--workers", "1"]),
            ("2 worker processes x 1 thread (default for --workers 2)", ["--workers", "2"]),
        ]
        base = ["sentiment_analysis", "--input", str(big), "--quiet", "--batch-size", "32"]
        for label, extra in cases:
            result = run_cli(base + ["--output", str(tmp / "out.jsonl")] + extra, home)
            rows.append([label, f"{args.lines / result['seconds']:.0f}", f"{result['seconds']:.1f}",
                         f"{max(result['rss_mb'], result['child_rss_mb']):.0f}"])
        for path, lines in ((small, args.lines // 10), (big, args.lines)):
            result = run_cli(["sentiment_analysis", "--input", str(path), "--quiet", "--output", str(tmp / "o.jsonl")], home)
            rss_rows.append([f"{lines:,}", f"{result['rss_mb']:.0f}"])
        if not args.skip_ray:
            start = time.perf_counter()
            result = run_cli(base + ["--output", str(tmp / "ray.jsonl"), "--backend", "ray", "--workers", "2"], home)
            seconds = time.perf_counter() - start
            rows.append(["--backend ray: 2 Ray actors on 2 local CPUs (Ray start-up included)",
                         f"{args.lines / seconds:.0f}", f"{seconds:.1f}", f"{result['rss_mb']:.0f} (driver)"])

    body = "\n".join([
        "## Batch jobs over files",
        "",
        load_note(load) + ".",
        "",
        f"`taskflow sentiment_analysis --input FILE --output out.jsonl` on {args.lines:,} lines of ChnSentiCorp "
        f"reviews (shipped model, batch 32), each case a fresh process. Machine: {machine()}. "
        f"Command: `python benchmarks/bench_jobs.py --data ../shared/data/sentiment --lines {args.lines}`.",
        "",
        table(["case", "items/s", "seconds", "peak RSS MB"], rows),
        "",
        "Peak RSS of one process against file size (memory is flat: records stream a chunk at a time):",
        "",
        table(["lines", "peak RSS MB"], rss_rows),
    ])
    update_section("jobs", body)
    print(body)


if __name__ == "__main__":
    main()
