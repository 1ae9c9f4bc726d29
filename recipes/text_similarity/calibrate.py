"""Tune a text_similarity package's decision threshold through the product, on the selection
splits its recipe tuned on: the held-out part of LCQMC dev (the manifest's ``lcqmc_dev_split``)
and BQ dev.  The threshold is the one with the best mean accuracy there (the task's ``train.best_threshold``:
a 0.01 grid, ties closest to 0.5), exactly as the recipe picks a single network's.

A package with an ``ensemble`` (networks it requires, whose probabilities it averages) is tuned
as it runs by default, into ``ensemble_threshold``; ``--own-network`` tunes its own network
alone (``ensemble=False``) into ``threshold``:

    python -m recipes.text_similarity.calibrate --package resources/text_similarity/siamese_char_word \\
        --data-dir ../shared/data/matching --write

It first fits the package's calibration (``calibration``, or ``ensemble_calibration`` for the
mixed probabilities): Platt scaling, ``sigmoid(a * logit(p) + b)`` fitted by logistic regression
on the selection splits pooled, so that a similarity of 0.5 means even odds there; then the
threshold on the calibrated scores.  Calibration is monotone: the labels at the tuned threshold
are those of the uncalibrated scores at the matching threshold.

``--keep-labels`` tunes no threshold: the package's threshold is carried onto the calibrated
scale (``sigmoid(a * logit(t) + b)``), so every label stays what it was and only the similarities
move, as for a package already shipped.

Without ``--write`` it only prints the calibration, the threshold and the accuracies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["selection_splits", "fit_calibration", "tune_threshold", "main"]


def selection_splits(data_dir: str | Path, training: dict) -> dict[str, list]:
    """The recipe's selection splits, rebuilt from the manifest's ``training``."""
    from .data import DEFAULT_FILES, read_pairs, split_lcqmc_dev

    split = training.get("lcqmc_dev_split")
    if not split:
        raise SystemExit("the package's manifest has no training.lcqmc_dev_split: it was not trained by the recipe")
    _, held = split_lcqmc_dev(read_pairs(Path(data_dir) / DEFAULT_FILES["lcqmc_dev"]), split["held_out"], split["seed"])
    splits = {"lcqmc_dev_held_out": held, "bq_dev": read_pairs(Path(data_dir) / DEFAULT_FILES["bq_dev"])}
    afqmc = training.get("afqmc_train_split")
    if afqmc:      # --afqmc-held-out: AFQMC train pairs the network never saw
        splits["afqmc_train_held_out"] = split_lcqmc_dev(read_pairs(Path(data_dir) / DEFAULT_FILES["afqmc_train"]),
                                                         afqmc["held_out"], afqmc["seed"])[1]
    return splits


def scored_splits(task, splits: dict[str, list]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``(similarities, labels)`` of each split, through the task as it runs."""
    scored = {}
    for name, pairs in splits.items():
        scores = np.array([r["similarity"] for r in task.run_items(
            [task.check_item([p.text1, p.text2], i) for i, p in enumerate(pairs)])])
        scored[name] = (scores, np.array([p.label for p in pairs]))
    return scored


