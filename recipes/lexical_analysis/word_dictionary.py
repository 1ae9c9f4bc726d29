"""The words of the lexical package's word dictionary (``taskflow.tasks.lexical_analysis.dictionary``).

After the model has labelled a text, a run of 2 to 4 words that spells a dictionary word becomes
that word (the product's :class:`~taskflow.tasks.lexical_analysis.dictionary.WordDictionary`).
What goes into it (:func:`build_word_dictionary`) decides what the step may do, so
it is chosen from data the model was trained on, not from the sets it is evaluated on:

* jieba's dictionary (``extra_dict/dict.txt.small``): words of 2 to 4 Han characters that it
  has seen at least ``min_freq`` times, except its person, place and organisation names (noisy,
  and entities are the model's) and its Latin and number entries;
* only where MSR's segmentation agrees: if the word's string occurs in MSRA's gold-segmented
  training text, the annotators kept it one word at least ``min_whole_share`` of the times
  (就是 is mostly 就/是 there, so it is left to the model; 粉丝 and 性价比 never occur);
* each word's tag as the recipe tags a training word (:func:`.data.derive_sentence`); a word
  that would be tagged PER, LOC, ORG or TIME is left out.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Callable

from taskflow.tasks.lexical_analysis.dictionary import KEPT_BY_MODEL

from .data import derive_sentence, read_word_tag_file

__all__ = ["build_word_dictionary"]

_JIEBA_NAMES_LATIN_NUMBERS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "x", "eng", "m", "mq"})
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def build_word_dictionary(jieba_small: str | Path, msra_train: str | Path, lexicon,
                          normalize: Callable[[str], str], *, min_freq: int = 20,
                          min_whole_share: float = 0.5, max_length: int = 4) -> dict[str, str]:
    """``{word: LAC tag}`` chosen as the module docstring says.

    ``jieba_small``: jieba's small dictionary as a ``term<TAB>freq<TAB>pos`` file with a header;
    ``msra_train``: MSRA's ``word/TAG`` training file; ``lexicon``: the recipe's
    :class:`.data.Lexicon` (jieba POS), which tags the words as the training data's are tagged.
    """
    candidates: dict[str, str] = {}
    with open(jieba_small, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            row = line.rstrip("\n").split("\t")
            if number == 0 and row[0].lower() == "term" or len(row) < 3:
                continue
            word, freq, pos = row[0], row[1], row[2]
            if (2 <= len(word) <= max_length and _HAN.fullmatch(word) and freq.isdigit() and int(freq) >= min_freq
                    and pos not in _JIEBA_NAMES_LATIN_NUMBERS):
                candidates.setdefault(normalize(word), word)

    # How often each candidate occurs in MSRA's training text, and how often as one gold word.
    seen, whole = Counter(), Counter()
    for sentence in read_word_tag_file(msra_train):
        words = [normalize(word) for word, _ in sentence]
        whole.update(word for word in words if word in candidates)
        text = "".join(words)
        seen.update(text[i:i + n] for n in range(2, max_length + 1) for i in range(len(text) - n + 1)
                    if text[i:i + n] in candidates)

    out, cache = {}, {}
    for norm, word in sorted(candidates.items()):
        if seen[norm] and whole[norm] < min_whole_share * seen[norm]:
            continue                                  # MSR cuts it: the model learnt to
        ((_, tag),) = derive_sentence([(word, "o")], lexicon, cache)
        if tag not in KEPT_BY_MODEL:
            out[norm] = tag
    return out
