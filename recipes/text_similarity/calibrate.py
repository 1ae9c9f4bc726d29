"""Tune a text_similarity package's decision threshold through the product, on the selection
splits its recipe tuned on: the held-out part of LCQMC dev (the manifest's ``lcqmc_dev_split``)
and BQ dev.  The threshold is the one with the best mean accuracy there (the task's ``train.best_threshold``:
a 0.01 grid, ties closest to 0.5), exactly as the recipe picks a single network's.

A package with an ``ensemble`` (networks it requires, whose probabilities it averages) is tuned
as it runs by default, into ``ensemble_threshold``; ``--own-network`` tunes its own network
alone (``ensemble=False``) into ``threshold``:

    python -m recipes.text_similarity.calibrate --package resources/text_similarity/siamese_char_word \\
        --data-dir ../shared/data/matching --write

Without ``--write`` it only prints the threshold and the accuracies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["selection_splits", "tune_threshold", "main"]


def selection_splits(data_dir: str | Path, training: dict) -> dict[str, list]:
    """The recipe's selection splits, rebuilt from the manifest's ``training``."""
    from .data import DEFAULT_FILES, read_pairs, split_lcqmc_dev

    split = training.get("lcqmc_dev_split")
    if not split:
        raise SystemExit("the package's manifest has no training.lcqmc_dev_split: it was not trained by the recipe")
    _, held = split_lcqmc_dev(read_pairs(Path(data_dir) / DEFAULT_FILES["lcqmc_dev"]), split["held_out"], split["seed"])
    return {"lcqmc_dev_held_out": held, "bq_dev": read_pairs(Path(data_dir) / DEFAULT_FILES["bq_dev"])}


def tune_threshold(task, splits: dict[str, list]) -> dict:
    """The threshold best for ``task``'s scores on ``splits``, and its accuracy on each."""
    from taskflow.tasks.text_similarity.train import accuracy, best_threshold

    scored = {}
    for name, pairs in splits.items():
        scores = np.array([r["similarity"] for r in task.run_items(
            [task.check_item([p.text1, p.text2], i) for i, p in enumerate(pairs)])])
        scored[name] = (scores, np.array([p.label for p in pairs]))
    threshold = best_threshold(list(scored.values()))
    return {"threshold": threshold, "method": "best mean accuracy over the selection splits, 0.01 grid, ties "
                                              "closest to 0.5 (text_similarity.calibrate)",
            "selection": {name: {"pairs": len(y), "accuracy": round(float(np.mean((s >= threshold) == (y > 0.5))), 4)}
                          for name, (s, y) in scored.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.text_similarity.calibrate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", required=True, help="a text_similarity model package (folder)")
    parser.add_argument("--data-dir", required=True, help="the matching data folder (lcqmc/dev.tsv, bq_corpus/dev.tsv)")
    parser.add_argument("--own-network", action="store_true",
                        help="for a package with an ensemble: tune its own network's threshold")
    parser.add_argument("--write", action="store_true", help="store the result in the package's manifest")
    args = parser.parse_args(argv)
    from taskflow import Taskflow

    flow = Taskflow("text_similarity", task_path=args.package, ensemble=not args.own_network)
    key = "ensemble_threshold" if flow.task.members else "threshold"
    tuned = tune_threshold(flow.task, selection_splits(args.data_dir, flow.task.manifest["training"]))
    print(json.dumps(tuned, ensure_ascii=False, indent=1))
    if args.write:
        from taskflow.training import update_manifest

        update_manifest(args.package, {key: tuned["threshold"], f"{key}_tuning": tuned})
        print(f"wrote {key} {tuned['threshold']} into {Path(args.package) / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
