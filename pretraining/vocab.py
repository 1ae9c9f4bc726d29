"""Build the encoder's char vocabulary from corpus files.

    python -m pretraining.vocab --corpus ../shared/data/corpus/*.txt.gz --out runs/vocab.txt

Corpus files are gzip (or plain) UTF-8, one document a line.  Text goes through the encoder's
normalisation (``taskflow.encoder.NORMALIZATION``: full-width -> half-width, ASCII lower-case,
whitespace -> space) before counting, so the vocabulary holds what the model will be asked to
look up.  It keeps the special tokens, then the most frequent chars that are letters (Han, Latin,
kana...), digits, punctuation, symbols or the space, seen at least ``--min-count`` times, up to
``--size`` entries in all; the rarest chars fall back to ``[UNK]``.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import unicodedata
from pathlib import Path
from typing import Iterable, Iterator

from taskflow.encoder import NORMALIZATION, SPECIAL_TOKENS, CharVocab
from taskflow.text import Normalizer

# Letters, numbers, punctuation, symbols, the space; not controls, format chars or private use.
_KEPT_CATEGORIES = ("L", "N", "P", "S")


def read_documents(path: str | Path) -> Iterator[str]:
    """The lines of a corpus file (gzip or plain UTF-8), without their newline, empty ones skipped."""
    with open(path, "rb") as handle:
        compressed = handle.read(2) == b"\x1f\x8b"
    opener = gzip.open if compressed else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line.strip():
                yield line


def count_chars(paths: Iterable[str | Path], normalize=None) -> collections.Counter:
    normalize = normalize or Normalizer(NORMALIZATION)
    counts: collections.Counter = collections.Counter()
    for path in paths:
        for document in read_documents(path):
            counts.update(normalize(document))
    return counts


def _kept(char: str) -> bool:
    return char == " " or unicodedata.category(char)[0] in _KEPT_CATEGORIES


def build_vocab(counts: collections.Counter, *, size: int = 12000, min_count: int = 5) -> CharVocab:
    """Special tokens, then the kept chars by falling frequency (ties by code point, so the result
    does not depend on the order the corpus was read in)."""
    if size <= len(SPECIAL_TOKENS):
        raise ValueError(f"size must leave room for chars after the {len(SPECIAL_TOKENS)} special tokens")
    chars = sorted((c for c, n in counts.items() if n >= min_count and _kept(c)), key=lambda c: (-counts[c], c))
    return CharVocab([*SPECIAL_TOKENS, *chars[:size - len(SPECIAL_TOKENS)]])


def coverage(counts: collections.Counter, vocab: CharVocab) -> float:
    """The share of the corpus' chars the vocabulary knows."""
    total = sum(counts.values())
    return sum(n for c, n in counts.items() if c in vocab.ids) / max(1, total)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="+", required=True, help="corpus files (gzip UTF-8, one document a line)")
    parser.add_argument("--out", required=True, help="the vocab.txt to write")
    parser.add_argument("--size", type=int, default=12000, help="entries in all, special tokens included")
    parser.add_argument("--min-count", type=int, default=5, help="rarer chars become [UNK]")
    args = parser.parse_args(argv)
    counts = count_chars(args.corpus)
    vocab = build_vocab(counts, size=args.size, min_count=args.min_count)
    vocab.save(args.out)
    print(f"{args.out}: {len(vocab)} entries, {len(counts)} distinct chars in {sum(counts.values())} "
          f"(after normalisation), coverage {coverage(counts, vocab):.5f}")


if __name__ == "__main__":
    main()
