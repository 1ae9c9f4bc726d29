"""The genre router of sentiment_analysis' fast mode: is a text a review or a social-media post?

    python -m recipes.sentiment_analysis.router --data-dir ../shared/data/sentiment \\
        --out resources/sentiment_analysis/genre_router

The fast model reads reviews best with the network trained on reviews alone, and Weibo posts best with
one that also learnt from the posts (recipes/sentiment_analysis/NOTES.md): one network trained on
both loses a point on the reviews.  A router sends each text to one of them, so a text costs one
network and a few table lookups.  The router is ``ngram_linear`` (model.py): logistic regression
over hashed char uni- and bigrams, trained on the three review sets' train splits (label
``reviews``) against every row of SMP2020-EWECT's train splits, whatever its emotion (``posts``),
each genre weighing the same in the loss; the epoch is chosen on the mean genre accuracy of the
five dev splits the sentiment models select on.  It reads text as the posts' model does (the
``social`` step first), so an emoticon code or an @-mention is one char it can weigh.

A package of its own (``genre_router``), named by the fast package's ``ensemble_router``: its labels,
in order, are the networks it sends a text to (taskflow/ensemble.py).  ``--route`` writes that fast
package: a copy of the reviews' network with the router and the posts' network required beside it:

    python -m recipes.sentiment_analysis.router --route REVIEWS_PACKAGE --out resources/sentiment_analysis/char_cnn \
        --version 1.3.0 --data-dir ../shared/data/sentiment

``--neutral-route`` writes ``neutral=True``'s package: the three-label network (``char_cnn_neutral``)
says how likely "neutral" is, and the fast mode's routed networks share the rest between negative
and positive, mixed with its own polarity (taskflow/ensemble.py: a member that lacks a label); its
weight and the neutral bias (``label_bias``) are chosen together on the five dev splits read
three-way (a neutral answer on a review is wrong):

    python -m recipes.sentiment_analysis.router --neutral-route NEUTRAL_NETWORK_PACKAGE \
        --out resources/sentiment_analysis/char_cnn_neutral --version 1.1.0 --data-dir ../shared/data/sentiment

``--accurate`` writes the accurate mode's package the same way: the encoder's package, with the
three-label char CNN, the reviews' and the posts' networks beside it and a mix per route
(``--routes``: the manifest's ``ensemble_routes``, chosen by ``python -m
recipes.sentiment_analysis.routes``), then ``train --calibrate`` fits its temperature:

    python -m recipes.sentiment_analysis.router --accurate ENCODER_PACKAGE --routes ROUTES.json \
        --out resources/sentiment_analysis/encoder_ensemble --version 1.3.0 --data-dir ../shared/data/sentiment
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

import numpy as np

from taskflow.package_draft import PackageDraft, framework_versions
from taskflow.recipe_command import recipe_parser
from taskflow.tasks.text_classification.train import Chars, build_vocab
from taskflow.text import Normalizer
from taskflow.training import Schedule, fit, length_batches, log, seed_all

from .train import NORMALIZATION_DEFAULT, SOCIAL_ROOT, SOCIAL_SETS, TRAIN_SETS, read_tsv

GENRES = ("reviews", "posts")


def read_posts(path: Path) -> list[str]:
    """Every post of an SMP2020-EWECT file, whatever its emotion."""
    with open(path, encoding="utf-8", newline="") as handle:
        return [row["text_a"] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
                if row["text_a"].strip()]


def read_genres(data: Path, split: str) -> dict[str, tuple[list[str], list[int]]]:
    """``{file: (texts, genre indices)}`` for each review set's and each SMP2020 set's ``split``."""
    files = {f"{name}/{split}.tsv": read_tsv(data / name / f"{split}.tsv")[0] for name in TRAIN_SETS}
    files.update({f"{SOCIAL_ROOT}/{name}/{split}.tsv": read_posts(data / SOCIAL_ROOT / name / f"{split}.tsv")
                  for name in SOCIAL_SETS})
    return {rel: (texts, [int(rel.startswith(SOCIAL_ROOT))] * len(texts)) for rel, texts in files.items()}


def parse_args(argv):
    p = recipe_parser("sentiment_analysis", __doc__, name=None, out="", data_required=True,
                      data="folder holding chnsenticorp/, online_shopping_10_cats/, waimai_10k/ and smp2020_ewect/")
    p.prog = "python -m recipes.sentiment_analysis.router"
    p.add_argument("--buckets", type=int, default=1 << 18, help="hashed bigram buckets (default: %(default)s)")
    p.add_argument("--min-freq", type=int, default=2, help="vocabulary: chars seen at least this often")
    p.add_argument("--max-len", type=int, default=256, help="chars read per text (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--route", metavar="PACKAGE",
                   help="no training: write PACKAGE (the reviews' network) again to --out as the routed fast package")
    p.add_argument("--posts", default="sentiment_analysis/char_cnn_posts",
                   help="with --route: the posts' network, as the manifest's requires names it (default: %(default)s)")
    p.add_argument("--router", default="sentiment_analysis/genre_router",
                   help="with --route: the router, as the manifest's requires names it (default: %(default)s)")
    p.add_argument("--accurate", metavar="PACKAGE",
                   help="no training: write PACKAGE (the encoder's) again to --out as the routed accurate package")
    p.add_argument("--neutral-route", metavar="PACKAGE",
                   help="no training: write PACKAGE (a three-label network) to --out as neutral=True's package, "
                        "its polarity mixed with the routed fast networks (--reviews, --posts, --router)")
    p.add_argument("--own-weights", type=float, nargs="+", default=[0.05, 0.2, 0.35, 0.5, 0.7],
                   help="with --neutral-route: the three-label network's polarity weights tried (default: %(default)s)")
    p.add_argument("--routes", type=Path, help="with --accurate: a JSON file of the manifest's ensemble_routes and "
                                               "ensemble_mixing ({\"ensemble_routes\": [...], \"ensemble_mixing\": ...})")
    p.add_argument("--neutral", default="sentiment_analysis/char_cnn_neutral",
                   help="with --accurate: the three-label char CNN (default: %(default)s)")
    p.add_argument("--reviews", default="sentiment_analysis/char_cnn",
                   help="with --accurate: the reviews' network's package (default: %(default)s)")
    return p.parse_args(argv)


def route(args) -> int:
    """``--route PACKAGE``: PACKAGE's files and manifest (its training, metrics and temperature are
    its own network's) under ``--out``, ``--name`` and ``--version``, requiring the router and the
    posts' network: each text then runs through the router and the one network it picks."""
    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.packages import write_package

    source = Path(args.route)
    manifest = Manifest.load(source / MANIFEST)
    fields = {k: v for k, v in manifest.data.items() if k != "files"}
    fields.update(name=args.name or Path(args.out).name, version=args.version,
                  description=f"routed by genre: {GENRES[0]} to this package's own network ({manifest.name} "
                              f"{manifest.version}: {manifest.get('description', '')}), {GENRES[1]} to "
                              f"{args.posts.rpartition('/')[2]}, as {args.router.rpartition('/')[2]} says",
                  requires={"posts": args.posts, "router": args.router}, ensemble=["posts"], ensemble_router="router")
    write_package(args.out, fields, {name: source / name for name in manifest.files})
    log(f"wrote {args.out}: {fields['name']} {fields['version']}, routed by {args.router} between its own network "
        f"and {args.posts}")
    return 0


