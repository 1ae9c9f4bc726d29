"""Choose the accurate mode's routes: per genre, which networks mix and which answers first.

    python -m recipes.sentiment_analysis.routes --data-dir ../shared/data/sentiment \\
        --encoder resources/sentiment_analysis/encoder_ensemble --out runs/routes.json

The accurate mode reads each text down the route ``genre_router`` picks for it (taskflow/ensemble.py,
``ensemble_routes``).  Its networks, in the manifest's order: the fine-tuned encoder, the
three-label char CNN (``char_cnn_neutral``, its negative / positive renormalised), the fast mode's
reviews network and its posts network.  A route mixes the networks that were trained on its genre
(their manifests' ``train_files``: the encoder read reviews only, so the posts' route leaves it out),
by a weight grid of step ``--step``, geometric or arithmetic; the genre's char CNN answers first,
alone where its top probability reaches the route's threshold (one of ``--thresholds``; 1.01 =
never), so that the encoder reads only what it is unsure of.

Every network runs once on the five dev splits the sentiment models select on (each text routed
as a whole: the product routes each chunk).  Kept: the routings at least as accurate as the fast
mode (its two networks, each text down its route) on every dev split, with the encoder reading at
most ``--max-encoder-share`` of the dev splits' chars (its cost); chosen: the best mean of the dev
splits' accuracies, then the least encoder share (``--tolerance``: the least encoder share within that
much of the best mean).  Writes ``ensemble_routes`` and ``ensemble_mixing`` (for ``router
--accurate``) with the figures.

On the shipped networks, a tolerance of 0.0005 (five of the 10,591 dev texts) halves the encoder's
share again (0.203 -> 0.129 of the dev chars) by weighting it 0.1 instead of 0.4, which the dev
splits cannot tell apart but the robustness suite can (negation 0.737 -> 0.670, contrast 0.923 ->
0.800; benchmarks/robustness_sentiment.py, 2026-11-28): the default is 0.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from .train import ENSEMBLE_SELECTION, DevSplits

NETWORKS = ("encoder", "neutral", "reviews", "posts")     # the accurate package's networks, in its order
GENRE_NETWORK = {0: 2, 1: 3}                               # router label -> the genre's char CNN
THRESHOLDS = (0.8, 0.85, 0.9, 0.95, 0.97, 1.01)    # 1.01: no cascade


def probabilities(flow_args: dict, texts: list[str], labels: tuple[str, ...]) -> np.ndarray:
    """[texts, labels]: one package's probabilities through the product, before any temperature."""
    from taskflow import Taskflow

    flow = Taskflow("sentiment_analysis", return_all_scores=True, offline=True, **flow_args)
    flow.task.temperature = None
    return np.array([[r["scores"][label] for label in labels] for r in flow(texts)])


