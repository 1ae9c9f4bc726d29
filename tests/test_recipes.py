"""Every training recipe (``recipes/<task>/train.py``), run as ``python -m recipes.<task>.train`` for a
few steps on tiny data written here, writes a package that ``Taskflow(task, task_path=...)`` runs.

The data mimic the layout and formats of ``../shared/data`` (which the suite never needs);
the networks are a few hundred parameters wide, so each recipe takes seconds, not hours.
"""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.cli import main as cli
from taskflow.corpus_vectors import pretrained_embeddings
from taskflow.manifest import Manifest

jieba = pytest.importorskip("jieba")     # every recipe but sentiment's finds words with it

POSITIVE = ["这家酒店很干净，服务也好", "房间很大，早餐好吃", "快递很快，质量不错", "书很好看，推荐购买",
            "手机屏幕清楚，电池耐用", "菜很好吃，价格实惠", "环境安静，服务热情", "非常满意，下次再来"]
NEGATIVE = ["等了一个小时还没上菜", "房间很脏，服务太差", "快递太慢，质量很差", "书是盗版，不推荐",
            "手机屏幕坏了，电池不行", "菜太咸了，价格太贵", "环境吵闹，服务冷淡", "非常失望，再也不来"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tsv(path: Path, header: str, rows) -> Path:
    return write(path, header + "\n" + "".join("\t".join(map(str, row)) + "\n" for row in rows))


def train(task: str, *options: str) -> Manifest:
    """Run the task's recipe as ``python -m recipes.<task>.train`` does (``taskflow train`` for a
    task whose recipe is still in the product), and check the package it wrote."""
    try:
        recipe = importlib.import_module(f"recipes.{task}.train")
    except ModuleNotFoundError as missing:
        if not f"recipes.{task}.train".startswith(missing.name or "?"):
            raise
        assert cli(["train", task, *options]) == 0
    else:
        assert recipe.main(list(options)) == 0
    out = Path(options[options.index("--out") + 1])
    manifest = Manifest.load(out / "manifest.json")
    assert manifest.task == task
    # A package names its network and its text normalisation, so it runs with no code of its task's defaults.
    from taskflow.text import Normalizer

    Normalizer(manifest["normalization"])
    if task != "knowledge_mining":
        from taskflow.model import network_class

        network_class(manifest["architecture"]["type"])
    return manifest


# ------------------------------------------------------------------ sentiment_analysis

def test_sentiment_recipe(tmp_path):
    rows = [(1, t) for t in POSITIVE] + [(0, t) for t in NEGATIVE]
    data = tmp_path / "sentiment"
    for folder, files in {"chnsenticorp": ("train", "dev", "test", "test.dedup"),
                          "online_shopping_10_cats": ("train", "dev", "test"), "waimai_10k": ("train", "dev", "test")}.items():
        for name in files:
            tsv(data / folder / f"{name}.tsv", "label\ttext", rows)
    out = tmp_path / "model"
    options = ("--min-freq", "1", "--embed-dim", "8", "--bigram-buckets", "64", "--ngram-dim", "4", "--conv-channels", "4",
               "--max-kernel", "2", "--wide-buckets", "256", "--batch-size", "8", "--epochs", "20", "--lr", "0.02",
               "--max-len", "16")
    # No generated sentences: the 16 reviews alone, seen often enough to be learnt.
    manifest = train("sentiment_analysis", "--data-dir", str(data), "--out", str(out), *options, "--wide-epochs", "20",
                     "--augment", "none")
    assert manifest["training"]["train_files"][0] == "chnsenticorp/train.tsv"
    assert set(manifest["metrics"]) >= {"chnsenticorp_test", "waimai_test"}

    # It tells the reviews it learnt apart (a constant label is right on half of them), and the figure its
    # manifest reports for them is what the product gives.
    flow = Taskflow("sentiment_analysis", task_path=out)
    results = flow(POSITIVE + NEGATIVE)
    accuracy = np.mean([r["label"] == ("positive" if i < len(POSITIVE) else "negative") for i, r in enumerate(results)])
    assert accuracy >= 0.875
    assert manifest["metrics"]["chnsenticorp_test"] == pytest.approx(accuracy)
    (long,) = flow(["好" * 40])          # longer than --max-len: read in chunks
    assert long["label"] in ("positive", "negative")

    # --deep-init: stage 1 comes from the package just written, only the wide part is trained again.
    again = tmp_path / "again"
    manifest = train("sentiment_analysis", "--data-dir", str(data), "--out", str(again), "--deep-init", str(out),
                     *options, "--wide-epochs", "2")
    assert manifest["training"]["history"]["deep"] == [{"from": f"{tmp_path.name}/model"}]
    with np.load(out / "weights.npz") as first, np.load(again / "weights.npz") as second:
        deep = [k for k in first.files if not k.startswith("wide_")]
        assert deep and all(np.array_equal(first[k], second[k]) for k in deep)


# -------------------------------------------------------------------- lexical_analysis

PEOPLE = ["李明", "王芳", "张伟", "刘洋", "陈静", "赵磊", "周杰", "吴敏"]
PLACES = ["北京", "上海", "杭州", "南京"]
ORGS = ["北京大学", "人民银行", "新华社"]


def msra_sentences(rng: random.Random, count: int) -> list[str]:
    """MSRA-style ``word/tag`` lines: ``o`` for plain words, ``nr``/``ns``/``nt`` for names."""
    lines = []
    for _ in range(count):
        words = [f"{rng.choice(PEOPLE)}/nr", "昨天/o", "在/o", f"{rng.choice(PLACES + ORGS)}/ns", "见到/o", "了/o",
                 f"{rng.choice(PEOPLE)}/nr", "，/o", "他们/o", "在/o", f"{rng.choice(ORGS)}/nt", "工作/o", "。/o"]
        lines.append(" ".join(words))
    return lines


def test_lexical_recipe(tmp_path):
    rng = random.Random(0)
    data = tmp_path / "data"
    write(data / "lexical/msra_seg_propn/train.txt", "\n".join(msra_sentences(rng, 40)) + "\n")
    write(data / "lexical/msra_seg_propn/dev.txt", "\n".join(msra_sentences(rng, 8)) + "\n")
    tsv(data / "lexicon/jieba_dict_small/dict_small.tsv", "term\tfreq\tpos",
        [("昨天", 100, "t"), ("见到", 50, "v"), ("工作", 80, "vn"), ("他们", 90, "r")])
    ner = [f"{ch}\t{'B-PER' if i == 0 else 'I-PER' if i == 1 else 'O'}" for i, ch in enumerate("王芳在杭州工作。")]
    write(data / "ner/msra/test.txt", "\n".join(ner) + "\n\n")
    ud = [(1, "王芳", "PROPN", "NNP"), (2, "在", "ADP", "IN"), (3, "杭州", "PROPN", "NNP"), (4, "工作", "VERB", "VV")]
    write(data / "lexical/ud_chinese_gsd/test.conll",
          "".join(f"{i}\t{form}\t_\t{upos}\t{xpos}\t_\t0\troot\t_\t_\n" for i, form, upos, xpos in ud) + "\n")
    # The recipe's own out-of-genre dev set (dev/genre_dev.jsonl, 701 sentences) would take most of the test's time.
    genre_dev = write(tmp_path / "genre_dev.jsonl", "".join(
        json.dumps({"text": f"哈哈，{p}去了{q}", "entities": [[3, 5, "PER"], [7, 9, "LOC"]]}, ensure_ascii=False) + "\n"
        for p, q in zip(PEOPLE, PLACES)))
    tiny = ("--batch-size", "16", "--char-dim", "8", "--bigram-dim", "4", "--hidden-size", "8", "--min-char-count", "1",
            "--min-bigram-count", "1", "--name-lists", "4", "--dev-name-lists", "4", "--max-length", "64",
            "--genre-dev", str(genre_dev))
    out = tmp_path / "model"
    manifest = train("lexical_analysis", "--data-dir", str(data), "--out", str(out), "--epochs", "8", "--lr", "0.05",
                     "--num-layers", "1", *tiny)
    assert manifest["training"]["data"]["lexicons"][-1] == "jieba_dict_small/dict_small.tsv"
    assert set(manifest["metrics"]) >= {"msra_dev_segmentation", "msra_ner_test_entities", "ud_gsd_test_coarse_pos"}
    # The word dictionary: the jieba words MSRA keeps whole (昨天 is a TIME word: left to the model).
    from taskflow.tasks.lexical_analysis.dictionary import WordDictionary

    assert manifest["word_dictionary"] == "words.tsv.gz"
    assert set(WordDictionary.load(out / "words.tsv.gz").words) == {"见到", "工作", "他们"}

    # Corpus vectors (pretraining/vectors.py's file): their chars and bigrams join the vocabulary and the
    # tables start from them.  '鑫' and '鑫鑫' are in no training sentence.
    rng_np = np.random.default_rng(0)
    vectors = {"char_tokens": np.array(["王", "鑫"]), "char_vectors": rng_np.normal(size=(2, 16)).astype(np.float16),
               "bigram_tokens": np.array(["王芳", "鑫鑫"]), "bigram_vectors": rng_np.normal(size=(2, 16)).astype(np.float16)}
    np.savez(tmp_path / "vectors.npz", **vectors)
    with_vectors = train("lexical_analysis", "--data-dir", str(data), "--out", str(tmp_path / "vec"), "--epochs", "1",
                         "--num-layers", "1", *tiny, "--no-evaluate", "--vectors", str(tmp_path), "--lr", "0")
    vocab = json.loads((tmp_path / "vec" / "vocab.json").read_text(encoding="utf-8"))
    assert "鑫" in vocab["chars"] and "鑫鑫" in vocab["bigrams"]
    weights = np.load(tmp_path / "vec" / "weights.npz")
    table = {k: v for k, v in weights.items() if k.endswith("char_emb.weight")}
    (char_table,) = table.values()
    # With lr 0 the trained table is the initial one: the corpus rows, cut to 8 dims, as the recipe made them.
    rows = [vocab["chars"].index(c) for c in ("王", "鑫")]
    got = char_table[rows].astype(np.float32)
    expected, coverage = pretrained_embeddings(vocab["chars"], ["王", "鑫"], vectors["char_vectors"].astype(np.float32),
                                               8, scale=0.1, seed=1)
    assert np.allclose(got, expected[rows], atol=1e-3) and coverage == 2 / len(vocab["chars"])
    assert "pretrained_embeddings" in with_vectors["training"]

    # It learnt the training sentences' words and names: new combinations of them are cut and tagged as
    # those sentences are (a constant tag, or one word a char, would find none of these entities).
    tagger = Taskflow("lexical_analysis", task_path=out)
    for text, entities in {"李明昨天在北京见到了王芳，他们在新华社工作。": [("李明", "PER"), ("北京", "LOC"), ("王芳", "PER"),
                                                                ("新华社", "ORG")],
                           "张伟昨天在杭州见到了吴敏": [("张伟", "PER"), ("杭州", "LOC"), ("吴敏", "PER")]}.items():
        (words,) = tagger([text])
        assert "".join(words["segs"]) == text and len(words["tags"]) == len(words["segs"])
        assert [(w, t) for w, t in zip(words["segs"], words["tags"]) if t in ("PER", "LOC", "ORG")] == entities, words
        assert ("昨天", "TIME") in zip(words["segs"], words["tags"])
    assert manifest["metrics"]["msra_dev_segmentation"]["f1"] > 0.9

    # The convolutional network the recipe can train instead (--network idcnn_crf) exports and runs too.
    conv = train("lexical_analysis", "--data-dir", str(data), "--out", str(tmp_path / "conv"), "--epochs", "1",
                 "--num-layers", "2", "--network", "idcnn_crf", *tiny, "--no-evaluate")
    assert conv["architecture"]["type"] == "idcnn_crf" and conv["architecture"]["dilations"] == [1, 1, 2]
    texts = ["李明在上海见到了王芳", "好", "王芳在杭州工作。" * 3]
    together = Taskflow("lexical_analysis", task_path=tmp_path / "conv")(texts)
    assert together == [Taskflow("lexical_analysis", task_path=tmp_path / "conv")([t])[0] for t in texts]
    # --word-dictionary-only rebuilds an existing package's dictionary (same bytes) and sets the version.
    before = (tmp_path / "conv" / "words.tsv.gz").read_bytes()
    from recipes.lexical_analysis.train import main as lexical_recipe

    assert lexical_recipe(["--data-dir", str(data), "--word-dictionary-only", str(tmp_path / "conv"),
                           "--version", "2.0.1", "--no-evaluate"]) == 0
    rebuilt = Manifest.load(tmp_path / "conv" / "manifest.json")
    assert rebuilt.version == "2.0.1" and rebuilt.files.keys() == conv.files.keys()
    assert (tmp_path / "conv" / "words.tsv.gz").read_bytes() == before

    # Other genres: CLUENER's gold entities and silver corpus lines, labelled by a teacher (the package above).
    cluener = [{"text": "哈哈，李明去了杭州", "label": {"name": {"李明": [[3, 4]]}, "address": {"杭州": [[7, 8]]}}},
               {"text": "王芳在新华社当记者", "label": {"name": {"王芳": [[0, 1]]}, "company": {"新华社": [[3, 5]]},
                                                   "position": {"记者": [[7, 8]]}}}]
    for split in ("train", "dev"):
        write(data / f"ner/cluener2020/{split}.json", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in cluener))
    corpus = write(tmp_path / "corpus.txt", "".join(f"哈哈，{p}昨天在{q}见到了朋友\n" for p in PEOPLE for q in PLACES))
    again = train("lexical_analysis", "--data-dir", str(data), "--out", str(tmp_path / "model2"), "--epochs", "2",
                  "--num-layers", "1", *tiny, "--teacher", str(out), "--silver-corpus", str(corpus), "--silver-lines",
                  "8", "--select-on-genres", "--max-bigrams", "50")
    assert again["architecture"]["bigram_vocab_size"] <= 52
    assert set(again["training"]["data"]["other_genres"]) == {"teacher", "cluener_train", "silver", "referee"}
    assert again["training"]["data"]["other_genres"]["referee"].startswith("jieba")    # no --lac-python
    assert [h["epoch"] for h in again["training"]["history"]] == [1, 2]
    assert all({"cluener_dev", "genre_dev"} <= set(h) for h in again["training"]["history"])   # scored every epoch
    assert again["training"]["best_epoch"] == max(again["training"]["history"], key=lambda h: h["selection"])["epoch"]
    assert set(again["metrics"]) >= {"cluener_dev_mapped_entities", "genre_dev_entities"}


