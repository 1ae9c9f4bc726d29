"""How the bundled reading_comprehension models were made from the public data (CMRC 2018): the
DrQA-style char reader's recipe (train.py), the decoding calibration of a package (calibrate.py:
length prior, null threshold, null model, ensemble weights) and the unanswerable sets they are
tuned and reported on (dev/, made by dev/make_unanswerable.py).

Run from the repository root, e.g. ``python -m recipes.reading_comprehension.train --help``.
"""
