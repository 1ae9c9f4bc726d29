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
           "CONTRAST_DEV", "read_contrast_dev", "OPEN_DOMAIN_FILES", "STSB_TEST", "read_open_domain",
           "read_stsb_binary"]


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


# ------------------------------------------------- open-domain pairs (--open-domain)

# Relative to --data-dir; each README there gives source, terms and counts.
OPEN_DOMAIN_FILES = {
    "chinese_sts": "chinese_sts/chinese_sts.tsv",
    "chinese_stsb_train": "chinese_stsb/train.tsv",
    "nli_probing": "nli_probing/pairs.tsv",
}
STSB_TEST = "chinese_stsb/test.tsv"


def _rows(path: Path) -> list[dict]:
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def _char_jaccard(a: str, b: str) -> float:
    a, b = set(model_text(a)), set(model_text(b))
    return len(a & b) / max(1, len(a | b))


def read_stsb_binary(path: str | Path) -> list[Pair]:
    """Chinese STS-B scored 0-5 as paraphrase labels: 4 and 5 (equivalent, at most unimportant
    details differ) -> 1, 0 to 2 (not equivalent) -> 0; 3 ("roughly equivalent, important
    information differs") has no paraphrase reading and is left out."""
    pairs = []
    for r in _rows(Path(path)):
        score = float(r["score"])
        if score != 3 and r["sentence1"].strip() and r["sentence2"].strip():
            pairs.append(Pair(r["sentence1"], r["sentence2"], int(score >= 4)))
    return pairs


def read_open_domain(data_dir: str | Path, seed: int, max_length: int) -> dict[str, list[Pair]]:
    """The open-domain sets as paraphrase pairs, by source.

    * ChineseSTS: 4 and 5 -> 1; its 0s that share at least a fifth of their chars (negation and
      modality minimal pairs: 他没拒绝我的要求 / 他拒绝我的要求) -> 0, and as many unrelated 0s,
      drawn with ``seed``, as there are positives left over (the rest are random sentence pairs:
      a network learns nothing from ten thousand of them).
    * Chinese STS-B train: as :func:`read_stsb_binary`.
    * NLI probing: synonym substitutions -> 1, every contradiction (antonym substitutions,
      negation, quantifier and HANS-style overlap fragments) -> 0; other entailments and the
      neutrals are not paraphrase labels and stay out.  A pair whose texts are the same in the
      first ``max_length`` chars the model reads (the edit lies beyond them) is dropped.
    """
    root = Path(data_dir)
    missing = [str(root / rel) for rel in OPEN_DOMAIN_FILES.values() if not (root / rel).is_file()]
    if missing:
        raise SystemExit(f"--open-domain: missing {', '.join(missing)}")
    sts_pos, sts_minimal, sts_unrelated = [], [], []
    for r in _rows(root / OPEN_DOMAIN_FILES["chinese_sts"]):
        a, b, score = r["sentence1"], r["sentence2"], float(r["score"])
        if score >= 4:
            sts_pos.append(Pair(a, b, 1))
        elif score == 0:
            (sts_minimal if _char_jaccard(a, b) >= 0.2 else sts_unrelated).append(Pair(a, b, 0))
    rng = random.Random(seed)
    unrelated = rng.sample(sts_unrelated, min(len(sts_unrelated), max(0, len(sts_pos) - len(sts_minimal))))
    probing = []
    for r in _rows(root / OPEN_DOMAIN_FILES["nli_probing"]):
        a, b = r["sentence1"], r["sentence2"]
        if model_text(a, max_length) == model_text(b, max_length):
            continue
        if r["subset"] == "stress_synonym" and r["label"] == "entailment":
            probing.append(Pair(a, b, 1))
        elif r["label"] == "contradiction":
            probing.append(Pair(a, b, 0))
    return {"chinese_sts": sts_pos + sts_minimal + unrelated,
            "chinese_stsb_train": read_stsb_binary(root / OPEN_DOMAIN_FILES["chinese_stsb_train"]),
            "nli_probing": probing}