def short(requirement: str) -> str:
    return requirement.rpartition("/")[2]


def describe_routes(chosen: dict, names: list[str], router: str) -> str:
    """The manifest's description of a routed mix: per route, its networks and weights, and which one
    answers first."""
    parts = []
    for genre, route in zip(GENRES, chosen["ensemble_routes"]):
        mixed = ", ".join(f"{names[k]} {w:g}" for k, w in enumerate(route["weights"]) if w > 0)
        first = (f"; {names[route['first']]} answers alone where its top probability is at least {route['confident']:g}"
                 if route.get("first") is not None else "")
        parts.append(f"{genre}: {chosen.get('ensemble_mixing', 'arithmetic')} mix of {mixed}{first}")
    return f"mode='accurate', routed by genre ({short(router)}). " + ". ".join(parts)


def accurate(args) -> int:
    """``--accurate PACKAGE``: PACKAGE's files and manifest under ``--out``, requiring the router and
    the networks ``--routes`` mixes: [PACKAGE's own, neutral, reviews, posts], in that order."""
    import json

    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.packages import write_package

    if not args.routes:
        raise SystemExit("--accurate needs --routes ROUTES.json (python -m recipes.sentiment_analysis.routes writes it)")
    source = Path(args.accurate)
    manifest = Manifest.load(source / MANIFEST)
    chosen = json.loads(args.routes.read_text(encoding="utf-8"))
    drop = ("files", "ensemble_weights", "ensemble_weights_tuning", "temperature", "calibration")
    fields = {k: v for k, v in manifest.data.items() if k not in drop}
    fields.update(chosen)
    fields.update(name=args.name or Path(args.out).name, version=args.version,
                  requires={"neutral": args.neutral, "reviews": args.reviews, "posts": args.posts, "router": args.router},
                  ensemble=["neutral", "reviews", "posts"], ensemble_router="router",
                  description=describe_routes(chosen, [f"the fine-tuned encoder ({manifest.get('architecture', {}).get('num_layers')}"
                                                       f" x {manifest.get('architecture', {}).get('hidden_size')})",
                                                       short(args.neutral), short(args.reviews) + "'s reviews network",
                                                       short(args.posts)], args.router))
    write_package(args.out, fields, {name: source / name for name in manifest.files})
    log(f"wrote {args.out}: {fields['name']} {fields['version']}, routes {chosen['ensemble_routes']}")
    return 0


