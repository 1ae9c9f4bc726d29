"""Recipe: MSRA segmentation + proper nouns, jieba POS, TIME rules -> BiGRU-CRF -> model package.

    OMP_NUM_THREADS=2 python -m recipes.lexical_analysis.train --data-dir ../shared/data \\
        --out resources/lexical_analysis/bigru_crf

Data (public sources, see README.md; paths can also be given one by one):

* ``lexical/msra_seg_propn/{train,dev}.txt``: MSRA bakeoff (SIGHAN 2006) training
  file, word-segmented, ``nr/ns/nt`` proper-noun tags; train for training, dev
  for model selection and the segmentation figures.
* ``lexicon/jieba_dict_small/dict_small.tsv`` and jieba's own ``dict.txt``: POS.
* ``ner/msra/test.txt``: MSRA NER official test set (entity F1, report only).
* ``lexical/ud_chinese_gsd/test.conll``: UD Chinese-GSD (coarse POS, report only).

Nothing is trained on a test split.  ``--evaluate-only PACKAGE`` re-runs the
held-out evaluation of an existing package (and jieba's, on the same data).
``--word-dictionary-only PACKAGE`` (re)builds an existing package's word dictionary
(``word_dictionary.py``: jieba's words that MSRA's training text does not cut, joined where the
model cuts them), pins it in the manifest, sets ``--version`` if given, and re-runs the
evaluation into the manifest (unless ``--no-evaluate``).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from taskflow.corpus_vectors import load_vectors, pretrained_embeddings
from taskflow.package_draft import PackageDraft, framework_versions
from taskflow.recipe_command import recipe_parser
from taskflow.tasks.lexical_analysis.dictionary import write_word_dictionary
from taskflow.tasks.lexical_analysis.tagger import NORMALIZATION, LexicalVocab, build_vocab, normalize, words_from_labels
from taskflow.training import Schedule, fit, length_batches, log, seed_all

from recipes.tuning import update_manifest

from .augment import augment, name_list_sentences
from .silver import (CLUENER_TO_LAC, Teacher, cluener_sentences, corpus_lines, read_genre_dev, run_lac,
                     silver_sentences, word_spans)
from .data import (LAC_TAGS, LAC_TO_COARSE, UPOS_TO_COARSE, JIEBA_TO_LAC, Lexicon, derive_sentence, is_punctuation,
                   read_bio_file, read_conll, read_word_tag_file, tag_counts)
from .word_dictionary import build_word_dictionary

LABELS = [f"{tag}-{part}" for tag in LAC_TAGS for part in "BI"]
GENRE_DEV = Path(__file__).parent / "dev" / "genre_dev.jsonl"   # hand-checked, out of MSRA's genre (dev/README.md)
LABEL_ID = {label: i for i, label in enumerate(LABELS)}
_SPLIT_AFTER = set("，。；！？：,;!?:、")
WORD_DICTIONARY = "words.tsv.gz"
WORD_DICTIONARY_SOURCE = ("jieba extra_dict/dict.txt.small words of 2-4 Han chars seen >= 20 times, not names, Latin "
                          "or numbers, that MSRA train keeps whole at least half the times they occur (dictionary.py)")


# ------------------------------------------------------------------- examples

def sentence_to_example(words: list[tuple[str, str]]) -> tuple[str, list[int]]:
    text = normalize("".join(w for w, _ in words))
    labels = []
    for word, tag in words:
        labels += [LABEL_ID[f"{tag}-B"]] + [LABEL_ID[f"{tag}-I"]] * (len(word) - 1)
    return text, labels


def split_long(words: list[tuple[str, str]], max_len: int) -> list[list[tuple[str, str]]]:
    """Pieces of a sentence of at most ``max_len`` chars, cut after punctuation where possible."""
    if sum(len(w) for w, _ in words) <= max_len:
        return [words]
    pieces, current, size, last_cut = [], [], 0, None
    for word, tag in words:
        if size + len(word) > max_len and current:
            if last_cut:                          # cut after the last punctuation in the piece
                pieces.append(current[:last_cut])
                current = current[last_cut:]
            else:
                pieces.append(current)
                current = []
            size, last_cut = sum(len(w) for w, _ in current), None
        current.append((word, tag))
        size += len(word)
        if word in _SPLIT_AFTER:
            last_cut = len(current)
    if current:
        pieces.append(current)
    return pieces


def with_spaces(words: list[tuple[str, str]], rng: random.Random, rate: float) -> list[tuple[str, str]]:
    """Insert space tokens (tag w) at some word boundaries, so the model learns that a space is one."""
    out = []
    for i, item in enumerate(words):
        if i and rng.random() < rate:
            out.append((" ", "w"))
        out.append(item)
    return out


def other_genres(args, paths: dict[str, Path]) -> list[list[tuple[str, str]]]:
    """CLUENER train with its gold entities and corpus lines with silver labels, both labelled by
    ``--teacher`` (silver.py); none without a teacher."""
    if not args.teacher:
        return []
    cluener = [json.loads(line)["text"] for line in paths["cluener_train"].read_text(encoding="utf-8").splitlines()
               if line.strip()] if paths.get("cluener_train") else []
    lines = []
    if args.silver_lines and args.silver_corpus:
        exclude = {text for text, _ in read_genre_dev(paths["genre_dev"])} if paths.get("genre_dev") else set()
        lines = corpus_lines(args.silver_corpus.split(","), args.silver_lines, exclude=exclude, seed=args.seed)
    lac = run_lac(args.lac_python, cluener + lines, args.lac_labels) if args.lac_python else {}
    referee = "LAC" if lac else "jieba"
    teacher = Teacher(args.teacher, lac=lac)
    sentences = []
    if cluener:
        sentences += cluener_sentences(paths["cluener_train"], teacher)
        log(f"CLUENER train: {len(sentences)} sentences, gold entities mapped, the teacher's words elsewhere, "
            f"its other entities checked by {referee}")
    if lines:
        silver = silver_sentences(lines, teacher)
        log(f"silver: {len(silver)} lines labelled by the teacher, entities checked by {referee}"
            + (", LAC's entities imposed" if lac else ""))
        sentences += silver
    return sentences


# ----------------------------------------------------------------- decoding

def spans_of(words: list[str]) -> list[tuple[int, int]]:
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word)
    return spans


def prf(correct: int, predicted: int, gold: int) -> dict:
    p = correct / predicted if predicted else 0.0
    r = correct / gold if gold else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / (p + r) if p + r else 0.0, 4)}


def decode_labels(text: str, ids: list[int]) -> list[tuple[int, int, str]]:
    tags = [LABELS[i].rsplit("-", 1)[0] for i in ids]
    begins = [LABELS[i].endswith("-B") for i in ids]
    if begins:
        begins[0] = True
    return words_from_labels(text, begins, tags)


def predict_dynamic(network, texts: list[str], vocab: LexicalVocab, batch_size: int = 128) -> list[list[tuple[int, int, str]]]:
    """Words of each (normalised) text from the dynamic-graph network (for model selection)."""
    import paddle

    out: list = [None] * len(texts)
    order = sorted(range(len(texts)), key=lambda k: len(texts[k]))
    network.eval()
    with paddle.no_grad():
        for start in range(0, len(order), batch_size):
            picked = order[start:start + batch_size]
            feeds = vocab.encode([texts[k] for k in picked])
            path = network(paddle.to_tensor(feeds["char_ids"]), paddle.to_tensor(feeds["bigram_ids"])).numpy()
            for row, k in enumerate(picked):
                out[k] = decode_labels(texts[k], path[row, : len(texts[k])].tolist())
    return out


def score_msra(predicted: list[list[tuple[int, int, str]]], gold: list[list[tuple[str, str]]]) -> dict:
    """Segmentation P/R/F1 and PER/LOC/ORG entity F1 against MSRA word/tag sentences."""
    seg = [0, 0, 0]
    ent = [0, 0, 0]
    entity_of = {"nr": "PER", "ns": "LOC", "nt": "ORG", "PER": "PER", "LOC": "LOC", "ORG": "ORG"}
    for words, sentence in zip(predicted, gold):
        gold_spans = spans_of([w for w, _ in sentence])
        gold_ents = {(s, e, entity_of[t]) for (s, e), (_, t) in zip(gold_spans, sentence) if t in entity_of}
        pred_spans = {(s, e) for s, e, _ in words}
        pred_ents = {(s, e, t) for s, e, t in words if t in ("PER", "LOC", "ORG")}
        seg[0] += len(pred_spans & set(gold_spans))
        seg[1] += len(pred_spans)
        seg[2] += len(gold_spans)
        ent[0] += len(pred_ents & gold_ents)
        ent[1] += len(pred_ents)
        ent[2] += len(gold_ents)
    return {"segmentation": prf(*seg), "entities": prf(*ent)}


# ----------------------------------------------------------------- training

def training_examples(args, paths: dict[str, Path], rng: random.Random):
    """MSRA train with derived LAC tags, cut into pieces and augmented, as ``(text, label ids)``;
    the vocabularies; the lexicon that tagged it; the dev sentences."""
    log("deriving LAC tags for MSRA train/dev")
    lexicon = Lexicon([paths["jieba_small"]])
    cache: dict = {}
    train_sents = [derive_sentence(s, lexicon, cache) for s in read_word_tag_file(paths["msra"] / "train.txt")]
    dev_gold = list(read_word_tag_file(paths["msra"] / "dev.txt"))
    log(f"train {len(train_sents)} sentences; tag counts {dict(tag_counts(train_sents).most_common())}")
    if args.limit:
        train_sents = train_sents[: args.limit]
        dev_gold = dev_gold[: max(50, args.limit // 10)]

    extra = augment(train_sents, rng, replace_share=args.replace_share, lists=args.name_lists)
    log(f"augmentation: {len(extra)} sentences (mention-replaced copies and {args.name_lists} name lists)")
    real = [p for s in train_sents + other_genres(args, paths) for p in split_long(s, args.max_train_length)]
    pieces = real + [p for s in extra for p in split_long(s, args.max_train_length)]
    pieces = [with_spaces(p, rng, 0.15) if rng.random() < args.space_rate else p for p in pieces]
    examples = [sentence_to_example(p) for p in pieces]
    # The vocabulary comes from the real pieces only: made-up names would add rare chars and bigrams.
    corpus = {kind: load_vectors(args.vectors, kind)[0] for kind in ("char", "bigram")} if args.vectors else {}
    char_list, bigram_list = build_vocab([t for t, _ in examples[:len(real)]], args.min_char_count,
                                         args.min_bigram_count, args.max_bigrams,
                                         corpus_chars=corpus.get("char", ()),
                                         corpus_bigrams=corpus.get("bigram", ())[:args.corpus_bigrams])
    log(f"{len(examples)} training pieces, {len(char_list)} chars, {len(bigram_list)} bigrams")
    return examples, char_list, bigram_list, lexicon, dev_gold


def start_from_vectors(network, vectors: str, char_list: list[str], bigram_list: list[str], seed: int) -> dict:
    """The char and bigram tables start from the corpus vectors (``pretraining/vectors.py``); the
    share of each vocabulary they cover is logged and returned."""
    import paddle

    coverage = {}
    for kind, vocab, layer in (("char", char_list, network.char_emb), ("bigram", bigram_list, network.bigram_emb)):
        if layer is None:
            continue
        tokens, matrix = load_vectors(vectors, kind)
        table, coverage[kind] = pretrained_embeddings(vocab, tokens, matrix, layer.weight.shape[1], scale=0.1, seed=seed)
        layer.weight.set_value(paddle.to_tensor(table, dtype=layer.weight.dtype))
    log(f"embeddings from {vectors}: " + ", ".join(f"{k} {v:.1%} of the vocabulary" for k, v in coverage.items()))
    return coverage


def train(args) -> None:
    from taskflow.model import network_class
    from taskflow.tasks.lexical_analysis.model import crf_batch_loss

    rng = seed_all(args.seed)
    paths = data_paths(args)
    examples, char_list, bigram_list, lexicon, dev_gold = training_examples(args, paths, rng)
    vocab = LexicalVocab({c: i for i, c in enumerate(char_list)}, {b: i for i, b in enumerate(bigram_list)})
    dev_texts = [normalize("".join(w for w, _ in s)) for s in dev_gold]
    dev_lists = dev_name_lists(dev_gold, args.dev_name_lists)
    dev_list_texts = [normalize("".join(w for w, _ in s)) for s in dev_lists]
    # Off MSRA's genre, scored every epoch and part of the selection when given.
    genre_sets = {name: items for name, items in (
        ("cluener_dev", read_cluener_dev(paths["cluener_dev"]) if paths.get("cluener_dev") else None),
        ("genre_dev", read_genre_dev(paths["genre_dev"]) if paths.get("genre_dev") else None)) if items}

    architecture = {
        "vocab_size": len(char_list), "bigram_vocab_size": len(bigram_list), "num_tags": len(LABELS),
        "char_dim": args.char_dim, "bigram_dim": args.bigram_dim, "hidden_size": args.hidden_size,
        "num_layers": args.num_layers,
    }
    kind = network_class(args.network)
    if args.network == "idcnn_crf":   # the manifest names the block, so the package rebuilds the same network
        architecture["dilations"] = list(kind.DILATIONS)
    network = kind(**architecture, dropout=args.dropout)
    if args.vectors:
        start_from_vectors(network, args.vectors, char_list, bigram_list, args.seed)

    def evaluate():
        scores = score_msra(predict_dynamic(network, dev_texts, vocab), dev_gold)
        list_scores = score_msra(predict_dynamic(network, dev_list_texts, vocab), dev_lists)
        genre_scores = {name: score_spans(predict_dynamic(network, [normalize(g[0]) for g in items], vocab),
                                          items)["all"] for name, items in genre_sets.items()}
        parts = [scores["segmentation"]["f1"], scores["entities"]["f1"]]
        if args.select_on_genres:
            parts += [genre["f1"] for genre in genre_scores.values()]
        return {"dev": scores, "dev_name_lists": list_scores["entities"], **genre_scores,
                "selection": sum(parts) / len(parts)}

    lengths = [len(text) for text, _ in examples]
    steps_per_epoch = -(-len(examples) // args.batch_size)
    schedule = Schedule(lr=args.lr, steps_per_epoch=steps_per_epoch, epochs=args.epochs, warmup=min(200, steps_per_epoch),
                        floor=0.05, minutes=args.time_budget)
    run = fit(network, lambda: length_batches(lengths, args.batch_size, rng),
              lambda batch: crf_batch_loss(network, [examples[k] for k in batch], vocab), evaluate,
              schedule=schedule, select="selection", average=args.average_weights)
    write(args, network, architecture, char_list, bigram_list, run, lexicon)
    if not args.no_evaluate:
        evaluate_package(args.out, paths, name_lists=args.dev_name_lists, write_manifest=True)


def write(args, network, architecture, char_list, bigram_list, run, lexicon) -> None:
    import importlib.metadata as md

    from taskflow.weights import save_weights

    with PackageDraft(args, "lexical_analysis") as draft:
        save_weights(network, draft / "weights.npz", float16=lambda name: "emb" in name)
        (draft / "vocab.json").write_text(json.dumps({"chars": char_list, "bigrams": bigram_list}, ensure_ascii=False),
                                          encoding="utf-8")
        word_dictionary(data_paths(args), lexicon, draft / WORD_DICTIONARY)
        context = (f"{args.num_layers} BiGRU layers of {args.hidden_size}" if args.network == "bigru_crf" else
                   f"{args.num_layers} blocks of dilated convolutions {tuple(architecture['dilations'])}, "
                   f"{args.hidden_size} wide")
        draft.write({
            "description": f"LAC-style char tagger (char + bigram embeddings, {context}, CRF with Viterbi in "
                           "the graph), trained from scratch on public data.",
            "architecture": {"type": args.network, **architecture}, "normalization": list(NORMALIZATION),
            "labels": LABELS, "tag_set": list(LAC_TAGS), "max_length": args.max_length,
            "word_dictionary": WORD_DICTIONARY,
            "training": {
                "data": {
                    "word_dictionary": WORD_DICTIONARY_SOURCE,
                    "segmentation_and_names": "MSRA bakeoff (SIGHAN 2006) train1.txt minus a seeded 5% dev split, "
                                              "MSR segmentation, nr/ns/nt -> PER/LOC/ORG",
                    "pos": "jieba dict.txt (jieba " + md.version("jieba") + ") + jieba extra_dict/dict.txt.small, "
                           "mapped to LAC tags; jieba POS HMM for name-tagged and unknown words",
                    "time": "rule set in recipes/lexical_analysis/data.py (dates, clock times, deictic time words)",
                    "lexicons": lexicon.sources,
                    **({"other_genres": {
                        "teacher": Path(args.teacher).name,
                        "cluener_train": "CLUENER 2020 train, gold name/address/organization/company/government "
                                         "as PER/LOC/ORG, position/book/movie/game as n/nw (silver.py)",
                        "silver": f"{args.silver_lines} lines from {args.silver_corpus and [Path(c).name for c in args.silver_corpus.split(',')]}, "
                                  "teacher labels, " + ("entities checked by LAC and LAC's entities imposed"
                                                        if args.lac_python else "entities kept where jieba agrees"),
                        "referee": "LAC (lac_labels.py)" if args.lac_python else "jieba " + md.version("jieba"),
                    }} if args.teacher else {}),
                },
                "hyper_parameters": {k: getattr(args, k) for k in (
                    "epochs", "batch_size", "lr", "dropout", "max_train_length", "min_char_count",
                    "min_bigram_count", "max_bigrams", "space_rate", "replace_share", "name_lists", "seed",
                    "time_budget", "silver_lines", "select_on_genres", "corpus_bigrams")},
                **({"pretrained_embeddings": f"char and bigram tables from corpus vectors ({Path(args.vectors).name}, "
                                             "pretraining/vectors.py)"} if args.vectors else {}),
                "augmentation": "mention replacement and synthetic name lists from training names (augment.py)",
                **run.summary(),
                "selection": ("best mean of MSRA dev segmentation F1, entity F1, CLUENER dev (mapped) and genre dev "
                              "entity F1 after each epoch" if args.select_on_genres else
                              "best (MSRA dev segmentation F1 + entity F1) / 2 after each epoch"),
            },
            "framework": framework_versions("paddlepaddle", "numpy"),
        })


def word_dictionary(paths: dict[str, Path], lexicon: Lexicon, out: Path) -> Path:
    """Build the package's word dictionary (``word_dictionary.py``) into ``out``."""
    words = build_word_dictionary(paths["jieba_small"], paths["msra"] / "train.txt", lexicon, normalize)
    log(f"word dictionary: {len(words)} words")
    return write_word_dictionary(words, out)


