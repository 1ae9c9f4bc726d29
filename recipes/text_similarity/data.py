"""The matching corpora and the splits the recipe and the benchmarks share.

Files are TSV with a header ``text_a<TAB>text_b<TAB>label`` (as in
``../shared/data/matching``; see its README for sources and terms), read by the
task's :func:`taskflow.tasks.text_similarity.pairs.read_pairs`.

LCQMC's train split is not available, so the only open-domain labelled pairs
are LCQMC dev.  :func:`split_lcqmc_dev` cuts it, with a fixed seed, into a
part used for training and a held-out part used only for model selection;
LCQMC test is never seen before the final report.  :func:`drop_overlap`
removes from the training pairs every pair that also occurs (in either
order, after the model's normalisation) in a held-out or test split.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Iterable

from taskflow.tasks.text_similarity.features import model_text
from taskflow.tasks.text_similarity.pairs import Pair, read_pairs

__all__ = ["Pair", "read_pairs", "split_lcqmc_dev", "drop_overlap", "pair_key", "DEFAULT_FILES", "resolve_files",
           "CONTRAST_DEV", "read_contrast_dev"]


# Relative to --data-dir (the shared matching folder); each can be overridden on the command line.
DEFAULT_FILES = {
    "bq_train": "bq_corpus/train.tsv",
    "afqmc_train": "afqmc/train.tsv",
    "lcqmc_dev": "lcqmc/dev.tsv",
    "bq_dev": "bq_corpus/dev.tsv",
    "lcqmc_test": "lcqmc/test.tsv",
    "bq_test": "bq_corpus/test.tsv",
    "afqmc_dev": "afqmc/dev.tsv",
}

# The project's own everyday pairs (dev/CONTRAST.md): report only, never trained or selected on.
CONTRAST_DEV = Path(__file__).parent / "dev" / "contrast_dev.jsonl"


def read_contrast_dev(path: str | Path = CONTRAST_DEV) -> list[dict]:
    """The contrast dev set's rows: ``{"text1", "text2", "label", "kind", "domain"}``."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def resolve_files(data_dir: str | Path | None, overrides: dict[str, str | None]) -> dict[str, Path]:
    """Each file's path: the override if given, else ``data_dir / DEFAULT_FILES[name]``."""
    files = {}
    for name, relative in DEFAULT_FILES.items():
        given = overrides.get(name)
        if given:
            files[name] = Path(given)
        elif data_dir is not None:
            files[name] = Path(data_dir) / relative
        else:
            raise SystemExit(f"no path for {name}: pass --data-dir or --{name.replace('_', '-')}")
    missing = [f"{name} ({path})" for name, path in files.items() if not path.is_file()]
    if missing:
        raise SystemExit(f"missing data file(s): {', '.join(missing)}")
    return files


def split_lcqmc_dev(pairs: list[Pair], held_out: int, seed: int) -> tuple[list[Pair], list[Pair]]:
    """``(train part, held-out part)``: ``held_out`` pairs drawn with ``random.Random(seed)``,
    the rest for training; both keep the file's order."""
    if not 0 < held_out < len(pairs):
        raise ValueError(f"held_out must be between 1 and {len(pairs) - 1}, got {held_out}")
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    held = set(order[:held_out])
    return [p for i, p in enumerate(pairs) if i not in held], [p for i, p in enumerate(pairs) if i in held]


def pair_key(text1: str, text2: str) -> tuple[str, str]:
    """The same key for a pair in either order and for texts the model cannot tell apart."""
    a, b = model_text(text1), model_text(text2)
    return (a, b) if a <= b else (b, a)


def drop_overlap(train: list[Pair], *evaluation: Iterable[Pair]) -> tuple[list[Pair], int]:
    """``train`` without the pairs that occur in any ``evaluation`` set, and how many went."""
    seen = {pair_key(p.text1, p.text2) for pairs in evaluation for p in pairs}
    kept = [p for p in train if pair_key(p.text1, p.text2) not in seen]
    return kept, len(train) - len(kept)
