"""Baidu LAC's words and tags for a file of texts: a teacher for the lexical recipe.

Run with the Python of a venv that has LAC (not the project's; LAC needs Paddle 2.6's
``paddle.base`` under its old name ``paddle.fluid``)::

    python3 -m venv .venv-lac
    .venv-lac/bin/pip install paddlepaddle==2.6.2 "numpy<2" "protobuf<4" "setuptools<70" wheel
    .venv-lac/bin/pip install --no-build-isolation LAC
    .venv-lac/bin/python recipes/lexical_analysis/lac_labels.py --texts texts.txt --out lac.jsonl

``--texts``: one text a line.  ``--out``: one JSON object a line, in the same order,
``{"text": ..., "words": [...], "tags": [...]}`` (``null`` words and tags where LAC's words do
not spell the text: it drops some runs of spaces); written to a temporary file and renamed into
place.  The recipe (``train.py --lac-python``) writes the texts and runs this itself.

LAC is the strong teacher off MSRA's genre (social posts, résumés: its entity spans hold where
this project's model reads laughter as a name) and a weak one on segmentation by MSRA's standard
(F1 0.872 on MSRA dev), so the recipe takes its entity spans and POS, not its word boundaries
(see ``silver.py``).  This file imports nothing from taskflow: the LAC venv does not have it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def load_lac(threads: int | None = None):
    """``LAC(mode="lac")``; ``threads`` sets its math library's threads (None: LAC's own default, 1).
    Also what benchmarks/peers/runner.py runs, on Paddle 1.8.5 and 2.6 alike."""
    import paddle

    if not hasattr(paddle, "fluid"):
        # Paddle 2.6 renamed paddle.fluid to paddle.base (the same API for what LAC 2.1.2 uses);
        # LAC imports the old name.  Paddle 1.8.5 still has it.
        import paddle.base

        sys.modules.setdefault("paddle.fluid", paddle.base)
        sys.modules.setdefault("paddle.fluid.core", paddle.base.core)
    import LAC.models
    from LAC import LAC as Lac

    if threads is not None:
        plain = LAC.models.AnalysisConfig

        def configured(*args):
            config = plain(*args)
            config.set_cpu_math_library_num_threads(threads)
            return config

        LAC.models.AnalysisConfig = configured
    return Lac(mode="lac")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", required=True, help="one text a line")
    parser.add_argument("--out", required=True, help="JSON lines: text, words, tags")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    with open(args.texts, encoding="utf-8") as handle:
        texts = [line.rstrip("\n") for line in handle]
    lac = load_lac(args.threads)
    started, chars, unspelled = time.monotonic(), 0, 0
    directory = os.path.dirname(os.path.abspath(args.out))
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, suffix=".part", delete=False) as out:
        for start in range(0, len(texts), args.batch_size):
            batch = texts[start:start + args.batch_size]
            # LAC drops an empty text from a batch, which would shift every later row: give it none.
            results = lac.run([t for t in batch if t])
            answers = iter(results)
            for text in batch:
                words, tags = next(answers) if text else ([], [])
                if "".join(words) != text:
                    # LAC drops some chars (runs of spaces): no labels rather than misplaced ones.
                    words = tags = None
                    unspelled += 1
                out.write(json.dumps({"text": text, "words": words, "tags": tags}, ensure_ascii=False) + "\n")
                chars += len(text)
    os.replace(out.name, args.out)
    seconds = time.monotonic() - started
    print(f"LAC labelled {len(texts)} texts ({chars} chars) in {seconds:.0f} s, {chars / max(seconds, 1e-9):,.0f} chars/s; "
          f"{unspelled} left unlabelled (LAC's words did not spell them)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
