"""Compare mixes of text_similarity networks on every split, through the product, before one ships.

    python -m recipes.text_similarity.mixes --data-dir ../shared/data/matching \\
        --network own=resources/text_similarity/siamese_char_word \\
        --network hard=resources/text_similarity/siamese_hard_negatives \\
        --network new=CANDIDATE --mix own,hard --mix own,new --mix own,hard,new

Each network runs alone (``ensemble=False``) once per split and its probabilities are cached in
``--cache`` (a folder; a network's file is keyed by its weights' sha256).  A mix of two or three
networks is then scored in every weighting in tenths, arithmetic and geometric (taskflow/ensemble.py's
``mix``), the threshold tuned on the held-out LCQMC dev part and BQ dev (the task's ``best_threshold``),
the selection mean taken over those and, for a network trained with ``--afqmc-held-out``
(``--selection-of``), AFQMC train's held-out part; each is reported on the selection, report (LCQMC test, BQ test, AFQMC dev), swap
dev, contrast dev, held-out lexicon check and Chinese STS-B test (another genre, 4-5 -> 1, 0-2 -> 0) splits.  Identical texts score 1.0, as the task scores them.  Nothing is chosen
on a report split: the table says where each weighting stands, the rule is the recipe's (a mix ships
when it beats the shipped one on the selection splits and on each report split).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from taskflow.ensemble import mix

from .augment import SWAP_DEV, read_generated
from .calibrate import selection_splits
from .data import DEFAULT_FILES, STSB_TEST, read_contrast_dev, read_pairs, read_stsb_binary

LEXICON_CHECK = Path(__file__).parent / "dev" / "lexicon_check.jsonl"

REPORT = ("lcqmc_test", "bq_test", "afqmc_dev")


def splits(data_dir: Path, training: dict) -> dict[str, list[tuple[str, str, int]]]:
    """Every split a mix is judged on, as (text1, text2, label) rows."""
    out = {name: [(p.text1, p.text2, p.label) for p in pairs]
           for name, pairs in selection_splits(data_dir, training).items()}
    for name in REPORT:
        out[name] = [(p.text1, p.text2, p.label) for p in read_pairs(data_dir / DEFAULT_FILES[name])]
    out["swap_dev"] = [(p.text1, p.text2, p.label) for p in read_generated(SWAP_DEV)]
    out["contrast_dev"] = [(r["text1"], r["text2"], r["label"]) for r in read_contrast_dev()]
    if LEXICON_CHECK.is_file():
        with open(LEXICON_CHECK, encoding="utf-8") as handle:
            out["lexicon_check"] = [(r["text1"], r["text2"], r["label"]) for r in (json.loads(line) for line in handle if line.strip())]
    if (data_dir / STSB_TEST).is_file():     # another genre (translated captions and news), report only
        out["stsb_test"] = [(p.text1, p.text2, p.label) for p in read_stsb_binary(data_dir / STSB_TEST)]
    return out


def network_scores(package: Path, rows: dict, cache: Path) -> dict[str, np.ndarray]:
    """P(same) of the package's own network on each split (cached by its weights' sha256)."""
    digest = hashlib.sha256((package / "weights.npz").read_bytes()).hexdigest()[:16]
    path = cache / f"{package.name}-{digest}.npz"
    if path.is_file():
        with np.load(path) as stored:
            if set(stored.files) >= set(rows):
                return {name: stored[name] for name in rows}
    from taskflow import Taskflow

    flow = Taskflow("text_similarity", task_path=str(package), ensemble=False, batch_size=128)
    scores = {name: np.array([r["similarity"] for r in flow([[a, b] for a, b, _ in pairs])], dtype=np.float64)
              for name, pairs in rows.items()}
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, **scores)
    return scores


def weightings(n: int, step: float = 0.1):
    """The equal weighting (as a package without ``ensemble_weights`` mixes), then every weighting
    of ``n`` networks in steps of ``step`` (``recipes.tuning.simplex_grid``)."""
    from recipes.tuning import simplex_grid

    grid = simplex_grid(n, step)
    equal = tuple([1 / n] * n)
    return ([equal] if not any(all(abs(a - b) < 1e-9 for a, b in zip(w, equal)) for w in grid) else []) + grid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.text_similarity.mixes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--network", action="append", required=True, metavar="NAME=PACKAGE")
    parser.add_argument("--mix", action="append", default=[], metavar="NAME,NAME[,NAME]")
    parser.add_argument("--cache", type=Path, default=Path("runs/similarity_scores"))
    parser.add_argument("--selection-of", metavar="NAME",
                        help="the network whose manifest's training names the selection splits (default: the "
                             "first; a network trained with --afqmc-held-out adds AFQMC train's held-out part)")
    args = parser.parse_args(argv)
    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.tasks.text_similarity.train import accuracy, best_threshold

    packages = dict(item.split("=", 1) for item in args.network)
    chooser = Path(packages[args.selection_of] if args.selection_of else next(iter(packages.values())))
    rows = splits(args.data_dir, Manifest.load(chooser / MANIFEST).data["training"])
    selection = [name for name in rows if name in ("lcqmc_dev_held_out", "bq_dev", "afqmc_train_held_out")]
    labels = {name: np.array([y for _, _, y in pairs]) for name, pairs in rows.items()}
    identical = {}
    scores = {name: network_scores(Path(path), rows, args.cache) for name, path in packages.items()}
    for name, pairs in rows.items():   # the task's identity rule: scored 1.0 by every network alike
        identical[name] = np.array([s == 1.0 for s in scores[next(iter(scores))][name]])
    columns = [*selection, *REPORT, "swap_dev", "contrast_dev",
               *(name for name in ("lexicon_check", "stsb_test") if name in rows)]
    print("networks mixing weights threshold selection_mean " + " ".join(columns))

    def report(label: str, mixed: dict[str, np.ndarray]) -> None:
        # The threshold as the package's calibration fits it (LCQMC and BQ), the mean over every selection split.
        threshold = best_threshold([(mixed[k], labels[k]) for k in ("lcqmc_dev_held_out", "bq_dev")])
        figures = {k: accuracy(mixed[k], labels[k], threshold) for k in columns}
        mean = float(np.mean([figures[k] for k in selection]))
        print(f"{label} {threshold:.2f} {mean:.4f} " + " ".join(f"{figures[k]:.4f}" for k in columns), flush=True)

    for name in scores:
        report(f"{name} - 1", scores[name])
    for spec in args.mix:
        names = spec.split(",")
        for weights in weightings(len(names)):
            for mixing in ("arithmetic", "geometric"):
                mixed = {}
                for split in rows:
                    p = np.stack([scores[n][split] for n in names])
                    two = np.stack([1 - p, p], axis=-1)
                    mixed[split] = np.where(identical[split], 1.0, mix(two, weights, mixing)[:, 1])
                report(f"{spec} {mixing[:5]} {'/'.join(f'{w:.2g}' for w in weights)}", mixed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
