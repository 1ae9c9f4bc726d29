"""The category classifier: a linear model over hashed char n-grams of a word, in numpy.

It decides the category of a noun or name that the term tree does not settle
(``华为技术有限公司`` -> 组织机构类_企事业单位, ``国家发改委`` -> 组织机构类, ``宫保鸡丁`` -> 饮食类).
Features are the word's chars, char bigrams and trigrams, its first one/two
chars, its last one/two/three chars (Chinese compounds are head-final, so the
suffix says the most) and a length bucket, each hashed (CRC32) into
``buckets`` rows of a ``[buckets, classes]`` weight matrix.  A word's scores
are the sum of its rows plus a bias; the best class among those allowed by
the word's LAC tag wins.  Training (scikit-learn) is the lab's recipe,
``recipes/knowledge_mining/train.py``; inference needs numpy only.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

__all__ = ["features", "feature_ids", "CategoryClassifier"]


def features(word: str) -> list[str]:
    """The feature strings of a (normalised) word.

    >>> features("红楼梦")[:4]
    ['u:红', 'u:楼', 'u:梦', 'b:红楼']
    """
    n = len(word)
    out = [f"u:{c}" for c in word]
    out += [f"b:{word[i:i + 2]}" for i in range(n - 1)]
    out += [f"t:{word[i:i + 3]}" for i in range(n - 2)]
    out += [f"p1:{word[:1]}", f"p2:{word[:2]}", f"s1:{word[-1:]}", f"s2:{word[-2:]}", f"s3:{word[-3:]}",
            f"len:{min(n, 8)}"]
    if word.isascii():
        out.append("ascii")
    return out


def feature_ids(word: str, buckets: int) -> np.ndarray:
    """Hashed feature rows of ``word`` (stable across processes and platforms)."""
    return np.fromiter((zlib.crc32(f.encode("utf-8")) % buckets for f in features(word)), dtype=np.int64)


class CategoryClassifier:
    """Scores of each class for a word; see the module docstring.

    >>> clf = CategoryClassifier(np.zeros((8, 2)), np.array([0.0, 1.0]), ["a", "b"])
    >>> clf.predict("词")
    'b'
    """

    def __init__(self, weights: np.ndarray, bias: np.ndarray, classes: Sequence[str]):
        if weights.ndim != 2 or weights.shape[1] != len(classes) or bias.shape != (len(classes),):
            raise ValueError(f"weights {weights.shape} and bias {bias.shape} do not fit {len(classes)} classes")
        self.weights = weights.astype(np.float32)
        self.bias = bias.astype(np.float32)
        self.classes = list(classes)
        self.index = {c: i for i, c in enumerate(self.classes)}
        self._cache: dict[str, np.ndarray] = {}

    @classmethod
    def load(cls, path, classes: Sequence[str]) -> "CategoryClassifier":
        with np.load(path) as data:
            return cls(data["weights"], data["bias"], classes)

    def scores(self, word: str) -> np.ndarray:
        found = self._cache.get(word)
        if found is None:
            found = self.weights[feature_ids(word, self.weights.shape[0])].sum(axis=0) + self.bias
            if len(self._cache) > 200_000:   # bounded: a long-running service sees unbounded vocabularies
                self._cache.clear()
            self._cache[word] = found
        return found

    def predict(self, word: str, candidates: Sequence[str] | None = None) -> str:
        """The best class for ``word``, among ``candidates`` when given (classes it does not know are skipped)."""
        scores = self.scores(word)
        if candidates is None:
            return self.classes[int(np.argmax(scores))]
        allowed = [self.index[c] for c in candidates if c in self.index]
        if not allowed:
            return candidates[0]
        return self.classes[max(allowed, key=lambda i: scores[i])]
