"""sentiment_analysis robustness: the CheckList-style suite of
recipes.sentiment_analysis.robustness run through the product (Taskflow, the shipped
package) and beside the char n-gram TF-IDF + logistic regression baseline of
accuracy_sentiment.py, trained on the same training files.

    python benchmarks/robustness_sentiment.py --data ../shared/data/sentiment

The invariances run on template sentences and, half of them, on ChnSentiCorp dev reviews that
both systems get right (dev.dedup: none of them is in the training data).  Needs scikit-learn
(`pip install '.[train]'`).  Figures go to benchmarks/RESULTS.md (section sentiment_robustness).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]   # common.py; recipes/
from accuracy_sentiment import baseline, training_texts  # noqa: E402
from common import machine, read_labelled_tsv, table, update_section  # noqa: E402

REAL_SPLIT = "chnsenticorp/dev.dedup.tsv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="the sentiment data folder (../shared/data/sentiment)")
    parser.add_argument("--per-kind", type=int, default=300, help="cases of each kind (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-chars", type=int, default=100,
                        help="longest dev review used as a base sentence (short ones show a perturbation's effect)")
    parser.add_argument("--task-path", action="append", default=[], metavar="PACKAGE",
                        help="score this package instead of the shipped one; give it twice to compare two in one "
                             "run (same cases, same real bases)")
    args = parser.parse_args()
    data = Path(args.data)

    from taskflow import Taskflow
    from recipes.sentiment_analysis.robustness import (
        INVARIANCE_KINDS, KINDS, LABELS, NO_OPINION_CEILING, REPORTED_CASES, generate_cases, run_no_opinion, run_suite)

    start = time.perf_counter()
    flows = [Taskflow("sentiment_analysis", task_path=path) for path in args.task_path] or [Taskflow("sentiment_analysis")]
    names = [f"taskflow {f.task.manifest.name} {f.task.manifest.version}" if len(flows) > 1 else "taskflow"
             for f in flows]
    flow = flows[0]
    manifest = flow.task.manifest
    train_texts, train_labels = training_texts(data, manifest["training"]["train_files"])
    base = baseline(train_texts, train_labels)

    def labels_of(model):
        return lambda texts: [r["label"] for r in model(texts)]

    systems = {name: labels_of(model) for name, model in zip(names, flows)}

    def tfidf(texts: list[str]) -> list[str]:
        return [LABELS[i] for i in base.predict(texts)]  # 0 = negative, 1 = positive, as LABELS

    # "No opinion": how sure each system is of statements of fact (its top label probability).
    confidences = {name: (lambda texts, m=model: [r["score"] for r in m(texts)]) for name, model in zip(names, flows)}
    confidences["TF-IDF + LR"] = lambda texts: base.predict_proba(texts).max(axis=1).tolist()

    dev_texts, dev_gold = read_labelled_tsv(data / REAL_SPLIT)
    gold = [LABELS[g] for g in dev_gold]
    systems["TF-IDF + LR"] = tfidf
    said = [predict(dev_texts) for predict in systems.values()]
    real = [(t, g) for t, g, *labels in zip(dev_texts, gold, *said)
            if all(label == g for label in labels) and len(t) <= args.max_chars]
    cases = generate_cases(real, seed=args.seed, per_kind=args.per_kind)
    real_texts = {t for t, _ in real}
    on_real = [c for c in cases if c.original in real_texts]

    reports = {name: run_suite(predict, cases) for name, predict in systems.items()}
    no_opinion = {name: run_no_opinion(confidence) for name, confidence in confidences.items()}
    real_reports = {name: run_suite(predict, on_real) for name, predict in systems.items()}
    seconds = time.perf_counter() - start

    rows = []
    for kind in KINDS:
        row = [kind, "label unchanged" if kind in INVARIANCE_KINDS else "gold label", reports[names[0]][kind]["n"]]
        row += [f"**{reports[name][kind]['held']:.3f}**" if name in names else f"{reports[name][kind]['held']:.3f}"
                for name in systems]
        if kind in real_reports[names[0]]:
            row += [real_reports[names[0]][kind]["n"]] + [f"{real_reports[name][kind]['held']:.3f}" for name in systems]
        else:
            row += [""] * (1 + len(systems))
        rows.append(row)

    rows.append(["no opinion", f"top probability <= {NO_OPINION_CEILING}", no_opinion[names[0]]["n"]]
                + [f"**{no_opinion[name]['held']:.3f}**" if name in names else f"{no_opinion[name]['held']:.3f}"
                   for name in systems] + [""] * (1 + len(systems)))
    confidence_line = "Mean top probability on the no-opinion statements: " + ", ".join(
        f"{name} {no_opinion[name]['mean_confidence']:.3f}" for name in systems) + "."

    issue_texts = list(dict.fromkeys(t for c in REPORTED_CASES for t in (c.original, c.text) if t is not None))
    issue_gold = {t: c.label for c in REPORTED_CASES for t in (c.original, c.text) if t is not None}
    issue_said = [predict(issue_texts) for predict in systems.values()]
    issue_rows = [[t, issue_gold[t], *labels] for t, *labels in zip(issue_texts, *issue_said)]

    failure_rows = []
    for failure in no_opinion[names[-1]]["failures"]:
        failure_rows.append(["no opinion", failure["text"], f"{failure['confidence']:.3f} sure",
                             f"at most {NO_OPINION_CEILING}"])
    for kind in KINDS:
        for failure in reports[names[-1]][kind]["failures"]:
            wanted = failure["expected"] if "expected" in failure else \
                f"what it says on {_short(failure['original'])}: {failure['original_predicted']}"
            text = failure["text"].replace(" ", "␣").replace("\u3000", "□") if kind == "whitespace" else failure["text"]
            failure_rows.append([kind, _short(text), failure["predicted"], wanted])

    body = "\n".join([
        "## sentiment_analysis: robustness (CheckList-style suite)",
        "",
        f"Model{'s' if len(flows) > 1 else ''} " + ", ".join(f"`{f.task.manifest.name}` {f.task.manifest.version}" for f in flows)
        + " through `Taskflow('sentiment_analysis')`, beside the char 1-3-gram "
        f"TF-IDF + logistic regression baseline of `accuracy_sentiment.py` trained on the same {len(train_texts):,} texts. "
        f"Cases: `recipes.sentiment_analysis.robustness.generate_cases` (seed {args.seed}, {args.per_kind} per kind). "
        "Invariances: a base sentence and a variant that must get the same label (trailing punctuation, extra spaces, "
        "stray digits, an emoji agreeing with the label, a year, a price); half the bases are templates, half are "
        f"{len(real):,} ChnSentiCorp dev.dedup reviews of at most {args.max_chars} characters that every system labels "
        "right. Labelled kinds: template sentences with a gold label (negation, contrast: the clause after 但是/可是/不过 "
        "decides, internet slang). No opinion: statements of fact (这本书有三百页, 手机是黑色的; "
        "`robustness.no_opinion_sentences`), held when the system's top label probability is at most "
        f"{NO_OPINION_CEILING}. The recipe's augmentation (augment.py) uses a template vocabulary disjoint from "
        "the suite's, but the slang words themselves are shared: the slang figure is known slang in unseen frames, "
        f"not unseen slang. Machine: {machine()}; {seconds:.0f} s in all. "
        "Command: `python benchmarks/robustness_sentiment.py --data ../shared/data/sentiment"
        + "".join(f" --task-path {path}" for path in args.task_path) + "`.",
        "",
        "Share of cases that hold (invariance: label unchanged; labelled: gold label):",
        "",
        table(["kind", "check", "n", *systems, "n on dev bases", *(f"{name} on dev bases" for name in systems)], rows),
        "",
        confidence_line,
        "",
        "The reported sentences:",
        "",
        table(["text", "gold", *systems], issue_rows),
        "",
        f"First failures of {names[-1]} per kind (the reported cases come first):",
        "",
        table(["kind", "text", "taskflow says", "expected"], failure_rows),
    ])
    update_section("sentiment_robustness", body)
    print(body)


def _short(text: str, limit: int = 60) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= limit else text[:limit] + "…"


if __name__ == "__main__":
    main()