def add_word_dictionary(package_dir: str | Path, paths: dict[str, Path], version: str | None = None):
    """(Re)build an existing package's word dictionary and pin it in its manifest (and set its
    ``version`` when given); the other files stay as they are."""
    from taskflow.manifest import MANIFEST, Manifest
    from taskflow.packages import write_package

    package_dir = Path(package_dir)
    manifest = Manifest.load(package_dir / MANIFEST)
    fields = {k: v for k, v in manifest.data.items() if k != "files"}
    word_dictionary(paths, Lexicon([paths["jieba_small"]]), package_dir / WORD_DICTIONARY)
    fields["word_dictionary"] = WORD_DICTIONARY
    fields.setdefault("training", {}).setdefault("data", {})["word_dictionary"] = WORD_DICTIONARY_SOURCE
    if version:
        fields["version"] = version
    files = {name: package_dir / name for name in manifest.files}
    return write_package(package_dir, fields, {**files, WORD_DICTIONARY: package_dir / WORD_DICTIONARY})


# --------------------------------------------------------------- evaluation

def dev_name_lists(dev_gold: list[list[tuple[str, str]]], count: int = 200) -> list[list[tuple[str, str]]]:
    """The held-out check of the name-list genre: ``count`` synthetic lists of the dev split's person names."""
    return name_list_sentences(dev_gold, count, seed=7)


