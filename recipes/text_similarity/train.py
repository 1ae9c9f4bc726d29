"""Recipe: BQ + AFQMC + part of LCQMC dev -> RE2-style matcher (or bi-encoder) -> model package.

    OMP_NUM_THREADS=2 python -m recipes.text_similarity.train --data-dir ../shared/data/matching \\
        --out resources/text_similarity/re2_char_word --minutes 30

Data (public sources; see tasks/text_similarity/README.md and ../shared/data/matching/README.md).
Every path can also be given on its own (``--bq-train``, ``--lcqmc-dev``...):

* training: ``bq_corpus/train.tsv`` (BQ corpus, Chen et al. 2018),
  ``afqmc/train.tsv`` (CLUE AFQMC) and the part of ``lcqmc/dev.tsv`` (LCQMC,
  Liu et al. 2018) left after ``--lcqmc-held-out`` pairs are drawn with
  ``--seed`` (LCQMC's own train split is not available here);
* model selection: the held-out part of LCQMC dev and ``bq_corpus/dev.tsv``
  (epoch, and the decision threshold); with ``--afqmc-held-out N``, also N pairs of
  ``afqmc/train.tsv`` kept out of training (the epoch and a mix's weights are then chosen on the
  three: AFQMC's questions are the ones an open-domain network loses; its dev split stays a report
  split);
* report only: ``lcqmc/test.tsv`` (12,500 pairs), ``bq_corpus/test.tsv`` and
  ``afqmc/dev.tsv``.

Training pairs that also occur in a selection or report split (either order,
after normalisation) are dropped.  Nothing is trained on a test split.

``--hard-negatives N`` adds N pairs generated from the training texts by
``augment.py`` (half hard negatives: swapped roles, changed numbers, entities,
negations; half paraphrases: synonyms, polite prefixes, particles), none with
a text of a selection or report split or of ``dev/swap_dev.tsv``.  Off by default.
``--kinds`` names the kinds drawn; ``augment.CONTRAST_KINDS`` adds the everyday contrasts
(opposite verbs, another question focus, another time of day or place).  ``--ocnli`` adds OCNLI
train's contradictions as label-0 pairs (an entailed hypothesis is not a paraphrase: the
entailments and neutrals stay out).

``--lexicon DIR --lexicon-pairs N`` adds N minimal pairs edited from the training texts with the
generator half of the word lexicons (``lexicon.py``: antonyms, negation words, times, places -> 0;
Cilin synonyms, politeness and function words, a time word moved -> 1); no held-out word is ever
written, and no text of the contrast dev set or the held-out lexicon check is edited.

``--open-domain`` adds the open-domain pairs staged beside them (ChineseSTS, Chinese STS-B train, the
NLI probing set's synonym substitutions and contradictions: ``data.read_open_domain``), seen
``--open-domain-repeat`` times an epoch; Chinese STS-B test, the contrast dev set and the held-out
lexicon check are report splits whenever they are there, logged at every evaluation.

``--init PACKAGE`` starts from a package's network (its architecture, vocabulary and weights: a warm
start; the network options are the package's).  After each evaluation the weights evaluated are kept
in ``OUT.ckpt/`` with the minutes spent; a run stopped and started again with the same ``--out``
starts from them with the rest of its ``--minutes`` (a fresh warm-up and decay over what is left),
and the folder goes once the package is written.

``--minutes`` is a wall-clock budget: after a few steps the recipe measures
its speed and fits the number of steps (and the learning-rate schedule) into
it.  ``--max-train-pairs`` trains on a random subset (architecture comparisons).
``--vectors DIR`` starts the char and word tables from corpus vectors
(``python -m pretraining.vectors``).

The network, its encoding, the training loop and the threshold are the task's own
(``taskflow.tasks.text_similarity.train``, which also trains on a user's own pairs:
``taskflow train text_similarity --train FILE``).  ``--halve PACKAGE`` writes a package again with
every weight in float16.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from taskflow.corpus_vectors import jieba_cut
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import recipe_parser
from taskflow.tasks.text_similarity.features import Vocab, model_text
from taskflow.tasks.text_similarity.train import (MAX_LENGTH, Encoded, accuracy, add_network_options, best_threshold,
                                                  build_network, fit_matcher, package_fields, predict,
                                                  start_from_vectors, stored_in_float16)
from taskflow.training import fast_cpu_math, log, seed_all

from .augment import CONTRAST_KINDS, FRAMED_KINDS, KINDS, SWAP_DEV, augmented_pairs, generated_training_pairs, read_generated
from .data import (CONTRAST_DEV, DEFAULT_FILES, OPEN_DOMAIN_FILES, STSB_TEST, Pair, drop_overlap, read_contrast_dev,
                   read_open_domain, read_pairs, read_stsb_binary, resolve_files, split_lcqmc_dev)
from .lexicon import HELD_OUT_SHARE, LEXICON_KINDS, LexiconEdits

LEXICON_CHECK = Path(__file__).parent / "dev" / "lexicon_check.jsonl"
LEXICON_SOURCE = ("HIT Cilin extended, antonym lists (guotong1988/chinese_dictionary, liuhuanyong/ChineseAntiword) "
                  "and negation lists (guotong1988, DavionWu2018) from ../shared/data/lexicon: research use")

SOURCES = {
    "bq_corpus": "Jing Chen et al., The BQ Corpus, EMNLP 2018 (GitHub liushaoweihua/chineseGLUE_datasets, bq.zip)",
    "afqmc": "CLUE AFQMC (Liang Xu et al., CLUE, COLING 2020; GitHub zejunwang1/bertorch data/AFQMC)",
    "lcqmc": "Xin Liu et al., LCQMC, COLING 2018 (GitHub zejunwang1/bertorch data/LCQMC dev/test)",
}
OCNLI_SOURCE = "Hai Hu et al., OCNLI, Findings of EMNLP 2020 (GitHub CLUEbenchmark/OCNLI train.10k), CC BY-NC 2.0"
OPEN_DOMAIN_SOURCES = {
    "chinese_sts": "Tang Shancheng et al., ChineseSTS, Xi'an University of Science and Technology 2016 (GitHub "
                   "IAdmireu/ChineseSTS); credit requested, no licence",
    "chinese_stsb": "Chinese STS-B of CNSD (GitHub pluto-junzeng/CNSD, via shibing624/text2vec), from the STS "
                    "Benchmark (Cer et al., SemEval-2017): academic research only",
    "nli_probing": "Hai Hu et al., Investigating Transfer Learning in Multilingual Pre-trained Language Models "
                   "through Chinese NLI, Findings of ACL 2021 (GitHub huhailinguist/ChineseNLIProbing), "
                   "rows built on OCNLI left out; no licence",
}


def parse_args(argv):
    parser = recipe_parser("text_similarity", __doc__, name="re2_char_word", seed=1234,
                           data="folder with lcqmc/, bq_corpus/, afqmc/ (../shared/data/matching)")
    parser.prog = "python -m recipes.text_similarity.train"
    for name, relative in DEFAULT_FILES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", help=f"default: DATA_DIR/{relative}")
    add_network_options(parser)
    parser.add_argument("--lcqmc-held-out", type=int, default=2500, help="LCQMC dev pairs kept out of training")
    parser.add_argument("--afqmc-held-out", type=int, default=0,
                        help="AFQMC train pairs kept out of training as a third selection split (default: none)")
    parser.add_argument("--lcqmc-repeat", type=int, default=3, help="times the LCQMC part is seen per epoch")
    parser.add_argument("--afqmc-repeat", type=int, default=1,
                        help="times AFQMC train is seen per epoch (its close negatives, questions about one "
                             "payment product that differ in a word, are the pairs other sources least teach)")
    parser.add_argument("--max-train-pairs", type=int, help="train on a random subset of this size")
    parser.add_argument("--hard-negatives", type=int, default=0, metavar="N",
                        help="add N pairs generated from the training texts (augment.py: half hard negatives, half "
                             "paraphrases); 0: none")
    parser.add_argument("--framed-questions", type=int, default=0, metavar="N",
                        help="with --hard-negatives: N questions written around swap markers (augment.SWAP_FRAMES) "
                             "join the texts pairs are generated from, and so does the symmetric kind (swaps that "
                             "keep the meaning); 0: none")
    parser.add_argument("--kinds", help="with --hard-negatives: the kinds of augment.py drawn, comma-separated "
                                        f"(default: {','.join(KINDS)}, and symmetric with --framed-questions; "
                                        f"the everyday contrasts: {','.join(CONTRAST_KINDS)})")
    parser.add_argument("--ocnli", action="store_true",
                        help="OCNLI train's contradictions join the training pairs as label 0 (DATA_DIR/"
                             "ocnli/train.tsv): a hypothesis that contradicts its premise is not the same text; "
                             "entailments and neutrals stay out (an entailed text is not a paraphrase)")
    parser.add_argument("--open-domain", action="store_true",
                        help="open-domain pairs join the training (data.read_open_domain: ChineseSTS, Chinese "
                             "STS-B train, the NLI probing set's synonym substitutions and contradictions, "
                             "under DATA_DIR)")
    parser.add_argument("--open-domain-repeat", type=int, default=2,
                        help="with --open-domain: times those pairs are seen per epoch")
    parser.add_argument("--lexicon", metavar="DIR", help="the word lexicons (../shared/data/lexicon), for --lexicon-pairs")
    parser.add_argument("--lexicon-pairs", type=int, default=0, metavar="N",
                        help="add N minimal pairs edited with the lexicons' generator words (lexicon.py; half "
                             "contrasts, half paraphrases); 0: none")
    parser.add_argument("--lexicon-kinds", default=",".join(LEXICON_KINDS),
                        help="with --lexicon-pairs: the kinds drawn (default: %(default)s)")
    parser.add_argument("--init", metavar="PACKAGE",
                        help="start from this package's network: its architecture, vocabulary and weights")
    parser.add_argument("--halve", metavar="PACKAGE",
                        help="train nothing: write PACKAGE again to --out, every weight in float16 "
                             "(--float16-weights for a package already trained), as --version")
    parser.add_argument("--evals", type=int, default=8, help="evaluations on the selection splits over the run")
    args = parser.parse_args(argv)
    if args.halve:
        return args
    if args.framed_questions and not args.hard_negatives:
        parser.error("--framed-questions N feeds the pairs --hard-negatives generates: give both")
    if args.hard_negatives < 0:
        parser.error("--hard-negatives N takes N >= 0")
    if args.afqmc_repeat < 1 or args.lcqmc_repeat < 1:
        parser.error("--afqmc-repeat and --lcqmc-repeat count times a part is seen per epoch: 1 or more")
    if args.kinds:
        if not args.hard_negatives:
            parser.error("--kinds names what --hard-negatives generates: give both")
        args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        unknown = sorted(set(args.kinds) - set(CONTRAST_KINDS))
        if unknown:
            parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(CONTRAST_KINDS)}")
    if args.init and args.vectors:
        parser.error("--init starts from a package's embeddings: not with --vectors")
    if args.lexicon_pairs and not args.lexicon:
        parser.error("--lexicon-pairs N edits texts with the lexicons: give --lexicon DIR")
    args.lexicon_kinds = [k.strip() for k in args.lexicon_kinds.split(",") if k.strip()]
    unknown = sorted(set(args.lexicon_kinds) - set(LEXICON_KINDS))
    if unknown:
        parser.error(f"--lexicon-kinds: unknown {', '.join(unknown)}; known: {', '.join(LEXICON_KINDS)}")
    if args.ocnli and not args.data_dir:
        parser.error("--ocnli reads DATA_DIR/ocnli/train.tsv: give --data-dir")
    if args.open_domain and not args.data_dir:
        parser.error("--open-domain reads its sets under DATA_DIR: give --data-dir")
    if args.open_domain_repeat < 1:
        parser.error("--open-domain-repeat N takes N >= 1")
    return args


# ------------------------------------------------------------------- the data

OCNLI_TRAIN = "ocnli/train.tsv"


def read_ocnli_contradictions(path: Path) -> list[Pair]:
    """OCNLI's contradictions (premise, hypothesis) as label-0 pairs; a row without both texts is skipped."""
    import csv

    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if rows and "label" not in rows[0]:
        raise SystemExit(f"{path}: expected the columns text_a, text_b, label (OCNLI's labels), got {list(rows[0])}")
    return [Pair(r["text_a"], r["text_b"], 0) for r in rows
            if r["label"] == "contradiction" and r["text_a"].strip() and r["text_b"].strip()]