def test_lexical_vocabulary_puts_the_corpus_bigrams_first():
    from taskflow.tasks.lexical_analysis.tagger import build_vocab

    # The training text has more frequent bigrams than the table holds: the corpus's still get rows.
    chars, bigrams = build_vocab(["甲乙甲乙", "甲乙丙"], 1, 1, max_bigrams=3, corpus_bigrams=["丁戊"])
    assert bigrams == ["[PAD]", "[UNK]", *sorted(["丁戊", "甲乙", "\x02甲"])]
    assert chars == ["[PAD]", "[UNK]", *sorted("甲乙丙")]


def test_cluener_mentions_are_imposed_on_the_teachers_words():
    from recipes.lexical_analysis.silver import _impose

    # The teacher read 那不勒斯vs as one ORG; the gold ORG 那不勒斯 cuts it, and the rest is no entity.
    words = [(0, 6, "ORG"), (6, 9, "ORG")]
    assert _impose(9, words, [(0, 4, "ORG"), (6, 9, "ORG")]) == [(0, 4, "ORG"), (4, 6, "nz"), (6, 9, "ORG")]
    # A gold span joins words; what the teacher said elsewhere stays.
    assert _impose(6, [(0, 1, "n"), (1, 3, "v"), (3, 6, "n")], [(1, 6, "LOC")]) == [(0, 1, "n"), (1, 6, "LOC")]



