"""Training sentences from outside MSRA's genre: CLUENER's gold entities, and silver labels.

The fast model was trained on one genre (MSRA news, 1998) and fails off it: laughter read as
names (哈哈/LOC), names cut apart in short clauses, titles and brands typed as people.  Two
sources of other genres, both labelled by a *teacher* (an existing lexical package) for what
they lack:

* **CLUENER 2020 train** (news titles and short texts, 10 fine entity types): the teacher's
  words and tags, with CLUENER's own mentions imposed, mapped to LAC's entity tags
  (:data:`CLUENER_TO_LAC`).  What the mapping loses: ``scene`` (景点) is left to the teacher
  (LAC calls mountains and lakes LOC, museums ORG); ``position`` becomes a plain noun,
  ``book``/``movie``/``game`` a work title (``nw``), so the teacher's PER/LOC/ORG on them goes.
* **Corpus lines** (dialogue, reviews, app descriptions, blogs): the teacher's labels alone
  (silver), where an entity is kept only when jieba's tagger, a model with other errors, also
  calls the same span a name, place or organisation.  Laughter (哈哈, jieba: a modal particle)
  and most of the teacher's other off-genre guesses fail that test and become plain words.

Both give sentences as ``[(word, LAC tag), ...]``, the recipe's training format.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterable, Iterator

ENTITY_TAGS = ("PER", "LOC", "ORG")
CLUENER_TO_LAC = {"name": "PER", "address": "LOC", "organization": "ORG", "company": "ORG", "government": "ORG",
                  "position": "n", "book": "nw", "movie": "nw", "game": "nw", "scene": None}
_JIEBA_ENTITY = {"nr": "PER", "nrfg": "PER", "nrt": "PER", "ns": "LOC", "nt": "ORG"}


def word_spans(pairs) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` of consecutive ``(word, tag)`` pairs (pos_tagging's output)."""
    spans, start = [], 0
    for word, tag in pairs:
        spans.append((start, start + len(word), tag))
        start += len(word)
    return spans


class Teacher:
    """An existing lexical package's words and tags, and jieba's, for the same texts."""

    def __init__(self, package: str | Path, batch_size: int = 64):
        import jieba
        import jieba.posseg

        from taskflow import Taskflow

        jieba.setLogLevel(60)
        self.flow = Taskflow("pos_tagging", task_path=str(package), batch_size=batch_size)
        self.posseg = jieba.posseg.POSTokenizer(jieba.Tokenizer())

    def words(self, texts: list[str]) -> list[list[tuple[int, int, str]]]:
        return [word_spans(pairs) for pairs in self.flow(texts)]

    def jieba_tags(self, text: str) -> dict[tuple[int, int], str]:
        """jieba's words as ``{(start, end): LAC tag}`` (its names, places and organisations as
        PER/LOC/ORG)."""
        from .data import JIEBA_TO_LAC

        spans, start = {}, 0
        for piece in self.posseg.lcut(text):
            end = start + len(piece.word)
            spans[(start, end)] = _JIEBA_ENTITY.get(piece.flag) or JIEBA_TO_LAC.get(piece.flag, "nz")
            start = end
        return spans


def _checked_entities(text: str, words: list[tuple[int, int, str]], teacher: Teacher,
                      protected: Iterable[tuple[int, int]] = ()) -> list[tuple[int, int, str]]:
    """The teacher's entities that jieba agrees with (same span, same type) stay; the others take
    jieba's tag where jieba has the same word (哈哈: a particle), else ``nz`` (a proper noun of no
    known type): the segmentation is kept, the claim dropped."""
    jieba_tag = teacher.jieba_tags(text)
    keep = set(protected)
    out = []
    for s, e, t in words:
        if t in ENTITY_TAGS and (s, e) not in keep and jieba_tag.get((s, e)) != t:
            t = jieba_tag.get((s, e), "nz")
            t = "nz" if t in ENTITY_TAGS else t
        out.append((s, e, t))
    return out


