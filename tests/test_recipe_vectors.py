"""``--vectors DIR``: the reading-comprehension, sentiment and similarity recipes start their
embedding tables from the corpus vectors ``python -m pretraining.vectors`` writes.

A tiny ``vectors.npz`` (and ``vectors.json``) in that format is written here; each recipe's
``start_from_vectors`` fills a tiny network's tables, and a row is checked against the corpus
vector of its token, centred as :func:`taskflow.corpus_vectors.pretrained_embeddings` centres them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from taskflow.corpus_vectors import load_vectors

SOURCES = {"corpus": "/somewhere/shared/data/corpus", "labelled_train": None, "max_chars": 1000,
           "excluded_dev_lines": 0}


def write_vectors(folder: Path, dims: dict[str, int], tokens: dict[str, list[str]], *, seed: int = 0) -> Path:
    """``vectors.npz`` as pretraining/vectors.py writes it (tokens most frequent first, float16 rows)
    and its ``vectors.json``."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for kind, kind_tokens in tokens.items():
        arrays[f"{kind}_tokens"] = np.array(kind_tokens)
        arrays[f"{kind}_counts"] = np.arange(len(kind_tokens), 0, -1, dtype=np.int64) * 10
        arrays[f"{kind}_vectors"] = rng.normal(size=(len(kind_tokens), dims[kind])).astype(np.float16)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "vectors.npz", **arrays)
    (folder / "vectors.json").write_text(json.dumps({"sources": SOURCES, "normalization": ["t2s", "width", "lower",
                                                                                          "space"]}), encoding="utf-8")
    return folder


def centred(folder: Path, kind: str) -> dict[str, np.ndarray]:
    """Each token's corpus vector less the mean vector of its kind."""
    tokens, matrix = load_vectors(folder, kind)
    return dict(zip(tokens, matrix - matrix.mean(axis=0)))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_rows(table: np.ndarray, vocab: list[str], expected: dict[str, np.ndarray], covered: list[str],
                uncovered: list[str]) -> None:
    """``covered`` tokens' rows point along their (centred) corpus vector; ``uncovered`` ones along none."""
    for token in covered:
        assert cosine(table[vocab.index(token)], expected[token]) > 0.999, token
    for token in uncovered:
        row = table[vocab.index(token)]
        assert np.abs(row).sum() > 0 and max(abs(cosine(row, v)) for v in expected.values()) < 0.95, token


def weight(layer) -> np.ndarray:
    return layer.weight.numpy().astype(np.float64)


# --------------------------------------------------------------- reading_comprehension

def test_reading_comprehension_char_table_from_the_vectors_at_the_svd_scale(tmp_path):
    from taskflow.tasks.reading_comprehension.data import FEATURES, Vocab
    from taskflow.tasks.reading_comprehension.model import ReaderNet
    from recipes.reading_comprehension.train import start_from_vectors

    vectors = write_vectors(tmp_path / "vectors", {"char": 8}, {"char": ["的", "杭", "州", "湖", "西", "，"]})
    vocab = Vocab(["[PAD]", "[UNK]", "[NULL]", "杭", "州", "鑫", "西"], [("[PAD]", 0), ("[UNK]", 0)])
    network = ReaderNet(len(vocab.char_list), len(FEATURES), char_dim=8, hidden_size=4, num_layers=1)
    record = start_from_vectors(network, str(vectors), vocab, seed=3)

    table = weight(network.embed)
    assert_rows(table, vocab.char_list, centred(vectors, "char"), ["杭", "州", "西"], ["鑫"])
    # The SVD path's scale: unit rows, pad / unknown / NULL zero.
    assert np.allclose(np.linalg.norm(table[3:], axis=1), 1.0, atol=1e-5) and not table[:3].any()
    assert record["coverage"] == round(3 / 7, 4)
    assert record["vectors"] == f"{tmp_path.name}/vectors"
    assert record["sources"]["corpus"] == "data/corpus" and record["sources"]["max_chars"] == 1000


def test_reading_comprehension_vectors_replace_the_svd_step(capsys):
    from recipes.reading_comprehension.train import parse_args

    assert parse_args(["--data-dir", "d", "--out", "o", "--vectors", "v"]).vectors == "v"
    for other in (["--no-pretrain"], ["--pretrain-files", "corpus.txt"]):
        with pytest.raises(SystemExit):
            parse_args(["--data-dir", "d", "--out", "o", "--vectors", "v", *other])
        assert "--vectors replaces the SVD char vectors" in capsys.readouterr().err


