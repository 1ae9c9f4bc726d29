"""Text helpers shared by tasks: normalisation, long-text splitting, word segmentation, vocabularies."""

from __future__ import annotations

import functools
import gzip
import json
import math
import re
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Normalizer", "NORMALIZATION_STEPS", "q2b", "to_simplified", "split_text", "Segmenter", "Vocab", "read_text_file"]

# ------------------------------------------------------------ normalisation
# What a model reads is its training text's normalisation, named step by step in its
# manifest (``"normalization": ["width", "lower"]``), so a package and the code that
# prepares its input cannot drift apart.  Every step but ``strip`` maps one char to one
# char, so offsets into the normalised text are offsets into the caller's text.

def _width_table() -> dict[int, int]:
    # Full-width ASCII variants (U+FF01..U+FF5E) to U+0021..U+007E; the ideographic space to a space.
    table = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
    table[0x3000] = 0x20
    return table


def _space_table() -> dict[int, int]:
    return {code: 0x20 for code in range(0x10000) if chr(code).isspace()}


def _strip_table() -> dict[int, None]:
    import unicodedata

    # whitespace, punctuation, and the control and format chars (NUL, zero-width space, BOM) a pasted
    # or file-read text brings in unseen
    return {code: None for code in range(0x10000)
            if chr(code).isspace() or unicodedata.category(chr(code)).startswith("P")
            or unicodedata.category(chr(code)) in ("Cc", "Cf")}


NORMALIZATION_STEPS: dict[str, Callable[[], Mapping[int, int | None]]] = {
    "width": _width_table,                                                   # full-width -> half-width
    "lower": lambda: {code: code + 32 for code in range(ord("A"), ord("Z") + 1)},  # ASCII only: 'İ' stays one char
    "space": _space_table,                                                   # any whitespace char -> ' '
    "strip": _strip_table,                                                   # drop whitespace and punctuation
}
LENGTH_CHANGING_STEPS = frozenset({"strip", "social"})


@functools.lru_cache(maxsize=1)
def _opencc():
    try:
        import opencc
    except ImportError as exc:  # a dependency of the wheel; missing only from a hand-made environment
        raise ImportError("this model reads traditional characters as simplified through OpenCC, which is not "
                          "installed: pip install opencc") from exc
    try:
        return opencc.OpenCC("t2s")
    except Exception:  # OpenCC before 1.1.7 names its configurations by file
        return opencc.OpenCC("t2s.json")


_T2S_TABLE: list = []       # the table, once made (one per process: it depends on OpenCC's version only)
_T2S_LOCK = threading.Lock()


def t2s_table(home=None) -> dict[int, str]:
    """:func:`_t2s_char_table`, made once a process; its file is kept under ``home``'s cache (the
    model's ``home=``, else ``$PPNLP_HOME``) by whichever model needs it first."""
    if not _T2S_TABLE:
        with _T2S_LOCK:
            if not _T2S_TABLE:
                _T2S_TABLE.append(_t2s_char_table(home))
    return _T2S_TABLE[0]


def _t2s_char_table(home=None) -> dict[int, str]:
    """OpenCC's character table alone (each CJK char converted on its own), one char to one char.

    Left out: conversions to a character beyond the BMP (綝 -> 𬘭, 1,126 of them): recently coded
    simplified forms of rare characters, which models and fonts know less well than the original.

    Converting the 93,000 chars takes OpenCC about 50 ms, a sixth of a process's way to its first
    result, so the table is kept in the cache home, one file per OpenCC version (its pairs of
    chars); a file that does not read as one is made again."""
    from .files import atomic_write_text, home_dir

    try:
        import opencc
        version = str(opencc.__version__)
    except (ImportError, AttributeError):
        version = None
    kept = home_dir(home) / "taskflow" / ".opencc" / f"t2s-chars-{version}.txt" if version else None
    try:
        pairs = kept.read_text(encoding="utf-8") if kept else ""
        if pairs and len(pairs) % 2 == 0:
            return dict(zip(map(ord, pairs[0::2]), pairs[1::2]))
    except (OSError, UnicodeError):
        pass
    chars = [chr(code) for first, last in ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF))
             for code in range(first, last + 1)]
    converted = _opencc().convert("\n".join(chars)).split("\n")
    table = {ord(a): b for a, b in zip(chars, converted) if a != b and len(b) == 1 and ord(b) <= 0xFFFF}
    if kept:
        try:
            atomic_write_text(kept, "".join(chr(a) + b for a, b in table.items()))
        except OSError:
            pass      # a read-only home: made again by the next process
    return table


@functools.lru_cache(maxsize=1)
def _t2s_chars() -> re.Pattern:
    """Any char :func:`_t2s_char_table` converts: one search in C tells most texts (simplified
    ones) apart faster than translating them and comparing."""
    return re.compile("[" + "".join(map(re.escape, map(chr, sorted(t2s_table())))) + "]")


