"""The text of the labelled sets' **train** splits, as one more corpus part.

    python -m pretraining.labelled --data ../shared/data --out pretraining/runs/labelled_train.txt.gz

The raw corpus is thin on reviews, questions, encyclopedic passages and short news (see
../shared/data/corpus/README.md); the labelled sets' train splits fill that gap.  Only train splits
are read (never dev, trial or test: the encoder must not have seen what the tasks are scored on).
Labels are dropped; each text is one line (newlines inside become spaces), each distinct text once.

``--split dev`` writes the dev splits' text instead (less any text also in a train split): never a
part to train on, but held-out text of the tasks' genres on which to compare two checkpoints
(``pretrain --resume CHECKPOINT --evaluate-only --corpus labelled_dev.txt.gz``).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Iterator

csv.field_size_limit(sys.maxsize)

# (relative path, how to read it).  LCQMC ships no train split here, so it has none to add.
SOURCES = [
    ("sentiment/chnsenticorp/train.tsv", "tsv:text"),
    ("sentiment/online_shopping_10_cats/train.tsv", "tsv:text"),
    ("sentiment/waimai_10k/train.tsv", "tsv:text"),
    ("matching/afqmc/train.tsv", "tsv:text_a,text_b"),
    ("matching/bq_corpus/train.tsv", "tsv:text_a,text_b"),
    ("mrc/cmrc2018/train.json", "squad"),
    ("ner/cluener2020/train.json", "jsonl:text"),
    # MSRA's sentences, segmented ("word/tag word/tag"); the same sentences as ner/msra/train.txt.
    ("lexical/msra_seg_propn/train.txt", "segmented"),
]


def _tsv(path: Path, columns: list[str]) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            for column in columns:
                yield row[column] or ""


def _squad(path: Path) -> Iterator[str]:
    for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
        for paragraph in article["paragraphs"]:
            yield paragraph["context"]
            for qa in paragraph["qas"]:
                yield qa["question"]


def _jsonl(path: Path, field: str) -> Iterator[str]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)[field]


def _segmented(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            yield "".join(token.rsplit("/", 1)[0] for token in line.split())


def texts(data: Path, relative: str, how: str) -> Iterator[str]:
    path = data / relative
    kind, _, fields = how.partition(":")
    if kind == "tsv":
        return _tsv(path, fields.split(","))
    if kind == "squad":
        return _squad(path)
    if kind == "jsonl":
        return _jsonl(path, fields)
    return _segmented(path)


def clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data", help="the shared data folder")
    parser.add_argument("--out", required=True, help="the .txt.gz part to write")
    parser.add_argument("--split", choices=("train", "dev"), default="train",
                        help="dev: the dev splits' text, for evaluation only (default: %(default)s)")
    args = parser.parse_args(argv)
    data = Path(args.data)
    seen: set[str] = set()
    if args.split == "dev":
        # A dev text that is also a train text is not held out.
        seen = {clean(text) for relative, how in SOURCES for text in texts(data, relative, how)}
    lines: list[str] = []
    for relative, how in SOURCES:
        if args.split == "dev":
            relative = relative.replace("/train.", "/dev.")
            if not (data / relative).is_file():
                continue
        before, chars = len(lines), 0
        for text in texts(data, relative, how):
            text = clean(text)
            if text and text not in seen:
                seen.add(text)
                lines.append(text)
                chars += len(text)
        print(f"{relative}: {len(lines) - before} texts, {chars} chars")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    print(f"wrote {args.out}: {len(lines)} texts, {sum(map(len, lines))} chars")


if __name__ == "__main__":
    main()
