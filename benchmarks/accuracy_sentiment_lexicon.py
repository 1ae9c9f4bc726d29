"""sentiment_analysis on plain opinions: the plain-opinion check, per kind, through the product.

    python benchmarks/accuracy_sentiment_lexicon.py [--task-path PACKAGE ...] [--baseline --data ../shared/data/sentiment]

Two parts (recipes/sentiment_analysis/lexicon.py):

- **generated**, from the held-out half of the public sentiment lexicons (words no training sentence
  of the lexicon augmentation uses, nor any word containing one): 200 texts of each kind, half
  positive and half negative: a single word (精彩), subject + adjective (手机真X), a degree adverb
  (很 / 非常 / 太…了 / 有点…), a negated form (不X, 一点也不X, 没有想象中X: a negated negative is
  positive);
- **hand-written** (recipes/sentiment_analysis/dev/plain_opinion.tsv): 122 everyday opinions of the
  same four kinds (内容很精彩, 手机不错, 不难吃, 没有想象中差), in everyday words, some of which the
  lexicon augmentation trains on; none of its texts is trained on.

Never trained or selected on.  The fast (default) and accurate modes are measured side by side,
with the share of texts the fast mode's router sends to its posts network, and the figures go to
benchmarks/RESULTS.md; with ``--task-path`` those packages alone are measured and printed, RESULTS.md
left alone.  ``--baseline`` adds accuracy_sentiment.py's char TF-IDF + LR, trained on the fast
mode's training files under ``--data``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/)
from common import machine, table, update_section  # noqa: E402
from recipes.sentiment_analysis.lexicon import CHECK_KINDS, check_cases, read_handwritten  # noqa: E402


def routed_to_posts(flow, texts: list[str]) -> float | None:
    """The share of ``texts`` the package's router sends to its second network (the posts'), or None
    without a router."""
    import numpy as np

    ensemble = getattr(flow.task, "ensemble", None)
    if ensemble is None or ensemble.router is None:
        return None
    from taskflow import Taskflow

    router = Taskflow("sentiment_analysis", task_path=str(ensemble.router.model.package.directory),
                      return_all_scores=True, offline=True)
    labels = list(router.task.labels)
    picked = np.array([labels.index(r["label"]) for r in router(texts)])
    return float((picked == 1).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task-path", action="append", default=[],
                        help="a package to measure instead of the shipped modes (RESULTS.md left alone); repeatable")
    parser.add_argument("--baseline", action="store_true", help="also the char TF-IDF + LR baseline (needs --data)")
    parser.add_argument("--data", help="the sentiment data folder, for --baseline's training files")
    args = parser.parse_args()
    from taskflow import Taskflow

    parts = {"generated (held-out words)": check_cases(), "hand-written": read_handwritten()}
    if args.task_path:
        flows = {Path(p).name: Taskflow("sentiment_analysis", task_path=p, offline=True) for p in args.task_path}
    else:
        flows = {"fast (default)": Taskflow("sentiment_analysis", offline=True),
                 "accurate": Taskflow("sentiment_analysis", mode="accurate", offline=True)}
    predict = {name: (lambda texts, flow=flow: [r["label"] for r in flow(texts)]) for name, flow in flows.items()}
    if args.baseline:
        if not args.data:
            parser.error("--baseline trains on the files under --data")
        from accuracy_sentiment import baseline, training_texts

        files = ["chnsenticorp/train.tsv", "online_shopping_10_cats/train.tsv", "waimai_10k/train.tsv",
                 "smp2020_ewect/usual/train.tsv", "smp2020_ewect/virus/train.tsv"]
        base = baseline(*training_texts(Path(args.data), files))
        predict["TF-IDF + LR"] = lambda texts: ["positive" if p == 1 else "negative" for p in base.predict(texts)]

    rows, errors, posts_share = [], {}, {}
    first = next(iter(flows.values()))
    for part, cases in parts.items():
        texts = [c.text for c in cases]
        answers = {name: run(texts) for name, run in predict.items()}
        groups = [("all", [True] * len(cases))] + [(kind, [c.kind == kind for c in cases]) for kind in CHECK_KINDS]
        groups += [(f"label {lab}", [c.label == lab for c in cases]) for lab in ("positive", "negative")]
        for group, keep in groups:
            scores = []
            for name in predict:
                pairs = [(a, c.label) for a, c, k in zip(answers[name], cases, keep) if k]
                scores.append(sum(a == g for a, g in pairs) / len(pairs))
            rows.append([part, group, sum(keep), *(f"{s:.3f}" for s in scores)])
        for name in flows:
            errors[(part, name)] = [c.text for c, a in zip(cases, answers[name]) if a != c.label]
        share = routed_to_posts(first, texts)
        if share is not None:
            posts_share[part] = share

    names = list(predict)
    body = "\n".join([
        "## sentiment_analysis: plain-opinion check",
        "",
        "Plain opinions, through `Taskflow('sentiment_analysis')`: a generated part of 800 texts (200 per kind, "
        "half positive) from the held-out fifth of the public sentiment lexicons' words (recipes/sentiment_analysis/"
        "lexicon.py: words two of DUTIR, Tsinghua, HowNet and NTUSD give one polarity and none the other, "
        "jieba frequency >= 100; no lexicon training sentence uses them or a word holding one), and 122 hand-written "
        "ones (recipes/sentiment_analysis/dev/plain_opinion.tsv). Never trained or selected on. "
        "Models: " + "; ".join(f"{name}: `{f.task.manifest.name}` {f.task.manifest.version}" for name, f in flows.items())
        + f". Machine: {machine()}. Command: `python benchmarks/accuracy_sentiment_lexicon.py`.",
        "",
        table(["part", "texts", "n", *names], rows),
        "",
        *([("Share of texts the fast mode's router sends to its posts network: "
            + ", ".join(f"{p} {s:.1%}" for p, s in posts_share.items()) + ".")] if posts_share else []),
        "",
        "Missed hand-written texts: " + "; ".join(
            f"{name}: {'、'.join(errors[('hand-written', name)]) or 'none'}" for name in flows) + ".",
    ])
    if not args.task_path:
        update_section("sentiment_lexicon_check", body)
    print(body)


if __name__ == "__main__":
    main()