def network_table(args, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """[networks, texts, 2] probabilities of negative / positive, and the router's genre of each text."""
    if args.cache and args.cache.exists():
        cached = np.load(args.cache)
        return cached["probs"], cached["genre"]
    both = ("negative", "positive")
    probs = [probabilities({"task_path": args.encoder, "ensemble": False}, texts, both)]
    # The three-label network alone, as the accurate mode reads it (ensemble=False: any members it may have left out).
    neutral = probabilities({"task_path": args.neutral, "neutral": True, "ensemble": False}, texts, both)
    probs.append(neutral / neutral.sum(axis=1, keepdims=True))
    probs.append(probabilities({"task_path": args.reviews, "ensemble": False}, texts, both))
    probs.append(probabilities({"task_path": args.posts}, texts, both))
    genre = probabilities({"task_path": args.router}, texts, ("reviews", "posts")).argmax(axis=1)
    probs = np.stack(probs)
    if args.cache:
        np.savez(args.cache, probs=probs, genre=genre)
    return probs, genre


def trained_on(packages: list[str]) -> list[set[int]]:
    """Per network, the genres (router labels: 0 reviews, 1 posts) its manifest's train_files hold."""
    from taskflow.manifest import MANIFEST, Manifest

    from .train import SOCIAL_ROOT, TRAIN_SETS

    genres = []
    for package in packages:
        files = (Manifest.load(Path(package) / MANIFEST).get("training") or {}).get("train_files") or []
        genres.append({g for g, sets in ((0, TRAIN_SETS), (1, [SOCIAL_ROOT]))
                       if any(f.split("/")[0] in sets for f in files)})
    return genres


def route_candidates(probs, rows, allowed, genre_net, step, thresholds, mixing):
    """Every route for ``rows`` (indices of the texts of one genre) over the networks ``allowed``:
    yields (route, predicted label of each row, whether the encoder read each row)."""
    from taskflow.ensemble import mix
    from recipes.tuning import simplex_grid

    cheap = probs[genre_net, rows]
    for grid in simplex_grid(len(allowed), step):
        weights = [0.0] * len(NETWORKS)
        for k, w in zip(allowed, grid):
            weights[k] = round(w, 4)
        mixed = mix(probs[:, rows][[k for k in range(len(NETWORKS)) if weights[k] > 0]],
                    [w for w in weights if w > 0], mixing).argmax(axis=1)
        for threshold in thresholds:
            if threshold <= 1 and weights[genre_net] == 0:
                continue        # the network asked first is one the route mixes
            sure = cheap.max(axis=1) >= threshold
            predicted = np.where(sure, cheap.argmax(axis=1), mixed)
            encoder = ~sure if weights[0] > 0 else np.zeros(len(rows), dtype=bool)
            route = {"weights": weights}
            if threshold <= 1:
                route.update(first=genre_net, confident=threshold)
            yield route, predicted, encoder


def choose(probs, genre, dev: DevSplits, chars: np.ndarray, trained: list[set[int]], *, step: float, thresholds,
           max_share: float, tolerance: float) -> dict:
    splits = np.searchsorted(np.array(dev.bounds[1:]), np.arange(len(dev.labels)), side="right")
    n_splits = len(dev.rels)
    sizes = np.bincount(splits, minlength=n_splits)
    fast = np.where(genre == 0, probs[2].argmax(1), probs[3].argmax(1))
    fast_correct = np.bincount(splits, weights=fast == dev.labels, minlength=n_splits)
    kept = []       # (score, share, mixing, reviews' route, posts' route, accuracies) of every allowed routing
    for mixing in ("arithmetic", "geometric"):
        per_genre = []
        for g in (0, 1):
            rows = np.flatnonzero(genre == g)
            options = []
            allowed = [k for k in range(len(NETWORKS)) if g in trained[k]]
            for route, predicted, encoder in route_candidates(probs, rows, allowed, GENRE_NETWORK[g], step, thresholds,
                                                              mixing):
                correct = np.bincount(splits[rows], weights=predicted == dev.labels[rows], minlength=n_splits)
                options.append((route, correct, float(chars[rows][encoder].sum())))
            per_genre.append(options)
        correct = np.array([o[1] for o in per_genre[0]])[:, None] + np.array([o[1] for o in per_genre[1]])[None]
        share = (np.array([o[2] for o in per_genre[0]])[:, None] + np.array([o[2] for o in per_genre[1]])[None]) / chars.sum()
        ok = (correct >= fast_correct - 1e-9).all(axis=2) & (share <= max_share)
        score = (correct / sizes).mean(axis=2)
        for i, j in zip(*np.nonzero(ok)):
            kept.append((score[i, j], share[i, j], mixing, per_genre[0][i][0], per_genre[1][j][0], correct[i, j] / sizes))
    if not kept:
        raise SystemExit("no routing is at least as accurate as the fast mode on every dev split within the "
                         "encoder share; raise --max-encoder-share")
    best_score = max(k[0] for k in kept)
    near = [k for k in kept if k[0] >= best_score - tolerance - 1e-12]
    score, share, mixing, reviews, posts, accuracy = min(near, key=lambda k: (k[1], -k[0]))
    fast_accuracy = fast_correct / sizes
    return {"ensemble_routes": [reviews, posts], "ensemble_mixing": mixing,
            "ensemble_routes_tuning": {
                "networks": list(NETWORKS), "trained_on": [sorted(t) for t in trained], "files": list(dev.rels),
                "step": step, "thresholds": list(thresholds),
                "accuracy": dict(zip(dev.rels, np.round(accuracy, 4).tolist())),
                "fast_accuracy": dict(zip(dev.rels, np.round(fast_accuracy, 4).tolist())),
                "score": round(float(score), 4), "best_score": round(float(best_score), 4),
                "encoder_char_share": round(float(share), 4), "max_encoder_share": max_share, "tolerance": tolerance,
                "rule": "every dev split at least the fast mode's; the least encoder share within the tolerance of "
                        "the best mean, then the best mean"}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.sentiment_analysis.routes", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, required=True, help="the sentiment data folder")
    p.add_argument("--encoder", required=True, help="the fine-tuned encoder's package")
    p.add_argument("--neutral", default="resources/sentiment_analysis/char_cnn_neutral")
    p.add_argument("--reviews", default="resources/sentiment_analysis/char_cnn")
    p.add_argument("--posts", default="resources/sentiment_analysis/char_cnn_posts")
    p.add_argument("--router", default="resources/sentiment_analysis/genre_router")
    p.add_argument("--step", type=float, default=0.1)
    p.add_argument("--thresholds", type=float, nargs="+", default=list(THRESHOLDS))
    p.add_argument("--max-encoder-share", type=float, default=0.3,
                   help="most of the dev chars the encoder may read (default: %(default)s)")
    p.add_argument("--tolerance", type=float, default=0.0,
                   help="mean dev accuracy the cheapest routing may give up against the best (default: %(default)s)")
    p.add_argument("--cache", type=Path, help="an .npz of the networks' dev probabilities: read if it exists, else written")
    p.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = p.parse_args(argv)
    dev = DevSplits(args.data_dir, list(ENSEMBLE_SELECTION))
    probs, genre = network_table(args, dev.texts)
    chars = np.array([len(t) for t in dev.texts], dtype=np.float64)
    trained = trained_on([args.encoder, args.neutral, args.reviews, args.posts])
    chosen = choose(probs, genre, dev, chars, trained, step=args.step, thresholds=args.thresholds,
                    max_share=args.max_encoder_share, tolerance=args.tolerance)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(chosen, ensure_ascii=False, indent=1), encoding="utf-8")
    print(json.dumps(chosen, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