def test_silver_entities_are_refereed_and_lac_spans_imposed():
    from recipes.lexical_analysis.silver import name_spans, silver_words

    text = "哈哈今天和小米的雷军去了深圳"
    # The teacher (MSRA-trained) reads laughter as a place and misses the company and the city.
    teacher = [(0, 2, "LOC"), (2, 4, "t"), (4, 5, "p"), (5, 7, "nz"), (7, 8, "u"), (8, 10, "PER"), (10, 12, "v"),
               (12, 13, "n"), (13, 14, "n")]
    lac = [(0, 2, "xc"), (2, 4, "TIME"), (4, 5, "p"), (5, 7, "ORG"), (7, 8, "u"), (8, 10, "PER"), (10, 11, "v"),
           (11, 12, "u"), (12, 14, "LOC")]
    referee = {(s, e): t for s, e, t in lac}
    out = silver_words(text, teacher, referee, [span for span in lac if span[2] in ("PER", "LOC", "ORG")])
    assert out == [(0, 2, "xc"),                   # the claim dropped, the referee's tag for the same word
                   (2, 4, "t"), (4, 5, "p"),        # the teacher's POS where no entity is at stake
                   (5, 7, "ORG"), (7, 8, "u"),       # LAC's entity imposed
                   (8, 10, "PER"),                  # both agree: kept
                   (10, 12, "v"),                   # the teacher's (MSRA's) word boundaries, not LAC's 去/了
                   (12, 14, "LOC")]                 # LAC's span joins the teacher's two chars
    # LAC's spans with a space or symbol inside are guesses, not names; joiners stay.
    assert name_spans("喝蒙牛死全家# #让-保罗", [(1, 9, "ORG"), (9, 13, "PER"), (0, 1, "v")]) == [(9, 13, "PER")]
    # Without a referee's word at the same span, a refused entity is a proper noun of no type...
    assert silver_words("哈哈", [(0, 2, "PER")], {}) == [(0, 2, "nz")]
    # ...unless the referee's words tile it: a refused claim's boundaries go with it.
    laughter = {(0, 4): "xc", (4, 5): "v", (5, 7): "ORG"}
    assert silver_words("哈哈哈哈笑死", [(0, 5, "PER"), (5, 6, "v")], laughter) == [(0, 4, "xc"), (4, 5, "v"), (5, 6, "v")]
    # With LAC as referee, its POS wins on words both cut alike; not its entities or time words.
    ours = [(0, 2, "LOC"), (2, 4, "t"), (4, 5, "p"), (5, 7, "nz"), (7, 8, "u"), (8, 10, "PER"), (10, 12, "v"),
            (12, 13, "n"), (13, 14, "n")]
    adopted = silver_words(text, ours, {**referee, (4, 5): "c", (7, 8): "xc", (12, 13): "ns"}, adopt_pos=True)
    assert adopted[:6] == [(0, 2, "xc"), (2, 4, "t"), (4, 5, "c"), (5, 7, "nz"), (7, 8, "xc"), (8, 10, "PER")]
    assert adopted[6:] == [(10, 12, "v"), (12, 13, "ns"), (13, 14, "n")]