def fit_calibration(scores: np.ndarray, labels: np.ndarray, iterations: int = 50) -> dict:
    """Platt scaling: the ``slope`` and ``intercept`` of a logistic regression of ``labels`` on
    ``logit(scores)`` (Newton's method, a weak prior at no change), so that ``sigmoid(slope * logit(p) + intercept)`` is the
    probability of "same" on these pairs.  Identical texts (scored 1.0 by rule) are left out.

    Scores whose logit z is N(3, 4) for "same" and N(-1, 4) for "not" have true log-odds z - 1:

    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 4000)
    >>> p = 1 / (1 + np.exp(-(2.0 * (2 * y - 1) + rng.normal(0, 2, 4000) + 1.0)))
    >>> fitted = fit_calibration(p, y)
    >>> round(fitted["slope"], 1), round(fitted["intercept"], 1)
    (1.0, -1.0)
    """
    keep = scores < 1.0
    p = np.clip(np.asarray(scores, dtype=np.float64)[keep], 1e-7, 1 - 1e-7)
    y = np.asarray(labels, dtype=np.float64)[keep]
    x = np.stack([np.log(p / (1 - p)), np.ones_like(p)], axis=1)
    # A weak pull (as much as one pair's worth) towards no change, slope 1 and intercept 0: on a
    # handful of separable pairs the fit stays finite, on thousands it does not matter.
    identity = np.array([1.0, 0.0])
    w = identity.copy()
    for _ in range(iterations):
        q = 1 / (1 + np.exp(-(x @ w)))
        gradient = x.T @ (q - y) + (w - identity)
        hessian = (x * (q * (1 - q))[:, None]).T @ x + np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    q = 1 / (1 + np.exp(-(x @ w)))
    return {"slope": round(float(w[0]), 6), "intercept": round(float(w[1]), 6),
            "method": "Platt scaling of logit(similarity), fitted on the selection splits pooled "
                      "(text_similarity.calibrate)",
            "pairs": int(len(y)), "mean_similarity": round(float(q.mean()), 4), "share_same": round(float(y.mean()), 4)}


def tune_threshold(task, splits: dict[str, list], scored: dict | None = None) -> dict:
    """The threshold best for ``task``'s scores on ``splits`` (or the ``scored`` ones), and its
    accuracy on each."""
    from taskflow.tasks.text_similarity.train import best_threshold

    scored = scored or scored_splits(task, splits)
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
    parser.add_argument("--keep-labels", action="store_true",
                        help="carry the package's threshold onto the calibrated scale instead of tuning one: "
                             "the labels stay, the similarities move")
    parser.add_argument("--write", action="store_true", help="store the result in the package's manifest")
    args = parser.parse_args(argv)
    from taskflow import Taskflow

    from taskflow.tasks.text_similarity import calibrated

    flow = Taskflow("text_similarity", task_path=args.package, ensemble=not args.own_network)
    task = flow.task
    key, calibration_key = (("ensemble_threshold", "ensemble_calibration") if task.members
                            else ("threshold", "calibration"))
    splits = selection_splits(args.data_dir, task.manifest["training"])
    task.calibration = None                     # fitted on the raw scores
    raw = scored_splits(task, splits)
    fitted = fit_calibration(np.concatenate([s for s, _ in raw.values()]), np.concatenate([y for _, y in raw.values()]))
    calibration = (fitted["slope"], fitted["intercept"])
    scored = {name: (np.where(s >= 1.0, 1.0, calibrated(s, calibration)), y) for name, (s, y) in raw.items()}
    if args.keep_labels:
        carried = round(float(calibrated(np.array([task.threshold]), calibration)[0]), 6)
        # The carried threshold is rounded: keep it only where every selection label stays as it was.
        if any(((s >= carried) != (r >= task.threshold)).any() for (s, _), (r, _) in zip(scored.values(), raw.values())):
            carried = float(calibrated(np.array([task.threshold]), calibration)[0])
        tuned = {"threshold": carried, "method": f"the package's threshold {task.threshold} carried onto the "
                 "calibrated scale: the labels are those of the uncalibrated scores (text_similarity.calibrate "
                 "--keep-labels)",
                 "selection": {name: {"pairs": len(y), "accuracy": round(float(np.mean((s >= carried) == (y > 0.5))), 4)}
                               for name, (s, y) in scored.items()}}
    else:
        tuned = tune_threshold(task, splits, scored)
    print(json.dumps({calibration_key: fitted, key: tuned}, ensure_ascii=False, indent=1))
    if args.write:
        from recipes.tuning import update_manifest

        update_manifest(args.package, {calibration_key: fitted, key: tuned["threshold"], f"{key}_tuning": tuned})
        print(f"wrote {calibration_key} and {key} {tuned['threshold']} into {Path(args.package) / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
