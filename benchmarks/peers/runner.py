"""Times one peer segmenter (LAC or pkuseg) on a file of sentences; run with the peers venv's
Python (benchmarks/peers/setup.sh makes it), not the project's.

    benchmarks/peers/.venv/bin/python benchmarks/peers/runner.py --engine lac --texts t.txt --seconds 10 --rounds 3

One sentence a line in ``--texts``.  The engine loads and warms up once, then each round runs
whole passes over the texts (at least one, at least ``--seconds``), as benchmarks/bench_lexical.py's
``timed`` does.  It prints one JSON object: engine, info (versions, threads), chars_per_s (median),
rounds (chars/s of each), words and tags (the first pass's output, one list per sentence).

``--serve`` is how benchmarks/bench_lexical_peers.py drives it, so that peers and taskflow take
interleaved turns on the cores: after loading it writes ``{"ready": true, "info": ...}`` and then
answers stdin lines, one JSON line each: ``time SECONDS`` -> ``{"chars_per_s": x}``,
``outputs`` -> ``{"words": [...], "tags": [...]}``, ``quit``.  A setup failure is reported as
``{"error": "..."}`` (exit status 0 in --serve mode, so the caller can put it in its table).

Engines: ``lac`` = ``LAC(mode="lac")`` as shipped (its AnalysisConfig sets no math-library
threads: 1); ``lac2`` = the same with ``set_cpu_math_library_num_threads(2)``; ``pkuseg`` =
``pkuseg.pkuseg(postag=True)``, or the default segmentation model alone when the postag model is
not in PKUSEG_HOME (it is a GitHub download; setup.sh fetches it where it can) - info says which.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKUSEG_HOME = os.path.join(HERE, ".venv", "pkuseg_home")
sys.path.insert(0, os.path.dirname(HERE))
from common import timed  # noqa: E402  (benchmarks/common.py: the same timing as the in-process engines)
# The LAC loader the lexical recipe's teacher uses (it imports nothing from taskflow, so it runs here too).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "recipes", "lexical_analysis"))
from lac_labels import load_lac  # noqa: E402


def dist_version(name):
    try:
        from importlib.metadata import version
    except ImportError:  # Python < 3.8
        return "?"
    try:
        return version(name)
    except Exception:
        return "?"


def load(engine, threads):
    """``(run, info)``: run(list of texts) -> list of (words, tags)."""
    info = {"python": sys.version.split()[0]}
    if engine in ("lac", "lac2"):
        lac = load_lac(threads if engine == "lac2" else None)
        info.update(LAC=dist_version("LAC"), paddlepaddle=dist_version("paddlepaddle"),
                    math_threads=threads if engine == "lac2" else 1)

        def run(texts):
            # LAC.run(list) is one LoD batch (no padding); it pops empty strings from the list it gets.
            return [(words, tags) for words, tags in lac.run(list(texts))]

        return run, info
    if engine == "pkuseg":
        os.environ.setdefault("PKUSEG_HOME", PKUSEG_HOME)
        import pkuseg

        home = os.environ["PKUSEG_HOME"]
        postag = os.path.exists(os.path.join(home, "postag.zip")) and os.path.isdir(os.path.join(home, "postag"))
        seg = pkuseg.pkuseg(postag=postag)
        info.update(pkuseg=dist_version("pkuseg"), postag=postag, model="default (mixed domain)")
        if postag:
            def run(texts):
                out = []
                for text in texts:
                    pairs = seg.cut(text)
                    out.append(([w for w, _ in pairs], [t for _, t in pairs]))
                return out
        else:
            def run(texts):
                return [(seg.cut(text), []) for text in texts]
        return run, info
    raise SystemExit("unknown engine %r" % engine)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", required=True, choices=["lac", "lac2", "pkuseg"])
    parser.add_argument("--texts", required=True, help="UTF-8, one sentence a line")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64, help="texts per call (LAC: one LoD batch)")
    parser.add_argument("--threads", type=int, default=2, help="math threads of lac2")
    parser.add_argument("--serve", action="store_true", help="answer commands on stdin (see above)")
    args = parser.parse_args()

    # The protocol owns the real stdout; whatever the libraries print goes to stderr.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)

    def say(obj):
        proto.write(json.dumps(obj, ensure_ascii=False) + "\n")
        proto.flush()

    with open(args.texts, encoding="utf-8") as handle:
        texts = [line.rstrip("\n") for line in handle if line.strip()]
    try:
        run, info = load(args.engine, args.threads)
        run(texts[:8])
    except Exception as exc:  # reported, not raised: the caller puts it in its table
        say({"engine": args.engine, "error": "%s: %s" % (type(exc).__name__, exc)})
        return 0 if args.serve else 1
    info["batch"] = args.batch
    outputs = None
    if not args.serve:
        speeds = []
        for _ in range(args.rounds):
            speed, out = timed(run, texts, args.seconds, args.batch)
            speeds.append(speed)
            outputs = outputs or out
        say({"engine": args.engine, "info": info, "chars_per_s": statistics.median(speeds), "rounds": speeds,
             "words": [w for w, _ in outputs], "tags": [t for _, t in outputs]})
        return 0
    say({"ready": True, "engine": args.engine, "info": info})
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        if command[0] == "time":
            speed, out = timed(run, texts, float(command[1]), args.batch)
            outputs = outputs or out
            say({"chars_per_s": speed})
        elif command[0] == "outputs":
            outputs = outputs or timed(run, texts, 0.0, args.batch)[1]
            say({"words": [w for w, _ in outputs], "tags": [t for _, t in outputs]})
        else:
            say({"error": "unknown command %r" % command[0]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