def test_lac_labels_file_and_review_splits_as_silver_sources(tmp_path):
    from recipes.lexical_analysis.silver import corpus_lines, read_lac_labels

    labels = tmp_path / "lac.jsonl"
    labels.write_text(json.dumps({"text": "雷军在深圳", "words": ["雷军", "在", "深圳"], "tags": ["PER", "p", "LOC"]},
                                 ensure_ascii=False) + "\n"
                      + json.dumps({"text": "a  b", "words": None, "tags": None}) + "\n", encoding="utf-8")
    assert read_lac_labels(labels) == {"雷军在深圳": [(0, 2, "PER"), (2, 3, "p"), (3, 5, "LOC")]}  # unspelled: none
    reviews = tmp_path / "train.tsv"
    reviews.write_text("label\ttext\tcat\n1\t送餐特别快,态度也好,辛苦啦\t外卖\n0\t太短\t外卖\n", encoding="utf-8")
    assert corpus_lines([reviews], 5) == ["送餐特别快,态度也好,辛苦啦"]       # the text column; short lines left out

# --------------------------------------------------------------------- text_similarity

SAME = [("怎么修改微信密码", "微信密码怎么改"), ("明天天气怎么样", "明天天气如何"), ("信用卡怎么还款", "信用卡如何还款"),
        ("酒店几点退房", "酒店退房时间是几点"), ("快递多久能到", "快递几天能到"), ("手机没电了怎么办", "手机没电怎么办")]
