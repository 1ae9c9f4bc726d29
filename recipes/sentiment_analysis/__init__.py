"""How the bundled sentiment_analysis models were made from the public data: the two-stage char
CNN recipe with its calibration and ensemble weighting (train.py), the generated training sentences
(augment.py), the robustness suite (robustness.py) and the teacher labels (teacher.py).

Run from the repository root, e.g. ``python -m recipes.sentiment_analysis.train --help``.
"""
