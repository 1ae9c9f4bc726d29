"""What the matching model sees: normalised text, chars and words, as id arrays.

Pure Python and numpy (no Paddle, no jieba), shared by the task, the training
recipe and the benchmarks, so training and inference encode text the same way.

* :func:`model_text`: half-width, ASCII lower-case, punctuation and whitespace
  removed ("人和畜生的区别是什么？" and "人和畜生的区别是什么！" are the same
  question), then cut to ``max_length`` chars.
* :class:`~taskflow.text.Segmenter`: words by the most probable path through a word list
  (jieba's DAG + unigram algorithm, without its HMM), over the word list and
  counts shipped in the package.  jieba is used once, at training time, to
  find that word list; inference needs neither jieba nor its dictionary.
* :func:`encode`: per side, ``chars`` [B, T] (char ids) and ``words`` [B, T]
  (for each char, the id of the word it belongs to), 0-padded.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from taskflow.text import Normalizer, Segmenter, Vocab as CharWordVocab, q2b

__all__ = ["PAD", "UNK", "NORMALIZATION", "model_text", "Segmenter", "Vocab", "encode"]

PAD, UNK = 0, 1
MAX_WORD_LENGTH = 8


# What the shipped model was trained on: half-width, ASCII lower-case, no whitespace or punctuation.
NORMALIZATION = ("t2s", "width", "lower", "strip")
_NORMALIZE = Normalizer(NORMALIZATION)


def model_text(text: str, max_length: int | None = None, normalize: Normalizer = _NORMALIZE) -> str:
    """The part of ``text`` the model reads.

    Punctuation and whitespace carry next to nothing for matching questions
    and differ between corpora, so they are dropped; a text made only of them
    keeps its (half-width) punctuation so it still has something to match.
    Longer texts keep their first ``max_length`` chars.

    >>> model_text("Ｗｉｆｉ 密码怎么改？")
    'wifi密码怎么改'
    """
    cleaned = normalize(text)
    if not cleaned:
        cleaned = "".join(q2b(text).split())
    return cleaned[:max_length] if max_length else cleaned


class Vocab(CharWordVocab):
    """The matcher's chars and words (0 pad, 1 unknown in both); see :class:`taskflow.text.Vocab`."""

    @classmethod
    def build(cls, texts: Iterable[str], cut, *, min_char: int = 2, min_word: int = 2,
              max_words: int = 40000) -> "Vocab":
        """A vocabulary from model texts: chars seen ``min_char`` times, and the
        words ``cut`` (e.g. ``jieba.lcut``) finds at least ``min_word`` times."""
        from collections import Counter

        chars, words = Counter(), Counter()
        for text in texts:
            chars.update(text)
            words.update(w for w in cut(text) if 0 < len(w) <= MAX_WORD_LENGTH and not w.isspace())
        char_list = ["[PAD]", "[UNK]"] + sorted(c for c, n in chars.items() if n >= min_char)
        kept = sorted(((w, n) for w, n in words.items() if n >= min_word), key=lambda x: (-x[1], x[0]))[:max_words]
        return cls(char_list, [("[PAD]", 0), ("[UNK]", 0), *kept])



def encode(texts: Sequence[str], vocab: Vocab) -> tuple[np.ndarray, np.ndarray]:
    """``(char_ids, word_ids)``, each [B, T] int64 and 0-padded, for model texts.

    ``word_ids[b, i]`` is the id of the word covering char ``i`` (1 when that
    word is not in the vocabulary), so both arrays share one length.
    """
    width = max(1, max((len(t) for t in texts), default=1))
    char_ids = np.zeros((len(texts), width), dtype=np.int64)
    word_ids = np.zeros((len(texts), width), dtype=np.int64)
    chars, words = vocab.chars, vocab.words
    for row, text in enumerate(texts):
        char_ids[row, : len(text)] = [chars.get(ch, UNK) for ch in text]
        position = 0
        for word in vocab.segment(text):
            word_ids[row, position:position + len(word)] = words.get(word, UNK)
            position += len(word)
    return char_ids, word_ids
