"""The lab: how each bundled model was made from the public data (``../shared/data``).

Not in the wheel.  Each ``recipes/<task>/`` imports the product (``taskflow``), never the other way:
run a recipe from the repository root, e.g. ``python -m recipes.sentiment_analysis.train --help``.
"""
