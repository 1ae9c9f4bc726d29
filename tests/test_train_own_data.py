"""``taskflow train TASK --train FILE --dev FILE``: a user's own labelled files in, a package out that
``Taskflow(task, task_path=...)`` runs with the user's labels.

Every data set here is written by the test and learnable (a label follows from words in the text),
so a model that did not learn fails the dev-accuracy checks; the networks are tiny, so each
training run takes a few seconds.  Malformed files must fail before training, naming file and line.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.cli import main as cli
from taskflow.errors import ModelNotFoundError
from taskflow.manifest import Manifest

TOPICS = {"1": "差烂慢坏贵脏吵", "3": "一般还行凑合普通", "5": "好棒快美赞香净"}
FILLER = "我们今天觉得这个那个非常真的还是有点东西"
TINY_CNN = ("--embed-dim", "16", "--bigram-buckets", "512", "--ngram-dim", "8", "--conv-channels", "16",
            "--max-kernel", "3", "--lr", "0.01", "--batch-size", "16")


def review(rng: random.Random, label: str) -> str:
    chars = [rng.choice(TOPICS[label]) for _ in range(3)] + [rng.choice(FILLER) for _ in range(6)]
    rng.shuffle(chars)
    return "".join(chars)


def reviews(seed: int, count: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(review(rng, label), label) for label in list(TOPICS) * (count // len(TOPICS))]


def write_csv(path: Path, header: list[str], rows, delimiter: str = ",", encoding: str = "utf-8") -> Path:
    with open(path, "w", newline="", encoding=encoding) as handle:
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def train(task: str, *options: str) -> Manifest:
    assert cli(["train", task, *options]) == 0
    return Manifest.load(Path(options[options.index("--out") + 1]) / "manifest.json")


def agreement(flow, texts: list[str], labels: list[str]) -> float:
    return sum(r["label"] == label for r, label in zip(flow(texts), labels)) / len(texts)


# ------------------------------------------------------------------ text_classification

def test_text_classification_from_csv_learns_the_users_labels(tmp_path, capsys):
    train_file = write_csv(tmp_path / "train.csv", ["id", "review", "stars"],
                           [(i, text, label) for i, (text, label) in enumerate(reviews(0, 150))])
    dev_rows = reviews(1, 45)
    dev_file = write_csv(tmp_path / "dev.csv", ["review", "stars"], dev_rows)
    out = tmp_path / "stars_model"
    manifest = train("text_classification", "--train", str(train_file), "--dev", str(dev_file), "--text-field", "review",
                     "--label-field", "stars", "--out", str(out), "--epochs", "4", *TINY_CNN)

    assert manifest.task == "text_classification" and manifest.name == "stars_model"
    assert manifest["labels"] == ["1", "3", "5"]
    report = manifest["metrics"]["dev"]
    assert report["examples"] == 45 and report["accuracy"] >= 0.8, report       # chance is 1/3
    assert {label: row["train"] for label, row in report["per_label"].items()} == {"1": 50, "3": 50, "5": 50}
    assert {label: row["dev"] for label, row in report["per_label"].items()} == {"1": 15, "3": 15, "5": 15}
    assert manifest["training"]["best_epoch"] == max(manifest["training"]["history"],
                                                     key=lambda h: h["dev_accuracy"])["epoch"]
    printed = capsys.readouterr().out
    assert "dev report (45 examples" in printed and f"accuracy {report['accuracy']:.4f}" in printed

    flow = Taskflow("text_classification", task_path=out, return_all_scores=True)
    results = flow([text for text, _ in dev_rows])
    assert {r["label"] for r in results} <= {"1", "3", "5"}
    assert set(results[0]["scores"]) == {"1", "3", "5"}
    # The package Taskflow runs (static graph) is the one the report measured.
    assert agreement(flow, [t for t, _ in dev_rows], [label for _, label in dev_rows]) == pytest.approx(
        report["accuracy"], abs=1 / 45)


def test_text_classification_from_gbk_tsv_with_held_out_dev_and_a_time_budget(tmp_path):
    rows = reviews(2, 120)
    train_file = write_csv(tmp_path / "train.tsv", ["text", "label"], rows, delimiter="\t", encoding="gbk")
    out = tmp_path / "model"
    manifest = train("text_classification", "--train", str(train_file), "--encoding", "gbk", "--out", str(out),
                     "--epochs", "50", "--minutes", "0.0001", "--quiet", *TINY_CNN)
    history = manifest["training"]["history"]
    assert len(history) == 1 and history[0]["stopped"] == "--minutes 0.0001 spent"
    # No --dev: a share of each label is held out, and the report says so.
    assert manifest["training"]["examples"] == {"train": 108, "dev": 12}
    assert manifest["metrics"]["dev"]["file"] == f"0.1 of {tmp_path.name}/train.tsv"
    assert all(row["dev"] == 4 for row in manifest["metrics"]["dev"]["per_label"].values())


def test_a_bigru_beside_the_cnn_is_padding_invariant_and_exports(tmp_path):
    """--rnn-size: the deep part also reads the text in order; a text's scores do not depend on the
    longer texts padded into its batch, and the static export agrees with the dynamic graph."""
    train_file = write_csv(tmp_path / "train.csv", ["text", "label"], reviews(3, 90))
    out = tmp_path / "gru"
    manifest = train("text_classification", "--train", str(train_file), "--out", str(out), "--epochs", "2",
                     "--rnn-size", "4", "--quiet", *TINY_CNN)
    assert manifest["architecture"]["rnn_size"] == 4
    texts = [text for text, _ in reviews(4, 6)]
    flow = Taskflow("text_classification", task_path=out, return_all_scores=True, batch_size=8)
    alone = [flow([text])[0]["scores"] for text in texts]
    batched = flow(texts + [texts[0] * 20])[:-1]
    for one, many in zip(alone, batched):
        assert many["scores"] == pytest.approx(one, abs=1e-5)
    dynamic = Taskflow("text_classification", task_path=out, return_all_scores=True, static=False)(texts)
    assert [r["scores"] for r in dynamic] == [pytest.approx(r["scores"], abs=1e-5) for r in batched]


def test_negation_scope_swaps_the_wide_weights_of_the_chars_after_a_negator():
    """--negation-window: 好 after 不 (up to a clause break) weighs as the 好 of 很好 with the labels
    swapped, before any negated example is seen; a correction table can undo the swap (不过)."""
    import paddle

    from taskflow.tasks.text_classification.model import SentimentNet

    vocab = ["[PAD]", "[UNK]", "不", "很", "好", "吃", ","]
    ids = {c: i for i, c in enumerate(vocab)}
    net = SentimentNet(len(vocab), embed_dim=8, bigram_buckets=0, conv_channels=4, max_kernel=1,
                       wide_buckets=64, deep_weight=0.0, negator_ids=[ids["不"]], clause_break_ids=[ids[","]],
                       negation_window=2)
    net.eval()

    def encode(*texts):
        return paddle.to_tensor([[ids[c] for c in text] for text in texts], dtype="int64")

    assert net.negated(encode("不好吃吃", "不,好吃", "很好不好")).numpy().tolist() == [
        [0, 1, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]]
    assert not net.wide_negated.weight.numpy().any()      # the correction starts at zero
    for name, weight in net.named_parameters():
        if name.startswith("wide_") and name != "wide_negated.weight":
            weight.set_value(np.zeros(weight.shape, dtype="float32"))
    uni = net.wide_uni.weight.numpy()
    uni[ids["好"]] = [0.0, 5.0]                       # 好 alone: praise
    net.wide_uni.weight.set_value(uni)
    praise, negated = net.wide_logits(encode("很好", "不好")).numpy()
    broken = net.wide_logits(encode("不,好")).numpy()[0]
    assert praise[1] - praise[0] > 1 and negated[0] - negated[1] > 1   # 不好: a complaint, never taught
    assert broken[1] - broken[0] > 1                                    # a clause break ends the scope
    net.wide_negated.weight.set_value(np.tile(np.array([[-5.0, 5.0]], dtype="float32"), [64, 1]))
    negated = net.wide_logits(encode("不好")).numpy()[0]
    assert negated[1] > negated[0]                                      # the correction undoes the swap


def test_a_negator_inside_an_exception_word_negates_nothing():
    """不过 (but) and 不得不 (have to) hold 不 and negate nothing; 不 elsewhere still does."""
    import paddle

    from taskflow.tasks.text_classification.model import SentimentNet

    vocab = ["[PAD]", "[UNK]", "不", "过", "得", "好", "说"]
    ids = {c: i for i, c in enumerate(vocab)}
    net = SentimentNet(len(vocab), embed_dim=4, bigram_buckets=0, conv_channels=2, max_kernel=1,
                       negator_ids=[ids["不"]], negation_window=2,
                       negation_exception_ids=[[ids[c] for c in "不过"], [ids[c] for c in "不得不"]])
    rows = [[ids[c] for c in text] for text in ("不过好好好", "不得不说好", "好不好过好")]
    assert net.negated(paddle.to_tensor(rows, dtype="int64")).numpy().tolist() == [
        [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 1, 1, 0]]


def test_polarity_head_flips_a_words_polarity_in_a_negators_scope_and_weighs_the_clause_after_but():
    """--polarity-head: a char's polarity counts with the opposite sign after a negator whose gate
    opens (and as it is when the gate shuts), and attention after 但 outweighs what came before."""
    import paddle

    from taskflow.tasks.text_classification.model import SentimentNet

    vocab = ["[PAD]", "[UNK]", "不", "很", "好", "差", ",", "但"]
    ids = {c: i for i, c in enumerate(vocab)}
    net = SentimentNet(len(vocab), embed_dim=4, bigram_buckets=0, conv_channels=2, max_kernel=1, dropout=0.0,
                       negator_ids=[ids["不"]], clause_break_ids=[ids[","]], negation_window=2,
                       polarity_head=True, contrast_ids=[[ids["但"]]])
    net.eval()

    def polarity(*texts, gate=10.0, bonus=0.0):
        net.flip_gate.bias.set_value(np.array([gate], dtype="float32"))
        net.contrast_bonus.set_value(np.array([bonus], dtype="float32"))
        x = paddle.to_tensor([[ids[c] for c in text] for text in texts], dtype="int64")
        mask = (x > 0).astype("float32").unsqueeze(-1)
        plain = net.char_emb(x) * mask
        convolved = paddle.zeros([x.shape[0], x.shape[1], 2])     # attention even, the gate its bias alone
        return net.polarity(x, plain, convolved, mask).numpy()[:, 0]

    # The lexicon reads one embedding column: 好 +1, 差 -1, everything else 0.
    table = np.zeros((len(vocab), 4), dtype="float32")
    table[ids["好"], 0], table[ids["差"], 0] = 1.0, -1.0
    net.char_emb.weight.set_value(table)
    net.lexicon.weight.set_value(np.array([[1.0], [0], [0], [0]], dtype="float32"))
    net.lexicon.bias.set_value(np.zeros([1], dtype="float32"))
    net.flip_gate.weight.set_value(np.zeros([2, 1], dtype="float32"))
    good, not_good, not_bad = polarity("很好", "不好", "不差")
    assert good > 0 and not_good < 0 and not_bad > 0
    assert polarity("不,好")[0] > 0                                  # a clause break ends the scope
    assert polarity("不好", gate=-10.0)[0] > 0                        # a shut gate leaves 好 as it is
    assert net.after_contrast(paddle.to_tensor([[ids[c] for c in "好但差差"]], dtype="int64")).numpy().tolist() \
        == [[0.0, 1.0, 1.0, 1.0]]
    even, after_but = polarity("好好但差")[0], polarity("好好但差", bonus=5.0)[0]
    assert even > 0 > after_but                                      # 但 hands the verdict to 差


@pytest.mark.parametrize("head", [(), ("--polarity-head",)], ids=["scope", "polarity_head"])
def test_a_negation_scope_model_trains_and_exports(tmp_path, head):
    train_file = write_csv(tmp_path / "train.csv", ["text", "label"],
                           [(("不" if i % 3 == 0 else "") + text, label) for i, (text, label) in enumerate(reviews(3, 90))])
    out = tmp_path / "neg"
    manifest = train("text_classification", "--train", str(train_file), "--out", str(out), "--epochs", "2",
                     "--negation-window", "3", *head, "--quiet", *TINY_CNN)
    assert manifest["architecture"]["negation_window"] == 3 and len(manifest["architecture"]["negator_ids"]) == 1
    assert manifest["architecture"].get("polarity_head", False) == bool(head)
    texts = ["不" + text for text, _ in reviews(4, 6)]
    static = Taskflow("text_classification", task_path=out, return_all_scores=True, batch_size=8)
    scores = static(texts)
    dynamic = Taskflow("text_classification", task_path=out, return_all_scores=True, static=False)(texts)
    assert [r["scores"] for r in dynamic] == [pytest.approx(r["scores"], abs=1e-5) for r in scores]
    padded = static(texts + [texts[0] * 20])[:-1]      # padding changes nothing (the head's softmax too)
    assert [r["scores"] for r in padded] == [pytest.approx(r["scores"], abs=1e-5) for r in scores]


def test_text_classification_needs_a_trained_model():
    with pytest.raises(ModelNotFoundError, match="taskflow train text_classification --train"):
        Taskflow("text_classification")


# -------------------------------------------------------------------- sentiment_analysis

def test_sentiment_from_jsonl_keeps_0_1_as_negative_positive(tmp_path):
    rng = random.Random(3)
    good, bad = "好棒赞美香", "差烂坏慢贵"

    def record(i):
        label = i % 2
        return {"review": review_like(rng, good if label else bad), "stars": label}

    def review_like(rng, words):
        chars = [rng.choice(words) for _ in range(3)] + [rng.choice(FILLER) for _ in range(5)]
        rng.shuffle(chars)
        return "".join(chars)

    train_file = write_jsonl(tmp_path / "train.jsonl", [record(i) for i in range(100)])
    dev_records = [record(i) for i in range(30)]
    dev_file = write_jsonl(tmp_path / "dev.jsonl", dev_records)
    out = tmp_path / "senta"
    manifest = train("sentiment_analysis", "--train", str(train_file), "--dev", str(dev_file), "--text-field", "review",
                     "--label-field", "stars", "--out", str(out), "--epochs", "4", *TINY_CNN)
    assert manifest["labels"] == ["negative", "positive"] and manifest["training"]["labels_in_file"] == ["0", "1"]
    assert manifest["metrics"]["dev"]["accuracy"] >= 0.8
    assert manifest.name == "senta"      # named after --out, not after the shipped char_cnn

    flow = Taskflow("sentiment_analysis", task_path=out)
    expected = ["positive" if r["stars"] else "negative" for r in dev_records]
    assert agreement(flow, [r["review"] for r in dev_records], expected) >= 0.8


def test_sentiment_trains_on_your_own_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli(["train", "sentiment_analysis", "--out", str(tmp_path / "m")])
    assert "--train FILE is required" in capsys.readouterr().err
    # The public data's recipe is not the CLI's: it says what the CLI trains on.
    with pytest.raises(SystemExit):
        cli(["train", "sentiment_analysis", "--data-dir", str(tmp_path), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert "trains on your own labelled file: give --train FILE" in err and "shared" not in err


# ---------------------------------------------------------------------- text_similarity

QUESTIONS = {"password": ["怎么修改微信密码", "微信密码怎么改", "忘记微信密码了", "微信密码如何重置"],
             "card": ["信用卡怎么还款", "信用卡如何还款", "信用卡还款方式", "怎样还信用卡"],
             "weather": ["明天天气怎么样", "明天天气如何", "明天会下雨吗", "明天的天气预报"],
             "delivery": ["快递多久能到", "快递几天能到", "快递什么时候到", "快递要多长时间"]}


def question_pairs(seed: int, count: int) -> list[tuple[str, str, int]]:
    rng, topics = random.Random(seed), list(QUESTIONS)
    rows = []
    for i in range(count):
        topic = rng.choice(topics)
        if i % 2:
            rows.append((*rng.sample(QUESTIONS[topic], 2), 1))
        else:
            other = rng.choice([t for t in topics if t != topic])
            rows.append((rng.choice(QUESTIONS[topic]), rng.choice(QUESTIONS[other]), 0))
    return rows


@pytest.mark.parametrize("rnn_size", [0, 4])
def test_text_similarity_from_tsv_pairs(tmp_path, rnn_size):
    pytest.importorskip("jieba")      # the word list of the user's texts is found with jieba
    train_file = write_csv(tmp_path / "train.tsv", ["text_a", "text_b", "label"], question_pairs(4, 240), "\t")
    dev_rows = question_pairs(5, 40)
    dev_file = write_csv(tmp_path / "dev.tsv", ["text_a", "text_b", "label"], dev_rows, "\t")
    out = tmp_path / "pairs_model"
    manifest = train("text_similarity", "--train", str(train_file), "--dev", str(dev_file), "--text-field",
                     "text_a,text_b", "--out", str(out), "--epochs", "3", "--char-dim", "16", "--word-dim", "8",
                     "--hidden", "16", "--rnn-size", str(rnn_size), "--quiet")
    report = manifest["metrics"]["dev"]
    assert report["accuracy"] >= 0.75, report        # half the pairs are the same question
    assert {label: row["dev"] for label, row in report["per_label"].items()} == {"0": 20, "1": 20}
    assert manifest["architecture"]["type"] == "siamese" and len(manifest["training"]["history"]) == 3
    assert manifest["architecture"].get("rnn_size", 0) == rnn_size

    flow = Taskflow("text_similarity", task_path=out, return_embeddings=True)
    results = flow([(a, b) for a, b, _ in dev_rows])
    assert all(r["label"] in (0, 1) and "embedding1" in r for r in results)
    right = sum(r["label"] == label for r, (_, _, label) in zip(results, dev_rows)) / len(dev_rows)
    assert right == pytest.approx(report["accuracy"], abs=1 / 40)


# -------------------------------------------------------------------------------- ner

PEOPLE = ["李明", "王芳", "张伟", "刘洋", "陈静", "赵磊", "周杰", "吴敏", "孙悦", "郑强"]
CITIES = ["北京", "上海", "杭州", "南京", "成都", "武汉"]
COMPANIES = ["华为", "腾讯", "阿里巴巴", "百度", "小米"]
TEMPLATES = ["{PER}昨天去{GPE}出差了", "{PER}在{COMPANY}工作", "{COMPANY}在{GPE}开了新店", "听说{PER}要去{GPE}",
             "我们在{GPE}见到了{PER}"]


def entity_sentences(seed: int, count: int) -> list[tuple[str, list[tuple[int, int, str]]]]:
    rng, out = random.Random(seed), []
    names = {"PER": PEOPLE, "GPE": CITIES, "COMPANY": COMPANIES}
    for _ in range(count):
        text, spans = "", []
        for part in re.split(r"(\{\w+\})", rng.choice(TEMPLATES)):
            if part.startswith("{"):
                word = rng.choice(names[part[1:-1]])
                spans.append((len(text), len(text) + len(word), part[1:-1]))
                text += word
            else:
                text += part
        out.append((text, spans))
    return out


def bio(sentences) -> str:
    blocks = []
    for text, spans in sentences:
        tags = ["O"] * len(text)
        for start, end, label in spans:
            tags[start:end] = [f"B-{label}"] + [f"I-{label}"] * (end - start - 1)
        blocks.append("".join(f"{char} {tag}\n" for char, tag in zip(text, tags)))
    return "\n".join(blocks)


def cluener(sentences) -> list[dict]:
    records = []
    for text, spans in sentences:
        label: dict = {}
        for start, end, kind in spans:
            label.setdefault(kind, {}).setdefault(text[start:end], []).append([start, end - 1])   # end inclusive
        records.append({"text": text, "label": label})
    return records


TINY_TAGGER = ("--char-dim", "16", "--bigram-dim", "8", "--hidden-size", "16", "--batch-size", "8", "--lr", "0.02")


def check_ner_package(out: Path, dev, manifest: Manifest, types=("COMPANY", "GPE", "PER")) -> None:
    report = manifest["metrics"]["dev"]
    assert manifest.task == "lexical_analysis" and manifest["entity_labels"] == list(types)
    assert report["f1"] >= 0.6, report
    assert {label: row["dev"] for label, row in report["per_label"].items()} == {
        kind: sum(s[2] == kind for _, spans in dev for s in spans) for kind in types}

    flow = Taskflow("ner", task_path=out)
    results = flow([text for text, _ in dev])
    found = [{(e["start"], e["end"], e["label"]) for e in r["entities"]} for r in results]
    assert all(e["text"] == r["text"][e["start"]:e["end"]] for r in results for e in r["entities"])
    assert {e["label"] for r in results for e in r["entities"]} <= set(types)
    gold = [set(spans) for _, spans in dev]
    correct = sum(len(f & g) for f, g in zip(found, gold))
    assert correct / sum(map(len, gold)) == pytest.approx(report["recall"], abs=0.02)


def test_ner_from_bio_files(tmp_path):
    dev = entity_sentences(7, 30)
    train_file = tmp_path / "train.bio"
    train_file.write_text(bio(entity_sentences(6, 120)), encoding="utf-8")
    dev_file = tmp_path / "dev.bio"
    dev_file.write_text("\ufeff" + bio(dev), encoding="utf-8")      # a BOM is not the first character
    out = tmp_path / "my_ner"
    manifest = train("ner", "--train", str(train_file), "--dev", str(dev_file), "--out", str(out),
                     "--epochs", "6", *TINY_TAGGER)
    check_ner_package(out, dev, manifest)
    # The user's types are the default entity labels, and entity_labels picks among them.
    (only,) = Taskflow("ner", task_path=out, entity_labels=["PER"])(["李明在华为工作"])
    assert {e["label"] for e in only["entities"]} <= {"PER"}


def test_ner_from_cluener_json_lines(tmp_path):
    dev = entity_sentences(9, 30)
    # A company inside a book title (CLUENER's own train has one): one tag a character cannot hold both.
    nested = {"text": "他在读《华为的故事》", "label": {"book": {"《华为的故事》": [[3, 9]]}, "COMPANY": {"华为": [[4, 5]]}}}
    train_file = write_jsonl(tmp_path / "train.json", [*cluener(entity_sentences(8, 120)), nested])
    dev_file = write_jsonl(tmp_path / "dev.json", cluener(dev))
    out = tmp_path / "cluener_model"
    manifest = train("ner", "--train", str(train_file), "--dev", str(dev_file), "--out", str(out),
                     "--epochs", "6", "--quiet", *TINY_TAGGER)
    check_ner_package(out, dev, manifest, types=["COMPANY", "GPE", "PER", "book"])
    assert manifest["training"]["overlapping_mentions_left_out"] == [
        {"file": f"{tmp_path.name}/train.json", "line": 121, "mention": "华为", "type": "COMPANY"}]


# --------------------------------------------------------------------- malformed files

GOOD_CSV = "text,label\n" + "".join(f"{text},{label}\n" for text, label in reviews(10, 9))

MALFORMED = {
    "csv missing label column": ("text_classification", {"train.csv": "text,stars\n很好,5\n"}, [],
                                 "train.csv: no column 'label'", "--label-field"),
    "csv row with a stray comma": ("text_classification", {"train.csv": GOOD_CSV + "很好,还行,3\n"}, [],
                                   "train.csv:11: 3 field(s)", "fix or delete that line"),
    "csv empty text": ("text_classification", {"train.csv": GOOD_CSV.replace("\n", "\n,5\n", 1)}, [],
                       "train.csv:2: 'text' is empty", "fill it in or delete the line"),
    "jsonl missing key": ("text_classification",
                          {"train.jsonl": '{"text": "很好", "label": "5"}\n{"text": "很差"}\n'}, [],
                          "train.jsonl:2: no key 'label'", "--label-field"),
    "jsonl float label": ("text_classification",
                          {"train.jsonl": '{"text": "很好", "label": 5}\n{"text": "很差", "label": 1.0}\n'}, [],
                          "train.jsonl:2: label 'label' is 1.0 (float)", "write it as the integer 1"),
    "jsonl bool label": ("text_classification",
                         {"train.jsonl": '{"text": "很好", "label": true}\n{"text": "很差", "label": false}\n'}, [],
                         "train.jsonl:1: label 'label' is True (bool)", 'write it as a string ("True")'),
    "empty file": ("text_classification", {"train.csv": ""}, [], "train.csv holds no examples", "empty"),
    "header row again": ("text_classification", {"train.csv": GOOD_CSV + GOOD_CSV}, [],
                         "train.csv:11: the header row again (text, label)", "delete that line"),
    "one label": ("text_classification", {"train.csv": "text,label\n很好,5\n不错,5\n"}, [],
                  "every example has the label '5'", "two labels or more"),
    "dev label unseen in train": ("text_classification",
                                  {"train.csv": GOOD_CSV, "dev.csv": "text,label\n很好,5\n很差,2\n"},
                                  ["--dev", "dev.csv"], "dev.csv:3: label '2' never occurs", "add examples of '2'"),
    "pair label not 0/1": ("text_similarity", {"train.tsv": "text1\ttext2\tlabel\n你好\t您好\t1\n你好\t再见\tyes\n"}, [],
                           "train.tsv:3: label 'yes'", "1 (same meaning) or 0"),
    "bio I- after O": ("ner", {"train.bio": "李 B-PER\n明 I-PER\n在 O\n京 I-LOC\n"}, [],
                       "train.bio:4: 'I-LOC' follows 'O'", "make it B-LOC"),
    "bio unknown tag": ("ner", {"train.bio": "李 B-PER\n明 PER\n"}, [], "train.bio:2: tag 'PER' is not O, B-TYPE",
                        "fix the tag"),
    "bio line without a tag": ("ner", {"train.bio": "李 B-PER\n明\n"}, [], "train.bio:2: '明' is not a token and its tag",
                               "blank line between sentences"),
    "cluener offsets": ("ner", {"train.json": json.dumps({"text": "李明在北京", "label": {"PER": {"李明": [[0, 2]]}}},
                                                         ensure_ascii=False) + "\n"}, [],
                        "train.json:1: mention '李明' of 'PER' at [0, 2] reads '李明在'", "end inclusive"),
    "ner dev type unseen": ("ner", {"train.bio": "李 B-PER\n明 I-PER\n", "dev.bio": "北 B-LOC\n京 I-LOC\n"},
                            ["--dev", "dev.bio"], "dev.bio:1: entity type 'LOC'", "add examples of 'LOC'"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_a_malformed_file_names_its_line_and_the_fix(tmp_path, monkeypatch, capsys, case):
    task, files, extra, where, fix = MALFORMED[case]
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli(["train", task, "--train", next(iter(files)), *extra, "--out", "model", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("taskflow: error: ") and where in error and fix in error, error
    assert not (tmp_path / "model").exists()


class _Terminal:
    """stderr as a terminal: tqdm draws its bar only there (a log file gets no bar)."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return True