DIFFERENT = [("怎么修改微信密码", "明天天气怎么样"), ("信用卡怎么还款", "酒店几点退房"), ("快递多久能到", "手机没电了怎么办"),
             ("明天天气如何", "信用卡如何还款"), ("酒店退房时间是几点", "微信密码怎么改"), ("快递几天能到", "书好看吗")]


@pytest.mark.parametrize("arch", ["match", "siamese"])
def test_text_similarity_recipe(tmp_path, arch):
    def pairs(suffix: str):
        return [(a + suffix, b + suffix, 1) for a, b in SAME] + [(a + suffix, b + suffix, 0) for a, b in DIFFERENT]

    data = tmp_path / "matching"
    # Distinct texts per split, so that no training pair is dropped as shared with an evaluation split.
    for relative, suffix in {"bq_corpus/train.tsv": "", "afqmc/train.tsv": "？", "lcqmc/dev.tsv": "呢",
                             "bq_corpus/dev.tsv": "啊", "lcqmc/test.tsv": "吗", "bq_corpus/test.tsv": "吧",
                             "afqmc/dev.tsv": "呀"}.items():
        tsv(data / relative, "text_a\ttext_b\tlabel", pairs(suffix))
    out = tmp_path / "model"
    manifest = train("text_similarity", "--data-dir", str(data), "--out", str(out), "--arch", arch,
                     "--char-dim", "8", "--word-dim", "4", "--hidden", "6", "--enc-layers", "1", "--min-char", "1",
                     "--min-word", "1", "--lcqmc-held-out", "4", "--epochs", "20", "--lr", "0.02", "--batch-size", "8",
                     "--warmup", "2", "--evals", "2", *(["--average-weights", "0.9"] if arch == "match" else []))
    assert manifest["training"]["train_files"]["lcqmc_dev"] == "lcqmc/dev.tsv"
    assert ("weight_average" in manifest["training"]["optimizer"]) == (arch == "match")    # what ships says it
    # The report splits, and the project's own checks (dev/, in a checkout) beside them; no
    # Chinese STS-B test in the tiny data.
    assert set(manifest["metrics"]["report"]) == {"lcqmc_test", "bq_test", "afqmc_dev", "contrast_dev", "lexicon_check"}
    assert manifest["training"]["hard_negatives"] == {"requested": 0, "pairs": 0}      # off unless asked for

    # lcqmc/test.tsv's pairs (their own suffix, never trained on): paraphrases score above the pairs that are
    # not, and the labels are right where a constant label is right on half.
    results = Taskflow("text_similarity", task_path=out)([(a + "吗", b + "吗") for a, b in SAME + DIFFERENT])
    assert all(0.0 <= r["similarity"] <= 1.0 for r in results)
    gold = [1] * len(SAME) + [0] * len(DIFFERENT)
    assert np.mean([r["label"] == label for r, label in zip(results, gold)]) >= 10 / 12
    same, different = results[:len(SAME)], results[len(SAME):]
    assert np.mean([r["similarity"] for r in same]) - np.mean([r["similarity"] for r in different]) > 0.5