def data_paths(args) -> dict[str, Path]:
    root = Path(args.data_dir) if args.data_dir else None

    def pick(value, relative):
        if value:
            return Path(value)
        if root is None:
            raise SystemExit(f"give --data-dir or the path of {relative}")
        return root / relative

    def optional(value, relative):
        if value:
            return Path(value)
        return root / relative if root is not None and (root / relative).is_file() else None

    return {
        "msra": pick(args.msra_dir, "lexical/msra_seg_propn"),
        "jieba_small": pick(args.jieba_dict, "lexicon/jieba_dict_small/dict_small.tsv"),
        "ner_test": pick(args.ner_test, "ner/msra/test.txt"),
        "ud_test": pick(args.ud_test, "lexical/ud_chinese_gsd/test.conll"),
        # Out of MSRA's genre: optional (the recipe ran without them before), found under --data-dir.
        "cluener_train": optional(args.cluener_train, "ner/cluener2020/train.json"),
        "cluener_dev": optional(args.cluener_dev, "ner/cluener2020/dev.json"),
        "genre_dev": Path(args.genre_dev) if args.genre_dev else GENRE_DEV,
    }


def _jieba_words(posseg, text: str) -> list[tuple[int, int, str]]:
    words, start = [], 0
    for piece in posseg.lcut(text):
        tag = "w" if is_punctuation(piece.word) else JIEBA_TO_LAC.get(piece.flag, "n")
        words.append((start, start + len(piece.word), tag))
        start += len(piece.word)
    return words


