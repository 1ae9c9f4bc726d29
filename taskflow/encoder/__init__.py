"""The project's pretrained char-level transformer encoder: what its packages hold, without Paddle.

The encoder is pretrained in PyTorch (``pretraining/`` in the repository, not in the wheel) and
run in Paddle (:mod:`taskflow.encoder.network`).  Both sides, and every task that fine-tunes the
encoder, must read text the same way, so the pieces they share live here, importable where
Paddle is not installed (the GPU machine that pretrains has PyTorch only):

* :data:`NORMALIZATION`: the :class:`taskflow.text.Normalizer` steps the encoder's text goes
  through before its chars are looked up (one constant, so a step added to the normaliser,
  such as traditional -> simplified, is added for every encoder package in one place).
* :data:`SPECIAL_TOKENS`: the first ids of every encoder vocabulary, in this order.
* :class:`CharVocab`: a package's ``vocab.txt`` (one token per line, id = line number).
* :func:`frame` / :func:`add_cls_sep`: id batches framed as the fine-tuned packages read them,
  ``[CLS] segment [SEP] segment [SEP]``.

>>> vocab = CharVocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "北", "京"])
>>> vocab.encode("北京市")
[5, 6, 1]
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

__all__ = ["NORMALIZATION", "SPECIAL_TOKENS", "PAD", "UNK", "CLS", "SEP", "MASK", "CharVocab", "frame", "add_cls_sep",
           "CLASSIFIER_TYPE"]

# The steps the reading-comprehension and lexical packages use: every step maps one char to one
# char, so an offset into the normalised text is an offset into the caller's text.
NORMALIZATION: tuple[str, ...] = ("t2s", "width", "lower", "space")

SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, UNK, CLS, SEP, MASK = range(len(SPECIAL_TOKENS))

# The architecture type of an encoder with a classification head (one text, or a pair read together).
CLASSIFIER_TYPE = "transformer_classifier"


def frame(rows: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """Each row's segments of ids as ``[CLS] s1 [SEP] s2 [SEP] ...``, right-padded with ``PAD`` into
    one ``[B, T]`` int64 batch: one text, a pair read together, or a question and its window.

    >>> frame([[np.array([7, 8])], [np.array([7]), np.array([9])]]).tolist()
    [[2, 7, 8, 3, 0], [2, 7, 3, 9, 3]]
    """
    framed = [np.concatenate([[CLS], *(part for segment in row for part in (segment, [SEP]))]) for row in rows]
    out = np.zeros((len(framed), max(map(len, framed))), dtype=np.int64)
    for i, row in enumerate(framed):
        out[i, :len(row)] = row
    return out


def add_cls_sep(ids: np.ndarray) -> np.ndarray:
    """``[B, T]`` char ids right-padded with ``PAD`` -> ``[B, T + 2]``: ``[CLS] ids [SEP]``, then the padding.

    >>> add_cls_sep(np.array([[7, 8, 9], [7, 0, 0]])).tolist()
    [[2, 7, 8, 9, 3], [2, 7, 3, 0, 0]]
    """
    batch, width = ids.shape
    out = np.zeros((batch, width + 2), dtype=ids.dtype)
    out[:, 0] = CLS
    out[:, 1:width + 1] = ids
    out[np.arange(batch), (ids != PAD).sum(axis=1) + 1] = SEP
    return out


class CharVocab:
    """Char -> id for an encoder package: ``tokens[i]`` has id ``i``; unknown chars get ``UNK``.

    The file is one token a line, read with nothing stripped but the newline, since the space
    char is a token of its own (text is normalised char for char, so every char needs an id).
    """

    def __init__(self, tokens: Sequence[str]):
        tokens = list(tokens)
        if tuple(tokens[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f"an encoder vocabulary starts with {list(SPECIAL_TOKENS)}, got {tokens[:5]}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("an encoder vocabulary lists each token once")
        chars = tokens[len(SPECIAL_TOKENS):]
        wrong = [t for t in chars if len(t) != 1]
        if wrong:
            raise ValueError(f"an encoder vocabulary holds single chars after its special tokens, got {wrong[:5]}")
        self.tokens = tokens
        self.ids = {token: i for i, token in enumerate(tokens)}
        # Every code point -> id, so a whole text is looked up by one numpy indexing.
        self._table = np.full(0x110000, UNK, dtype=np.int32)
        for i, char in enumerate(chars, start=len(SPECIAL_TOKENS)):
            self._table[ord(char)] = i

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def load(cls, path: str | Path) -> "CharVocab":
        text = Path(path).read_text(encoding="utf-8")
        tokens = text.split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls(tokens)

    def save(self, path: str | Path) -> None:
        from taskflow.files import atomic_write_text

        atomic_write_text(path, "".join(token + "\n" for token in self.tokens))

    def encode_array(self, text: str) -> np.ndarray:
        """The ids of ``text`` (already normalised), one per char, as int32."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        return self._table[codes]

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.tokens[i] for i in ids)
