"""text_similarity on the held-out lexicon check: minimal pairs made only from lexicon words that no
generator may write (recipes/text_similarity/dev/lexicon_check.jsonl, written by
make_lexicon_check.py there; report only, never trained on).

    python benchmarks/accuracy_lexicon_check.py                       # both modes, section in RESULTS.md
    python benchmarks/accuracy_lexicon_check.py --task-path PACKAGE   # a package of your own, printed only
    python benchmarks/accuracy_lexicon_check.py --task-path A --task-path B --ensemble-off

Half the pairs are contrasts (label 0: an antonym, a negation dropped, another time or place, another
number, swapped roles or directions), half paraphrases (label 1: a Cilin synonym, a politeness or
function word, a harmless change of order).  Each system runs through the product
(``Taskflow("text_similarity", ...)``, the label at its own threshold); reported per kind beside
char-bigram Jaccard at a fixed 0.5.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from accuracy_contrast import jaccard  # noqa: E402
from common import machine, table, update_section  # noqa: E402

CHECK = Path(__file__).resolve().parents[1] / "recipes" / "text_similarity" / "dev" / "lexicon_check.jsonl"
CONTRAST_KINDS = ("antonym", "negation", "time", "place", "number", "role")
PARAPHRASE_KINDS = ("synonym", "function", "reorder")
KINDS = CONTRAST_KINDS + PARAPHRASE_KINDS


def read_check(path: Path = CHECK) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def evaluate(rows: list[dict], labels) -> dict:
    gold = np.array([r["label"] for r in rows])
    right = np.asarray(labels) == gold
    kinds = np.array([r["kind"] for r in rows])
    return {"overall": float(right.mean()), "contrasts": float(right[gold == 0].mean()),
            "paraphrases": float(right[gold == 1].mean()),
            "kind": OrderedDict((k, float(right[kinds == k].mean())) for k in KINDS if (kinds == k).any())}


def run(rows, **options):
    from taskflow import Taskflow

    flow = Taskflow("text_similarity", **options)
    results = flow([[r["text1"], r["text2"]] for r in rows])
    manifest = flow.task.manifest
    return f"`{manifest.name}` {manifest.version}", [r["label"] for r in results]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", choices=("fast", "accurate"), default=["fast", "accurate"])
    parser.add_argument("--task-path", action="append", help="a package of your own (repeatable; nothing is written)")
    parser.add_argument("--ensemble-off", action="store_true", help="with --task-path: each package's own network alone")
    parser.add_argument("--data", type=Path, default=CHECK, help="default: %(default)s")
    parser.add_argument("--no-results", action="store_true", help="print only: leave benchmarks/RESULTS.md as it is")
    args = parser.parse_args(argv)

    rows = read_check(args.data)
    systems, described = OrderedDict(), []
    if args.task_path:
        for path in args.task_path:
            options = {"task_path": path, **({"ensemble": False} if args.ensemble_off else {})}
            name, labels = run(rows, **options)
            systems[path] = evaluate(rows, labels)
            described.append(f"{path}: {name}")
    else:
        for mode in args.modes:
            name, labels = run(rows, mode=mode)
            systems[mode] = evaluate(rows, labels)
            described.append(f"{mode}: {name}")
    systems["Jaccard"] = evaluate(rows, [int(jaccard(r["text1"], r["text2"]) >= 0.5) for r in rows])

    names = list(systems)
    count = lambda kind: sum(r["kind"] == kind for r in rows)
    n_contrast = sum(r["label"] == 0 for r in rows)
    main_rows = [["**all**", len(rows)] + [f"**{systems[n]['overall']:.3f}**" for n in names],
                 ["contrasts (label 0)", n_contrast] + [f"{systems[n]['contrasts']:.3f}" for n in names],
                 ["paraphrases (label 1)", len(rows) - n_contrast] + [f"{systems[n]['paraphrases']:.3f}" for n in names]]
    kind_rows = [[k, "different" if k in CONTRAST_KINDS else "same", count(k)]
                 + [f"{systems[n]['kind'][k]:.3f}" for n in names] for k in KINDS if count(k)]
    command = "python benchmarks/accuracy_lexicon_check.py" + (
        "" if args.task_path or args.modes == ["fast", "accurate"] else " --modes " + " ".join(args.modes))
    body = "\n".join([
        "## text_similarity: held-out lexicon check",
        "",
        f"recipes/text_similarity/dev/lexicon_check.jsonl: {len(rows)} pairs made from lexicon words held out of "
        f"every generator (hash split; make_lexicon_check.py), {n_contrast} contrasts and {len(rows) - n_contrast} "
        "paraphrases, texts from report splits and templates; report only. Accuracy of the label each system "
        f"returns through `Taskflow` ({'; '.join(described)}); baseline: char-bigram Jaccard at a fixed 0.5. "
        f"Machine: {machine()}. Command: `{command}`.",
        "",
        table(["", "pairs"] + names, main_rows),
        "",
        table(["kind", "label", "pairs"] + names, kind_rows),
    ])
    if not args.task_path and not args.no_results:
        update_section("similarity_lexicon_check", body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