def test_text_similarity_recipe_adds_generated_pairs(tmp_path):
    data = tmp_path / "matching"
    for relative, suffix in {"bq_corpus/train.tsv": "", "afqmc/train.tsv": "？", "lcqmc/dev.tsv": "呢",
                             "bq_corpus/dev.tsv": "啊", "lcqmc/test.tsv": "吗", "bq_corpus/test.tsv": "吧",
                             "afqmc/dev.tsv": "呀"}.items():
        tsv(data / relative, "text_a\ttext_b\tlabel",
            [(a + suffix, b + suffix, 1) for a, b in SAME] + [(a + suffix, b + suffix, 0) for a, b in DIFFERENT])
    out = tmp_path / "model"
    manifest = train("text_similarity", "--data-dir", str(data), "--out", str(out), "--arch", "siamese",
                     "--char-dim", "8", "--word-dim", "4", "--hidden", "6", "--enc-layers", "1", "--min-char", "1",
                     "--min-word", "1", "--lcqmc-held-out", "4", "--epochs", "1", "--batch-size", "8",
                     "--warmup", "2", "--evals", "1", "--hard-negatives", "6")
    generated = manifest["training"]["hard_negatives"]
    assert generated["requested"] == generated["pairs"] == manifest["training"]["train_pairs"]["generated"] == 6
    by_kind = generated["by_kind"]
    # Half hard negatives, half paraphrases; these questions hold entities (微信, 信用卡, 明天) to change.
    assert by_kind["entity"] + by_kind["negation"] + by_kind["number"] + by_kind["swap"] == 3
    assert by_kind["synonym"] + by_kind["surface"] == 3 and by_kind["entity"] > 0

    framed = train("text_similarity", "--data-dir", str(data), "--out", str(tmp_path / "framed"), "--arch", "siamese",
                   "--char-dim", "8", "--word-dim", "4", "--hidden", "6", "--enc-layers", "1", "--min-char", "1",
                   "--min-word", "1", "--lcqmc-held-out", "4", "--epochs", "1", "--batch-size", "8", "--warmup", "2",
                   "--evals", "1", "--hard-negatives", "40", "--framed-questions", "200", "--float16-weights")
    generated = framed["training"]["hard_negatives"]
    assert generated["framed_questions"] == 200 and generated["by_kind"]["swap"] >= 5
    assert generated["by_kind"]["symmetric"] >= 5
    stored = np.load(tmp_path / "framed" / "weights.npz")
    assert {stored[name].dtype for name in stored.files} == {np.dtype(np.float16)}

    # --afqmc-held-out: pairs of AFQMC train kept out of training, a third selection split that the
    # calibration and the mixes read back from the manifest.
    from recipes.text_similarity.calibrate import selection_splits

    held = train("text_similarity", "--data-dir", str(data), "--out", str(tmp_path / "held"), "--arch", "siamese",
                 "--char-dim", "8", "--word-dim", "4", "--hidden", "6", "--enc-layers", "1", "--min-char", "1",
                 "--min-word", "1", "--lcqmc-held-out", "4", "--afqmc-held-out", "5", "--epochs", "1",
                 "--batch-size", "8", "--warmup", "2", "--evals", "1", "--afqmc-repeat", "3")
    assert held["training"]["train_pairs"]["afqmc_train"] == len(SAME) + len(DIFFERENT) - 5
    # --afqmc-repeat 3: AFQMC's part seen three times an epoch, LCQMC's (the default) three times
    pairs = held["training"]["train_pairs"]
    assert held["training"]["pairs_per_epoch"] == pairs["bq_train"] + 3 * pairs["afqmc_train"] + 3 * pairs[
        "lcqmc_dev_train_part"]
    assert manifest["training"]["train_pairs"]["afqmc_train"] == len(SAME) + len(DIFFERENT)
    assert set(held["metrics"]["selection"]) == {"lcqmc_dev_held_out", "bq_dev", "afqmc_train_held_out"}
    rebuilt = selection_splits(data, held["training"])["afqmc_train_held_out"]
    assert len(rebuilt) == 5 and all(p.text1.endswith("？") for p in rebuilt)
    assert "afqmc_train_held_out" not in selection_splits(data, manifest["training"])

    # --halve: the first package again, every weight in float16, scoring as it did to ~1e-3
    halved = train("text_similarity", "--halve", str(out), "--out", str(tmp_path / "halved"), "--version", "1.0.1")
    assert (halved.name, halved.version) == (manifest.name, "1.0.1")
    assert halved["training"]["stored_in_float16"]["from_version"] == manifest.version
    assert halved["architecture"] == manifest["architecture"] and halved["threshold"] == manifest["threshold"]
    stored = np.load(tmp_path / "halved" / "weights.npz")
    assert {stored[name].dtype for name in stored.files} == {np.dtype(np.float16)}
    pairs = [["怎么修改微信密码", "微信密码怎么改"], ("明天天气", "信用卡")]
    before = [r["similarity"] for r in Taskflow("text_similarity", task_path=out)(pairs)]
    after = [r["similarity"] for r in Taskflow("text_similarity", task_path=tmp_path / "halved")(pairs)]
    assert np.allclose(before, after, atol=2e-3) and before != after