def to_simplified(text: str) -> str:
    """Traditional characters to simplified, one char for one char (offsets hold), by OpenCC's
    maintained tables.

    Only characters that OpenCC's character table converts are changed, each to what its phrase
    table says in context (乾隆 keeps 乾, 乾燥 becomes 干燥).  A character its table leaves alone is
    never changed by a phrase: on simplified text the phrase table alone would turn 破坏 into 破坯
    (坏土 is a traditional word) and the name 沈重 into 沉重.

    >>> to_simplified("我覺得這部電影很長，乾隆年間")
    '我觉得这部电影很长，乾隆年间'
    """
    if text.isascii() or not _t2s_chars().search(text):
        return text                      # no traditional character: the common case, at C speed
    table = t2s_table()
    by_char = text.translate(table)
    in_context = _opencc().convert(text)
    if len(in_context) != len(text):     # no phrase changes the length today; if one ever does, chars alone
        return by_char
    return "".join(p if ord(c) in table and ord(p) <= 0xFFFF else b
                   for c, p, b in zip(text, in_context, by_char))


# Social-media markup (the ``social`` step).  A URL and an @-mention carry no opinion and, read char by
# char, drown a short post's words; a Weibo emoticon code such as [泪] or [哈哈] is one signal, not
# its chars.  Each becomes one char of Unicode's private use areas, which no real text holds: the
# same code always the same char, so a vocabulary learns the frequent ones like any char.
URL_CHAR, MENTION_CHAR = "\ue000", "\ue001"
EMOTICON_PLANE = 0xF0000     # plane 15, 65,534 private use chars: one per code name, by its CRC-32
_URL = re.compile(r"(?:https?://|www\.)[!-~]+", re.IGNORECASE)
# @name of up to 12 chars that a space, punctuation, the next @ or the end closes (nicknames are short,
# and an unclosed run is more likely the post's own words: then the @ alone is replaced); //@name:
# retweet chains keep their // and :.
_NAME_END = r"\s@＠:：,，;；。!！?？、()（）\[\]【】#"
_MENTION = re.compile(rf"[@＠](?:[^{_NAME_END}]{{1,12}}(?=[{_NAME_END}]|$))?")
_EMOTICON = re.compile(r"[\[［]([^\[\]［］\s]{1,8})[\]］]")
# Emoji skin tones, variation selectors and the zero-width joiner: 👍🏻 reads as 👍.
_EMOJI_MODIFIERS = {**{code: None for code in range(0x1F3FB, 0x1F400)}, 0xFE0E: None, 0xFE0F: None, 0x200D: None}


def emoticon_char(name: str) -> str:
    """The char the ``social`` step writes for the emoticon code ``[name]``.

    >>> emoticon_char("泪") == emoticon_char("泪") != emoticon_char("哈哈")
    True
    """
    import zlib

    return chr(EMOTICON_PLANE + zlib.crc32(name.encode("utf-8")) % 0xFFFE)


def _emoticon(match: re.Match) -> str:
    name = match.group(1)
    # [1] or [12] is a reference mark, [a] a letter in brackets: only a name with a Han char is a code.
    return emoticon_char(name) if re.search(r"[\u4e00-\u9fff]", name) else match.group(0)


def social(text: str) -> str:
    """URLs, @-mentions and emoticon codes as one private-use char each; emoji modifiers dropped.

    >>> social("笑死我了[哈哈] //@小明:真的假的 http://t.cn/abc") == (
    ...     "笑死我了" + emoticon_char("哈哈") + " //" + MENTION_CHAR + ":真的假的 " + URL_CHAR)
    True
    """
    if "[" in text or "［" in text:
        text = _EMOTICON.sub(_emoticon, text)
    if "@" in text or "＠" in text:
        text = _MENTION.sub(MENTION_CHAR, text)
    if "://" in text or "www." in text.lower():
        text = _URL.sub(URL_CHAR, text)
    return text.translate(_EMOJI_MODIFIERS)


# Steps that are functions of the whole string rather than per-char tables.  t2s keeps the length and
# touches only Han characters, so it commutes with the table steps; social shortens the text (a
# package that reads with it has no char offsets) and reads full-width @ and brackets itself.  Both
# run before the table steps.
STRING_STEPS: dict[str, Callable[[str], str]] = {
    "social": social,        # URLs, @-mentions, emoticon codes -> one char each
    "t2s": to_simplified,    # traditional -> simplified
}
# What manifests written before the steps had names said, in words.
_DESCRIBED = {
    "q2b (full-width to half-width) + ASCII lower-case, per character": ("width", "lower"),
    "full-width to half-width, ASCII lower-case, whitespace to space (char for char)": ("width", "lower", "space"),
}


def normalization_steps(spec: Any) -> tuple[str, ...]:
    """The step names of a manifest's ``normalization`` field (a list, or ``"width+lower"``)."""
    if isinstance(spec, str):
        spec = _DESCRIBED.get(spec) or spec.split("+")
    if not isinstance(spec, (list, tuple)) or not all(isinstance(step, str) for step in spec):
        raise ValueError(f"normalization must be a list of step names, got {spec!r}")
    unknown = [step for step in spec if step not in NORMALIZATION_STEPS and step not in STRING_STEPS]
    if unknown:
        raise ValueError(f"unknown normalization step(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join([*STRING_STEPS, *NORMALIZATION_STEPS])}")
    return tuple(spec)


