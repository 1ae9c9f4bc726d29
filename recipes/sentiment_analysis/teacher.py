"""Teacher labels: a strong sentiment package reads unlabelled text, and the fast recipe learns its
probabilities (knowledge distillation, Hinton et al. 2015; on unlabelled text, as Tang et al.,
*Distilling Task-Specific Knowledge from BERT into Simple Neural Networks*, 2019).

The labelled sets are three genres of reviews; the pretrained encoder read 2B tokens of other text
before its sentiment head was trained, and reads news headlines, dialogue and other review sites
better than a char CNN that only saw the reviews.  Its probabilities on such text, learnt as soft
targets (``train.py --teacher-labels``), carry some of that to the fast model.  From the
repository root::

    python -m recipes.sentiment_analysis.teacher \\
        --task-path pretraining/checkpoints/sentiment_33k_head \\
        --text ../shared/data/corpus/fewclue_csl.txt.gz ../shared/data/corpus/web_misc.txt.gz \\
        --per-file 20000 --out runs/teacher_33k.tsv

Writes a TSV (``text``, ``positive``: the teacher's calibrated probability of positive, ``source``:
the file it came from) and beside it ``<out>.json``: the teacher package, the files and how many
units each gave.  A unit is a line of 6 to 120 chars, or consecutive sentences of a longer line
grouped up to 100 chars; keyword lists and abstracts (two ASCII commas or underscores) and units
under half Han are skipped, repeats dropped, and an equal share taken from each file, evenly spread over it.

Only unlabelled text belongs here: never a dev or test split (the project's corpus was cleaned of
lines sharing 20 chars with any of them).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from pathlib import Path

_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])")
# Short units: reviews, posts, headlines and turns of dialogue are what the task reads; a long
# paragraph is cut into groups of its sentences.
MIN_CHARS, MAX_CHARS, GROUP_CHARS = 6, 120, 100


def units(line: str) -> list[str]:
    """The pieces of one corpus line that a teacher reads (see the module's docstring).

    >>> units("虽然片长只有105分钟，不过看的感觉还是很好。")
    ['虽然片长只有105分钟，不过看的感觉还是很好。']
    >>> units("山东队,CBA,劳森,新疆队,常林"), units("山东_新疆_内蒙_农村学校体育"), units("好")
    ([], [], [])
    """
    line = line.strip()
    if len(line) <= MAX_CHARS:
        pieces = [line]
    else:
        pieces, current = [], ""
        for sentence in _SENTENCE_END.split(line):
            if current and len(current) + len(sentence) > GROUP_CHARS:
                pieces.append(current)
                current = ""
            current += sentence
        pieces.append(current)
    return [p.strip() for p in pieces if _readable(p.strip())]


def _readable(text: str) -> bool:
    # Two ASCII commas or underscores: a keyword list (a,b,c / a_b_c) or a paper abstract written
    # with ASCII punctuation; the teacher reads both as sure praise or a sure complaint, which is
    # noise, not an opinion.
    if not MIN_CHARS <= len(text) <= MAX_CHARS or text.count(",") >= 2 or text.count("_") >= 2:
        return False
    return sum("\u4e00" <= c <= "\u9fff" for c in text) >= 0.5 * len(text)


def read_units(path: str, count: int) -> tuple[list[str], int]:
    """About ``count`` units of ``path`` (gzip by the .gz suffix), evenly spread over the file, and
    how many distinct units it holds."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        found = list(dict.fromkeys(u for line in handle for u in units(line)))
    step = max(1, len(found) // max(1, count))
    return found[::step][:count], len(found)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.sentiment_analysis.teacher",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task-path", required=True, help="the teacher: a sentiment_analysis package directory")
    p.add_argument("--text", nargs="+", required=True, metavar="FILE", help="unlabelled text, one document per line")
    p.add_argument("--per-file", type=int, default=20000, help="units taken from each file")
    p.add_argument("--out", required=True, help="the TSV to write (and OUT.json beside it)")
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args(argv)
    if args.per_file < 1:
        p.error(f"--per-file must be >= 1, got {args.per_file}")
    for path in args.text:
        if not Path(path).is_file():
            p.error(f"--text {path}: no such file")

    from taskflow import Taskflow
    from taskflow.files import atomic_write_text
    from taskflow.package_draft import portable_path
    from taskflow.training import log

    flow = Taskflow("sentiment_analysis", task_path=args.task_path, batch_size=args.batch_size)
    texts, sources, counts = [], [], {}
    for path in args.text:
        taken, found = read_units(path, args.per_file)
        texts += taken
        sources += [Path(path).name] * len(taken)
        counts[Path(path).name] = {"units": found, "taken": len(taken)}
        log(f"{path}: {found} units, {len(taken)} taken")
    seen = set()   # a unit two files share is read once
    keep = [i for i, t in enumerate(texts) if not (t in seen or seen.add(t))]
    texts, sources = [texts[i] for i in keep], [sources[i] for i in keep]

    started = time.time()
    positive = []
    for start in range(0, len(texts), 1024):
        results = flow(texts[start:start + 1024])
        positive += [r["score"] if r["label"] == "positive" else 1.0 - r["score"] for r in results]
        log(f"teacher: {len(positive)} / {len(texts)} units, {len(positive) / (time.time() - started):.0f} a second")
    # Tabs and newlines cannot occur in a unit (lines are stripped; a tab would split the row).
    rows = ["text\tpositive\tsource"] + [f"{t.replace(chr(9), ' ')}\t{q:.4f}\t{s}"
                                         for t, q, s in zip(texts, positive, sources)]
    atomic_write_text(args.out, "\n".join(rows) + "\n")
    manifest = json.loads(Path(args.task_path, "manifest.json").read_text(encoding="utf-8"))
    share = sum(q >= 0.5 for q in positive) / max(1, len(positive))
    atomic_write_text(args.out + ".json", json.dumps({
        "teacher": {"task_path": portable_path(args.task_path), "name": manifest.get("name"),
                    "version": manifest.get("version")},
        "files": counts, "units": len(texts), "positive_share": round(share, 4),
        "seconds": round(time.time() - started), "command": " ".join(sys.argv),
    }, ensure_ascii=False, indent=1) + "\n")
    log(f"{len(texts)} units written to {args.out} ({share:.1%} read positive)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
