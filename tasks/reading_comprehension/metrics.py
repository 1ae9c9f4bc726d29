"""CMRC 2018's official scoring (``cmrc2018_evaluate.py``), without nltk.

* F1: both strings in mixed segmentation (each CJK char a token, each run of
  latin letters / digits one token), punctuation removed; precision and
  recall from the longest common *substring* of the two token lists.
* EM: the punctuation-stripped strings are equal.

Each is the maximum over the reference answers; the corpus figures are means
times 100.  The official script tokenises non-CJK runs with
``nltk.word_tokenize``; here a run splits into ``\\w+`` tokens and single
other chars, which agrees on letters, digits and the punctuation it removes.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

__all__ = ["mixed_segmentation", "remove_punctuation", "f1_score", "em_score", "evaluate"]

_SP_CHARS = set("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』") | {"……"}
_CJK = re.compile(r"[\u4e00-\u9fa5]")
_RUN = re.compile(r"\w+|[^\w\s]")


def mixed_segmentation(text: str, rm_punc: bool = False) -> list[str]:
    text = str(text).lower().strip()
    out, run = [], ""
    for char in text:
        if rm_punc and char in _SP_CHARS:
            continue
        if _CJK.match(char) or char in _SP_CHARS:
            if run:
                out.extend(_RUN.findall(run))
                run = ""
            out.append(char)
        else:
            run += char
    if run:
        out.extend(_RUN.findall(run))
    return out


def remove_punctuation(text: str) -> str:
    return "".join(c for c in str(text).lower().strip() if c not in _SP_CHARS)


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common substring (contiguous) of two token lists."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best = current[j]
        previous = current
    return best


def f1_score(answers: Iterable[str], prediction: str) -> float:
    scores = [0.0]
    prediction_segs = mixed_segmentation(prediction, rm_punc=True)
    for answer in answers:
        answer_segs = mixed_segmentation(answer, rm_punc=True)
        common = _lcs_length(answer_segs, prediction_segs)
        if common == 0:
            continue
        precision, recall = common / len(prediction_segs), common / len(answer_segs)
        scores.append(2 * precision * recall / (precision + recall))
    return max(scores)


def em_score(answers: Iterable[str], prediction: str) -> float:
    stripped = remove_punctuation(prediction)
    return float(any(remove_punctuation(a) == stripped for a in answers))


def evaluate(references: Sequence[Sequence[str]], predictions: Sequence[str]) -> dict[str, float]:
    """``{"f1", "em"}`` in percent over parallel lists of reference answers and predictions."""
    if len(references) != len(predictions):
        raise ValueError(f"{len(references)} references for {len(predictions)} predictions")
    n = max(1, len(predictions))
    f1 = sum(f1_score(r, p) for r, p in zip(references, predictions)) / n
    em = sum(em_score(r, p) for r, p in zip(references, predictions)) / n
    return {"f1": round(100 * f1, 3), "em": round(100 * em, 3), "questions": len(predictions)}
