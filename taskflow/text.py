"""Text helpers shared by tasks: width normalisation, long-text splitting, word segmentation, vocabularies."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["q2b", "split_text", "Segmenter", "Vocab", "read_text_file"]

# Full-width ASCII variants (U+FF01..U+FF5E) map to U+0021..U+007E; the ideographic
# space to a plain space.  One char in, one char out, so offsets survive.
_Q2B = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_Q2B[0x3000] = 0x20


def q2b(text: str) -> str:
    """Full-width to half-width, character for character (``len`` is kept).

    >>> q2b("ＡＢＣ１２３，")
    'ABC123,'
    """
    return text.translate(_Q2B)


# A sentence ends after one of these, plus any closing quotes or brackets.
_SENTENCE_END = re.compile(r"[。！？!?；;…\n]+[”’」』）)\]]*")


def split_text(text: str, max_length: int) -> list[tuple[int, str]]:
    """Split ``text`` into pieces of at most ``max_length`` characters.

    Pieces break at sentence ends where possible, packing whole sentences
    together; a sentence longer than ``max_length`` is cut hard.  Returns
    ``(offset, piece)`` pairs with ``text[offset:offset + len(piece)] == piece``,
    covering the whole text in order.

    >>> split_text("今天很好。明天下雨！", 6)
    [(0, '今天很好。'), (5, '明天下雨！')]
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if len(text) <= max_length:
        return [(0, text)]
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        sentences.append((start, match.end()))
        start = match.end()
    if start < len(text):
        sentences.append((start, len(text)))

    pieces: list[tuple[int, str]] = []
    chunk_start = chunk_end = 0
    for s_start, s_end in sentences:
        if s_end - chunk_start <= max_length:
            chunk_end = s_end
            continue
        if chunk_end > chunk_start:
            pieces.append((chunk_start, text[chunk_start:chunk_end]))
        chunk_start = s_start
        while s_end - chunk_start > max_length:
            pieces.append((chunk_start, text[chunk_start:chunk_start + max_length]))
            chunk_start += max_length
        chunk_end = s_end
    if chunk_end > chunk_start:
        pieces.append((chunk_start, text[chunk_start:chunk_end]))
    return pieces


class Segmenter:
    """Most probable segmentation into words of a unigram word list.

    Every single char is allowed (a char never seen costs the most), so any
    text segments; ties go to the longer, earlier word.

    >>> Segmenter({"密码": 5, "怎么": 4, "修改": 3}).cut("怎么修改密码")
    ['怎么', '修改', '密码']
    """

    def __init__(self, counts: Mapping[str, int]):
        total = float(sum(counts.values()) or 1)
        self.logp = {w: math.log(c / total) for w, c in counts.items() if c > 0}
        self.unknown = math.log(0.5 / total)
        self.max_len = max([1, *(len(w) for w in self.logp)])

    def cut(self, text: str) -> list[str]:
        n = len(text)
        best = [0.0] + [-math.inf] * n
        start = [0] * (n + 1)
        logp, unknown = self.logp, self.unknown
        for end in range(1, n + 1):
            for begin in range(max(0, end - self.max_len), end):
                lp = logp.get(text[begin:end])
                if lp is None:
                    if end - begin != 1:
                        continue
                    lp = unknown
                score = best[begin] + lp
                if score > best[end]:
                    best[end], start[end] = score, begin
        words, end = [], n
        while end > 0:
            words.append(text[start[end]:end])
            end = start[end]
        return words[::-1]


class Vocab:
    """Char ids, word ids and a :class:`Segmenter` over the word list, as a package's
    ``vocab.json`` stores them: ``{"chars": [...], "words": [[word, count], ...]}``.

    Ids are positions in the lists; a task puts its special tokens (``[PAD]`` = 0,
    ``[UNK]`` = 1, ...) first and builds the lists in its recipe.
    """

    SPECIAL = ("[PAD]", "[UNK]", "[NULL]")
    UNK = 1

    def __init__(self, chars: Sequence[str], words: Sequence[tuple[str, int]]):
        self.char_list = list(chars)
        self.word_list = [w for w, _ in words]
        self.chars = {c: i for i, c in enumerate(self.char_list)}
        self.words = {w: i for i, w in enumerate(self.word_list)}
        self.segmenter = Segmenter({w: int(c) for w, c in words if w not in self.SPECIAL})
        self._counts = [[w, int(c)] for w, c in words]

    @classmethod
    def load(cls, path) -> "Vocab":
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return cls(data["chars"], [tuple(x) for x in data["words"]])

    def save(self, path) -> None:
        from .packages import atomic_write_text

        atomic_write_text(path, json.dumps({"chars": self.char_list, "words": self._counts}, ensure_ascii=False))

    def ids(self, text: str) -> list[int]:
        """Char ids of ``text``, unknown chars as ``UNK``."""
        get, unk = self.chars.get, self.UNK
        return [get(c, unk) for c in text]

    def segment(self, text: str) -> list[str]:
        return self.segmenter.cut(text)


def read_text_file(path: Path, error: type[Exception]) -> str:
    """A user-supplied UTF-8 text file (gzip-compressed or not, BOM dropped).

    Unreadable bytes raise ``error(message, source=, line=)`` naming the file and line,
    so a dictionary or term file with a bad line says where."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise error(f"{path}: not a readable gzip file ({exc})", source=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8 ({exc.reason}); save the file as UTF-8",
                    source=str(path), line=line) from None
    return text.lstrip("\ufeff")