def _impose(length: int, words: list[tuple[int, int, str]], spans: list[tuple[int, int, str]]):
    """Words with ``spans`` (start, end, tag) made whole words of their tag; the teacher's words
    they cut keep their tag on either side."""
    begins = [False] * length
    tags = [""] * length
    for s, e, t in words:
        begins[s] = True
        tags[s:e] = [t] * (e - s)
    for s, e, t in spans:
        begins[s] = True
        begins[s + 1:e] = [False] * (e - s - 1)
        if e < length:
            begins[e] = True
        tags[s:e] = [t] * (e - s)
    # What is left of a teacher's entity that a gold span cut (那不勒斯vs/ORG cut at 那不勒斯) is no entity.
    for s, e, t in words:
        cut = [k for k in range(s, e) if any(a <= k < b for a, b, _ in spans)]
        if cut and len(cut) < e - s and t in ENTITY_TAGS:
            for k in range(s, e):
                if k not in cut:
                    tags[k] = "nz"
    out, start = [], 0
    for k in range(1, length + 1):
        if k == length or begins[k]:
            out.append((start, k, tags[start]))
            start = k
    return out


def cluener_sentences(path: str | Path, teacher: Teacher) -> list[list[tuple[str, str]]]:
    """CLUENER 2020 train (JSON lines) as LAC-tagged sentences: gold mentions mapped and imposed,
    the teacher's words and tags elsewhere, its entities outside gold mentions checked by jieba."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [row["text"] for row in rows]
    out = []
    for row, text, words in zip(rows, texts, teacher.words(texts)):
        gold, left_to_teacher = [], []
        for kind, mentions in row.get("label", {}).items():
            tag = CLUENER_TO_LAC[kind]
            for spans in mentions.values():
                for start, end in spans:        # CLUENER's end is inclusive
                    (left_to_teacher if tag is None else gold).append((start, end + 1, tag))
        gold = _without_overlaps(gold)
        covered = {k for s, e, _ in gold for k in range(s, e)}
        # Inside a gold mention the gold tag decides; a scene is the teacher's to label, unchecked.
        outside = [(s, e, t) for s, e, t in words if not covered & set(range(s, e))]
        checked = _checked_entities(text, outside, teacher, protected=[(s, e) for s, e, _ in left_to_teacher])
        words = _impose(len(text), [w for w in words if w not in outside] + checked, gold)
        out.append([(text[s:e], t) for s, e, t in words])
    return out


def _without_overlaps(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    kept: list[tuple[int, int, str]] = []
    for span in sorted(spans, key=lambda x: x[0] - x[1]):          # longest first
        if all(span[1] <= s or span[0] >= e for s, e, _ in kept):
            kept.append(span)
    return kept


def corpus_lines(paths: Iterable[str | Path], count: int, *, exclude: set[str] = frozenset(),
                 max_length: int = 120, seed: int = 1) -> list[str]:
    """``count`` lines drawn evenly from the given corpus files (gzip or plain), each at most
    ``max_length`` characters, none of them in ``exclude`` (the dev sets)."""
    import random

    paths = list(paths)
    per_file = max(1, count // max(1, len(paths)))
    rng = random.Random(seed)
    picked: list[str] = []
    for path in paths:
        lines = [line.strip() for line in _open(path) if 8 <= len(line.strip()) <= max_length]
        lines = [line for line in lines if line not in exclude]
        rng.shuffle(lines)
        picked += lines[:per_file]
    return picked


def _open(path: str | Path) -> Iterator[str]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        yield from handle


def silver_sentences(texts: list[str], teacher: Teacher) -> list[list[tuple[str, str]]]:
    """Corpus lines labelled by the teacher, its entities kept only where jieba agrees."""
    return [[(text[s:e], t) for s, e, t in _checked_entities(text, words, teacher)]
            for text, words in zip(texts, teacher.words(texts))]


def read_genre_dev(path: str | Path) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """The hand-checked out-of-genre dev set: ``(text, [(start, end, PER|LOC|ORG)])`` pairs."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["text"], [tuple(span) for span in row["entities"]]) for row in rows]