def neutral_route(args, argv) -> int:
    """``--neutral-route PACKAGE``: PACKAGE's files and manifest (its network's training and
    metrics) under ``--out``, requiring the reviews' and the posts' networks and the router; the
    weight of PACKAGE's own polarity on each route, the mixing and the neutral bias are the ones
    with the best mean three-way dev accuracy."""
    import shutil
    import tempfile

    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.packages import write_package

    from .train import ENSEMBLE_SELECTION, THREE_LABELS, DevSplits, neutral_bias_fields, package_probabilities

    source = Path(args.neutral_route)
    manifest = Manifest.load(source / MANIFEST)
    if list(manifest.get("labels", [])) != list(THREE_LABELS):
        raise SystemExit(f"--neutral-route needs a package with the labels {list(THREE_LABELS)}; "
                         f"{source} has {manifest.get('labels')}")
    drop = ("files", "temperature", "calibration", "label_bias", "label_bias_tuning")
    base = {k: v for k, v in manifest.data.items() if k not in drop}
    base.update(name=args.name or Path(args.out).name, version=args.version,
                requires={"reviews": args.reviews, "posts": args.posts, "router": args.router},
                ensemble=["reviews", "posts"], ensemble_router="router")
    dev = DevSplits(Path(args.data_dir), ENSEMBLE_SELECTION, neutral=True)
    tried = []
    with tempfile.TemporaryDirectory() as tmp:
        for mixing in ("geometric", "arithmetic"):
            for weight in args.own_weights:
                fields = {**base, "ensemble_mixing": mixing,
                          "ensemble_routes": [{"weights": [weight, 1 - weight, 0]}, {"weights": [weight, 0, 1 - weight]}]}
                candidate = Path(tmp) / f"{mixing}_{weight}"
                write_package(candidate, fields, {name: source / name for name in manifest.files})
                bias = neutral_bias_fields(package_probabilities(candidate, dev.texts, labels=THREE_LABELS), dev)
                tried.append((bias["label_bias_tuning"]["chosen"]["dev"], -abs(bias["label_bias"]["neutral"]),
                              mixing, weight, fields, bias))
                log(f"{mixing} own weight {weight}: neutral bias {bias['label_bias']['neutral']:+.1f}, mean dev "
                    f"{bias['label_bias_tuning']['chosen']['dev']:.4f}")
                shutil.rmtree(candidate)
    score, _, mixing, weight, fields, bias = max(tried, key=lambda t: t[:2])
    fields.update(bias, description=(
        f"neutral=True: {manifest.name} {manifest.version} ({manifest.get('description', '')}) says how likely "
        f"'neutral' is; negative / positive share the rest by the {mixing} mix of its own polarity ({weight:g}) "
        f"and, routed by {short(args.router)}, {short(args.reviews)}'s reviews network or {short(args.posts)} "
        f"({1 - weight:g})"))
    fields["ensemble_routes_tuning"] = {
        "score": "mean of the dev splits' three-way accuracies, each with its best neutral bias",
        "files": list(dev.rels), "chosen": {"mixing": mixing, "own_weight": weight, "dev": score},
        "grid": [[m, w, s] for s, _, m, w, _, _ in tried], "grid_columns": ["mixing", "own_weight", "mean"],
        "command": "python -m recipes.sentiment_analysis.router " + " ".join(argv)}
    write_package(args.out, fields, {name: source / name for name in manifest.files})
    log(f"wrote {args.out}: {fields['name']} {fields['version']}, {mixing} own weight {weight}, neutral bias "
        f"{bias['label_bias']['neutral']:+.1f}, mean dev {score:.4f}")
    return 0


