"""How the bundled lexical model (``lexical_analysis/bigru_crf``, also ner's fast mode) was made from
the public data: the recipe (train.py), its training data derived from MSRA, jieba and rules (data.py),
the name augmentation (augment.py), the other-genre sentences and silver labels (silver.py, with
Baidu LAC as referee through lac_labels.py), the package's word dictionary (word_dictionary.py) and
the hand-checked out-of-genre dev set with its maker (dev/).

Run from the repository root, e.g. ``python -m recipes.lexical_analysis.train --help``.
"""
