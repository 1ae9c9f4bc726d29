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
* **Corpus lines** (dialogue, reviews, app descriptions, blogs) and the train splits of the
  review sets: the teacher's labels (silver), its entities checked by a *referee*.

The referee is Baidu LAC when its labels are given (``lac_labels.py``, run in a venv with LAC;
F1 0.79 on the genre dev set against 0.63 for this project's 1.1.0 model), else jieba's tagger.
A teacher's entity stays only where the referee calls the same span the same type; laughter
(哈哈: a particle to both) and most other off-genre guesses fail that test and take the
referee's words and tags for that span, or ``nz``.  Where LAC has a word with the teacher's
boundaries, its POS is taken (no gold POS there; LAC's tag set is the model's).  LAC's own
PER/LOC/ORG spans are then imposed: words keep the teacher's (MSRA's) boundaries, entities are LAC's.  LAC is not trusted for word
boundaries (F1 0.87 on MSRA dev by MSRA's standard), jieba not for entities it alone finds.

Both give sentences as ``[(word, LAC tag), ...]``, the recipe's training format.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterable, Iterator

from taskflow.tasks.lexical_analysis.tagger import CLOSING_MARKS, OPENING_MARKS

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
    """An existing lexical package's words and tags, and a referee's for the same texts: LAC's
    where ``lac`` (:func:`read_lac_labels`) has the text, else jieba's."""

    def __init__(self, package: str | Path, batch_size: int = 64,
                 lac: dict[str, list[tuple[int, int, str]]] | None = None):
        import jieba
        import jieba.posseg

        from taskflow import Taskflow

        jieba.setLogLevel(60)
        self.flow = Taskflow("pos_tagging", task_path=str(package), batch_size=batch_size)
        self.posseg = jieba.posseg.POSTokenizer(jieba.Tokenizer())
        self.lac = lac or {}

    def words(self, texts: list[str]) -> list[list[tuple[int, int, str]]]:
        return [word_spans(pairs) for pairs in self.flow(texts)]

    def referee_tags(self, text: str) -> dict[tuple[int, int], str]:
        """The referee's words as ``{(start, end): LAC tag}``: LAC's if it labelled ``text``."""
        if text in self.lac:
            return {(s, e): t for s, e, t in self.lac[text]}
        return self.jieba_tags(text)

    def lac_entities(self, text: str) -> list[tuple[int, int, str]]:
        """LAC's PER/LOC/ORG spans in ``text`` (none when LAC did not label it), less those with a
        space or a symbol inside (蒙牛死全家# #/ORG: LAC's off-genre guesses, not names)."""
        return name_spans(text, self.lac.get(text, ()))

    def jieba_tags(self, text: str) -> dict[tuple[int, int], str]:
        """jieba's words as ``{(start, end): LAC tag}`` (its names, places and organisations as
        PER/LOC/ORG)."""
        from taskflow.tasks.lexical_analysis.tags import JIEBA_TO_LAC

        spans, start = {}, 0
        for piece in self.posseg.lcut(text):
            end = start + len(piece.word)
            spans[(start, end)] = _JIEBA_ENTITY.get(piece.flag) or JIEBA_TO_LAC.get(piece.flag, "nz")
            start = end
        return spans


def name_spans(text: str, spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The PER/LOC/ORG ``spans`` of ``text`` that could be names: no space or symbol inside."""
    return [(s, e, t) for s, e, t in spans if t in ENTITY_TAGS and all(_name_char(c) for c in text[s:e])]


def _name_char(char: str) -> bool:
    """A char a name can hold: letters and digits of any script, and the joiners in 让-保罗 or 迈克尔·杰克逊."""
    return char.isalnum() or char in "·•-'."


def _checked_entities(words: list[tuple[int, int, str]], referee: dict[tuple[int, int], str],
                      protected: Iterable[tuple[int, int]] = (), *, adopt_pos: bool = False
                      ) -> list[tuple[int, int, str]]:
    """The teacher's words, refereed where no gold says otherwise.

    * An entity the referee agrees with (same span, same type) stays.  One it refuses takes the
      referee's words where they tile the same span (哈哈哈哈笑/PER -> 哈哈哈哈/xc 笑/v: a refused
      claim's boundaries are as suspect as its type), else the referee's tag for the same word,
      else ``nz`` (a proper noun of no known type); the referee's own entities are never taken here.
    * With ``adopt_pos`` (the referee is LAC), any other word whose span the referee has too takes
      the referee's POS: LAC's tag set is the one the model learns, and these lines have no gold
      POS.  Not time words nor the referee's entities: TIME follows the MSRA data's rules, and
      entities are imposed apart.  jieba, the fallback referee, is not trusted for POS here."""
    keep = set(protected)
    out = []
    for s, e, t in words:
        theirs = referee.get((s, e))
        if t in ENTITY_TAGS and (s, e) not in keep and theirs != t:
            tiling = _tiling(referee, s, e)
            if theirs is None and len(tiling) > 1:
                out += [(a, b, "nz" if u in ENTITY_TAGS else u) for a, b, u in tiling]
                continue
            t = "nz" if theirs is None or theirs in ENTITY_TAGS else theirs
        elif adopt_pos and t not in _KEEP_OWN and theirs is not None and theirs not in _KEEP_OWN:
            t = theirs
        out.append((s, e, t))
    return out


_KEEP_OWN = ENTITY_TAGS + ("TIME",)


def _tiling(referee: dict[tuple[int, int], str], start: int, end: int) -> list[tuple[int, int, str]]:
    """The referee's words that exactly cover ``[start, end)``, in order; empty if they do not."""
    out, at = [], start
    ends = {s: (e, t) for (s, e), t in referee.items()}
    while at < end and at in ends:
        stop, tag = ends[at]
        if stop > end:
            return []
        out.append((at, stop, tag))
        at = stop
    return out if at == end else []


def silver_words(text: str, words: list[tuple[int, int, str]], referee: dict[tuple[int, int], str],
                 entities: list[tuple[int, int, str]] = (), *, adopt_pos: bool = False) -> list[tuple[int, int, str]]:
    """One silver sentence: the teacher's ``words`` refereed (:func:`_checked_entities`), then
    ``entities`` (LAC's) imposed on them."""
    return _impose(len(text), _checked_entities(words, referee, adopt_pos=adopt_pos), list(entities))


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
                    start, end = _inside_brackets(text, start, end + 1)
                    (left_to_teacher if tag is None else gold).append((start, end, tag))
        gold = _without_overlaps(gold)
        covered = {k for s, e, _ in gold for k in range(s, e)}
        # Inside a gold mention the gold tag decides; a scene is the teacher's to label, unchecked.
        outside = [(s, e, t) for s, e, t in words if not covered & set(range(s, e))]
        checked = _checked_entities(outside, teacher.referee_tags(text), protected=[(s, e) for s, e, _ in left_to_teacher],
                                    adopt_pos=text in teacher.lac)
        # LAC's entities are not imposed here: CLUENER marks every name, place and organisation
        # of its kinds, so one outside its mentions is by its standard no entity.
        words = _impose(len(text), [w for w in words if w not in outside] + checked, gold)
        out.append([(text[s:e], t) for s, e, t in words])
    return out


def _inside_brackets(text: str, start: int, end: int) -> tuple[int, int]:
    """A mention without its enclosing brackets: CLUENER marks titles as 《红楼梦》, LAC and MSRA as
    《/w 红楼梦/nw 》/w."""
    while end - start > 2 and text[start] in OPENING_MARKS and text[end - 1] in CLOSING_MARKS:
        start, end = start + 1, end - 1
    return start, end


def _without_overlaps(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    kept: list[tuple[int, int, str]] = []
    for span in sorted(spans, key=lambda x: x[0] - x[1]):          # longest first
        if all(span[1] <= s or span[0] >= e for s, e, _ in kept):
            kept.append(span)
    return kept


def corpus_lines(paths: Iterable[str | Path], count: int, *, exclude: set[str] = frozenset(),
                 max_length: int = 120, seed: int = 1) -> list[str]:
    """``count`` lines drawn evenly from the given files, each at most ``max_length`` characters,
    none of them in ``exclude`` (the dev sets).  A file is a corpus part (a text a line, gzip or
    plain) or a labelled set's train split (``.tsv`` with a ``text`` column: reviews)."""
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
        if str(path).endswith(".tsv"):
            import csv

            # One review a row; a newline inside one would split it, so rows come whole.
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                yield (row.get("text") or "").replace("\n", " ")
        else:
            yield from handle


def silver_sentences(texts: list[str], teacher: Teacher) -> list[list[tuple[str, str]]]:
    """Corpus lines labelled by the teacher, its entities kept only where the referee agrees, and
    LAC's entities imposed where LAC labelled the line."""
    out = []
    for text, words in zip(texts, teacher.words(texts)):
        words = silver_words(text, words, teacher.referee_tags(text), teacher.lac_entities(text),
                             adopt_pos=text in teacher.lac)
        out.append([(text[s:e], t) for s, e, t in words])
    return out


def read_lac_labels(path: str | Path) -> dict[str, list[tuple[int, int, str]]]:
    """``lac_labels.py``'s output as ``{text: [(start, end, LAC tag), ...]}``."""
    out = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["words"] is not None:          # None: LAC's words did not spell the text
                out[row["text"]] = word_spans(zip(row["words"], row["tags"]))
    return out


def run_lac(python: str | Path, texts: list[str], out: str | Path, threads: int = 2) -> dict[str, list[tuple[int, int, str]]]:
    """LAC's labels for ``texts``, by ``lac_labels.py`` run with ``python`` (a venv with LAC; it
    cannot share the project's Paddle).  ``out`` keeps them (JSON lines): a file that already
    labels every text is read, not made again."""
    import subprocess
    import sys

    out = Path(out)
    wanted = [t for t in dict.fromkeys(texts) if t and "\n" not in t]
    if out.exists():
        labels = read_lac_labels(out)
        if all(t in labels for t in wanted):
            return labels
    out.parent.mkdir(parents=True, exist_ok=True)
    listing = out.with_suffix(".texts")
    listing.write_text("".join(t + "\n" for t in wanted), encoding="utf-8")
    script = Path(__file__).with_name("lac_labels.py")
    subprocess.run([str(python), str(script), "--texts", str(listing), "--out", str(out), "--threads", str(threads)],
                   check=True, stdout=sys.stderr)
    listing.unlink()
    return read_lac_labels(out)


def read_genre_dev(path: str | Path) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """The hand-checked out-of-genre dev set: ``(text, [(start, end, PER|LOC|ORG)])`` pairs."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["text"], [tuple(span) for span in row["entities"]]) for row in rows]
