"""text_similarity on the contrast dev set: everyday question/command pairs, half minimal contrasts
(label 0: one word or one order changes the meaning) and half paraphrases in other words or another
word order (label 1), across assistant commands, shopping, banking, travel, health and general
questions (recipes/text_similarity/dev/contrast_dev.jsonl, see CONTRAST.md there; report only, never
trained on).

    python benchmarks/accuracy_contrast.py                      # both modes, section in RESULTS.md
    python benchmarks/accuracy_contrast.py --modes fast
    python benchmarks/accuracy_contrast.py --task-path PACKAGE  # your own package, printed only

Each mode runs through the product (``Taskflow("text_similarity", mode=...)``, the label at the
model's own threshold).  Reported: accuracy overall, per kind and per domain, and the mean
similarity on contrasts and on paraphrases, beside a baseline that knows nothing of meaning:
char-bigram Jaccard of the two texts (lowercased, without punctuation or whitespace), label 1 at a
fixed threshold of 0.5 (not tuned on this set).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))     # the lab (recipes/): the set and its reader
from common import machine, table, update_section  # noqa: E402
from recipes.text_similarity.data import CONTRAST_DEV, read_contrast_dev  # noqa: E402

CONTRAST_KINDS = ("negation", "antonym", "time", "place", "number", "entity", "question", "role")
PARAPHRASE_KINDS = ("paraphrase_words", "paraphrase_order")
KINDS = CONTRAST_KINDS + PARAPHRASE_KINDS
DOMAINS = ("assistant", "shopping", "banking", "travel", "health", "general")
JACCARD_THRESHOLD = 0.5
BASELINE = (f"char-bigram Jaccard (lowercased, punctuation and whitespace dropped), label 1 at a fixed "
            f"{JACCARD_THRESHOLD}")


def _bigrams(text: str) -> set[str]:
    text = re.sub(r"[\W_]+", "", text.lower())
    return {text[i:i + 2] for i in range(len(text) - 1)} or {text}


def jaccard(a: str, b: str) -> float:
    x, y = _bigrams(a), _bigrams(b)
    return len(x & y) / max(1, len(x | y))


def evaluate(rows: list[dict], scores, labels) -> dict:
    """Accuracy overall, per kind, per domain; mean score on contrasts and on paraphrases."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    gold = np.array([r["label"] for r in rows])
    right = labels == gold
    kinds, domains = np.array([r["kind"] for r in rows]), np.array([r["domain"] for r in rows])
    return {
        "overall": float(right.mean()),
        "contrasts": float(right[gold == 0].mean()),
        "paraphrases": float(right[gold == 1].mean()),
        "kind": OrderedDict((k, float(right[kinds == k].mean())) for k in KINDS if (kinds == k).any()),
        "domain": OrderedDict((d, float(right[domains == d].mean())) for d in DOMAINS if (domains == d).any()),
        "mean_contrast": float(scores[gold == 0].mean()),
        "mean_paraphrase": float(scores[gold == 1].mean()),
    }


def run_taskflow(rows: list[dict], mode: str | None = None, task_path: str | None = None):
    from taskflow import Taskflow

    flow = Taskflow("text_similarity", mode=mode, task_path=task_path)
    results = flow([[r["text1"], r["text2"]] for r in rows])
    return flow, [r["similarity"] for r in results], [r["label"] for r in results]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", choices=("fast", "accurate"), default=["fast", "accurate"])
    parser.add_argument("--task-path", help="evaluate your own package instead (nothing is written to RESULTS.md)")
    parser.add_argument("--data", type=Path, default=CONTRAST_DEV, help="default: %(default)s")
    args = parser.parse_args(argv)

    rows = read_contrast_dev(args.data)
    gold = [r["label"] for r in rows]
    systems = OrderedDict()
    described = []
    runs = [(args.task_path, None, args.task_path)] if args.task_path else [(m, m, None) for m in args.modes]
    for name, mode, task_path in runs:
        flow, scores, labels = run_taskflow(rows, mode, task_path)
        systems[name] = evaluate(rows, scores, labels)
        manifest = flow.task.manifest
        described.append(f"{name}: `{manifest.name}` {manifest.version}, threshold {flow.task.threshold}")
    base_scores = [jaccard(r["text1"], r["text2"]) for r in rows]
    systems["Jaccard"] = evaluate(rows, base_scores, [int(s >= JACCARD_THRESHOLD) for s in base_scores])

    names = list(systems)
    header = ["", "pairs"] + names
    count = lambda key, value: sum(r[key] == value for r in rows)
    n_contrast = gold.count(0)
    rows_main = [
        ["**all**", len(rows)] + [f"**{systems[n]['overall']:.3f}**" for n in names],
        ["contrasts (label 0)", n_contrast] + [f"{systems[n]['contrasts']:.3f}" for n in names],
        ["paraphrases (label 1)", len(rows) - n_contrast] + [f"{systems[n]['paraphrases']:.3f}" for n in names],
        ["mean similarity, contrasts", n_contrast] + [f"{systems[n]['mean_contrast']:.3f}" for n in names],
        ["mean similarity, paraphrases", len(rows) - n_contrast] + [f"{systems[n]['mean_paraphrase']:.3f}" for n in names],
    ]
    kind_rows = [[k, count("kind", k)] + [f"{systems[n]['kind'][k]:.3f}" for n in names]
                 for k in KINDS if count("kind", k)]
    domain_rows = [[d, count("domain", d)] + [f"{systems[n]['domain'][d]:.3f}" for n in names]
                   for d in DOMAINS if count("domain", d)]
    command = "python benchmarks/accuracy_contrast.py" + (
        "" if args.task_path or args.modes == ["fast", "accurate"] else " --modes " + " ".join(args.modes))
    body = "\n".join([
        "## text_similarity: contrast dev set",
        "",
        f"recipes/text_similarity/dev/contrast_dev.jsonl: {len(rows)} hand-written everyday pairs, "
        f"{n_contrast} minimal contrasts (label 0) and {len(rows) - n_contrast} paraphrases (label 1), "
        "report only (recipes/text_similarity/dev/CONTRAST.md). Accuracy of the label each mode returns "
        f"through `Taskflow('text_similarity', mode=...)` ({'; '.join(described)}); baseline: {BASELINE}. "
        f"Machine: {machine()}. Command: `{command}`.",
        "",
        table(header, rows_main),
        "",
        "Per kind (the first eight are contrasts, label 0; the last two paraphrases, label 1):",
        "",
        table(["kind", "pairs"] + names, kind_rows),
        "",
        "Per domain:",
        "",
        table(["domain", "pairs"] + names, domain_rows),
    ])
    if not args.task_path:
        update_section("similarity_contrast", body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