# ------------------------------------------------------------------ sentiment_analysis

def test_sentiment_char_table_and_bigram_buckets_from_the_vectors(tmp_path):
    from recipes.sentiment_analysis.train import start_from_vectors
    from taskflow.tasks.text_classification.model import SentimentNet

    buckets = 4
    vocab = ["[PAD]", "[UNK]", "好", "评", "差", "不", " ", "\u3000", "鑫"]
    bigrams = ["好X", "\x02好", "好评", "差评", "不好", "不差", "好 ", "评不", "差不", "好好", "评评"]
    vectors = write_vectors(tmp_path, {"char": 8, "bigram": 6},
                            {"char": ["的", "好", "评", "差", "不", " ", "X"], "bigram": bigrams})
    net = SentimentNet(len(vocab), embed_dim=8, bigram_buckets=buckets, ngram_dim=6, conv_channels=2, max_kernel=1,
                       wide_buckets=16)
    record = start_from_vectors(net, str(vectors), vocab, seed=5)

    chars = centred(vectors, "char")
    # The ideographic space is this model's own char, the vectors' plain space.
    chars["\u3000"] = chars[" "]
    assert_rows(weight(net.char_emb), vocab, chars, ["好", "评", "差", "不", " ", "\u3000"], ["鑫"])

    # Each bucket holds the most frequent corpus bigram the model hashes into it (the hash model.py
    # documents); a bigram with a char outside the vocabulary ("X", the BOS mark) takes none.
    ids = {c: i for i, c in enumerate(vocab)}
    expected: dict[int, str] = {}
    for bigram in bigrams:
        if bigram[0] in ids and bigram[1] in ids:
            expected.setdefault((ids[bigram[0]] * 1000003 + ids[bigram[1]]) % (buckets - 1) + 1, bigram)
    assert len(expected) == buckets - 1 and "好评" in expected.values()
    table, corpus = weight(net.bigram_emb), centred(vectors, "bigram")
    for bucket, bigram in expected.items():
        assert cosine(table[bucket], corpus[bigram]) > 0.999, (bucket, bigram)
        assert max(cosine(table[bucket], corpus[b]) for b in bigrams if b != bigram) < 0.999
    assert not table[0].any()
    assert record["coverage"] == {"char": round(6 / 9, 4), "bigram_buckets": 0.75}
    assert record["sources"]["corpus"] == "data/corpus"


def test_sentiment_bigram_buckets_are_the_ones_the_network_looks_up(tmp_path):
    """Through the network itself: the bigram features of "好评" are its corpus vector's direction."""
    import paddle

    from recipes.sentiment_analysis.train import start_from_vectors
    from taskflow.tasks.text_classification.model import SentimentNet, hash_ngrams

    vocab = ["[PAD]", "[UNK]", "好", "评"]
    vectors = write_vectors(tmp_path, {"char": 4, "bigram": 6}, {"char": ["好", "评"], "bigram": ["评好", "好评", "好好"]})
    net = SentimentNet(len(vocab), embed_dim=4, bigram_buckets=1000, ngram_dim=6, conv_channels=2, max_kernel=1)
    start_from_vectors(net, str(vectors), vocab, seed=0)
    ids = paddle.to_tensor(np.array([[2, 3]], dtype="int64"))
    bucket = int(hash_ngrams(ids, (ids > 0).astype("int64"), 2, net.bigram_buckets).numpy()[0, 0])
    assert cosine(weight(net.bigram_emb)[bucket], centred(vectors, "bigram")["好评"]) > 0.999


# --------------------------------------------------------------------- text_similarity

