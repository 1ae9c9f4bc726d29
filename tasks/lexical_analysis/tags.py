"""The LAC tag set, and jieba's part-of-speech tags mapped onto it.

:data:`LAC_TAGS` are the word tags of the shipped lexical model (its labels are each tag's
``-B`` and ``-I``).  :data:`JIEBA_TO_LAC` reads a jieba-format user dictionary's tags
(``word freq tag``) as LAC tags at inference; the lab's recipe tags its training words with it.
"""

from __future__ import annotations

__all__ = ["LAC_TAGS", "JIEBA_TO_LAC"]

# The LAC tag set (Jiao et al. 2018): 24 POS tags and 4 upper-case proper-name classes.
LAC_TAGS = ("n", "f", "s", "t", "nr", "ns", "nt", "nw", "nz", "v", "vd", "vn", "a", "ad", "an", "d",
            "m", "q", "r", "p", "c", "u", "xc", "w", "PER", "LOC", "ORG", "TIME")

# jieba / ICTCLAS tag -> LAC tag.  What each choice buys is in README.md; in short:
# LAC has no idiom/set-phrase, distinguishing-word, state-word, modal or affix tags,
# so those fold into the LAC class they behave like in a sentence.
JIEBA_TO_LAC = {
    "n": "n", "ng": "n", "nr": "PER", "nrt": "PER", "nrfg": "PER", "ns": "LOC", "nt": "ORG",
    "nz": "nz", "eng": "nz", "x": "nz", "j": "n", "l": "n", "g": "n", "k": "n",
    "t": "TIME", "tg": "TIME", "s": "s", "f": "f",
    "v": "v", "vg": "v", "vi": "v", "vq": "v", "vd": "vd", "vn": "vn", "i": "v",
    "a": "a", "ag": "a", "b": "a", "z": "a", "zg": "a", "ad": "ad", "an": "an",
    "d": "d", "df": "d", "dg": "d", "m": "m", "mq": "m", "mg": "m", "q": "q", "qg": "q",
    "r": "r", "rr": "r", "rz": "r", "rg": "r", "p": "p", "c": "c",
    "u": "u", "uj": "u", "ul": "u", "uv": "u", "uz": "u", "ud": "u", "ug": "u",
    "y": "xc", "e": "xc", "o": "xc", "h": "xc", "w": "w",
}