def load_pairs(args):
    """The data files; the training pairs by source (minus those in an evaluation split), how many
    were dropped for that, and the selection and report splits."""
    overrides = {name: getattr(args, name) for name in DEFAULT_FILES}
    files = resolve_files(args.data_dir, overrides)
    sets = {name: read_pairs(path) for name, path in files.items()}
    lcqmc_train, lcqmc_held = split_lcqmc_dev(sets["lcqmc_dev"], args.lcqmc_held_out, args.seed)
    selection = {"lcqmc_dev_held_out": lcqmc_held, "bq_dev": sets["bq_dev"]}
    if args.afqmc_held_out:
        sets["afqmc_train"], selection["afqmc_train_held_out"] = split_lcqmc_dev(sets["afqmc_train"],
                                                                                 args.afqmc_held_out, args.seed)
    report = {"lcqmc_test": sets["lcqmc_test"], "bq_test": sets["bq_test"], "afqmc_dev": sets["afqmc_dev"]}
    stsb_test = Path(args.data_dir) / STSB_TEST if args.data_dir else None
    if stsb_test and stsb_test.is_file():     # another genre (translated captions and news), report only
        report["chinese_stsb_test"] = read_stsb_binary(stsb_test)
    for name, path in (("contrast_dev", CONTRAST_DEV), ("lexicon_check", LEXICON_CHECK)):
        if path.is_file():                    # the project's own checks (dev/), report only
            report[name] = read_check(path)
    parts = {"bq_train": sets["bq_train"], "afqmc_train": sets["afqmc_train"], "lcqmc_dev_train_part": lcqmc_train}
    if args.ocnli:
        parts["ocnli_contradictions"] = read_ocnli_contradictions(Path(args.data_dir) / OCNLI_TRAIN)
    if args.open_domain:
        parts.update(read_open_domain(args.data_dir, args.seed, MAX_LENGTH))
    dropped = {}
    for name in parts:
        parts[name], dropped[name] = drop_overlap(parts[name], *selection.values(), *report.values())
    if args.max_train_pairs:
        total = sum(len(p) for p in parts.values())
        for name in parts:  # the same fraction of each source
            keep = round(len(parts[name]) * min(1.0, args.max_train_pairs / total))
            parts[name] = random.Random(args.seed).sample(parts[name], keep)
    if not any(parts.values()):
        raise SystemExit("no training pairs left after dropping those shared with the evaluation splits")
    generated = {"requested": 0, "pairs": 0}
    if args.hard_negatives:
        held_out = [p for pairs in (*selection.values(), *report.values()) for p in pairs]
        held_out_files = ["the selection and report splits"]
        if SWAP_DEV.is_file():       # in a checkout (not in a wheel): keep its texts out too
            held_out += read_generated(SWAP_DEV)
            held_out_files.append("recipes/text_similarity/dev/swap_dev.tsv")
        if args.lexicon_pairs:       # newer recipes keep the contrast set and the lexicon check out as well
            held_out += check_pairs()
            held_out_files += ["recipes/text_similarity/dev/contrast_dev.jsonl",
                               "recipes/text_similarity/dev/lexicon_check.jsonl"]
        pairs = generated_training_pairs([p for name, part in parts.items() if name != "ocnli_contradictions"
                                          for p in part], held_out,
                                         args.hard_negatives, args.seed, framed=args.framed_questions,
                                         kinds=args.kinds)
        parts["generated"] = [Pair(p.text1, p.text2, p.label) for p in pairs]
        kinds = args.kinds or (FRAMED_KINDS if args.framed_questions else KINDS)
        generated = {"requested": args.hard_negatives, "pairs": len(pairs), "seed": args.seed,
                     **({"framed_questions": args.framed_questions} if args.framed_questions else {}),
                     **({"kinds": list(args.kinds)} if args.kinds else {}),
                     "by_kind": {kind: sum(p.kind == kind for p in pairs) for kind in kinds},
                     "texts_excluded": held_out_files,
                     "method": "augment.generated_training_pairs over the training texts above"}
        dropped["generated"] = 0
    if args.lexicon_pairs:
        parts["lexicon_generated"], generated["lexicon"] = lexicon_pairs(args, parts, selection, report)
        dropped["lexicon_generated"] = 0
    log("training pairs: " + ", ".join(f"{k} {len(v)} (dropped {dropped[k]} shared with eval splits)"
                                       for k, v in parts.items()))
    return files, parts, dropped, selection, report, generated