@pytest.mark.parametrize("arch", ["match", "siamese"])
def test_similarity_char_and_word_tables_from_the_vectors(tmp_path, arch):
    from taskflow.tasks.text_similarity.features import Vocab
    from taskflow.tasks.text_similarity.model import build
    from taskflow.tasks.text_similarity.train import start_from_vectors

    vectors = write_vectors(tmp_path / "v", {"char": 8, "word": 6},
                            {"char": ["的", "微", "信", "密", "码"], "word": ["的", "微信", "密码", "怎么"]})
    vocab = Vocab(["[PAD]", "[UNK]", "微", "信", "密", "码", "鑫"],
                  [("[PAD]", 0), ("[UNK]", 0), ("微信", 3), ("密码", 2), ("鑫鑫", 2)])
    network = build({"type": arch, "vocab_size": len(vocab.char_list), "word_vocab_size": len(vocab.word_list),
                     "char_dim": 8, "word_dim": 6, "hidden_size": 4, "enc_layers": 1, "kernel_size": 3,
                     "dropout": 0.0})
    record = start_from_vectors(network, str(vectors / "vectors.npz"), vocab, seed=2)

    assert_rows(weight(network.embed.char_emb), vocab.char_list, centred(vectors, "char"), ["微", "信", "密", "码"],
                ["鑫"])
    assert_rows(weight(network.embed.word_emb), vocab.word_list, centred(vectors, "word"), ["微信", "密码"], ["鑫鑫"])
    assert record["coverage"] == {"char": round(4 / 7, 4), "word": 0.4}
    assert record["vectors"] == "v/vectors.npz" and record["sources"]["max_chars"] == 1000


