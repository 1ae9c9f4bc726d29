"""sentiment_analysis off its training genres: accuracy on the hand-checked out-of-genre dev set
(recipes/sentiment_analysis/dev/genre_dev.tsv: film, book, forum, product Q&A, news comment, app,
game, restaurant, travel and course texts), overall, per genre and per label, beside
accuracy_sentiment.py's baseline (char 1-3-gram TF-IDF + logistic regression) trained on the same
training files as the fast model.

    python benchmarks/accuracy_sentiment_genre.py --data ../shared/data/sentiment [--task-path PACKAGE]

Needs scikit-learn (`pip install '.[train]'`).  The fast (default) and accurate modes are measured
side by side and the figures go to benchmarks/RESULTS.md; with ``--task-path`` that package alone is
measured and printed, RESULTS.md left alone.  The set is for reporting only: no model or data
selection is made on it.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from accuracy_sentiment import flows_and_baseline  # noqa: E402
from common import machine, table, update_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GENRE_DEV = ROOT / "recipes" / "sentiment_analysis" / "dev" / "genre_dev.tsv"


def read_genre_dev(path=GENRE_DEV) -> list[dict]:
    """The rows of ``label<TAB>genre<TAB>text`` (header included), as dicts."""
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="the sentiment data folder (../shared/data/sentiment), "
                        "for the baseline's training files")
    parser.add_argument("--task-path", help="a package to measure instead of the shipped model (RESULTS.md left alone)")
    parser.add_argument("--dev", default=str(GENRE_DEV), help="the out-of-genre set (default: %(default)s)")
    args = parser.parse_args()
    data = Path(args.data)

    rows = read_genre_dev(args.dev)
    texts = [r["text"] for r in rows]
    gold = [r["label"] for r in rows]

    flows, train_files, train_texts, base, base_seconds = flows_and_baseline(data, args.task_path)

    predictions = {name: [r["label"] for r in flow(texts)] for name, flow in flows.items()}
    predictions["TF-IDF + LR"] = ["positive" if p == 1 else "negative" for p in base.predict(texts)]

    def accuracy(labels, keep) -> str:
        pairs = [(p, g) for p, g, k in zip(labels, gold, keep) if k]
        return f"{sum(p == g for p, g in pairs) / len(pairs):.4f}"

    groups = [("all", [True] * len(rows))]
    groups += [(f"genre `{g}`", [r["genre"] == g for r in rows]) for g in dict.fromkeys(r["genre"] for r in rows)]
    groups += [(f"label `{lab}`", [r["label"] == lab for r in rows]) for lab in ("positive", "negative")]
    result_rows = []
    for name, keep in groups:
        scores = [accuracy(labels, keep) for labels in predictions.values()]
        best = max(scores)
        result_rows.append([name, sum(keep), *(f"**{s}**" if s == best else s for s in scores)])

    counts = Counter((r["genre"], r["label"]) for r in rows)
    body = "\n".join([
        "## sentiment_analysis: out-of-genre dev set",
        "",
        f"{len(rows)} hand-written, hand-checked texts in {len({r['genre'] for r in rows})} genres the training "
        "sets do not cover (recipes/sentiment_analysis/dev/genre_dev.tsv, "
        f"{sum(g == 'positive' for g in gold)} positive / {sum(g == 'negative' for g in gold)} negative; "
        "see its README), with negation, contrast, sarcasm, rhetorical questions, slang and emoji in natural "
        "use. Never trained on or selected on. "
        "Models: " + "; ".join(f"{name}: `{flow.task.manifest.name}` {flow.task.manifest.version}"
                                for name, flow in flows.items()) + ", run through `Taskflow('sentiment_analysis')`. "
        f"Baseline: char 1-3-gram TF-IDF + logistic regression (C=4, accuracy_sentiment.py's), trained in {base_seconds:.0f} s on the "
        f"fast model's {len(train_texts):,} training texts ({', '.join(train_files)}). "
        f"Machine: {machine()}. "
        "Command: `python benchmarks/accuracy_sentiment_genre.py --data ../shared/data/sentiment`.",
        "",
        table(["texts", "n", *predictions], result_rows),
        "",
        "Per genre (positive / negative): " + ", ".join(
            f"{g} {counts[(g, 'positive')]} / {counts[(g, 'negative')]}"
            for g in dict.fromkeys(r["genre"] for r in rows)) + ". "
        "With about 35 texts a genre, one text is about 3 points of a genre's accuracy.",
    ])
    if not args.task_path:
        update_section("sentiment_genre_accuracy", body)
    print(body)


if __name__ == "__main__":
    main()