def read_check(path: Path) -> list[Pair]:
    """A check of ``dev/`` (JSON lines with text1, text2, label) as pairs."""
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [Pair(r["text1"], r["text2"], r["label"]) for r in rows]


def check_pairs() -> list[Pair]:
    """The pairs of the contrast dev set and of the held-out lexicon check (their texts stay out of
    every generated pair)."""
    return [p for path in (CONTRAST_DEV, LEXICON_CHECK) if path.is_file() for p in read_check(path)]


def lexicon_pairs(args, parts: dict, selection: dict, report: dict) -> tuple[list[Pair], dict]:
    """``--lexicon-pairs``: minimal pairs edited from the training texts with the generator words,
    and what the manifest says of them."""
    edits = LexiconEdits(args.lexicon, side="generator")
    held_out = [p for pairs in (*selection.values(), *report.values()) for p in pairs] + check_pairs()
    if SWAP_DEV.is_file():
        held_out += read_generated(SWAP_DEV)
    exclude = {model_text(t) for p in held_out for t in p[:2]}
    texts = [t for name, part in parts.items() if name not in ("ocnli_contradictions", "generated", "lexicon_generated")
             for p in part for t in (p.text1, p.text2)]
    started = time.time()
    pairs = augmented_pairs(texts, random.Random(args.seed + 2), args.lexicon_pairs, kinds=args.lexicon_kinds,
                            exclude=exclude, generators=edits.generators())
    by_kind = {kind: sum(p.kind == kind for p in pairs) for kind in args.lexicon_kinds}
    log(f"lexicon pairs in {time.time() - started:.0f}s: {len(pairs)} {by_kind}")
    return [Pair(p.text1, p.text2, p.label) for p in pairs], {
        "requested": args.lexicon_pairs, "pairs": len(pairs), "seed": args.seed + 2, "kinds": list(args.lexicon_kinds),
        "by_kind": by_kind, "words": edits.counts(), "lexicon": portable_path(args.lexicon),
        "split": f"a word is held out when md5(word) % {HELD_OUT_SHARE} == 0 (lexicon.held_out); only pairs "
                 "with no held-out word are written",
        "source": LEXICON_SOURCE,
        "method": "lexicon.LexiconEdits(side='generator') through augment.augmented_pairs over the training texts"}