def test_training_shows_a_progress_bar_with_an_eta_on_a_terminal_and_none_when_quiet(tmp_path, monkeypatch):
    train_file = write_csv(tmp_path / "train.csv", ["text", "label"], reviews(11, 60))
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    train("text_classification", "--train", str(train_file), "--out", str(tmp_path / "a"), "--epochs", "2", *TINY_CNN)
    assert re.search(r"training: +\d+%.*\d+/8 \[\d\d:\d\d<\d\d:\d\d", terminal.text), terminal.text    # <ETA
    quiet = _Terminal()
    monkeypatch.setattr("sys.stderr", quiet)
    train("text_classification", "--train", str(train_file), "--out", str(tmp_path / "b"), "--epochs", "2", "--quiet",
          *TINY_CNN)
    assert quiet.text == ""


@pytest.mark.parametrize("options, message", [
    (["--batch-size", "0"], "argument --batch-size: 0 is out of range: it must be >= 1"),
    (["--dropout", "1.5"], "argument --dropout: 1.5 is out of range: it must be >= 0 and < 1"),
    (["--epochs", "0"], "argument --epochs: 0 is out of range"),
    (["--lr", "-1"], "argument --lr: -1 is out of range: it must be >= 0"),
    (["--minutes", "0"], "argument --minutes: 0 is out of range"),
    (["--seed", "-5"], "argument --seed: -5 is out of range"),
    (["--average-weights", "2"], "argument --average-weights: 2 is out of range"),
    (["--max-len", "x"], "argument --max-len: 'x' is not an integer"),
    (["--polarity-head"], "--polarity-head reads the negation scopes: give --negation-window N"),
    (["--version", "a/b"], "--version 'a/b' names the package's folder"),
    (["--name", "../x"], "--name '../x' names the package's folder"),
    (["--out", "a_file"], "--out a_file is a file"),
    (["--out", "a_file/sub"], "a_file is a file, not a folder"),
    (["--out", "other"], "--out other holds other files and no package"),
    (["--out", "dangling"], "--out dangling: dangling is a symbolic link to nowhere, which does not exist"),
    (["--out", "dangling/sub"], "dangling is a symbolic link to nowhere, which does not exist"),
    # New folders only, never a shipped model's own: where the refusal is missing, the test must not
    # be what replaces one.
    (["--out", "{shipped}/text_classification/mine"], "is inside the models taskflow ships"),
    (["--out", "{shipped}/sentiment_analysis/mine", "--name", "char_cnn"], "is inside the models taskflow ships"),
    (["--out", "link_to_shipped/sentiment_analysis/mine"], "is inside the models taskflow ships"),
    (["--out", "{cache}/text_classification/mine/1.0.0"], "is inside taskflow's model cache"),
])
def test_a_bad_option_or_out_folder_is_refused_before_training(tmp_path, monkeypatch, capsys, options, message):
    import taskflow.resources

    shipped = Path(taskflow.resources.__file__).parent
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.csv").write_text(GOOD_CSV, encoding="utf-8")
    (tmp_path / "a_file").write_text("not a folder", encoding="utf-8")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "dangling").symlink_to("nowhere")
    (tmp_path / "link_to_shipped").symlink_to(shipped)
    options = [o.format(shipped=shipped, cache=Path(os.environ["PPNLP_HOME"]) / "taskflow") for o in options]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    shipped_before = sorted(str(p) for p in shipped.rglob("*"))
    argv = ["train", "text_classification", "--train", "train.csv", "--quiet", *options]
    try:
        with pytest.raises(SystemExit) as info:
            cli(argv if "--out" in options else [*argv, "--out", "model"])
    finally:
        made = sorted(set(map(str, shipped.rglob("*"))) - set(shipped_before))
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
    assert not made, f"written among the shipped models: {made}"
    error = capsys.readouterr().err
    assert info.value.code == 2 and error.startswith("taskflow: error: ") and message in error, error
    assert sorted(p.name for p in tmp_path.rglob("*")) == before      # nothing trained, nothing written