# -------------------------------------------------------------------- knowledge_mining

def test_knowledge_mining_recipe(tmp_path):
    pytest.importorskip("sklearn")     # the category classifier is fitted with scikit-learn's SGDClassifier
    data = tmp_path / "data"
    tsv(data / "lexicon/thuocl/thuocl_all.tsv", "term\tcategory\tfreq",
        [("字符串", "it", 395499), ("初始化", "it", 372767), ("杭州", "place", 90000), ("西湖公园", "place", 800),
         ("红烧肉", "food", 5000), ("曹雪芹", "historical_figure", 3000), ("熊猫", "animal", 7000),
         ("感冒", "medical", 6000), ("一帆风顺", "idiom", 500), ("汽车", "car", 9000), ("股票", "finance", 8000),
         ("合同法", "law", 700), ("床前明月光", "poem", 100)])
    cluener = [{"text": "浙商银行企业信贷部叶老桂博士", "label": {"name": {"叶老桂": [[9, 11]]},
                                                       "company": {"浙商银行": [[0, 3]]}}},
               {"text": "红楼梦的作者是曹雪芹", "label": {"book": {"红楼梦": [[0, 2]]}, "name": {"曹雪芹": [[7, 9]]}}}]
    write(data / "ner/cluener2020/train.json", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in cluener))
    tsv(data / "lexicon/jieba_dict_small/dict_small.tsv", "term\tfreq\tpos", [("王芳", 30, "nr"), ("南京", 400, "ns")])
    jieba_dict = write(tmp_path / "dict.txt", "记者 900 n\n医院 800 n\n电脑 700 n\n新华社 600 nt\n张伟 50 nr\n")
    out = tmp_path / "termtree"
    manifest = train("knowledge_mining", "--data-dir", str(data), "--out", str(out), "--jieba-dict", str(jieba_dict),
                     "--buckets", "256")
    assert manifest.name == "termtree"
    assert manifest["training"]["sources"]["jieba"] == [f"{tmp_path.name}/dict.txt", "jieba_dict_small/dict_small.tsv"]
    assert manifest["training"]["tree"]["entries"] > 10

    # The terms of its sources get their own categories and term ids (CLUENER's book, THUOCL's categories).
    mined = Taskflow("knowledge_mining", task_path=out)(["红楼梦的作者是曹雪芹", "我在杭州吃红烧肉"])
    assert "".join(item["item"] for item in mined[0]["items"]) == "红楼梦的作者是曹雪芹"
    terms = {item["item"]: (item["wordtag_label"], item["termid"]) for result in mined for item in result["items"]}
    assert terms["红楼梦"] == ("作品类_实体", "作品与出版物_eb_红楼梦")
    assert terms["曹雪芹"] == ("人物类_实体", "人物_eb_曹雪芹")
    assert terms["杭州"] == ("世界地区类", "世界地区_eb_杭州")
    assert terms["红烧肉"] == ("饮食类", "饮食_eb_红烧肉")