def evaluate_shipped(network, selection_data: dict, report: dict, vocab: Vocab, cache: dict) -> tuple[float, dict]:
    """The decision threshold best on the selection splits, and accuracies there and on the report splits."""
    selection_scores = {k: (predict(network, d), d.labels) for k, d in selection_data.items()}
    threshold = best_threshold(list(selection_scores.values()))
    metrics = {"selection": {}, "report": {}}
    for k, (s, y) in selection_scores.items():
        metrics["selection"][k] = {"pairs": len(y), "accuracy": round(accuracy(s, y, threshold), 4),
                                   "accuracy_at_0.5": round(accuracy(s, y), 4)}
    for k, pairs in report.items():
        data = Encoded(pairs, vocab, cache)
        s = predict(network, data)
        metrics["report"][k] = {"pairs": len(pairs), "accuracy": round(accuracy(s, data.labels, threshold), 4),
                                "accuracy_at_0.5": round(accuracy(s, data.labels), 4)}
    log(f"threshold {threshold}: " + json.dumps(metrics))
    return threshold, metrics


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    fast_cpu_math()
    if args.halve:
        return halve(args)
    started = time.time()
    rng = seed_all(args.seed)
    files, parts, dropped, selection, report, generated = load_pairs(args)

    train_texts = [model_text(t, MAX_LENGTH) for pairs in parts.values() for p in pairs for t in (p.text1, p.text2)]
    distinct = list(dict.fromkeys(train_texts))
    if args.init:
        vocab = Vocab.load(Path(args.init) / "vocab.json")
        log(f"the vocabulary of {args.init}")
    else:
        log(f"building the vocabulary from {len(distinct)} distinct training texts (jieba)")
        vocab = Vocab.build(distinct, jieba_cut(), min_char=args.min_char, min_word=args.min_word,
                            max_words=args.max_words)
    log(f"{len(vocab.char_list)} chars, {len(vocab.word_list)} words")

    cache: dict = {}
    train_pairs = [p for pairs in parts.values() for p in pairs]
    train = Encoded(train_pairs, vocab, cache)
    epoch_index = list(range(len(train_pairs)))
    repeats = {"lcqmc_dev_train_part": args.lcqmc_repeat, "afqmc_train": args.afqmc_repeat,
               **({name: args.open_domain_repeat for name in OPEN_DOMAIN_FILES} if args.open_domain else {})}
    start = 0
    for name, pairs in parts.items():     # LCQMC, AFQMC and the open-domain parts may be seen more than once an epoch
        epoch_index += list(range(start, start + len(pairs))) * (repeats.get(name, 1) - 1)
        start += len(pairs)
    selection_data = {k: Encoded(v, vocab, cache) for k, v in selection.items()}
    log(f"encoded in {time.time() - started:.0f}s; {len(epoch_index)} pairs per epoch")

    if args.init:
        architecture, network, init = start_from_package(args)
    else:
        architecture, network = build_network(args, vocab)
        init = None
    log(f"{args.arch}: {sum(int(np.prod(p.shape)) for p in network.parameters()):,} parameters")
    pretrained = start_from_vectors(network, args.vectors, vocab, args.seed) if args.vectors else None
    resumed = resume_checkpoint(args, network)

    checks = {k: Encoded(report[k], vocab, cache) for k in ("contrast_dev", "lexicon_check", "chinese_stsb_test")
              if k in report}

    def evaluate():
        accuracies = {k: accuracy(predict(network, d), d.labels) for k, d in selection_data.items()}
        figures = {**accuracies, "mean": float(np.mean(list(accuracies.values())))}
        if checks:    # beside the selection figures, never chosen on
            log("checks at 0.5: " + ", ".join(f"{k} {accuracy(predict(network, d), d.labels):.4f}"
                                              for k, d in checks.items()))
        save_checkpoint(args, network, figures, resumed, started_fit)
        return figures

    started_fit = time.time()
    run = fit_matcher(network, train, epoch_index, evaluate, "mean", args, rng, evals=args.evals, eval_guess=15.0)

    with PackageDraft(args, "text_similarity", started=started) as draft:
        draft.ship_weights(network, float16=stored_in_float16(args))    # and evaluate exactly what ships
        threshold, metrics = evaluate_shipped(network, selection_data, report, vocab, cache)
        vocab.save(draft / "vocab.json")
        draft.write({
            "description": ("RE2-style interaction model over chars and words with exact-match flags"
                            if args.arch == "match" else "siamese conv bi-encoder over chars and words"),
            **package_fields(architecture, threshold),
            "training": {
                "train_files": {**{k: portable_path(files[k], args.data_dir) for k in ("bq_train", "afqmc_train", "lcqmc_dev")},
                                **({"ocnli_contradictions": OCNLI_TRAIN} if args.ocnli else {}),
                                **(dict(OPEN_DOMAIN_FILES) if args.open_domain else {})},
                "train_pairs": {k: len(v) for k, v in parts.items()},
                "pairs_per_epoch": len(epoch_index),
                "dropped_overlap_with_eval": dropped,
                "lcqmc_dev_split": {"seed": args.seed, "held_out": args.lcqmc_held_out,
                                    "method": "random.Random(seed).shuffle of row indices; first held_out rows held out"},
                **({"afqmc_train_split": {"seed": args.seed, "held_out": args.afqmc_held_out,
                                          "method": "as lcqmc_dev_split, over afqmc/train.tsv"}}
                   if args.afqmc_held_out else {}),
                "lcqmc_repeat": args.lcqmc_repeat,
                **({"afqmc_repeat": args.afqmc_repeat} if args.afqmc_repeat != 1 else {}),
                **({"open_domain": {"repeat": args.open_domain_repeat,
                                    "method": "data.read_open_domain (STS 4-5 -> 1, 0-2 -> 0; NLI probing synonym "
                                              "substitutions -> 1, contradictions -> 0)"}}
                   if args.open_domain else {}),
                "max_train_pairs": args.max_train_pairs,
                "hard_negatives": generated,
                "selection_splits": ["lcqmc/dev.tsv held-out part", "bq_corpus/dev.tsv",
                                     *(["afqmc/train.tsv held-out part"] if args.afqmc_held_out else [])],
                "sources": {**SOURCES, **({"ocnli": OCNLI_SOURCE} if args.ocnli else {}),
                            **(OPEN_DOMAIN_SOURCES if args.open_domain else {})},
                "vocab": {"chars": len(vocab.char_list), "words": len(vocab.word_list), "min_char": args.min_char,
                          "min_word": args.min_word, "segmenter": "jieba 0.42 (HMM) word list, max-probability path"},
                **({"pretrained_embeddings": pretrained} if pretrained else {}),
                **({"init": init} if init else {}),
                **({"resumed": resumed} if resumed else {}),
                **run.summary(), "batch_size": args.batch_size, "seed": args.seed,
            },
            "metrics": metrics,
            "framework": framework_versions("paddlepaddle", "numpy"),
        })
    shutil.rmtree(checkpoint_dir(args), ignore_errors=True)    # the package is written: nothing to resume
    return 0