def _entity_scores(predicted, gold) -> dict:
    counts = {label: [0, 0, 0] for label in ("PER", "LOC", "ORG", "all")}
    for words, (_, spans) in zip(predicted, gold):
        pred = {(s, e, t) for s, e, t in words if t in ("PER", "LOC", "ORG")}
        ref = set(spans)
        for label in ("PER", "LOC", "ORG"):
            p = {x for x in pred if x[2] == label}
            g = {x for x in ref if x[2] == label}
            counts[label][0] += len(p & g)
            counts[label][1] += len(p)
            counts[label][2] += len(g)
        counts["all"][0] += len(pred & ref)
        counts["all"][1] += len(pred)
        counts["all"][2] += len(ref)
    return {label: prf(*c) for label, c in counts.items()}


def read_cluener_dev(path: Path) -> list[tuple[str, list[tuple[int, int, str]], list[tuple[int, int]]]]:
    """CLUENER dev mapped to PER/LOC/ORG: ``(text, gold spans, unscored spans)``.  Scenes (景点) are
    unscored: LAC's convention calls some of them LOC (黄山) and some ORG (故宫博物院), CLUENER neither."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        gold, unscored = [], []
        for kind, mentions in row.get("label", {}).items():
            tag = CLUENER_TO_LAC[kind]
            for spans in mentions.values():
                for start, end in spans:
                    if tag in ("PER", "LOC", "ORG"):
                        gold.append((start, end + 1, tag))
                    elif tag is None:
                        unscored.append((start, end + 1))
        out.append((row["text"], gold, unscored))
    return out


def score_spans(predicted, gold) -> dict:
    """PER/LOC/ORG P/R/F1 of predicted words against ``(text, spans[, unscored])`` items; a predicted
    entity that overlaps an unscored span counts neither way."""
    items = [(g[0], g[1], g[2] if len(g) > 2 else []) for g in gold]
    kept = [[(s, e, t) for s, e, t in words if not any(s < b and a < e for a, b in unscored)]
            for words, (_, _, unscored) in zip(predicted, items)]
    return _entity_scores(kept, [(text, spans) for text, spans, _ in items])


def _pos_scores(predicted, sentences) -> dict:
    """Coarse POS accuracy against UD: per char, and per gold token the system also segmented."""
    chars_ok = chars_all = tok_ok = tok_matched = tok_all = 0
    for words, sentence in zip(predicted, sentences):
        gold = [(s, e, UPOS_TO_COARSE.get(upos)) for (s, e), (_, upos, _) in zip(spans_of([f for f, _, _ in sentence]), sentence)]
        pred_at = {}
        by_span = {}
        for s, e, t in words:
            classes = LAC_TO_COARSE.get(t, set())
            by_span[(s, e)] = classes
            for k in range(s, e):
                pred_at[k] = classes
        for s, e, coarse in gold:
            if coarse is None:      # UD's X (foreign / unknown) has no LAC class
                continue
            tok_all += 1
            for k in range(s, e):
                chars_all += 1
                chars_ok += coarse in pred_at.get(k, set())
            if (s, e) in by_span:
                tok_matched += 1
                tok_ok += coarse in by_span[(s, e)]
    return {
        "char_accuracy": round(chars_ok / chars_all, 4),
        "token_accuracy_on_matched_tokens": round(tok_ok / max(tok_matched, 1), 4),
        "matched_token_fraction": round(tok_matched / max(tok_all, 1), 4),
    }


def evaluate_package(package_dir, paths: dict[str, Path], *, name_lists: int = 200, write_manifest: bool = False) -> dict:
    """Held-out figures of a package (through the Taskflow API, static graph) and of jieba."""
    import jieba
    import jieba.posseg

    from taskflow import Taskflow

    jieba.setLogLevel(60)
    flow = Taskflow("pos_tagging", task_path=package_dir)

    def words_of(texts):
        return [word_spans(pairs) for pairs in flow(texts)]

    posseg = jieba.posseg.POSTokenizer(jieba.Tokenizer())
    report: dict = {"model": {}, "jieba": {}}

    dev_gold = list(read_word_tag_file(paths["msra"] / "dev.txt"))
    dev_texts = ["".join(w for w, _ in s) for s in dev_gold]
    log(f"MSRA dev: {len(dev_texts)} sentences")
    report["model"]["msra_dev"] = score_msra(words_of(dev_texts), dev_gold)
    report["jieba"]["msra_dev"] = score_msra([_jieba_words(posseg, t) for t in dev_texts], dev_gold)

    dev_lists = dev_name_lists(dev_gold, name_lists)
    list_texts = ["".join(w for w, _ in s) for s in dev_lists]
    log(f"MSRA dev name lists: {len(list_texts)} synthetic lists of dev-split names")
    report["model"]["msra_dev_name_lists"] = score_msra(words_of(list_texts), dev_lists)
    report["jieba"]["msra_dev_name_lists"] = score_msra([_jieba_words(posseg, t) for t in list_texts], dev_lists)

    ner_gold = list(read_bio_file(paths["ner_test"]))
    ner_texts = [text for text, _ in ner_gold]
    log(f"MSRA NER test: {len(ner_texts)} sentences")
    report["model"]["msra_ner_test"] = _entity_scores(words_of(ner_texts), ner_gold)
    report["jieba"]["msra_ner_test"] = _entity_scores([_jieba_words(posseg, t) for t in ner_texts], ner_gold)

    for name, items in (("cluener_dev_mapped", read_cluener_dev(paths["cluener_dev"]) if paths.get("cluener_dev") else None),
                        ("genre_dev", read_genre_dev(paths["genre_dev"]) if paths.get("genre_dev") else None)):
        if items:
            texts = [item[0] for item in items]
            log(f"{name}: {len(texts)} sentences")
            report["model"][name] = score_spans(words_of(texts), items)
            report["jieba"][name] = score_spans([_jieba_words(posseg, t) for t in texts], items)

    ud = list(read_conll(paths["ud_test"]))
    ud_texts = ["".join(f for f, _, _ in s) for s in ud]
    log(f"UD-GSD test: {len(ud_texts)} sentences")
    report["model"]["ud_gsd_test_coarse_pos"] = _pos_scores(words_of(ud_texts), ud)
    report["jieba"]["ud_gsd_test_coarse_pos"] = _pos_scores([_jieba_words(posseg, t) for t in ud_texts], ud)
    log(json.dumps(report, ensure_ascii=False, indent=1))

    if write_manifest:
        update_manifest(package_dir, {"metrics": {
            "msra_dev_segmentation": report["model"]["msra_dev"]["segmentation"],
            "msra_dev_entities": report["model"]["msra_dev"]["entities"],
            "msra_dev_name_lists_entities": report["model"]["msra_dev_name_lists"]["entities"],
            "msra_ner_test_entities": report["model"]["msra_ner_test"],
            "ud_gsd_test_coarse_pos": report["model"]["ud_gsd_test_coarse_pos"],
            **{f"{name}_entities": report["model"][name] for name in ("cluener_dev_mapped", "genre_dev")
               if name in report["model"]},
            "jieba_0.42.1_same_data": report["jieba"],
        }})
    return report


# ---------------------------------------------------------------------- cli

def parse_args(argv):
    parser = recipe_parser("lexical_analysis", __doc__, name="bigru_crf", out="lexical_model",
                           data="root of ../shared/data (the paths below are relative to it)")
    parser.prog = "python -m recipes.lexical_analysis.train"
    parser.add_argument("--msra-dir", help="folder with MSRA train.txt / dev.txt (word/TAG lines)")
    parser.add_argument("--jieba-dict", help="jieba dict_small.tsv (term, freq, pos)")
    parser.add_argument("--ner-test", help="MSRA NER test.txt (char<TAB>BIO)")
    parser.add_argument("--ud-test", help="UD Chinese-GSD test.conll")
    parser.add_argument("--cluener-train", help="CLUENER 2020 train.json (gold entities; needs --teacher)")
    parser.add_argument("--cluener-dev", help="CLUENER 2020 dev.json (scored every epoch, mapped to PER/LOC/ORG)")
    parser.add_argument("--genre-dev", help="out-of-genre dev set (default: dev/genre_dev.jsonl beside this recipe)")
    parser.add_argument("--teacher", metavar="PACKAGE",
                        help="a lexical package that labels the CLUENER and corpus sentences (silver.py); "
                             "without it the recipe trains on MSRA alone, as before")
    parser.add_argument("--silver-corpus",
                        help="comma-separated files for silver sentences: corpus parts (gzip, a text a line) or "
                             "labelled sets' train splits (.tsv with a text column)")
    parser.add_argument("--silver-lines", type=int, default=0, help="corpus lines to label with the teacher")
    parser.add_argument("--lac-python", metavar="PYTHON",
                        help="the Python of a venv with Baidu LAC (lac_labels.py): LAC referees the teacher's "
                             "entities and gives the silver lines' entities (silver.py); without it, jieba referees")
    parser.add_argument("--lac-labels", metavar="FILE",
                        help="with --lac-python: where LAC's labels are kept (JSON lines), and read from on a re-run")
    parser.add_argument("--select-on-genres", action="store_true",
                        help="pick the epoch on MSRA dev and the CLUENER / genre dev sets together")
    parser.add_argument("--vectors", metavar="DIR",
                        help="corpus vectors (python -m pretraining.vectors --out DIR): char and bigram tables start "
                             "from them, and their chars and most frequent bigrams join the vocabulary")
    parser.add_argument("--corpus-bigrams", type=int, default=50000,
                        help="with --vectors: the corpus's most frequent bigrams added to the training text's "
                             "(within --max-bigrams)")
    parser.add_argument("--max-bigrams", type=int, default=100000,
                        help="keep at most this many bigrams, the most frequent (package size)")
    parser.add_argument("--evaluate-only", metavar="PACKAGE", help="only evaluate an existing package")
    parser.add_argument("--word-dictionary-only", metavar="PACKAGE",
                        help="only (re)build an existing package's word dictionary (and set --version if given), "
                             "then evaluate it into its manifest unless --no-evaluate")
    parser.add_argument("--no-evaluate", action="store_true", help="skip the held-out evaluation")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--time-budget", "--minutes", type=float, default=50.0, help="minutes of training at most")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--dropout", type=float, default=0.2)
    parser.add_argument("--network", choices=("bigru_crf", "idcnn_crf"), default="bigru_crf",
                        help="context layers: BiGRU (LAC's) or dilated convolutions (model.py; speeds in "
                             "benchmarks/bench_lexical.py --architectures)")
    parser.add_argument("--char-dim", type=int, default=128)
    parser.add_argument("--bigram-dim", type=int, default=48)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2,
                        help="BiGRU layers, or blocks of dilated convolutions for idcnn_crf (4 gives a 33-char window)")
    parser.add_argument("--max-train-length", type=int, default=100)
    parser.add_argument("--max-length", type=int, default=512, help="inference window (manifest max_length)")
    parser.add_argument("--min-char-count", type=int, default=2)
    parser.add_argument("--min-bigram-count", type=int, default=3)
    parser.add_argument("--space-rate", type=float, default=0.03, help="share of pieces given space tokens")
    parser.add_argument("--replace-share", type=float, default=0.15,
                        help="share of sentences with names added again with names replaced (augment.py)")
    parser.add_argument("--name-lists", type=int, default=1000, help="synthetic name lists added (augment.py)")
    parser.add_argument("--dev-name-lists", type=int, default=200,
                        help="synthetic name lists of dev names that selection and evaluation score")
    parser.add_argument("--limit", type=int, default=0, help="use only this many training sentences (smoke tests)")
    # Whether --version was given (in any spelling argparse accepts): --word-dictionary-only keeps
    # the package's own version otherwise.
    default_version = parser.get_default("version")
    parser.set_defaults(version=None)
    args = parser.parse_args(argv)
    args.version_given = args.version is not None
    args.version = args.version or default_version
    if args.lac_python and not args.lac_labels:
        parser.error("--lac-python needs --lac-labels FILE (where LAC's labels are kept for a re-run)")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.evaluate_only:
        evaluate_package(args.evaluate_only, data_paths(args), name_lists=args.dev_name_lists, write_manifest=False)
        return 0
    if args.word_dictionary_only:
        paths = data_paths(args)
        manifest = add_word_dictionary(args.word_dictionary_only, paths, args.version if args.version_given else None)
        log(f"{args.word_dictionary_only}: {manifest.name} {manifest.version} with {WORD_DICTIONARY}")
        if not args.no_evaluate:
            evaluate_package(args.word_dictionary_only, paths, name_lists=args.dev_name_lists, write_manifest=True)
        return 0
    train(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