@functools.lru_cache(maxsize=None)
def _composed_table(steps: tuple[str, ...]) -> dict[int, int | None]:
    tables = [NORMALIZATION_STEPS[step]() for step in steps]
    table: dict[int, int | None] = {}
    for code in set().union(*tables):
        value: int | None = code
        for step_table in tables:
            value = step_table.get(value, value)
            if value is None:
                break
        if value != code:
            table[code] = value
    return table


class Normalizer:
    """A text normalisation as one ``str.translate`` table, built from named steps.

    >>> Normalizer(["width", "lower", "space"])("ＩＢＭ\u3000公司")
    'ibm 公司'
    """

    def __init__(self, steps: Any):
        self.steps = normalization_steps(steps)
        self.keeps_length = not (set(self.steps) & LENGTH_CHANGING_STEPS)
        self._string_steps = [STRING_STEPS[step] for step in self.steps if step in STRING_STEPS]
        self._table = _composed_table(tuple(step for step in self.steps if step in NORMALIZATION_STEPS))

    def __call__(self, text: str) -> str:
        for step in self._string_steps:
            text = step(text)
        return text.translate(self._table)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Normalizer) and other.steps == self.steps

    def __hash__(self) -> int:
        return hash(self.steps)

    def __repr__(self) -> str:
        return f"Normalizer({list(self.steps)!r})"


_Q2B = Normalizer(["width"])


def q2b(text: str) -> str:
    """Full-width to half-width, character for character (``len`` is kept).

    >>> q2b("ＡＢＣ１２３，")
    'ABC123,'
    """
    return _Q2B(text)


# A sentence ends after one of these, plus any closing quotes or brackets.
_SENTENCE_END = re.compile(r"[。！？!?；;…\n]+[”’」』）)\]]*")
# Where a sentence too long for one piece is cut instead: after a comma, colon or space.
_CLAUSE_END = re.compile(r"[，,、：:\s]+[”’」』）)\]]*")


def split_text(text: str, max_length: int) -> list[tuple[int, str]]:
    """Split ``text`` into pieces of at most ``max_length`` characters.

    Pieces break at sentence ends where possible, packing whole sentences
    together; a sentence longer than ``max_length`` is cut after its last
    comma, colon or space in the second half of a piece, and only where it has
    none there, hard at ``max_length`` (through a word, maybe).  Returns
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
            cut = _clause_cut(text[chunk_start:chunk_start + max_length])
            pieces.append((chunk_start, text[chunk_start:chunk_start + cut]))
            chunk_start += cut
        chunk_end = s_end
    if chunk_end > chunk_start:
        pieces.append((chunk_start, text[chunk_start:chunk_end]))
    return pieces


def _clause_cut(window: str) -> int:
    """Where to end a piece that must end inside ``window``: after its last clause end in the
    second half, else at the window's end."""
    ends = [m.end() for m in _CLAUSE_END.finditer(window, len(window) // 2)]
    return ends[-1] if ends else len(window)


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
        from .files import atomic_write_text

        atomic_write_text(path, json.dumps({"chars": self.char_list, "words": self._counts}, ensure_ascii=False))

    def ids(self, text: str) -> list[int]:
        """Char ids of ``text``, unknown chars as ``UNK``."""
        get, unk = self.chars.get, self.UNK
        return [get(c, unk) for c in text]

    def segment(self, text: str) -> list[str]:
        return self.segmenter.cut(text)


def read_text_file(path: Path, error: type[Exception], max_bytes: int = 256 << 20) -> str:
    """A user-supplied UTF-8 text file (gzip-compressed or not, BOM dropped) of at most
    ``max_bytes`` (once decompressed).

    Unreadable bytes raise ``error(message, source=, line=)`` naming the file and line,
    so a dictionary or term file with a bad line says where.  A gzip file is decompressed as a
    stream and given up past ``max_bytes``: a few KB can expand to gigabytes (a "gzip bomb")."""
    def too_big() -> Exception:
        return error(f"{path} holds more than {max_bytes / 2**20:g} MiB of text once decompressed, the most "
                     "taskflow reads from such a file; split it, or leave out what is not needed", source=str(path))

    with open(path, "rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
        handle.seek(0)
        if not gzipped:
            data = handle.read(max_bytes + 1)
            if len(data) > max_bytes:
                raise too_big()
        else:
            try:
                with gzip.GzipFile(fileobj=handle) as stream:
                    data = stream.read(max_bytes + 1)
            except (OSError, EOFError) as exc:
                raise error(f"{path}: not a readable gzip file ({exc})", source=str(path)) from None
            if len(data) > max_bytes:
                raise too_big()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not valid UTF-8 ({exc.reason}); save the file as UTF-8",
                    source=str(path), line=line) from None
    return text.lstrip("\ufeff")
