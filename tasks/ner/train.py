"""Training on your own files: an entity tagger for your own entity types, from a BIO or CLUENER file.

    taskflow train ner --train train.bio --dev dev.bio --out my_ner/
    taskflow train ner --train cluener/train.json --dev cluener/dev.json --out my_ner/
    # then: Taskflow("ner", task_path="my_ner/")

Files (tasks/ner/data.py reads them; the format is told by the first line, or --format):

* BIO, CoNLL style: a character and its tag a line (``北 B-LOC``; extra columns
  between them are ignored), a blank line between sentences; O / B- / I- tags
  (BIOES's S- / E- / M- are read too);
* CLUENER JSON lines: ``{"text": ..., "label": {"TYPE": {"mention": [[start, end]]}}}``,
  end inclusive.

The model is the fast ner mode's own network, the lexical BiGRU-CRF (chars and
char bigrams, a CRF decoded in the graph), sized for small data, with labels
``O``, ``TYPE-B``, ``TYPE-I`` for your types: the package is a lexical_analysis
package whose manifest names your types as its ``entity_labels``, so
``Taskflow("ner", task_path=...)`` runs it like the shipped fast mode and gives
entities with your labels.  The vocabulary is the characters and bigrams of the
--train file.  After each epoch the entity F1 on dev is measured; the best epoch
ships; training stops after --patience epochs without a better one, after
--epochs, or when --minutes is spent.  The dev report (entity precision, recall,
F1; per type: mentions in train and dev, P/R/F1) is printed and written into the
manifest under metrics.dev.

The shipped fast-mode model itself was made by the lab's recipe for the public data,
``python -m recipes.lexical_analysis.train`` (not in the wheel).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter

from taskflow.dev_report import print_report
from taskflow.errors import TrainingDataError
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import recipe_parser
from taskflow.training import Schedule, fit, length_batches, log, seed_all
from taskflow.training_data import add_own_data_options, split_off_dev

from .data import OUTSIDE, Sentence, char_labels, read_entity_file, spans_from_labels

__all__ = ["main", "entity_report"]


def parse_args(argv):
    parser = recipe_parser("ner", __doc__, data=None, name=None)
    add_own_data_options(parser, text_field=None, label_field=None,
                         formats="BIO (a character and its tag a line) or CLUENER JSON lines")
    parser.add_argument("--format", choices=("auto", "bio", "cluener"), default="auto",
                        help="the files' format (default: told by the first line)")
    parser.add_argument("--patience", type=int, default=5,
                        help="stop after this many epochs without a better dev F1 (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=30, help="at most this many epochs (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--char-dim", type=int, default=64)
    parser.add_argument("--bigram-dim", type=int, default=32)
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--num-layers", type=int, default=1)
    parser.add_argument("--min-char-count", type=int, default=1)
    parser.add_argument("--min-bigram-count", type=int, default=1)
    parser.add_argument("--max-train-length", type=int, default=128,
                        help="longer sentences are cut (outside entities) into pieces this long for training")
    parser.add_argument("--max-length", type=int, default=256, help="chars the model reads at once when it runs")
    args = parser.parse_args(argv)
    if not args.train:
        parser.error("--train FILE is required: `taskflow train ner` trains on your own entity file "
                     "(the shipped fast-mode model was made by the lab's recipe, `python -m recipes.lexical_analysis.train`)")
    return args


def pieces(text: str, labels: list[str], max_length: int) -> list[tuple[str, list[str]]]:
    """The sentence cut into pieces of at most ``max_length`` chars, never inside an entity
    (an entity longer than that is cut, as a last resort)."""
    out, start = [], 0
    while len(text) - start > max_length:
        cut = start + max_length
        while cut > start + 1 and labels[cut].endswith("-I"):
            cut -= 1
        cut = cut if cut > start + 1 else start + max_length
        out.append((text[start:cut], labels[start:cut]))
        start = cut
    out.append((text[start:], labels[start:]))
    return out


def entity_report(gold: list[list[tuple]], predicted: list[list[tuple]], types: list[str],
                  train_counts: Counter) -> dict:
    """Exact-match entity precision, recall and F1 (micro), and per type."""
    def prf(correct, found, wanted):
        p = correct / found if found else 0.0
        r = correct / wanted if wanted else 0.0
        return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0}

    per_type, totals = {}, [0, 0, 0]
    for entity in types:
        wanted = sum(1 for spans in gold for s in spans if s[2] == entity)
        found = sum(1 for spans in predicted for s in spans if s[2] == entity)
        correct = sum(len({s for s in g if s[2] == entity} & set(p)) for g, p in zip(gold, predicted))
        per_type[entity] = {"train": int(train_counts.get(entity, 0)), "dev": wanted, "predicted": found,
                            **prf(correct, found, wanted)}
        totals = [totals[0] + correct, totals[1] + found, totals[2] + wanted]
    return {"sentences": len(gold), "entities": totals[2], **prf(*totals), "per_label": per_type}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    from taskflow.tasks.lexical_analysis.tagger import NORMALIZATION, LexicalVocab, build_vocab, normalize

    started = time.time()
    rng = seed_all(args.seed)
    train = read_entity_file(args.train, encoding=args.encoding, format=args.format)
    if args.dev:
        dev = read_entity_file(args.dev, encoding=args.encoding, format=args.format)
    else:
        # Held out by the first entity type a sentence has, so each type keeps sentences in train.
        train, dev = split_off_dev(train, args.dev_share, rng, label_of=lambda s: s.spans[0][2] if s.spans else "")
    overlapping = [{"file": portable_path(path), "line": sentence.line, "mention": sentence.text[start:end],
                    "type": entity} for path, sentences in ((args.train, train), (args.dev or args.train, dev))
                   for sentence in sentences for start, end, entity in sentence.dropped]
    if overlapping and not args.quiet:
        log(f"warning: {len(overlapping)} mention(s) overlap a longer one and are left out (a character holds one "
            f"entity), e.g. {overlapping[0]['mention']!r} ({overlapping[0]['type']}) at {overlapping[0]['file']}:"
            f"{overlapping[0]['line']}; the manifest lists them")
    train_counts = Counter(entity for sentence in train for _, _, entity in sentence.spans)
    if not train_counts:
        raise TrainingDataError(f"{args.train} has no entities (every tag is O); a tagger learns from labelled "
                                "entities: tag some, or check the file's tag column", args.train)
    check_dev_types(dev, set(train_counts), args)
    types = sorted(train_counts)
    labels = [OUTSIDE] + [f"{entity}-{part}" for entity in types for part in "BI"]
    label_id = {label: i for i, label in enumerate(labels)}

    examples = []
    for sentence in train:
        text = normalize(sentence.text)
        examples += [(t, [label_id[x] for x in ls]) for t, ls in pieces(text, char_labels(sentence),
                                                                        args.max_train_length)]
    char_list, bigram_list = build_vocab([t for t, _ in examples], args.min_char_count, args.min_bigram_count)
    vocab = LexicalVocab({c: i for i, c in enumerate(char_list)}, {b: i for i, b in enumerate(bigram_list)})
    if not args.quiet:
        log(f"{len(train)} training and {len(dev)} dev sentences, entity types {', '.join(types)}, "
            f"{len(char_list)} chars")

    from taskflow.tasks.lexical_analysis.model import LexicalNet, crf_batch_loss

    architecture = {"vocab_size": len(char_list), "bigram_vocab_size": len(bigram_list), "num_tags": len(labels),
                    "char_dim": args.char_dim, "bigram_dim": args.bigram_dim, "hidden_size": args.hidden_size,
                    "num_layers": args.num_layers}
    network = LexicalNet(**architecture, dropout=args.dropout)
    dev_texts = [normalize(s.text) for s in dev]
    dev_gold = [list(s.spans) for s in dev]

    def predict(texts: list[str]) -> list[list[tuple]]:
        import paddle

        out: list = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda k: len(texts[k]))
        network.eval()
        with paddle.no_grad():
            for s in range(0, len(order), 64):
                picked = order[s:s + 64]
                feeds = vocab.encode([texts[k] for k in picked])
                path = network(paddle.to_tensor(feeds["char_ids"]), paddle.to_tensor(feeds["bigram_ids"])).numpy()
                for row, k in enumerate(picked):
                    out[k] = spans_from_labels([labels[i] for i in path[row, : len(texts[k])]])
        return out

    lengths = [len(text) for text, _ in examples]
    run = fit(network, lambda: length_batches(lengths, args.batch_size, rng),
              lambda batch: crf_batch_loss(network, [examples[k] for k in batch], vocab),
              lambda: {"dev_f1": entity_report(dev_gold, predict(dev_texts), types, train_counts)["f1"]},
              schedule=Schedule(lr=args.lr, steps_per_epoch=-(-len(examples) // args.batch_size), epochs=args.epochs,
                                minutes=args.minutes),
              select="dev_f1", patience=args.patience, average=args.average_weights, quiet=args.quiet)

    with PackageDraft(args, "lexical_analysis", started=started) as draft:
        draft.ship_weights(network, float16=lambda name: "emb" in name)    # the report is on the weights that ship
        (draft / "vocab.json").write_text(json.dumps({"chars": char_list, "bigrams": bigram_list}, ensure_ascii=False),
                                          encoding="utf-8")
        report = entity_report(dev_gold, predict(dev_texts), types, train_counts)
        report["file"] = portable_path(args.dev) if args.dev else f"{args.dev_share:g} of {portable_path(args.train)}"
        print_report(report, title=f"dev report ({report['sentences']} sentences, {report['entities']} entities, "
                                   f"best epoch {run.best['epoch']})",
                     headline=f"entity precision {report['precision']:.4f} recall {report['recall']:.4f} "
                              f"F1 {report['f1']:.4f}", quiet=args.quiet)
        draft.write({
            "description": f"BiGRU-CRF entity tagger for {', '.join(types)}, trained on {portable_path(args.train)} "
                           "with `taskflow train ner`; run it with Taskflow('ner', task_path=...)",
            "architecture": {"type": "bigru_crf", **architecture}, "normalization": list(NORMALIZATION),
            "labels": labels, "tag_set": [OUTSIDE, *types], "entity_labels": types, "max_length": args.max_length,
            "training": {
                "train_file": portable_path(args.train), "dev_file": portable_path(args.dev) if args.dev else None,
                "sentences": {"train": len(train), "dev": len(dev)}, "mentions_in_train": dict(train_counts),
                "overlapping_mentions_left_out": overlapping,
                **run.summary(), "seed": args.seed,
                "hyper_parameters": {k: getattr(args, k) for k in (
                    "epochs", "patience", "batch_size", "lr", "dropout", "char_dim", "bigram_dim", "hidden_size",
                    "num_layers", "min_char_count", "min_bigram_count", "max_train_length", "minutes")},
                "command": "taskflow train ner " + " ".join(argv),
                "seconds": round(time.time() - started),
            },
            "metrics": {"dev": report},
            "framework": framework_versions("paddlepaddle", "numpy"),
        })
    return 0


def check_dev_types(dev: list[Sentence], known: set[str], args) -> None:
    for sentence in dev:
        for start, end, entity in sentence.spans:
            if entity not in known:
                raise TrainingDataError(
                    f"{args.dev}:{sentence.line}: entity type {entity!r} ({sentence.text[start:end]!r}) never occurs "
                    f"in {args.train} (its types: {', '.join(sorted(known))}); the model can only learn types it is "
                    f"trained on: add examples of {entity!r} to the training file, or fix the tag",
                    args.dev, sentence.line)


if __name__ == "__main__":
    sys.exit(main())
