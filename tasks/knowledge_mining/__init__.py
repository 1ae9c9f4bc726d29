"""knowledge_mining (alias wordtag): a WordTag category for every word, and term ids from a term tree.

>>> from taskflow import Taskflow
>>> Taskflow("knowledge_mining")("《红楼梦》是清代作家曹雪芹的作品")   # doctest: +SKIP
[{'text': '《红楼梦》是清代作家曹雪芹的作品',
  'items': [{'item': '《', 'offset': 0, 'length': 1, 'wordtag_label': 'w', 'termid': None},
            {'item': '红楼梦', 'offset': 1, 'length': 3, 'wordtag_label': '作品类_实体',
             'termid': '作品与出版物_eb_红楼梦'},
            ...
            {'item': '曹雪芹', 'offset': 10, 'length': 3, 'wordtag_label': '人物类_实体',
             'termid': '人物_eb_曹雪芹'}, ...]}]

How a word gets its category (details and the category list in README.md):

1. the lexical model (``lexical_analysis/bigru_crf``, named by the package's
   ``requires.lexical``) segments the text and gives LAC tags;
2. rules: the text inside ``《》`` is one work (作品类_实体); closed-class words
   (是, 不, 什么, 吗, 哈哈...) get their WordTag class;
3. the term tree: adjacent nominal words whose concatenation is a term are
   merged (longest match; not when all of them are names, whose boundaries the
   lexical model knows best); a word in the tree takes the tree's most frequent
   category among those its LAC tag allows (a word tagged ORG is never a person);
4. the category classifier (char n-grams, numpy) decides the other nouns and
   names among the categories their LAC tag allows;
5. everything else maps from its LAC tag (v -> 场景事件, p -> 介词, m -> 数量词...);
6. the user dictionary (``user_dict``) overrides all of the above.

A word gets a ``termid`` when the tree has it under the same top type as its category.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from taskflow.errors import OptionError, UserDictError
from taskflow.registry import register_task
from taskflow.task import Option
from taskflow.tasks.lexical_analysis.tagger import LexicalStages, normalize, words_from_labels
from taskflow.tasks.lexical_analysis.user_dict import DictItem, UserDict, user_dict_lines

from .categories import (
    CANDIDATES, CATEGORIES, ENTITY_CATEGORIES, FUNCTION_WORDS, LAC_TO_WORDTAG, NOUN_CLASSES,
)
from .termtree import Term, TermTree

__all__ = ["KnowledgeMiningTask", "Labeller", "TermTree", "Term", "CATEGORIES",
           "ENTITY_CATEGORIES", "load_user_dict"]

# Words of these LAC tags may be merged into one tree term.
_MERGEABLE_TAGS = frozenset({"n", "nr", "ns", "nt", "nw", "nz", "PER", "LOC", "ORG", "s", "vn", "an"})
# Tree categories that may merge words: not idioms or verse lines, which the segmenter handles.
_MERGEABLE_CATEGORIES = frozenset(NOUN_CLASSES) - {"词汇用语"}
_LATIN = re.compile(r"[a-z][a-z0-9.&'_+-]*")
_PLAIN_WORD_TAGS = frozenset({"v", "vd", "vn", "a", "ad", "an", "d"})
_NAME_TAGS = frozenset({"PER", "LOC", "ORG", "nr", "ns", "nt", "nw"})


class Labeller:
    """Turns LAC-tagged words into WordTag items (steps 2-5 of the module docstring).

    ``tree`` and ``classifier`` may be ``None`` (then those steps are skipped), and
    ``rules=False`` drops step 2: with all three off this is the plain LAC-tag mapping,
    the baseline the benchmark compares with.

    Tree entries whose ``source`` starts with one of ``name_only_sources`` are trusted
    only for words the lexical model tagged as names (PER, LOC, ORG, nr, ns, nt, nw), and
    never merge words: jieba's dictionary tags many common words as names (多云/nr, 两国/ns).
    A merge needs at least one word not tagged as a name.
    """

    def __init__(self, tree: TermTree | None, classifier=None, *, rules: bool = True, max_merge_words: int = 4,
                 max_merge_chars: int = 16, name_only_sources: Iterable[str] = (), normalize=normalize):
        self.tree = tree
        self.normalize = normalize
        self.classifier = classifier
        self.rules = rules
        self.name_only_sources = tuple(name_only_sources)
        self.max_merge_words = max_merge_words
        self.max_merge_chars = max_merge_chars

    def label(self, text: str, words: list[tuple[int, int, str]]) -> list[list]:
        """``[start, end, category, termid or None]`` for each (possibly merged) word."""
        norm = self.normalize(text)
        items: list[list] = []
        i = 0
        while i < len(words):
            merged = self._merge(norm, words, i)
            if merged is not None:
                i, made = merged
                items += made
                continue
            s, e, tag = words[i]
            items.append([s, e, *self.label_word(norm[s:e], tag)])
            i += 1
        return items

    def _merge(self, norm: str, words, i: int):
        """``(next index, items)`` when words from ``i`` on form one unit, else ``None``."""
        s = words[i][0]
        if self.rules and norm[s:words[i][1]] == "《":
            for j in range(i + 1, min(len(words), i + 30)):
                word = norm[words[j][0]:words[j][1]]
                if word == "《" or words[j][0] - s > 40:
                    break   # 《《红楼梦》》: the inner pair is the title
                if word == "》":
                    if j == i + 1:
                        break
                    start, end = words[i + 1][0], words[j - 1][1]
                    title = norm[start:end]
                    # a title has a letter or digit and no space at its edges: 《，》 names nothing
                    if any(ch.isalnum() for ch in title) and not any(ch.isspace() for ch in (title[0], title[-1])):
                        entry = self.tree.linked(title, "作品类_实体") if self.tree is not None else None
                        return j, [[s, words[i][1], "w", None], [start, end, "作品类_实体", entry.termid if entry else None]]
                    break
        if self.tree is None or words[i][2] not in _MERGEABLE_TAGS:
            return None
        last = i
        while (last + 1 < len(words) and last + 1 - i < self.max_merge_words and words[last + 1][2] in _MERGEABLE_TAGS
               and words[last + 1][1] - s <= self.max_merge_chars):
            last += 1
        for j in range(last, i, -1):   # longest match first
            head_tag = words[j][2]
            allowed = [c for c in CANDIDATES.get(head_tag, NOUN_CLASSES) if c in _MERGEABLE_CATEGORIES]
            if all(words[k][2] in _NAME_TAGS for k in range(i, j + 1)):
                continue   # the lexical model's own name boundaries stand: 中/LOC 美/LOC stays two words
            entries = self._entries(norm[s:words[j][1]], allowed, named=False)
            if entries:
                return j + 1, [[s, words[j][1], entries[0].category, entries[0].termid]]
        return None

    def _entries(self, text: str, categories, named: bool):
        entries = self.tree.lookup(text, categories)
        if named or not self.name_only_sources:
            return entries
        return [e for e in entries if not e.source.startswith(self.name_only_sources)]

    def label_word(self, word: str, tag: str) -> tuple[str, str | None]:
        """``(category, termid or None)`` of one normalised word with its LAC tag."""
        if tag == "w" or not word.strip():
            return "w", None
        candidates = CANDIDATES.get(tag)
        if candidates is None:
            if self.rules and word in FUNCTION_WORDS and not (word == "是" and tag not in ("v", "d")):
                return FUNCTION_WORDS[word], None
            if self.tree is not None and tag in _PLAIN_WORD_TAGS and len(word) >= 4:
                idioms = self.tree.lookup(word, ["词汇用语"])
                if idioms:
                    return "词汇用语", idioms[0].termid
            if self.rules and tag == "xc" and _LATIN.fullmatch(word):
                return "外语单词", None   # the lexical model's "other function word" for a stray letter or word
            return LAC_TO_WORDTAG.get(tag, "词汇用语"), None
        if self.tree is not None:
            entries = self._entries(word, candidates, tag in _NAME_TAGS)
            if entries:
                return entries[0].category, entries[0].termid
        if self.rules and tag in ("n", "nz") and _LATIN.fullmatch(word):
            return "外语单词", None
        if self.classifier is not None and len(candidates) > 1:
            category = self.classifier.predict(word, candidates)
        else:
            category = LAC_TO_WORDTAG[tag]
        entry = self.tree.linked(word, category) if self.tree is not None else None
        return category, entry.termid if entry else None


def load_user_dict(source: Any, *, format: str = "auto", normalize=normalize) -> UserDict:
    """A WordTag user dictionary: ``长津湖/作品类_实体``, ``华为 手机/物体类``, or a bare word.

    A file path or a list of lines; parsed into the lexical tasks' :class:`UserDict`,
    so matching follows the same rules (forward maximum matching on normalised text,
    a later line wins).  Categories outside :data:`CATEGORIES` are allowed (your own).
    """
    if format not in ("auto", "lac"):
        raise UserDictError(
            f"user_dict_format for knowledge_mining must be 'auto' or 'lac' (lines like 长津湖/作品类_实体), got {format!r}"
        )
    lines, where = user_dict_lines(source, example=["长津湖/作品类_实体"])
    items: dict[str, DictItem] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        words, tags = [], []
        for part in line.split():
            word, slash, tag = part.rpartition("/")
            if not slash or tag[:1].isdigit():   # no tag, or a '/' inside a word such as 1/2
                word, tag = part, None
            elif not tag or not word:
                raise UserDictError(
                    f"{where}:{number}: part {part!r} needs a word and a category, e.g. 长津湖/作品类_实体",
                    source=where, line=number,
                )
            words.append(word)
            tags.append(tag)
        items[normalize("".join(words))] = DictItem(tuple(words), tuple(tags), number)
    return UserDict(items, normalize)


@register_task("knowledge_mining", aliases=["wordtag"])
class KnowledgeMiningTask(LexicalStages):
    """WordTag categories and term ids for every word of each text; see the module docstring.

    Its model (the term tree and category classifier) builds on the lexical model, named by
    its manifest's ``requires.lexical``: that network runs, then the labeller.

    >>> from taskflow import Taskflow
    >>> Taskflow("wordtag", user_dict=["长津湖/作品类_实体"])("长津湖很好看")   # doctest: +SKIP
    [{'text': '长津湖很好看', 'items': [{'item': '长津湖', 'offset': 0, 'length': 3,
      'wordtag_label': '作品类_实体', 'termid': None}, ...]}]
    """

    declared = {
        "term_tree": Option(
            None,
            'a term file (``.tsv``/``.tsv.gz``, format in :mod:`.termtree`) or a :class:`TermTree` replacing '
            'the shipped tree.',
            "str"),
        "user_dict": Option(
            None,
            'a file path or a list of lines, one item a line, parts separated by spaces, each optionally '
            '``word/category``: ``长津湖/作品类_实体``, ``华为 手机/物体类``. User items win over the model and the tree.',
            "str"),
        "user_dict_format": Option(
            'auto',
            '``"auto"`` or ``"lac"`` (the format above; kept for symmetry with the lexical tasks).',
            "str"),
    }

    default_model = "termtree"
    lexical_role = "lexical"

    def __init__(self, model, *, term_tree: Any = None, user_dict: Any = None, user_dict_format: str = "auto",
                 **base):
        super().__init__(model, **base)
        if term_tree is None:
            tree = TermTree.load(model.path(self.manifest["term_tree"]), self.normalize)
        elif isinstance(term_tree, TermTree):
            tree = term_tree
        elif isinstance(term_tree, (str, os.PathLike)):
            tree = TermTree.load(term_tree, self.normalize)
        else:
            raise OptionError(f"term_tree must be a file path or a TermTree, got {type(term_tree).__name__}",
                              "term_tree")
        from .classifier import CategoryClassifier

        classifier = CategoryClassifier.load(model.path("classifier.npz"), self.manifest["classes"])
        self.labeller = Labeller(tree, classifier, normalize=self.normalize, **self.manifest.get("labeller", {}))
        self.user_dict = (None if user_dict is None
                          else load_user_dict(user_dict, format=user_dict_format, normalize=self.normalize))

    @property
    def tree(self) -> TermTree:
        return self.labeller.tree

    def join(self, item, results, units):
        return self.format_result(item, self.wordtag_items(item, results, units))

    def wordtag_items(self, item: str, results, units) -> list[list]:
        """``[start, end, category, termid or None]`` for each word of ``item``."""
        items = self.labeller.label(item, self.lac_words(item, results, units))
        if self.user_dict is not None:
            items = self._apply_user_dict(item, items)
        return items

    def _apply_user_dict(self, text: str, items: list[list]) -> list[list]:
        begins, labels = [False] * len(text), [""] * len(text)
        for s, e, label, _ in items:
            begins[s] = True
            labels[s:e] = [label] * (e - s)
        self.user_dict.apply(self.normalize(text), begins, labels)
        known = {(s, e, label): termid for s, e, label, termid in items}
        out = []
        for s, e, label in words_from_labels(text, begins, labels):
            if (s, e, label) in known:
                termid = known[(s, e, label)]
            else:
                entry = self.tree.linked(self.normalize(text[s:e]), label)
                termid = entry.termid if entry else None
            out.append([s, e, label, termid])
        return out

    def format_result(self, text: str, items: list[list]) -> Any:
        out = []
        for s, e, label, termid in items:
            # termid is always there (None when the tree does not link the word), as in PaddleNLP.
            out.append({"item": text[s:e], "offset": s, "length": e - s, "wordtag_label": label,
                        "termid": termid or None})
        return {"text": text, "items": out}

    def result_words(self, result):
        return [(item["item"], item["wordtag_label"]) for item in result["items"]]