# --------------------------------------------------------------- reading_comprehension

CONTEXTS = [
    ("杭州市是浙江省的省会，位于中国东南沿海。西湖在杭州市的西面。", [("浙江省的省会是哪里？", "杭州市"), ("西湖在哪里？", "杭州市的西面")]),
    ("曹雪芹是清代作家，他写了红楼梦。红楼梦是中国古典小说。", [("红楼梦是谁写的？", "曹雪芹"), ("曹雪芹是哪个朝代的作家？", "清代")]),
    ("北京大学创办于一八九八年，是中国的一所大学。", [("北京大学创办于哪一年？", "一八九八年"), ("北京大学是什么？", "中国的一所大学")]),
]


def squad(rows) -> str:
    paragraphs = [{"id": f"P{i}", "context": context,
                   "qas": [{"id": f"Q{i}_{j}", "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
                           for j, (q, a) in enumerate(qas)]}
                  for i, (context, qas) in enumerate(rows)]
    return json.dumps({"version": "v1.0", "data": [{"paragraphs": paragraphs}]}, ensure_ascii=False)


def test_reading_comprehension_recipe(tmp_path):
    pytest.importorskip("sklearn")     # char vectors come from scikit-learn's randomized SVD
    data = tmp_path / "cmrc2018"
    write(data / "train.json", squad(CONTEXTS * 3))
    write(data / "trial.json", squad(CONTEXTS[:2]))
    write(data / "dev.json", squad(CONTEXTS[2:]))
    corpus = write(tmp_path / "corpus.txt", "".join(c for c, _ in CONTEXTS) + "\n")
    out = tmp_path / "model"
    manifest = train("reading_comprehension", "--data-dir", str(data), "--out", str(out), "--char-dim", "8",
                     "--hidden", "6", "--layers", "1", "--min-char", "1", "--min-word", "1", "--window", "24",
                     "--max-seq-len", "32", "--doc-stride", "8", "--epochs", "30", "--lr", "0.02", "--batch-size", "4",
                     "--warmup", "2", "--evals", "2", "--pretrain-files", str(corpus))
    assert manifest["training"]["train_file"] == "train.json"
    assert manifest["training"]["char_vectors"]["files"][0] == f"{tmp_path.name}/corpus.txt"
    assert set(manifest["metrics"]) == {"selection", "report"}

    # The passages it trained on (the first is held out for selection): each question gets its own answer,
    # where one span for every question of a passage would be right once at most.
    qa = Taskflow("reading_comprehension", task_path=out)
    trained = [(context, question, answer) for context, qas in CONTEXTS[1:] for question, answer in qas]
    answers = qa([{"context": context, "question": question} for context, question, _ in trained])
    assert all(a["answer"] == context[a["start"]:a["end"]] for a, (context, _, _) in zip(answers, trained))
    assert np.mean([a["answer"] == gold for a, (_, _, gold) in zip(answers, trained)]) >= 0.75, answers
