"""Seeded random kills of batch jobs: N runs of `taskflow sentiment_analysis --input ... --output ...
--workers 2 --on-error skip`, each hit at a random moment by one fault, then finished with --resume.

    python benchmarks/kill_jobs.py [--runs 50] [--seed 0] [--lines 6000]

Faults, drawn per run: SIGKILL or SIGTERM of the parent (the CLI process), SIGKILL or
SIGTERM of a random worker process, SIGSTOP of a random worker (a hang; --worker-timeout 3).
The moment is uniform in the first --window seconds of the job (start-up included).
The input has a blank line every 997 lines, so the errors file is exercised too.

Each run must end without a hang (a 120 s limit), leave no worker process behind, never
print Paddle's C++ SIGTERM dump, exit 0, 3 (finished; a worker was replaced), 2 with one
clear error, or die by the parent's SIGKILL; after `--resume` (one process), its output
and errors file must equal those of a clean run byte for byte.  The counts go to
benchmarks/RESULTS.md (section "job_faults"); the exit status is 1 if any run failed.
Uses the tiny test model (tests/fixtures/make_tiny_models.py): the faults, not the
model, are under test.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
sys.path.insert(0, str(Path(__file__).parent))

from job_faults import Job, leftovers, wait_for, write_runner  # noqa: E402

FAULTS = ["parent SIGKILL", "parent SIGTERM", "worker SIGKILL", "worker SIGTERM", "worker SIGSTOP"]
PADDLE_DUMP = ("FatalError", "Termination signal", "C++ Traceback")
JOB_TIMEOUT = 120.0


def one_run(rng: random.Random, runner: Path, args: list[str], workdir: Path, reference: tuple[bytes, bytes],
            window: float) -> dict:
    fault = rng.choice(FAULTS)
    delay = rng.uniform(0.0, window)
    workdir.mkdir(parents=True, exist_ok=True)
    target = workdir / "out.jsonl"
    started = time.monotonic()
    job = Job(runner, [*args, "--output", str(target), "--workers", "2", "--worker-timeout", "3"], cwd=workdir)
    time.sleep(delay)
    who, signame = fault.split()
    signum = getattr(signal, signame)
    hit = "after the end"
    if job.process.poll() is None:
        if who == "parent":
            job.signal(signum)
            hit = f"parent at {delay:.1f} s"
        elif wait_for(lambda: job.current_workers() or job.process.poll() is not None, 30):
            workers = sorted(job.current_workers())
            if workers:
                try:
                    os.kill(rng.choice(workers), signum)
                    hit = f"worker at {time.monotonic() - started:.1f} s"
                except ProcessLookupError:
                    pass
    code, output = job.wait(JOB_TIMEOUT)
    row = {"fault": fault, "hit": hit, "code": code, "hung": code is None,
           "orphans": len(leftovers(job.workers)), "dump": any(m in output for m in PADDLE_DUMP)}
    if code in (0, 3):
        row["outcome"] = "finished" + (", a worker replaced or killed" if code == 3 else "")
    elif code == 2 and "taskflow: error:" in output and "Traceback" not in output:
        row["outcome"] = "stopped: one clear error"
    elif code == -signal.SIGKILL and fault == "parent SIGKILL":
        row["outcome"] = "parent killed"
    elif (code in (-signal.SIGTERM, 128 + signal.SIGTERM) and fault == "parent SIGTERM"
          and not target.with_name(target.name + ".partial.ckpt").exists()):
        # The signal came while Python and Paddle were still importing, before the CLI's handler (installed
        # as Paddle is imported, well before the first checkpoint): Python's default action, or Paddle's
        # own handler during its import (which prints its dump; counted below).
        row["outcome"] = "parent terminated while importing"
    else:
        row["outcome"] = f"UNCLEAR exit {code}"
        row["output"] = output[-2000:]
    resumed = None
    if not target.exists() and not row["hung"]:
        resumed, resume_output = Job(runner, [*args, "--output", str(target), "--resume"], cwd=workdir).wait(JOB_TIMEOUT)
        if resumed != 0:
            row["output"] = resume_output[-2000:]
    errors = target.with_name(target.name + ".errors.jsonl")
    row["resumed"] = resumed is not None
    row["exact"] = (target.exists() and target.read_bytes() == reference[0]
                    and (errors.read_bytes() if errors.exists() else b"") == reference[1])
    row["seconds"] = time.monotonic() - started
    row["dump_while_importing"] = row["dump"] and row["outcome"] == "parent terminated while importing"
    row["ok"] = (not row["hung"] and not row["orphans"] and (not row["dump"] or row["dump_while_importing"]) and row["exact"]
                 and not row["outcome"].startswith("UNCLEAR") and resumed in (None, 0))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lines", type=int, default=6000)
    parser.add_argument("--window", type=float, default=6.0, help="faults land in the first this many seconds")
    parser.add_argument("--workdir", help="where to keep the runs (default: a temporary directory)")
    parser.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = parser.parse_args()

    from make_tiny_models import TINY_BUILDERS

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.workdir or scratch)
        os.environ["PPNLP_HOME"] = str(root / "ppnlp_home")  # never the user's cache
        model = TINY_BUILDERS["sentiment_analysis"](root / "tiny")
        source = root / "in.txt"
        source.write_text("".join("\n" if i % 997 == 996 else f"第{i}条：{'服务很好，干净' if i % 3 else '太差了'}\n"
                                  for i in range(args.lines)), encoding="utf-8")
        runner = write_runner(root)
        cli = ["sentiment_analysis", "--input", str(source), "--task-path", str(model), "--batch-size", "16",
               "--threads", "1", "--quiet", "--on-error", "skip"]
        code, output = Job(runner, [*cli, "--output", str(root / "reference.jsonl")], cwd=root).wait(JOB_TIMEOUT)
        if code != 0:
            print(output)
            return 1
        reference = ((root / "reference.jsonl").read_bytes(), (root / "reference.jsonl.errors.jsonl").read_bytes())

        rows = []
        for run in range(args.runs):
            row = one_run(random.Random(args.seed + run), runner, cli, root / f"run{run:03d}", reference, args.window)
            rows.append(row)
            print(f"run {run:3d} seed {args.seed + run}: {row['fault']:15s} {row['hit']:20s} -> {row['outcome']}"
                  f"{', resumed' if row['resumed'] else ''}; {'ok' if row['ok'] else 'FAILED'} ({row['seconds']:.1f} s)",
                  flush=True)
            if not row["ok"]:
                print(row.get("output", ""), flush=True)

    failed = [r for r in rows if not r["ok"]]
    body = report(rows, args)
    print(body)
    if not args.no_write:
        from common import update_section

        update_section("job_faults", body)
    return 1 if failed else 0


def report(rows: list[dict], args) -> str:
    from common import machine, table

    by = collections.Counter((r["fault"], r["outcome"]) for r in rows)
    lines = [[fault, outcome, count] for (fault, outcome), count in sorted(by.items())]
    totals = {
        "runs": len(rows),
        "hangs (no exit within 120 s)": sum(r["hung"] for r in rows),
        "worker processes left behind": sum(r["orphans"] for r in rows),
        "runs printing Paddle's SIGTERM dump (after Paddle's import)": sum(r["dump"] and not r["dump_while_importing"]
                                                                           for r in rows),
        "runs printing it during Paddle's import (before taskflow can replace its handler)":
            sum(r["dump_while_importing"] for r in rows),
        "unclear exits": sum(r["outcome"].startswith("UNCLEAR") for r in rows),
        "runs finished by --resume": sum(r["resumed"] for r in rows),
        "outputs not byte-identical to a clean run (records lost, doubled or changed)": sum(not r["exact"] for r in rows),
    }
    seconds = sum(r["seconds"] for r in rows)
    return "\n".join([
        "## Batch jobs under random kills",
        "",
        f"{len(rows)} seeded runs (seeds {args.seed}-{args.seed + len(rows) - 1}) of `taskflow sentiment_analysis "
        f"--input in.txt --output out.jsonl --workers 2 --on-error skip --worker-timeout 3` over {args.lines:,} "
        f"lines (a blank one every 997), tiny test model; each hit by one fault at a random moment in its first "
        f"{args.window:g} s, then finished with `--resume` when it had stopped. Machine: {machine()}; "
        f"{seconds:.0f} s in all. Command: `python benchmarks/kill_jobs.py --runs {len(rows)} --seed {args.seed}`.",
        "",
        table(["fault", "how the job ended", "runs"], lines),
        "",
        table(["check", "count"], [[k, v] for k, v in totals.items()]),
    ])


if __name__ == "__main__":
    sys.exit(main())
