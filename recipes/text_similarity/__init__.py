"""How the bundled text_similarity models were made from the public matching corpora (BQ, AFQMC,
LCQMC): the recipe (train.py), the corpora's splits (data.py), the generated hard negatives and
paraphrases (augment.py), the threshold tuning of a package (calibrate.py) and the swap dev set
(dev/, made by dev/make_swap_dev.py).

Run from the repository root, e.g. ``python -m recipes.text_similarity.train --help``.
"""