def start_from_package(args):
    """``--init``: the package's architecture (the network options follow it) and its weights."""
    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.weights import load_weights
    from taskflow.tasks.text_similarity.model import build

    source = Path(args.init)
    manifest = Manifest.load(source / MANIFEST)
    architecture = dict(manifest.data["architecture"])
    network = build(architecture)
    load_weights(network, source / "weights.npz")
    args.arch = architecture["type"]
    log(f"starting from {source}: {manifest.name} {manifest.version}")
    return architecture, network, {"package": portable_path(source), "name": manifest.name,
                                   "version": manifest.version,
                                   "weights_sha256": manifest.files["weights.npz"]["sha256"]}


def checkpoint_dir(args) -> Path:
    return Path(str(args.out).rstrip("/") + ".ckpt")


def save_checkpoint(args, network, figures: dict, resumed: dict | None, started: float) -> None:
    """The weights just evaluated, and the minutes spent training so far (this run and those it resumed)."""
    import json

    folder = checkpoint_dir(args)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "weights.tmp.npz", **{k: v.numpy() for k, v in network.state_dict().items()})
    os.replace(folder / "weights.tmp.npz", folder / "weights.npz")
    spent = (resumed or {}).get("minutes", 0.0) + (time.time() - started) / 60
    (folder / "state.json").write_text(json.dumps({"minutes": round(spent, 2), "figures": figures}), encoding="utf-8")


