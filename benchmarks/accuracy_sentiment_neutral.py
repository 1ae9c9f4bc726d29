"""sentiment_analysis with ``neutral=True``: the three-label model (negative / positive / neutral)
beside the two-label default and char TF-IDF + logistic regression baselines trained on the same
rows.

    python benchmarks/accuracy_sentiment_neutral.py --data ../shared/data/sentiment [--task-path PACKAGE]

Two questions, each on SMP2020-EWECT's test splits (usual + virus, pooled; surprise rows left out,
as the recipe leaves them out of training):

* three-way: macro-F1 and accuracy over positive (happy), negative (angry, sad, fear) and neutral,
  beside a TF-IDF + LR trained on the three-label model's own training rows, read the same way
  (its manifest's ``train_files``, neutral rows included; the generated statements of fact are not
  given to the baseline);
* what the third label costs on polar text: accuracy on the polar rows of SMP2020 and on the review
  test splits, a ``neutral`` answer counted wrong, beside the two-label default.

Needs scikit-learn (`pip install '.[train]'`).  Figures go to benchmarks/RESULTS.md; with
``--task-path`` that package is measured in place of ``char_cnn_neutral`` and only printed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/): the readers
from accuracy_sentiment import baseline, data_and_package  # noqa: E402
from common import machine, table, update_section  # noqa: E402
from recipes.sentiment_analysis.train import THREE_LABELS, read_split  # noqa: E402

SOCIAL_TESTS = ("smp2020_ewect/usual/test.tsv", "smp2020_ewect/virus/test.tsv")
REVIEW_TESTS = ("chnsenticorp/test.tsv", "online_shopping_10_cats/test.tsv", "waimai_10k/test.tsv")


def macro_f1(predicted: list[int], gold: list[int], labels=range(3)) -> float:
    scores = []
    for label in labels:
        hit = sum(p == g == label for p, g in zip(predicted, gold))
        said, truth = predicted.count(label), gold.count(label)
        scores.append(2 * hit / (said + truth) if said + truth else 0.0)
    return sum(scores) / len(scores)


def main() -> None:
    from taskflow import Taskflow

    data, task_path = data_and_package(__doc__, "a three-label package to measure instead of char_cnn_neutral")
    three = (Taskflow("sentiment_analysis", task_path=task_path, neutral=True) if task_path
             else Taskflow("sentiment_analysis", neutral=True))
    two = Taskflow("sentiment_analysis")
    manifest = three.task.manifest
    train_texts, train_labels = [], []
    for rel in manifest["training"]["train_files"]:
        texts, labels = read_split(data, rel, neutral=True)
        train_texts += texts
        train_labels += labels
    start = time.perf_counter()
    base3 = baseline(train_texts, train_labels)
    base_seconds = time.perf_counter() - start

    def labels_of(flow, texts) -> list[int]:
        return [THREE_LABELS.index(r["label"]) for r in flow(texts)]

    texts, gold = [], []
    for rel in SOCIAL_TESTS:
        t, y = read_split(data, rel, neutral=True)
        texts, gold = texts + t, gold + y
    ours, theirs = labels_of(three, texts), [int(p) for p in base3.predict(texts)]
    accuracy = lambda p, g: sum(a == b for a, b in zip(p, g)) / len(g)   # noqa: E731
    f1 = {"three-label model (`neutral=True`)": macro_f1(ours, gold),
          "TF-IDF + LR, same rows, three labels": macro_f1(theirs, gold)}
    three_way = [[name, f"**{value:.4f}**" if value == max(f1.values()) else f"{value:.4f}",
                  f"{accuracy(said, gold):.4f}"] for (name, value), said in zip(f1.items(), (ours, theirs))]
    counts = {label: gold.count(k) for k, label in enumerate(THREE_LABELS)}

    polar_rows = []
    for name, rels in [("SMP2020 test, usual + virus (polar rows)", SOCIAL_TESTS),
                       *((rel, (rel,)) for rel in REVIEW_TESTS)]:
        texts, gold = [], []
        for rel in rels:
            t, y = read_split(data, rel)
            texts, gold = texts + t, gold + y
        said = labels_of(three, texts)
        a3, a2 = accuracy(said, gold), accuracy(labels_of(two, texts), gold)
        said_neutral = said.count(THREE_LABELS.index("neutral")) / len(gold)
        polar_rows.append([name, len(gold), f"{a3:.4f}", f"{a2:.4f}", f"{a3 - a2:+.4f}", f"{said_neutral:.1%}"])

    body = "\n".join([
        "## sentiment_analysis: neutral=True",
        "",
        f"Models: `{manifest.name}` {manifest.version} (labels {', '.join(three.task.labels)}) and the two-label "
        f"default `{two.task.manifest.name}` {two.task.manifest.version}, through `Taskflow` (static graph). Baseline: "
        f"char 1-3-gram TF-IDF + LR (C=4), three labels, trained in {base_seconds:.0f} s on the same "
        f"{len(train_texts):,} rows ({', '.join(manifest['training']['train_files'])}). Machine: {machine()}. "
        "Command: `python benchmarks/accuracy_sentiment_neutral.py --data ../shared/data/sentiment`.",
        "",
        f"Three-way, SMP2020-EWECT test (usual + virus, {sum(counts.values()):,} posts: "
        + ", ".join(f"{n:,} {label}" for label, n in counts.items()) + "; surprise rows left out):",
        "",
        table(["system", "macro-F1", "accuracy"], three_way),
        "",
        "Polar text (a `neutral` answer counts wrong):",
        "",
        table(["split", "texts", "neutral=True", "two labels", "difference", "answered neutral"], polar_rows),
    ])
    if not task_path:
        update_section("sentiment_neutral", body)
    print(body)


if __name__ == "__main__":
    main()
