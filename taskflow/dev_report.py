"""The dev report of a model trained on a user's own files: what ``taskflow train`` prints and the
package's manifest keeps (:func:`classification_report`, :func:`print_report`)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["classification_report", "print_report"]


def classification_report(gold: list[str], predicted: list[str], labels: list[str],
                          train_counts: Mapping[str, int]) -> dict:
    """Dev accuracy, and per label: its train and dev examples, precision and recall on dev.  A
    figure with nothing to count is None (null), not 0: a label with no dev examples has no recall,
    one never predicted no precision."""
    correct = sum(g == p for g, p in zip(gold, predicted))
    per_label = {}
    for label in labels:
        hits = sum(g == p == label for g, p in zip(gold, predicted))
        in_dev, as_predicted = gold.count(label), predicted.count(label)
        per_label[label] = {"train": int(train_counts.get(label, 0)), "dev": in_dev, "predicted": as_predicted,
                            "precision": round(hits / as_predicted, 4) if as_predicted else None,
                            "recall": round(hits / in_dev, 4) if in_dev else None}
    return {"examples": len(gold), "accuracy": round(correct / len(gold), 4) if gold else 0.0,
            "per_label": per_label}


def print_report(report: Mapping[str, Any], *, title: str, headline: str, quiet: bool = False) -> None:
    """The dev report as a small table on stdout (``headline`` names the overall figure)."""
    if quiet:
        return
    print(f"{title}: {headline}")
    rows = report["per_label"]
    columns = [c for c in ("train", "dev", "predicted", "precision", "recall", "f1") if any(c in r for r in rows.values())]
    width = max([5, *map(_display_width, rows)])
    print(f"  {'label':<{width}}  " + "  ".join(f"{c:>9}" for c in columns))
    for label, row in rows.items():
        padding = " " * (width - _display_width(label))
        print(f"  {label}{padding}  " + "  ".join(f"{'n/a' if row.get(c, '') is None else row.get(c, ''):>9}"
                                                 for c in columns))
    unmeasured = [label for label, row in rows.items() if row.get("dev") == 0]
    if unmeasured:
        print(f"  no dev examples of {', '.join(map(repr, unmeasured))}: how well the model knows "
              f"{'it' if len(unmeasured) == 1 else 'them'} is not measured; add some to --dev")


def _display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: Chinese labels (酒店, 手机) take two a character."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
