"""sentiment_analysis accuracy of the shipped model, through the product
(Taskflow, static graph), beside a char n-gram TF-IDF + logistic regression
baseline trained on the same training files.

    python benchmarks/accuracy_sentiment.py --data ../shared/data/sentiment [--task-path PACKAGE]

Needs scikit-learn (`pip install '.[train]'`).  Figures go to benchmarks/RESULTS.md; with
``--task-path`` (a package of your own, e.g. an encoder run of ``pretraining/finetune_classifier.py``)
they are printed only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, read_labelled_tsv, table, update_section  # noqa: E402

EVAL_SPLITS = [
    ("ChnSentiCorp dev", "chnsenticorp/dev.tsv"),
    ("ChnSentiCorp test", "chnsenticorp/test.tsv"),
    ("ChnSentiCorp test.dedup", "chnsenticorp/test.dedup.tsv"),
    ("online_shopping_10_cats test", "online_shopping_10_cats/test.tsv"),
    ("waimai_10k test", "waimai_10k/test.tsv"),
]


DEFAULT_TRAIN_FILES = ["chnsenticorp/train.tsv", "online_shopping_10_cats/train.tsv", "waimai_10k/train.tsv"]


def training_texts(data: Path, train_files: list[str]) -> tuple[list[str], list[int]]:
    """The texts and labels of a package's training files (its manifest's ``train_files``)."""
    texts, labels = [], []
    for name in train_files:
        more_texts, more_labels = read_labelled_tsv(data / name)
        texts += more_texts
        labels += more_labels
    return texts, labels


def baseline(train_texts, train_labels):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    model = make_pipeline(
        TfidfVectorizer(analyzer="char", ngram_range=(1, 3), min_df=2, sublinear_tf=True),
        LogisticRegression(C=4.0, max_iter=2000),
    )
    return model.fit(train_texts, train_labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="the sentiment data folder (../shared/data/sentiment)")
    parser.add_argument("--task-path", help="a package to measure instead of the shipped model (RESULTS.md left alone)")
    args = parser.parse_args()
    data = Path(args.data)

    from taskflow import Taskflow

    flow = Taskflow("sentiment_analysis", **({"task_path": args.task_path} if args.task_path else {}))
    manifest = flow.task.manifest
    # The package's own training files; the shipped recipe's three train splits for a package that
    # does not list them.
    train_files = manifest.get("training", {}).get("train_files") or DEFAULT_TRAIN_FILES
    train_texts, train_labels = training_texts(data, train_files)
    start = time.perf_counter()
    base = baseline(train_texts, train_labels)
    base_seconds = time.perf_counter() - start

    rows = []
    for label, name in EVAL_SPLITS:
        texts, gold = read_labelled_tsv(data / name)
        predicted = [int(r["label"] == "positive") for r in flow(texts)]
        ours = sum(p == g for p, g in zip(predicted, gold)) / len(gold)
        theirs = (base.predict(texts) == gold).mean()
        rows.append([label, len(gold), f"**{ours:.4f}**", f"{theirs:.4f}", f"{ours - theirs:+.4f}"])

    body = "\n".join([
        "## sentiment_analysis: accuracy",
        "",
        f"Model `{manifest.name}` {manifest.version} ({manifest['architecture']['type']}), run through "
        "`Taskflow('sentiment_analysis')` (static graph). "
        f"Baseline: char 1-3-gram TF-IDF + logistic regression (C=4), trained in {base_seconds:.0f} s on the same "
        f"{len(train_texts):,} training texts ({', '.join(train_files)}). Machine: {machine()}. "
        "Command: `python benchmarks/accuracy_sentiment.py --data ../shared/data/sentiment`.",
        "",
        table(["split", "texts", "taskflow", "TF-IDF + LR", "difference"], rows),
        "",
        "ChnSentiCorp dev/test share 340/333 texts with train (see the data README); test.dedup drops them.",
    ])
    if not args.task_path:
        update_section("sentiment_accuracy", body)
    print(body)


if __name__ == "__main__":
    main()