def main(argv=None) -> int:
    import paddle
    import paddle.nn.functional as F

    from taskflow.tasks.text_classification.model import NgramLinear

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.route:
        return route(args)
    if args.accurate:
        return accurate(args)
    if args.neutral_route:
        return neutral_route(args, argv)
    data, started = Path(args.data_dir), time.time()
    rng = seed_all(args.seed)
    normalizer = Normalizer(NORMALIZATION_DEFAULT)
    train = read_genres(data, "train")
    texts = [t for rel in train for t in train[rel][0]]
    genres = np.array([g for rel in train for g in train[rel][1]])
    counts = np.bincount(genres, minlength=len(GENRES))
    weights = (len(genres) / (len(GENRES) * counts))[genres].astype("float32")   # each genre weighs the same
    log(f"{len(texts)} texts: {dict(zip(GENRES, counts.tolist()))}")
    dev = read_genres(data, "dev")

    vocab = build_vocab(texts, args.min_freq, normalizer)
    chars = Chars(vocab, args.max_len, len(GENRES), normalizer=normalizer)
    architecture = dict(vocab_size=len(vocab), buckets=args.buckets, num_labels=len(GENRES), max_n=2)
    net = NgramLinear(**architecture)
    rows = [chars.encode(t)[: args.max_len] for t in texts]

    def accuracies() -> dict[str, float]:
        return {rel: round(chars.accuracy(net, t, g), 4) for rel, (t, g) in dev.items()}

    def evaluate():
        each = accuracies()
        return {"dev": float(np.mean(list(each.values()))), "splits": each}

    def loss_of(batch):
        logits = net.logits(paddle.to_tensor(chars.pad([rows[i] for i in batch])))
        nll = F.cross_entropy(logits, paddle.to_tensor(genres[batch]), reduction="none").squeeze(-1)
        return (nll * paddle.to_tensor(weights[batch])).mean()

    lengths = [len(r) for r in rows]
    schedule = Schedule(lr=args.lr, steps_per_epoch=-(-len(rows) // args.batch_size), epochs=args.epochs, floor=0.05)
    run = fit(net, lambda: length_batches(lengths, args.batch_size, rng), loss_of, evaluate, schedule=schedule,
              select="dev", grad_clip=None, description="router")

    with PackageDraft(args, "sentiment_analysis", started=started) as draft:
        # Per-label n-gram weights: int8 with a scale per label (taskflow/predictor.py), a quarter of float32.
        draft.ship_weights(net, float16=lambda name: False, int8=lambda name: "bias" not in name)
        (draft / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        metrics = {f"{rel[:-len('.tsv')]}": a for rel, a in accuracies().items()}
        log(f"genre accuracy on dev {metrics}")
        draft.write({
            "description": "genre router: logistic regression over hashed char uni- and bigrams, reviews or posts",
            "architecture": {"type": "ngram_linear", **architecture},
            "labels": list(GENRES),
            "max_length": args.max_len,
            "normalization": list(normalizer.steps),
            # Table lookups and a sum: 3-4x faster on the CPU without oneDNN's per-run set-up.
            "onednn": False,
            "training": {
                "train_files": list(train),
                "examples": dict(zip(GENRES, counts.tolist())),
                "weighting": "each genre weighs the same in the loss",
                "selection": {"splits": list(dev), "score": "mean of the splits' genre accuracies",
                              "chooses": "the epoch"},
                "epochs": args.epochs, "lr": args.lr, "seed": args.seed, "history": run.history,
                "command": "python -m recipes.sentiment_analysis.router " + " ".join(argv),
                "seconds": round(time.time() - started),
            },
            "metrics": {"genre_accuracy": metrics},
            "framework": framework_versions("paddlepaddle"),
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
