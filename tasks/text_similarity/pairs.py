"""Labelled sentence pairs: the :class:`Pair` row, and the TSV files of the matching corpora.

A file is TSV with a header ``text_a<TAB>text_b<TAB>label`` and a 0/1 label (the layout of
LCQMC, BQ and AFQMC as ``../shared/data/matching`` holds them).  Training on the user's own
files reads them with ``taskflow.training_data.read_labelled`` instead (any columns, .csv / .tsv /
.jsonl); both give :class:`Pair` rows to the network.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

__all__ = ["Pair", "read_pairs"]


class Pair(NamedTuple):
    text1: str
    text2: str
    label: int


def read_pairs(path: str | Path) -> list[Pair]:
    """``(text1, text2, label)`` rows of a ``text_a<TAB>text_b<TAB>label`` file with a header."""
    pairs = []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for number, row in enumerate(reader, 2):
            try:
                label = int(row["label"])
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}:{number}: expected text_a, text_b and a 0/1 label, got {row}") from None
            if label not in (0, 1):
                raise ValueError(f"{path}:{number}: label must be 0 or 1, got {label}")
            pairs.append(Pair(row["text_a"] or "", row["text_b"] or "", label))
    return pairs