def test_similarity_recipe_ships_the_vectors_tables(tmp_path):
    """An end-to-end run with --lr 0: the shipped char table is the one the vectors gave, and the
    manifest says which vectors and how much of the vocabulary they covered."""
    pytest.importorskip("jieba")
    from taskflow.cli import main as cli
    from taskflow.manifest import Manifest
    from taskflow.tasks.text_similarity.features import Vocab

    same = [("怎么修改微信密码", "微信密码怎么改"), ("明天天气怎么样", "明天天气如何"), ("信用卡怎么还款", "信用卡如何还款")]
    different = [("怎么修改微信密码", "明天天气怎么样"), ("信用卡怎么还款", "微信密码怎么改"), ("明天天气如何", "信用卡如何还款")]
    rows = [(a, b, 1) for a, b in same] + [(a, b, 0) for a, b in different]
    train = tmp_path / "pairs.tsv"
    train.write_text("text1\ttext2\tlabel\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows * 3), encoding="utf-8")
    vectors = write_vectors(tmp_path / "vectors", {"char": 8, "word": 4},
                            {"char": ["的", "微", "信", "密", "码", "天"], "word": ["微信", "密码", "明天", "的"]})
    out = tmp_path / "model"
    assert cli(["train", "text_similarity", "--train", str(train), "--out", str(out), "--char-dim", "8",
                "--word-dim", "4", "--hidden", "4", "--epochs", "1", "--lr", "0", "--vectors", str(vectors),
                "--quiet"]) == 0

    record = Manifest.load(out / "manifest.json")["training"]["pretrained_embeddings"]
    assert record["vectors"] == f"{tmp_path.name}/vectors" and record["sources"]["corpus"] == "data/corpus"
    assert 0 < record["coverage"]["char"] < 1 and 0 < record["coverage"]["word"] < 1
    vocab = Vocab.load(out / "vocab.json")
    with np.load(out / "weights.npz") as weights:
        chars = weights[next(k for k in weights.files if k.endswith("char_emb.weight"))].astype(np.float64)
    assert_rows(chars, vocab.char_list, centred(vectors, "char"), ["微", "信", "密", "码", "天"], ["明", "怎"])


# ------------------------------------------------------------------ the recipes end to end

POSITIVE = ["这家酒店很干净，服务也好", "房间很大，早餐好吃", "快递很快，质量不错", "菜很好吃，价格实惠"]
NEGATIVE = ["等了一个小时还没上菜", "房间很脏，服务太差", "快递太慢，质量很差", "菜太咸了，价格太贵"]


def test_sentiment_recipe_ships_the_vectors_tables(tmp_path):
    """A tiny run with --lr 0: the shipped char table and the bucket of "好吃" are the vectors'."""
    from recipes.sentiment_analysis.train import main as recipe
    from taskflow.manifest import Manifest

    data = tmp_path / "sentiment"
    for folder, files in {"chnsenticorp": ("train", "dev", "test", "test.dedup"),
                          "online_shopping_10_cats": ("train", "dev", "test"),
                          "waimai_10k": ("train", "dev", "test")}.items():
        (data / folder).mkdir(parents=True)
        for name in files:
            (data / folder / f"{name}.tsv").write_text(
                "label\ttext\n" + "".join(f"1\t{t}\n" for t in POSITIVE) + "".join(f"0\t{t}\n" for t in NEGATIVE),
                encoding="utf-8")
    vectors = write_vectors(tmp_path / "vectors", {"char": 8, "bigram": 4},
                            {"char": ["的", "好", "吃", "菜", "贵"], "bigram": ["好吃", "很好", "太贵", "菜很"]})
    out = tmp_path / "model"
    assert recipe(["--data-dir", str(data), "--out", str(out), "--min-freq", "1",
                   "--embed-dim", "8", "--bigram-buckets", "64", "--ngram-dim", "4", "--conv-channels", "2",
                   "--max-kernel", "1", "--wide-buckets", "64", "--batch-size", "8", "--epochs", "1",
                   "--wide-epochs", "1", "--max-len", "16", "--lr", "0", "--augment", "none", "--skip-calibration",
                   "--social-sets", "none", "--vectors", str(vectors)]) == 0

    record = Manifest.load(out / "manifest.json")["training"]["pretrained_embeddings"]
    assert record["vectors"] == f"{tmp_path.name}/vectors" and 0 < record["coverage"]["char"] < 1
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    with np.load(out / "weights.npz") as weights:
        chars, bigrams = (weights[name].astype(np.float64) for name in ("char_emb.weight", "bigram_emb.weight"))
    assert_rows(chars, vocab, centred(vectors, "char"), ["好", "吃", "菜", "贵"], ["酒", "店"])
    bucket = (vocab.index("好") * 1000003 + vocab.index("吃")) % 63 + 1
    assert cosine(bigrams[bucket], centred(vectors, "bigram")["好吃"]) > 0.999


def test_reading_comprehension_recipe_ships_the_vectors_char_table(tmp_path):
    """A tiny run with --lr 0: the shipped char table is the vectors' at unit length, and the
    manifest's char_vectors names them."""
    pytest.importorskip("jieba")
    from recipes.reading_comprehension.train import main as recipe
    from taskflow.manifest import Manifest

    context = "杭州市是浙江省的省会，位于中国东南沿海。西湖在杭州市的西面。"
    qas = [("浙江省的省会是哪里？", "杭州市"), ("西湖在哪里？", "杭州市的西面")]
    squad = {"data": [{"paragraphs": [{"id": f"P{i}", "context": context + "。" * i,
                                       "qas": [{"id": f"Q{i}_{j}", "question": q,
                                                "answers": [{"text": a, "answer_start": context.index(a)}]}
                                               for j, (q, a) in enumerate(qas)]} for i in range(4)]}]}
    data = tmp_path / "cmrc"
    data.mkdir()
    (data / "train.json").write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    vectors = write_vectors(tmp_path / "vectors", {"char": 8}, {"char": ["的", "杭", "州", "西", "湖", "省"]})
    out = tmp_path / "model"
    assert recipe(["--data-dir", str(data), "--out", str(out), "--char-dim", "8",
                   "--hidden", "4", "--layers", "1", "--min-char", "1", "--min-word", "1", "--window", "24",
                   "--max-seq-len", "32", "--doc-stride", "8", "--max-answer-len", "6", "--epochs", "1",
                   "--batch-size", "4", "--warmup", "1", "--evals", "1", "--lr", "0", "--report", "", "--unanswerable", "",
                   "--vectors", str(vectors)]) == 0

    record = Manifest.load(out / "manifest.json")["training"]["char_vectors"]
    assert record["vectors"] == f"{tmp_path.name}/vectors" and record["sources"]["corpus"] == "data/corpus"
    from taskflow.tasks.reading_comprehension.data import Vocab

    vocab = Vocab.load(out / "vocab.json")
    with np.load(out / "weights.npz") as weights:
        chars = weights["embed.weight"].astype(np.float64)
    assert_rows(chars, vocab.char_list, centred(vectors, "char"), ["杭", "州", "西", "湖", "省"], ["浙", "江"])
    assert np.allclose(np.linalg.norm(chars[3:], axis=1), 1.0, atol=1e-2)     # float16 as shipped
