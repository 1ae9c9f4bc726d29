"""Where the fast mode's router sends each text, and what a wrong route costs.

    python benchmarks/accuracy_sentiment_routing.py --data ../shared/data/sentiment

The fast mode (``char_cnn``) reads each text with one of two networks, the reviews' or the posts'
(``char_cnn_posts``), as ``genre_router`` says.  Per test split: the share of texts sent to each, the
fast mode's accuracy on each share, and the other network's accuracy on the same texts (what the
other route would have given them).  Beside it, on the Weibo posts, a char 1-3-gram TF-IDF + logistic
regression trained on SMP2020-EWECT's polar train posts alone (the baseline of a system that only
knows posts).  Needs scikit-learn (`pip install '.[train]'`).  Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/): the SMP2020 reader
from accuracy_sentiment import baseline, training_texts  # noqa: E402
from common import machine, table, update_section  # noqa: E402
from recipes.sentiment_analysis.train import read_split  # noqa: E402

SPLITS = {"ChnSentiCorp test": ("chnsenticorp/test.tsv",),
          "online_shopping_10_cats test": ("online_shopping_10_cats/test.tsv",),
          "waimai_10k test": ("waimai_10k/test.tsv",),
          "SMP2020 test, usual + virus (polar rows)": ("smp2020_ewect/usual/test.tsv", "smp2020_ewect/virus/test.tsv")}
POSTS_TRAIN = ["smp2020_ewect/usual/train.tsv", "smp2020_ewect/virus/train.tsv"]


def share(right: np.ndarray, rows: np.ndarray) -> str:
    return f"{right[rows].mean():.4f}" if rows.any() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="the sentiment data folder (../shared/data/sentiment)")
    data = Path(parser.parse_args().data)
    from taskflow import Taskflow

    fast = Taskflow("sentiment_analysis")
    task = fast.task
    router = task.ensemble.router.model
    if list(router.labels) != ["reviews", "posts"]:
        raise SystemExit(f"expected a router with the labels reviews, posts; {router.name} has {router.labels}")
    route = Taskflow("sentiment_analysis", task_path=router.package.directory)
    networks = {"reviews": Taskflow("sentiment_analysis", ensemble=False),
                "posts": Taskflow("sentiment_analysis", task_path=task.networks[1].model.package.directory)}
    train_texts, train_labels = training_texts(data, POSTS_TRAIN)
    start = time.perf_counter()
    posts_baseline = baseline(train_texts, train_labels)
    seconds = time.perf_counter() - start

    rows, smp = [], None
    for label, names in SPLITS.items():
        texts, gold = [], []
        for name in names:
            more_texts, more_gold = read_split(data, name)
            texts += more_texts
            gold += more_gold
        gold = np.array(gold)

        def right(flow):
            return np.array([r["label"] == "positive" for r in flow(texts)]) == gold

        to_posts = np.array([r["label"] == "posts" for r in route(texts)])
        fast_right, reviews_right, posts_right = right(fast), right(networks["reviews"]), right(networks["posts"])
        rows.append([label, len(texts), f"{to_posts.mean():.1%}", f"{fast_right.mean():.4f}",
                     share(fast_right, ~to_posts), share(posts_right, ~to_posts),
                     share(fast_right, to_posts), share(reviews_right, to_posts)])
        if names[0].startswith("smp2020"):
            smp = (fast_right.mean(), float((posts_baseline.predict(texts) == gold).mean()))
    body = "\n".join([
        "## sentiment_analysis: the fast mode's routes",
        "",
        f"`{task.manifest.name}` {task.manifest.version}: `{router.name}` {router.version} sends each text to the "
        f"reviews network or to `{task.networks[1].model.name}` {task.networks[1].model.version}; each route's "
        "texts read by the network it chose (the fast mode) and by the other one alone, through `Taskflow`. "
        f"Machine: {machine()}. Command: `python benchmarks/accuracy_sentiment_routing.py --data "
        "../shared/data/sentiment`.",
        "",
        table(["split", "texts", "sent to posts", "fast", "to reviews: fast", "to reviews: posts network",
               "to posts: fast", "to posts: reviews network"], rows),
        "",
        f"Weibo posts against a system that knows posts only: char 1-3-gram TF-IDF + LR trained in {seconds:.0f} s "
        f"on SMP2020-EWECT's {len(train_texts):,} polar train posts (usual + virus) gets {smp[1]:.4f} on the "
        f"pooled polar test; the fast mode {smp[0]:.4f} ({smp[0] - smp[1]:+.4f}).",
    ])
    update_section("sentiment_routing", body)
    print(body)


if __name__ == "__main__":
    main()
