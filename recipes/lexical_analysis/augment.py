"""Training-set augmentation for the names (PER / LOC / ORG) of the lexical model.

MSRA's training sentences teach names mostly through the names themselves:
the dev split is carved from the same file and shares most of its names, so
it rewards memorising them, while new text brings new names.  Two standard,
label-preserving augmentations push the model towards the cues that carry over
(surnames, name shapes, context words):

* **mention replacement** (Dai & Adel, COLING 2020, "An Analysis of Simple
  Data Augmentation for Named Entity Recognition"): a copy of a sentence with
  each name swapped, with some probability, for another training name of the
  same type; person names are sometimes newly composed from a training surname
  and given-name characters, so the model meets names it cannot have memorised.
* **name lists**: official news prints lists of people (committee members,
  delegates, mourners) as names written back to back, often with no
  separator at all (``区宗杰朱祖寿刘本立…``, one of the MSRA training
  sentences).  The training file has only two such lists, so the model
  learns little of where one name ends and the next begins; synthetic lists
  of training names (no separator, 、, ， or spaces) give it that.

The same list generator over the *dev* split's names gives a held-out check of
the genre (``name_list_sentences(dev, ...)``), reported beside the dev figures.
Everything is seeded; nothing here reads a test split.
"""

from __future__ import annotations

import random
from collections import defaultdict

Sentence = list[tuple[str, str]]

NAME_TAGS = {"nr": "PER", "ns": "LOC", "nt": "ORG", "PER": "PER", "LOC": "LOC", "ORG": "ORG"}

# Separator styles of a name list, with their weights: none, 、, ，, a space.
_SEPARATORS = [("", 0.5), ("、", 0.25), ("，", 0.15), (" ", 0.10)]


def mention_pool(sentences: list[Sentence]) -> dict[str, list[str]]:
    """Distinct names of each type (PER/LOC/ORG) in word/tag sentences (MSRA or LAC tags)."""
    pool: dict[str, set[str]] = defaultdict(set)
    for sentence in sentences:
        for word, tag in sentence:
            if tag in NAME_TAGS and word.strip():
                pool[NAME_TAGS[tag]].add(word)
    return {label: sorted(words) for label, words in pool.items()}


class PersonNames:
    """Chinese person names: drawn from a pool, or composed from its surnames and given-name chars."""

    def __init__(self, names: list[str]):
        # Two- and three-char names written in Han characters: surname + given name.
        self.names = [n for n in names if 2 <= len(n) <= 3 and all("\u4e00" <= c <= "\u9fff" for c in n)]
        if not self.names:
            raise ValueError("no two- or three-char person names to draw from")
        self.surnames = [n[0] for n in self.names]        # a list, so frequent surnames stay frequent
        self.given = [c for n in self.names for c in n[1:]]

    def draw(self, rng: random.Random, composed: float = 0.3) -> str:
        if rng.random() >= composed:
            return rng.choice(self.names)
        return rng.choice(self.surnames) + "".join(rng.choice(self.given) for _ in range(rng.choice((1, 2, 2))))


def replace_mentions(sentence: Sentence, pool: dict[str, list[str]], people: PersonNames, rng: random.Random,
                     rate: float = 0.5) -> Sentence:
    """A copy of ``sentence`` with each name replaced, with probability ``rate``, by another of its type."""
    out = []
    for word, tag in sentence:
        label = NAME_TAGS.get(tag)
        if label and pool.get(label) and rng.random() < rate:
            word = people.draw(rng) if label == "PER" else rng.choice(pool[label])
        out.append((word, tag))
    return out


def name_list(people: PersonNames, rng: random.Random, tag: str = "PER") -> Sentence:
    """One list of 5-40 person names in one separator style, sometimes closed by 等 and a full stop."""
    separator = rng.choices([s for s, _ in _SEPARATORS], weights=[w for _, w in _SEPARATORS])[0]
    out: Sentence = []
    for i in range(rng.randint(5, 40)):
        if i and separator:
            out.append((separator, "w"))
        out.append((people.draw(rng), tag))
    if rng.random() < 0.3:
        out.append(("等", "u"))
    if rng.random() < 0.5:
        out.append(("。", "w"))
    return out


def name_list_sentences(sentences: list[Sentence], count: int, seed: int, tag: str = "PER") -> list[Sentence]:
    """``count`` synthetic name lists built from the person names of ``sentences`` (seeded)."""
    rng = random.Random(seed)
    people = PersonNames(mention_pool(sentences).get("PER", []))
    return [name_list(people, rng, tag) for _ in range(count)]


def augment(sentences: list[Sentence], rng: random.Random, *, replace_share: float, lists: int) -> list[Sentence]:
    """Extra training sentences: mention-replaced copies of a share of those with names, plus name lists."""
    pool = mention_pool(sentences)
    people = PersonNames(pool.get("PER", []))
    with_names = [s for s in sentences if any(tag in NAME_TAGS for _, tag in s)]
    extra = [replace_mentions(s, pool, people, rng) for s in with_names if rng.random() < replace_share]
    extra += [name_list(people, rng) for _ in range(lists)]
    return extra
