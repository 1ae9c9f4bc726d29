"""sentiment_analysis accuracy of the shipped model, through the product
(Taskflow, static graph), beside a char n-gram TF-IDF + logistic regression
baseline trained on the same training files.

    python benchmarks/accuracy_sentiment.py --data ../shared/data/sentiment [--task-path PACKAGE]

Needs scikit-learn (`pip install '.[train]'`).  The default model and ``mode="accurate"`` are
measured side by side (the dev splits too: the accurate mode's ensemble weights were chosen on
them).  Figures go to benchmarks/RESULTS.md; with ``--task-path`` (a package of your own, e.g. an
encoder run of ``pretraining/finetune_classifier.py``) that package alone is measured and printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/): the SMP2020 reader
from common import machine, table, update_section  # noqa: E402
from recipes.sentiment_analysis.train import read_split  # noqa: E402

EVAL_SPLITS = [
    ("ChnSentiCorp dev", "chnsenticorp/dev.tsv"),
    ("ChnSentiCorp test", "chnsenticorp/test.tsv"),
    ("ChnSentiCorp test.dedup", "chnsenticorp/test.dedup.tsv"),
    ("online_shopping_10_cats dev", "online_shopping_10_cats/dev.tsv"),
    ("online_shopping_10_cats test", "online_shopping_10_cats/test.tsv"),
    ("waimai_10k dev", "waimai_10k/dev.tsv"),
    ("waimai_10k test", "waimai_10k/test.tsv"),
    ("SMP2020 usual dev (polar rows)", "smp2020_ewect/usual/dev.tsv"),
    ("SMP2020 usual test (polar rows)", "smp2020_ewect/usual/test.tsv"),
    ("SMP2020 virus dev (polar rows)", "smp2020_ewect/virus/dev.tsv"),
    ("SMP2020 virus test (polar rows)", "smp2020_ewect/virus/test.tsv"),
]
# Rows that pool splits above: the social target is on both SMP2020 test sets together.
POOLED = {"SMP2020 test, usual + virus (polar rows)": ("smp2020_ewect/usual/test.tsv", "smp2020_ewect/virus/test.tsv")}


DEFAULT_TRAIN_FILES = ["chnsenticorp/train.tsv", "online_shopping_10_cats/train.tsv", "waimai_10k/train.tsv"]


def training_texts(data: Path, train_files: list[str]) -> tuple[list[str], list[int]]:
    """The texts and labels of a package's training files (its manifest's ``train_files``)."""
    texts, labels = [], []
    for name in train_files:
        more_texts, more_labels = read_split(data, name)
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


def flows_and_baseline(data: Path, task_path: str | None):
    """The systems a sentiment benchmark measures (``task_path``'s package, or the fast and accurate
    modes) and the baseline trained on the training files of the first one's networks (the shipped
    recipe's three train splits for a package that does not list them): ``(flows, train_files,
    train_texts, baseline, seconds to train it)``."""
    from taskflow import Taskflow

    if task_path:
        flows = {"taskflow": Taskflow("sentiment_analysis", task_path=task_path)}
    else:
        flows = {"fast (default)": Taskflow("sentiment_analysis"),
                 "accurate": Taskflow("sentiment_analysis", mode="accurate")}
    task = next(iter(flows.values())).task
    # What the package's networks learnt from, all of them (a routed fast package's posts network too).
    train_files = []
    for model in [task.model] + [network.model for network in task.networks[1:]]:
        for name in model.manifest.get("training", {}).get("train_files") or DEFAULT_TRAIN_FILES:
            if name not in train_files:
                train_files.append(name)
    train_texts, train_labels = training_texts(data, train_files)
    start = time.perf_counter()
    base = baseline(train_texts, train_labels)
    return flows, train_files, train_texts, base, time.perf_counter() - start


def data_and_package(description: str, task_path_help: str) -> tuple[Path, str | None]:
    """The sentiment benchmarks' command line: ``--data`` and ``--task-path``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, help="the sentiment data folder (../shared/data/sentiment)")
    parser.add_argument("--task-path", help=task_path_help)
    args = parser.parse_args()
    return Path(args.data), args.task_path


def main() -> None:
    data, task_path = data_and_package(__doc__, "a package to measure instead of the shipped model "
                                                "(RESULTS.md left alone)")

    flows, train_files, train_texts, base, base_seconds = flows_and_baseline(data, task_path)

    rows, right = [], {}   # right[name]: per system, per text, whether its label is gold
    for label, name in EVAL_SPLITS:
        texts, gold = read_split(data, name)
        right[name] = [[int(r["label"] == "positive") == g for r, g in zip(flow(texts), gold)]
                       for flow in flows.values()] + [list(base.predict(texts) == gold)]
    for label, names in [*((label, (name,)) for label, name in EVAL_SPLITS), *POOLED.items()]:
        *ours, theirs = [sum(sum(right[n][k]) for n in names) / sum(len(right[n][k]) for n in names)
                         for k in range(len(flows) + 1)]
        rows.append([label, sum(len(right[n][0]) for n in names),
                     *(f"**{x:.4f}**" if x == max(ours) else f"{x:.4f}" for x in ours),
                     f"{theirs:.4f}", f"{ours[-1] - theirs:+.4f}"])

    def described(flow):
        m = flow.task.manifest
        members = [n.model for n in getattr(flow.task, "networks", [])[1:]]
        ensemble = getattr(flow.task, "ensemble", None)
        if ensemble is not None and ensemble.router is not None:
            how = f", each text to one network by `{ensemble.router.model.name}` {ensemble.router.model.version}"
        else:
            how = f", weights {' / '.join(f'{w:g}' for w in flow.task.weights)}" if members else ""
        return (f"`{m.name}` {m.version} ({m['architecture']['type']}"
                + "".join(f" + `{x.name}` {x.version}" for x in members) + how + ")")

    body = "\n".join([
        "## sentiment_analysis: accuracy",
        "",
        "Models: " + "; ".join(f"{name}: {described(flow)}" for name, flow in flows.items()) + ", run through "
        "`Taskflow('sentiment_analysis')` (static graph). "
        f"Baseline: char 1-3-gram TF-IDF + logistic regression (C=4), trained in {base_seconds:.0f} s on the same "
        f"{len(train_texts):,} training texts ({', '.join(train_files)}). Machine: {machine()}. "
        "Command: `python benchmarks/accuracy_sentiment.py --data ../shared/data/sentiment`.",
        "",
        table(["split", "texts", *flows, "TF-IDF + LR", f"{list(flows)[-1]} - TF-IDF"], rows),
        "",
        "ChnSentiCorp dev/test share 340/333 texts with train (see the data README); test.dedup drops them. "
        "SMP2020-EWECT is read as polarity: happy positive; angry, sad, fear negative (neutral and surprise "
        "rows left out). "
        "The dev splits chose the fast model's epoch and temperature and the accurate mode's ensemble weights.",
    ])
    if not task_path:
        update_section("sentiment_accuracy", body)
    print(body)


if __name__ == "__main__":
    main()