def test_out_dot_writes_the_package_into_the_current_folder_named_after_it(tmp_path, monkeypatch):
    here = tmp_path / "my_reviews"
    here.mkdir()
    (tmp_path / "train.csv").write_text(GOOD_CSV, encoding="utf-8")
    monkeypatch.chdir(here)
    manifest = train("text_classification", "--train", "../train.csv", "--out", ".", "--epochs", "1", "--quiet",
                     *TINY_CNN)
    assert manifest.name == "my_reviews" and (here / "manifest.json").is_file()
    assert Taskflow("text_classification", task_path=".")(["好棒快"])[0]["label"] in {"1", "3", "5"}


def test_out_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch, capsys):
    # /proc takes no new folders, even from root, whatever its permission bits say.
    (tmp_path / "train.csv").write_text(GOOD_CSV, encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        cli(["train", "text_classification", "--train", str(tmp_path / "train.csv"), "--out", "/proc/my_model"])
    assert info.value.code == 2 and "--out /proc/my_model: cannot write in /proc" in capsys.readouterr().err


def test_a_package_is_replaced_manifest_first(tmp_path):
    from taskflow.packages import write_package

    source = tmp_path / "w.bin"
    source.write_bytes(b"one")
    write_package(tmp_path / "pkg", {"task": "text_classification", "name": "pkg", "version": "1.0.0"}, {"w.bin": source})
    source.write_bytes(b"two")
    with pytest.raises(OSError):     # a write cut short: no manifest is left over other bytes
        write_package(tmp_path / "pkg", {"task": "text_classification", "name": "pkg", "version": "1.0.0"},
                      {"w.bin": source, "gone.bin": tmp_path / "missing"})
    assert not (tmp_path / "pkg" / "manifest.json").exists()