def resume_checkpoint(args, network) -> dict | None:
    """A checkpoint beside ``--out`` from a run stopped before it wrote its package: its weights go
    into the network and ``--minutes`` shrinks by the minutes it had spent."""
    import json

    import paddle

    folder = checkpoint_dir(args)
    if not (folder / "weights.npz").is_file() or not (folder / "state.json").is_file():
        return None
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    with np.load(folder / "weights.npz") as stored:
        network.set_state_dict({k: paddle.to_tensor(stored[k]) for k in stored.files})
    if args.minutes:
        args.minutes = max(1.0, args.minutes - state["minutes"])
    log(f"resuming from {folder} ({state['minutes']} min spent, selection {state['figures']}); "
        f"{args.minutes} min left")
    return {"from": portable_path(folder), "minutes": state["minutes"]}


def halve(args) -> int:
    """``--halve PACKAGE``: the package's network stored again with every weight in float16, under
    its own name and ``--version``; the rest of the manifest is kept and says where it came from.
    Its recorded metrics are the float32 network's: measure the new one through the product
    (benchmarks/accuracy_similarity.py) before shipping it."""
    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.weights import load_weights
    from taskflow.tasks.text_similarity.model import build

    source = Path(args.halve)
    manifest = Manifest.load(source / MANIFEST)
    network = build(manifest.data["architecture"])
    load_weights(network, source / "weights.npz")
    fields = {k: v for k, v in manifest.data.items() if k not in ("task", "name", "version", "files")}
    fields["training"] = {**fields.get("training", {}), "stored_in_float16": {
        "from_version": manifest.version, "from_weights_sha256": manifest.files["weights.npz"]["sha256"],
        "note": "every weight halved after training (--halve); metrics above are the float32 network's"}}
    with PackageDraft(args, "text_similarity") as draft:
        draft.identity["name"] = manifest.name
        draft.ship_weights(network, float16=lambda name: True)
        shutil.copyfile(source / "vocab.json", draft / "vocab.json")
        draft.write(fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
