"""How the bundled knowledge_mining model (``knowledge_mining/termtree``, also ner's accurate mode) was
made from the public data: the term tree and the category classifier (train.py).

Run from the repository root, e.g. ``python -m recipes.knowledge_mining.train --help``.
"""
