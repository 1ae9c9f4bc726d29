"""text_similarity: pair forms, typed errors, symmetry, padding, truncation, files, CLI, recipe."""

import json
import math
import random

import numpy as np
import pytest
from make_tiny_models import make_tiny_similarity

from recipes.text_similarity.data import drop_overlap, split_lcqmc_dev
from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InputTypeError, InvalidInputError, ManifestError, OptionError
from taskflow.tasks.text_similarity.features import Segmenter, Vocab, encode, model_text
from taskflow.tasks.text_similarity.pairs import Pair, read_pairs

PAIRS = [["怎么修改微信密码", "微信密码怎么改"], ["明天天气怎么样", "昨天天气怎么样"], ["这家酒店很干净", "服务太差了"]]


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return tiny_models["text_similarity"]


@pytest.fixture(scope="module")
def flow(tiny):
    return Taskflow("text_similarity", task_path=tiny)


@pytest.fixture(scope="module")
def tiny_siamese(tmp_path_factory):
    return make_tiny_similarity(tmp_path_factory.mktemp("tiny_siamese"), kind="siamese")


def _scores(results):
    return [r["similarity"] for r in results]


# ------------------------------------------------------------------ inputs

def test_a_pair_may_be_a_list_a_tuple_or_a_dict(flow):
    a, b = PAIRS[0]
    forms = [[a, b], (a, b), {"text1": a, "text2": b}, {"text1": a, "text2": b, "id": 7}]
    outs = [flow(form) for form in forms] + [flow([form]) for form in forms]
    for out in outs:
        assert len(out) == 1 and out[0]["text1"] == a and out[0]["text2"] == b
        assert set(out[0]) == {"text1", "text2", "similarity", "label"}
        assert out[0]["label"] in (0, 1) and 0.0 <= out[0]["similarity"] <= 1.0
    np.testing.assert_allclose([o[0]["similarity"] for o in outs], outs[0][0]["similarity"], atol=1e-6)


def test_list_of_pairs_in_order_and_aliases(flow, tiny):
    mixed = [PAIRS[0], tuple(PAIRS[1]), {"text1": PAIRS[2][0], "text2": PAIRS[2][1]}]
    out = flow(mixed)
    assert [(r["text1"], r["text2"]) for r in out] == [tuple(p) for p in PAIRS]
    alias = Taskflow("text_matching", task_path=tiny)(PAIRS)
    np.testing.assert_allclose(_scores(alias), _scores(out), atol=1e-6)
    assert flow(iter(PAIRS)) == out  # any iterable of pairs


@pytest.mark.parametrize("bad, error, index, words", [
    ("怎么修改微信密码", InputTypeError, None, "single str"),
    (42, InputTypeError, None, "got int"),
    (["a", "b", "c"], InvalidInputError, 0, "pair #0 must hold exactly 2 texts, got 3"),   # one pair, too long
    ([["a", "b"], ["a", "b", "c"]], InvalidInputError, 1, "exactly 2 texts, got 3"),
    ([["a", "b"], ["a"]], InvalidInputError, 1, "exactly 2 texts, got 1"),
    ([["a", "b"], None], InputTypeError, 1, "got NoneType"),
    ([["a", "b"], {"text1": "a"}], InvalidInputError, 1, "without 'text2'"),
    ([["a", "b"], {"text_1": "a", "text_2": "b"}], InvalidInputError, 1, "'text1' and 'text2'"),
    ([["a", "b"], [1, "b"]], InputTypeError, 1, "'text1' of pair #1 must be a str, got int"),
    ([["a", "b"], ["a", b"b"]], InputTypeError, 1, "decode"),
])
def test_bad_pair_shapes_are_typed_errors_naming_the_index(flow, bad, error, index, words):
    with pytest.raises(error) as info:
        flow(bad)
    assert getattr(info.value, "index", None) == index
    assert words in str(info.value)
    if index is not None:
        assert f"#{index}" in str(info.value)


@pytest.mark.parametrize("pair, which", [(["", "微信密码"], "text1"), (["微信密码", "   "], "text2"), (["\n", "\t"], "text1"),
                                         (["\u200b", "微信密码"], "text1"), (["微信密码", "\ufeff\x00"], "text2")])
def test_empty_members_are_typed_errors(flow, pair, which):
    with pytest.raises(InvalidInputError, match=f"'{which}' of pair #1 is empty"):
        flow([PAIRS[0], pair])
    with pytest.raises(InvalidInputError, match=f"'{which}' of pair #0"):
        flow(pair)


def test_options_are_checked(tiny):
    for bad in (-0.1, 1.5, "0.5", True):
        with pytest.raises(OptionError, match="threshold"):
            Taskflow("text_similarity", task_path=tiny, threshold=bad)
    with pytest.raises(OptionError, match="bi-encoder"):
        Taskflow("text_similarity", task_path=tiny, return_embeddings=True)
    with pytest.raises(TypeError, match="threshold"):
        Taskflow("text_similarity", task_path=tiny, treshold=0.5)


def test_threshold_decides_the_label(tiny):
    pairs = PAIRS + [["怎么修改微信密码", "怎么修改微信密码！"]]   # read identically: similarity 1.0
    low = Taskflow("text_similarity", task_path=tiny, threshold=0.0)(pairs)
    high = Taskflow("text_similarity", task_path=tiny, threshold=1.0)(pairs)
    assert [r["label"] for r in low] == [1, 1, 1, 1]
    assert all(r["similarity"] < 1.0 for r in high[:3])        # the tiny network never says 1.0 itself
    assert [r["label"] for r in high] == [0, 0, 0, 1]
    assert _scores(low) == _scores(high)
    scores = sorted(_scores(low)[:3])
    middle = Taskflow("text_similarity", task_path=tiny, threshold=(scores[0] + scores[1]) / 2)(pairs)
    assert sum(r["label"] for r in middle) == 3                 # all but the lowest-scoring pair


# ------------------------------------------------------- model behaviour

def test_swapping_the_texts_gives_the_same_score(flow):
    forward = flow(PAIRS + [["好" * 40, "好"]])
    backward = flow([[b, a] for a, b in PAIRS + [["好" * 40, "好"]]])
    np.testing.assert_allclose(_scores(forward), _scores(backward), atol=1e-6)
    assert [r["label"] for r in forward] == [r["label"] for r in backward]


@pytest.mark.parametrize("static", [True, False])
def test_padding_does_not_change_a_score(tiny, static):
    flow = Taskflow("text_similarity", task_path=tiny, batch_size=64, static=static)
    alone = flow([PAIRS[1]])[0]["similarity"]
    # In one batch with much longer pairs, on either side: the pair is padded to their width.
    padded = flow([PAIRS[1], ["这家酒店很干净，服务也好" * 2, "好"], ["好", "服务也好，干净" * 4]])[0]["similarity"]
    assert math.isclose(alone, padded, abs_tol=1e-5)


def test_texts_are_cut_to_max_length_and_punctuation_is_ignored(flow):
    limit = int(flow.task.manifest["max_length"])
    head = "服务" * limit
    out = flow([[head + "很差很差", "服务很好"], [head[:limit], "服务很好"],
                ["人和畜生的区别是什么？", "区别"], ["人和畜生的区别是什么!!", "区别"]])
    assert out[0]["text1"] == head + "很差很差"  # the result keeps the caller's text
    assert math.isclose(out[0]["similarity"], out[1]["similarity"], abs_tol=1e-6)
    assert math.isclose(out[2]["similarity"], out[3]["similarity"], abs_tol=1e-6)


def test_texts_read_identically_score_one(flow):
    out = flow([["花呗怎么还款？", "花呗 怎么还款!"], ["ＡＢＣ", "abc"], ["花呗怎么还款", "花呗怎么还"],
                # a BOM, a NUL or a zero-width space read from a file is no char of the text
                ["\ufeff花呗怎么还款", "花呗怎么还款\x00"], ["花\u200b呗", "花呗"]])
    assert [r["similarity"] for r in out] == [1.0, 1.0, out[2]["similarity"], 1.0, 1.0] and out[0]["label"] == 1
    assert out[2]["similarity"] < 1.0


def test_a_text_of_only_punctuation_still_runs(flow):
    (result,) = flow([["？？", "!!"]])
    assert 0.0 <= result["similarity"] <= 1.0


def test_bi_encoder_returns_embeddings_static_equal_to_dynamic(tiny_siamese):
    static = Taskflow("text_similarity", task_path=tiny_siamese, return_embeddings=True)(PAIRS)
    dynamic = Taskflow("text_similarity", task_path=tiny_siamese, return_embeddings=True, static=False)(PAIRS)
    for s, d in zip(static, dynamic):
        assert len(s["embedding1"]) == len(s["embedding2"]) == 6
        np.testing.assert_allclose(s["embedding1"] + s["embedding2"] + [s["similarity"]],
                                   d["embedding1"] + d["embedding2"] + [d["similarity"]], atol=1e-5)
    # A bi-encoder's embedding of a text does not depend on the other text.
    again = Taskflow("text_similarity", task_path=tiny_siamese, return_embeddings=True)([[PAIRS[0][0], "别的"]])
    np.testing.assert_allclose(again[0]["embedding1"], static[0]["embedding1"], atol=1e-5)


def test_overlap_features_are_symmetric_padding_free_and_see_the_order_of_shared_chars():
    import paddle

    from taskflow.tasks.text_similarity.model import OVERLAP_FEATURES, overlap_features

    ids = {c: i for i, c in enumerate("__北京到上海的票多少钱机", start=0)}

    def side(*texts, width=None):
        width = width or max(map(len, texts))
        rows = [[ids[c] for c in text] + [0] * (width - len(text)) for text in texts]
        return paddle.to_tensor(rows, dtype="int64")

    a = ["北京到上海的票多少钱", "北京到上海的票多少钱", "北京到上海的票多少钱"]
    b = ["北京到上海的票多少钱", "上海到北京的票多少钱", "北京到上海的机票多少钱"]
    forward = overlap_features(side(*a), side(*a), side(*b), side(*b)).numpy()
    backward = overlap_features(side(*b), side(*b), side(*a), side(*a)).numpy()
    assert forward.shape == (3, OVERLAP_FEATURES)
    np.testing.assert_allclose(forward, backward, atol=1e-6)
    padded = overlap_features(side(*a, width=16), side(*a, width=16), side(*b, width=20), side(*b, width=20))
    np.testing.assert_allclose(padded.numpy(), forward, atol=1e-6)
    same, swapped, one_more = forward
    in_order = [6, 7]                                  # mean and minimum of the in-order share
    assert same[in_order].tolist() == [1.0, 1.0] and (swapped[in_order] < 0.9).all()
    assert same[0] == swapped[0] == 1.0 and one_more[0] < 1.0      # every char shared / one not


@pytest.mark.parametrize("kind", ["siamese_overlap", "siamese_rnn", "match_rnn"])
@pytest.mark.parametrize("static", [True, False])
def test_networks_that_read_order_are_symmetric_and_padding_free(tmp_path, static, kind):
    package = make_tiny_similarity(tmp_path / "overlap", kind=kind)
    flow = Taskflow("text_similarity", task_path=package, batch_size=64, static=static)
    forward = flow(PAIRS)
    np.testing.assert_allclose(_scores(forward), _scores(flow([[b, a] for a, b in PAIRS])), atol=1e-6)
    padded = flow([PAIRS[1], ["这家酒店很干净，服务也好" * 2, "好"]])[0]["similarity"]
    assert math.isclose(forward[1]["similarity"], padded, abs_tol=1e-5)
    other = Taskflow("text_similarity", task_path=package, static=not static)(PAIRS)
    np.testing.assert_allclose(_scores(forward), _scores(other), atol=1e-5)


def test_results_render_as_an_escaped_table(flow):
    page = flow([["<script>alert(1)</script>", "a & b"], PAIRS[0]])._repr_html_()
    assert "<table" in page and "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "a &amp; b" in page
    assert page.count("<tr>") == 3


# ------------------------------------------------------------ files, CLI

def test_files_of_pairs_jsonl_csv_tsv_txt(flow, tmp_path):
    expected = flow(PAIRS)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text1": a, "text2": b, "id": i}, ensure_ascii=False) + "\n"
                                               for i, (a, b) in enumerate(PAIRS)), encoding="utf-8")
    (tmp_path / "in.tsv").write_text("id\ttext1\ttext2\n" + "".join(f"{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(PAIRS)),
                                     encoding="utf-8")
    (tmp_path / "in.csv").write_text("text2,text1\n" + "".join(f"{b},{a}\n" for a, b in PAIRS), encoding="utf-8")
    (tmp_path / "in.txt").write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    for name in ("in.jsonl", "in.tsv", "in.csv", "in.txt"):
        out = tmp_path / f"{name}.out.jsonl"
        flow.predict_file(tmp_path / name, out, progress=False)
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert [(r["text1"], r["text2"], r["label"]) for r in rows] == [(r["text1"], r["text2"], r["label"]) for r in expected]
        np.testing.assert_allclose(_scores(rows), _scores(expected), atol=1e-6)


def test_a_bad_line_in_a_file_is_named(flow, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text(f"{PAIRS[0][0]}\t{PAIRS[0][1]}\nno tab here\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"in.txt:2: pair must hold exactly 2 texts, got 1"):
        flow.predict_file(source, tmp_path / "out.jsonl", progress=False)
    summary = flow.predict_file(source, tmp_path / "out.jsonl", on_error="skip", progress=False)
    assert summary.processed == 1 and summary.skipped == 1


def test_cli_positional_texts_are_read_as_pairs(tiny, capsys):
    assert main(["text_similarity", *PAIRS[0], *PAIRS[1], "--task-path", str(tiny)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["text1"], r["text2"]) for r in rows] == [tuple(PAIRS[0]), tuple(PAIRS[1])]
    with pytest.raises(SystemExit):
        main(["text_similarity", "a", "b", "c", "--task-path", str(tiny)])
    assert "2 texts per item (text1, text2); got 3" in capsys.readouterr().err


# -------------------------------------------------------- text, vocab, data

def test_model_text_and_segmenter():
    assert model_text("Ｗｉｆｉ 密码怎么改？") == "wifi密码怎么改"
    assert model_text("？？") == "??"
    assert model_text("一二三四五", 3) == "一二三"
    seg = Segmenter({"密码": 5, "怎么": 4, "修改": 3, "修": 1, "改": 1, "密": 1})
    assert seg.cut("怎么修改密码") == ["怎么", "修改", "密码"]
    assert "".join(seg.cut("从未见过的字怎么办")) == "从未见过的字怎么办"
    assert seg.cut("") == []


def test_vocab_round_trip_and_encoding(tmp_path):
    vocab = Vocab.build(["怎么修改密码", "密码怎么改", "修改密码"], lambda t: Segmenter({"怎么": 2, "修改": 2, "密码": 3}).cut(t),
                        min_char=1, min_word=2)
    vocab.save(tmp_path / "vocab.json")
    again = Vocab.load(tmp_path / "vocab.json")
    assert again.char_list == vocab.char_list and again.word_list == vocab.word_list
    chars, words = encode(["修改密码", "改"], again)
    assert chars.shape == words.shape == (2, 4)
    assert words[0, 0] == words[0, 1] == again.words["修改"] and words[0, 2] == words[0, 3] == again.words["密码"]
    assert chars[1, 1:].tolist() == [0, 0, 0] and words[1, 1:].tolist() == [0, 0, 0]


def test_lcqmc_dev_split_is_seeded_disjoint_and_overlap_is_dropped(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("text_a\ttext_b\tlabel\n" + "".join(f"问题{i}\t问{i}题\t{i % 2}\n" for i in range(50)), encoding="utf-8")
    pairs = read_pairs(path)
    train, held = split_lcqmc_dev(pairs, 10, seed=3)
    assert len(train) == 40 and len(held) == 10 and not set(train) & set(held)
    assert split_lcqmc_dev(pairs, 10, seed=3) == (train, held)
    assert split_lcqmc_dev(pairs, 10, seed=4) != (train, held)
    kept, dropped = drop_overlap([Pair("问题1", "问1题", 1), Pair("别的？", "问题", 0)], [Pair("问1题", "问题1！", 1)])
    assert kept == [Pair("别的？", "问题", 0)] and dropped == 1


# ------------------------------------------------------ the shipped model

def test_shipped_model_scores_near_duplicates_high_unrelated_low_and_is_symmetric():
    flow = Taskflow("text_similarity")
    # Not identical (identical texts score 1.0 by rule, before the network runs): one word added or swapped.
    near = flow([["怎么修改微信密码", "怎么修改微信的密码"], ["明天天气怎么样", "明天的天气怎么样"],
                 ["如何办理信用卡", "怎么办理信用卡"]])
    assert all(r["similarity"] > 0.9 and r["label"] == 1 for r in near), near
    unrelated = flow([["明天天气怎么样", "如何办理信用卡"], ["怎么修改微信密码", "花呗怎么还款"]])
    assert all(r["similarity"] < 0.1 and r["label"] == 0 for r in unrelated), unrelated
    pairs = [["怎么修改微信密码", "微信密码怎么改"], ["借呗怎么还款", "花呗可以分期吗"]]
    forward, backward = flow(pairs), flow([[b, a] for a, b in pairs])
    np.testing.assert_allclose(_scores(forward), _scores(backward), atol=1e-5)
    assert forward[0]["similarity"] > forward[1]["similarity"]


# ------------------------------------------------- generated pairs (augment.py) and the swap dev set

def test_swap_roles_makes_a_negative_and_skips_identical_or_joined_entities():
    from recipes.text_similarity.augment import GeneratedPair, swap_roles

    rng = random.Random(0)
    assert swap_roles("北京到上海的高铁票多少钱", rng) == GeneratedPair("北京到上海的高铁票多少钱", "上海到北京的高铁票多少钱",
                                                                0, "swap")
    assert swap_roles("张三欠李四多少钱", rng).text2 == "李四欠张三多少钱"
    assert swap_roles("我给他转账了怎么撤回", rng).text2 == "他给我转账了怎么撤回"
    assert swap_roles("余额宝转入花呗", rng).text2 == "花呗转入余额宝"
    assert swap_roles("北京到北京的高铁", rng) is None           # the same entity twice: swapped, the same question
    assert swap_roles("你给您转账", rng) is None                 # 你 and 您 are one person
    assert swap_roles("北京和上海哪个大", rng) is None           # 和 is symmetric
    assert swap_roles("我朋友比我高", rng) is None               # 我朋友 is one phrase, not 我 + 朋友
    assert swap_roles("北京到上海和上海到北京一样吗", rng) is None  # asks both directions already


def test_symmetric_swaps_keep_the_meaning_and_only_before_a_symmetric_question():
    from recipes.text_similarity.augment import GeneratedPair, swap_symmetric

    rng = random.Random(0)
    assert swap_symmetric("花呗和借呗有什么区别", rng) == GeneratedPair("花呗和借呗有什么区别", "借呗和花呗有什么区别",
                                                                1, "symmetric")
    assert swap_symmetric("北京和上海之间有多远", rng).text2 == "上海和北京之间有多远"
    assert swap_symmetric("余额宝与零钱通哪个收益高", rng).text2 == "零钱通与余额宝哪个收益高"
    assert swap_symmetric("我跟他借钱", rng) is None              # 跟 as "from": the lender is not the borrower
    assert swap_symmetric("北京到上海多少钱", rng) is None         # no symmetric marker
    assert swap_symmetric("我和我朋友谁高", rng) is None           # 我朋友 is one phrase


def test_framed_questions_give_swaps_of_both_labels():
    from collections import Counter

    from recipes.text_similarity.augment import SWAP_FRAMES, framed_questions, generated_training_pairs

    questions = framed_questions(300, random.Random(1))
    assert questions == framed_questions(300, random.Random(1)) and "{" not in "".join(questions)
    assert len({frame for group in SWAP_FRAMES.values() for frame in group}) > 30
    pairs = generated_training_pairs([], [Pair(questions[0], "别的", 0)], 200, seed=5, framed=300)
    kinds = Counter(p.kind for p in pairs)
    assert kinds["swap"] >= 40 and kinds["symmetric"] >= 25, kinds      # a third of the positives each
    assert all(p.label == 0 for p in pairs if p.kind == "swap") and all(p.label == 1 for p in pairs if p.kind == "symmetric")
    assert questions[0] not in {t for p in pairs for t in p[:2]}     # a held-out text stays out
    assert generated_training_pairs([], [], 50, seed=5) == []        # without frames: only the training texts


def test_numbers_entities_and_negations_change_only_where_the_meaning_changes():
    from recipes.text_similarity.augment import change_entity, change_number, flip_negation

    rng = random.Random(0)
    changed = change_number("尾号1234的卡还款3天了", rng)
    assert changed.label == 0 and changed.text2.startswith("尾号1234的卡还款") and changed.text2 != changed.text1
    for inside_an_id in ("卡号6222021234567890", "订单号12345号", "验证码是1234", "一次性还清"):
        assert change_number(inside_an_id, rng) is None, inside_an_id
    assert change_number("2019年的账单", random.Random(0)).text2 == "2020年的账单"
    assert change_number("分三期还", random.Random(0)).text2 == "分三十六期还"          # Chinese stays Chinese

    assert change_entity("花呗怎么还款", random.Random(0)).text2 == "网商贷怎么还款"
    banks = {change_entity("工行的卡怎么办", random.Random(seed)).text2 for seed in range(30)}
    assert "工商银行的卡怎么办" not in banks and len(banks) > 5        # 工行 is 工商银行: never "changed" into it

    assert flip_negation("为什么不能借款", rng).text2 == "为什么能借款"
    assert flip_negation("为什么可以借款", rng).text2 == "为什么不可以借款"
    assert flip_negation("这款手机有指纹解锁", rng).text2 == "这款手机没有指纹解锁"
    for same_question in ("花呗可以分期吗", "能不能提前还款", "花呗是在余额扣还是余额宝扣", "手机有什么功能"):
        assert flip_negation(same_question, rng) is None, same_question


def test_everyday_contrasts_change_a_verb_the_question_or_the_setting():
    from recipes.text_similarity.augment import (CONTRAST_KINDS, KINDS, augmented_pairs, change_antonym,
                                                 change_question, change_setting)

    opposites = {change_antonym("怎么开通花呗", random.Random(s)).text2 for s in range(20)}
    assert opposites == {"怎么关闭花呗", "怎么取消花呗"}
    assert change_antonym("蓝牙怎么打开", random.Random(0)).text2 == "蓝牙怎么关闭"
    assert change_antonym("外卖怎么买单", random.Random(0)) is None          # 买单 is the bill, not a purchase
    assert change_antonym("今天天气怎么样", random.Random(0)) is None

    asked = {change_question("信用卡怎么办理", random.Random(s)).text2 for s in range(30)}
    assert asked == {"信用卡在哪里办理", "信用卡什么时候办理", "信用卡为什么办理"}
    assert change_question("花呗怎么还不到账", random.Random(0)) is None    # 怎么 asks why here: 为什么 is the same
    assert "如何不能借款" not in {change_question("为什么不能借款", random.Random(s)).text2 for s in range(30)}
    assert change_question("这是为什么", random.Random(0)) is None          # nothing after it to ask about

    assert change_setting("明天早上去机场", random.Random(0)).label == 0
    days = {change_setting("周一能到账吗", random.Random(s)).text2 for s in range(60)}
    assert "星期一能到账吗" not in days and len(days) > 5                    # 周一 and 星期一 are one day
    assert change_setting("石家庄铁道学院学校环境怎么样", random.Random(0)) is None   # a place only after 去/到/在…
    assert change_setting("商家怎么开通线下分期", random.Random(0)).text2 == "商家怎么开通线上分期"

    questions = ["怎么开通花呗", "信用卡怎么办理", "明天早上去机场", "为什么不能借款", "花呗怎么还款"]
    default = augmented_pairs(questions, random.Random(7), 8)
    assert not {p.kind for p in default} - set(KINDS)                      # older recipes draw as before
    everyday = augmented_pairs(questions, random.Random(7), 30, kinds=CONTRAST_KINDS)
    assert {"antonym", "question", "setting"} <= {p.kind for p in everyday}


def test_paraphrases_keep_the_meaning():
    from recipes.text_similarity.augment import GeneratedPair, edit_surface, substitute_synonym

    assert substitute_synonym("怎么截图", random.Random(0)) == GeneratedPair("怎么截图", "怎么截屏", 1, "synonym")
    assert substitute_synonym("苹果手机多少钱", random.Random(1)).text2 in ("iPhone多少钱", "苹果手机什么价格")
    assert {substitute_synonym("手机号码丢了", random.Random(s)).text2 for s in range(10)} == {"手机号丢了"}
    assert substitute_synonym("怎么还不到账", random.Random(0)).text2 == "怎么还不到帐"   # 怎么 here asks why
    assert substitute_synonym("借了多少钱", random.Random(0)) is None                    # an amount, not a price
    surface = {edit_surface("花呗怎么还款", random.Random(s)).text2 for s in range(20)}
    assert surface == {"请问花呗怎么还款", "你好，花呗怎么还款", "花呗怎么还款呢", "花呗怎么还款啊"}
    polite = {edit_surface("你好！请问借呗利息怎么算", random.Random(s)).text2 for s in range(20)}
    assert polite == {"借呗利息怎么算", "你好！请问借呗利息怎么算呢", "你好！请问借呗利息怎么算啊"}
    assert edit_surface("花呗可以分期", random.Random(3)).label == 1
    assert "花呗可以分期吗" in {edit_surface("花呗可以分期", random.Random(s)).text2 for s in range(20)}


def test_augmented_pairs_are_seeded_balanced_and_keep_excluded_texts_out():
    from recipes.text_similarity.augment import augmented_pairs, generated_training_pairs

    questions = ["北京到上海的高铁票多少钱", "花呗怎么还款", "借款3天利息多少", "为什么不能借款", "怎么截图",
                 "我给他转账了怎么撤回", "信用卡可以分期", "明天天气怎么样", "苹果手机怎么下载微信", "为什么我的借呗不能用"]
    pairs = augmented_pairs(questions, random.Random(7), 12)
    assert pairs == augmented_pairs(questions, random.Random(7), 12)
    assert pairs != augmented_pairs(questions, random.Random(8), 12)
    assert sum(p.label for p in pairs) == 6 and len(pairs) == 12
    assert {p.kind for p in pairs if p.label == 0} == {"swap", "number", "entity", "negation"}
    keys = {tuple(sorted((model_text(p.text1), model_text(p.text2)))) for p in pairs}
    assert len(keys) == len(pairs)
    kept_out = augmented_pairs(questions, random.Random(7), 12, exclude={"上海到北京的高铁票多少钱", "花呗怎么还款"})
    assert not {t for p in kept_out for t in p[:2]} & {"上海到北京的高铁票多少钱", "花呗怎么还款"}
    training = [Pair("北京到上海的高铁票多少钱", "高铁票价", 0), Pair("花呗怎么还款", "花呗如何还", 1)]
    generated = generated_training_pairs(training, [Pair("上海到北京的高铁票多少钱", "别的", 0)], 4, seed=3)
    assert generated and all(p.text2 != "上海到北京的高铁票多少钱" for p in generated)


def test_the_swap_dev_set_meets_its_contract():
    from collections import Counter

    from recipes.text_similarity.augment import KINDS, NEGATIVE_KINDS, SWAP_DEV, read_generated

    pairs = read_generated(SWAP_DEV)
    assert len(read_pairs(SWAP_DEV)) == len(pairs) >= 300                  # also a plain text_a/text_b/label file
    kinds = Counter(p.kind for p in pairs)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 40, kinds
    assert all(p.label == (0 if p.kind in NEGATIVE_KINDS else 1) for p in pairs)
    assert abs(sum(p.label for p in pairs) / len(pairs) - 0.5) <= 0.05
    keys = [tuple(sorted((model_text(p.text1), model_text(p.text2)))) for p in pairs]
    assert len(set(keys)) == len(keys) and all(a != b for a, b in keys)   # no duplicates, no pair read as one text
    for a, b, label in [("北京到上海的高铁票多少钱", "上海到北京的高铁票多少钱", 0), ("张三欠李四", "李四欠张三", 0),
                        ("iPhone 15 Pro多少钱", "苹果15pro售价", 1), ("电脑怎么截图", "电脑怎么截屏", 1)]:
        assert (a, b, label) in {(p.text1, p.text2, p.label) for p in pairs}


# ---------------------------------------------------------------- ensembles

@pytest.fixture(scope="module")
def ensemble_package(tiny_siamese, tmp_path_factory):
    """The tiny bi-encoder with a cross-encoder (another network, seed, and a shorter max_length)
    inside it as its ensemble member."""
    import shutil

    from recipes.tuning import update_manifest

    package = tmp_path_factory.mktemp("ensemble") / "pair"
    shutil.copytree(tiny_siamese, package)
    make_tiny_similarity(package / "partner", seed=1)
    update_manifest(package / "partner", {"max_length": 6})
    update_manifest(package, {"requires": {"partner": "./partner"}, "ensemble": ["partner"],
                              "threshold": 0.9, "ensemble_threshold": 0.3})
    return package


def test_an_ensemble_averages_its_networks_probabilities(tiny_siamese, ensemble_package):
    pairs = PAIRS + [["这家酒店很干净服务也很好", "这家酒店服务很好也很干净"]]
    own = _scores(Taskflow("text_similarity", task_path=tiny_siamese)(pairs))
    partner = _scores(Taskflow("text_similarity", task_path=ensemble_package / "partner")(pairs))
    together = Taskflow("text_similarity", task_path=ensemble_package)
    assert len(together.task.predictors) == 2
    assert _scores(together(pairs)) == pytest.approx([(a + b) / 2 for a, b in zip(own, partner)], rel=1e-5)
    assert own != partner
    # Its own threshold: the mean probabilities are another score.
    assert together.task.threshold == 0.3
    assert [r["label"] for r in together(pairs)] == [int(s >= 0.3) for s in _scores(together(pairs))]
    # Still symmetric, still 1.0 for texts read identically.
    swapped = _scores(together([[b, a] for a, b in pairs]))
    assert swapped == pytest.approx(_scores(together(pairs)), rel=1e-5)
    assert together([["微信密码怎么改？", "微信密码怎么改"]])[0]["similarity"] == 1.0


def test_a_weighted_geometric_ensemble_mixes_same_against_different(tiny_siamese, ensemble_package, tmp_path):
    import shutil

    from recipes.tuning import update_manifest

    pairs = PAIRS + [["这家酒店很干净服务也很好", "这家酒店服务很好也很干净"]]
    own = np.array(_scores(Taskflow("text_similarity", task_path=tiny_siamese)(pairs)))
    partner = np.array(_scores(Taskflow("text_similarity", task_path=ensemble_package / "partner")(pairs)))
    package = tmp_path / "geometric"
    shutil.copytree(ensemble_package, package)
    update_manifest(package, {"ensemble_weights": [3, 1], "ensemble_mixing": "geometric"})
    # P(same) against P(different), each the weighted geometric mean: a score per pair, not a
    # distribution over the batch's pairs.
    same, different = own ** 0.75 * partner ** 0.25, (1 - own) ** 0.75 * (1 - partner) ** 0.25
    expected = same / (same + different)
    mixed = Taskflow("text_similarity", task_path=package)
    assert _scores(mixed(pairs)) == pytest.approx(expected.tolist(), rel=1e-5)
    assert _scores(mixed(pairs[:1])) == pytest.approx(expected[:1].tolist(), rel=1e-5)   # alone as in a batch


def test_ensemble_false_runs_the_package_s_own_network_and_embeddings_stay_its_own(tiny_siamese, ensemble_package):
    alone = Taskflow("text_similarity", task_path=ensemble_package, ensemble=False)
    assert not alone.task.members and alone.task.threshold == 0.9
    assert _scores(alone(PAIRS)) == _scores(Taskflow("text_similarity", task_path=tiny_siamese)(PAIRS))
    with_vectors = Taskflow("text_similarity", task_path=ensemble_package, return_embeddings=True)(PAIRS)
    own_vectors = Taskflow("text_similarity", task_path=tiny_siamese, return_embeddings=True)(PAIRS)
    for mine, theirs in zip(with_vectors, own_vectors):
        assert mine["embedding1"] == pytest.approx(theirs["embedding1"], rel=1e-5)
        assert mine["embedding2"] == pytest.approx(theirs["embedding2"], rel=1e-5)


def _calibration_case(ensemble_package, tmp_path):
    """A copy of the ensemble package, as the recipe's calibrate.py finds one, and its selection
    splits (LCQMC dev's held-out part and BQ dev) written under ``tmp_path``: (package, rows)."""
    import shutil

    from recipes.tuning import update_manifest

    package = tmp_path / "pair"
    shutil.copytree(ensemble_package, package)
    update_manifest(package, {"training": {"lcqmc_dev_split": {"seed": 3, "held_out": 4}}})
    rows = [(a, b, 1) for a, b in PAIRS] + [("明天天气怎么样", "这家酒店很干净", 0), ("服务太差了", "怎么修改微信密码", 0)]
    for relative in ("lcqmc/dev.tsv", "bq_corpus/dev.tsv"):
        (tmp_path / relative).parent.mkdir(parents=True)
        (tmp_path / relative).write_text("text_a\ttext_b\tlabel\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows),
                                         encoding="utf-8")
    return package, rows


def test_calibrate_tunes_the_ensemble_threshold_on_the_selection_splits(ensemble_package, tmp_path):
    from recipes.text_similarity.calibrate import main as calibrate
    from recipes.tuning import update_manifest

    package, rows = _calibration_case(ensemble_package, tmp_path)
    assert calibrate(["--package", str(package), "--data-dir", str(tmp_path), "--write"]) == 0
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    tuned = manifest["ensemble_threshold"]
    assert manifest["threshold"] == 0.9 and tuned == manifest["ensemble_threshold_tuning"]["threshold"]
    assert manifest["ensemble_threshold_tuning"]["selection"]["lcqmc_dev_held_out"]["pairs"] == 4
    assert manifest["ensemble_threshold_tuning"]["selection"]["bq_dev"]["pairs"] == 5
    flow = Taskflow("text_similarity", task_path=package)
    assert flow.task.threshold == tuned
    # The tuned threshold is the best one on those splits: no grid point has a better mean accuracy.
    _, held = split_lcqmc_dev(read_pairs(tmp_path / "lcqmc/dev.tsv"), 4, 3)
    splits = [held, read_pairs(tmp_path / "bq_corpus/dev.tsv")]
    scored = [(np.array(_scores(flow([[p.text1, p.text2] for p in pairs]))), np.array([p.label for p in pairs]))
              for pairs in splits]
    mean_accuracy = lambda t: np.mean([np.mean((s >= t) == (y > 0.5)) for s, y in scored])
    assert mean_accuracy(tuned) == max(mean_accuracy(t) for t in np.round(np.arange(0.05, 0.951, 0.01), 2))
    # The mixed scores are calibrated (Platt scaling fitted on the same splits); the own network's are not.
    from taskflow.tasks.text_similarity import calibrated

    fitted = manifest["ensemble_calibration"]
    assert fitted["slope"] > 0 and 0 < fitted["pairs"] <= 9 and "calibration" not in manifest
    raw = _scores(Taskflow("text_similarity", task_path=ensemble_package)(PAIRS))
    assert _scores(flow(PAIRS)) == pytest.approx(
        calibrated(np.array(raw), (fitted["slope"], fitted["intercept"])).tolist(), rel=1e-6)
    assert fitted["slope"] != 1.0 and _scores(flow(PAIRS)) != pytest.approx(raw, rel=1e-6)
    update_manifest(package, {"ensemble_calibration": {"slope": -1, "intercept": 0}})
    with pytest.raises(ManifestError, match="ensemble_calibration must be"):
        Taskflow("text_similarity", task_path=package)


def test_calibrate_keep_labels_moves_the_scores_and_no_label(ensemble_package, tmp_path):
    from recipes.text_similarity.calibrate import main as calibrate

    package, rows = _calibration_case(ensemble_package, tmp_path)
    pairs = PAIRS + [[a, b] for a, b, _ in rows] + [["这家酒店很干净服务也很好", "服务很差"]]
    before = Taskflow("text_similarity", task_path=package)(pairs)
    assert calibrate(["--package", str(package), "--data-dir", str(tmp_path), "--keep-labels", "--write"]) == 0
    after = Taskflow("text_similarity", task_path=package)(pairs)
    assert [r["label"] for r in after] == [r["label"] for r in before]
    assert [r["similarity"] for r in after] != pytest.approx([r["similarity"] for r in before], rel=1e-6)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["ensemble_threshold"] != 0.3 and "carried" in manifest["ensemble_threshold_tuning"]["method"]


# ------------------------------------------------------------------ contrast dev set

CONTRAST_KINDS = ("negation", "antonym", "time", "place", "number", "entity", "question", "role")
PARAPHRASE_KINDS = ("paraphrase_words", "paraphrase_order")
CONTRAST_DOMAINS = ("assistant", "shopping", "banking", "travel", "health", "general")


def test_contrast_dev_set_is_well_formed_balanced_and_without_duplicates():
    from collections import Counter
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "recipes" / "text_similarity" / "dev" / "contrast_dev.jsonl"
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [json.loads(line) for line in lines]                 # every line parses
    for row in rows:
        assert set(row) == {"text1", "text2", "label", "kind", "domain"}, row
        assert isinstance(row["text1"], str) and isinstance(row["text2"], str), row
        assert row["text1"].strip() and row["text2"].strip() and row["text1"] != row["text2"], row
        assert row["label"] in (0, 1) and type(row["label"]) is int, row
        assert row["kind"] in CONTRAST_KINDS + PARAPHRASE_KINDS, row
        assert row["domain"] in CONTRAST_DOMAINS, row
        # a contrast differs in meaning (label 0), a paraphrase keeps it (label 1)
        assert row["label"] == (0 if row["kind"] in CONTRAST_KINDS else 1), row
    assert len(rows) >= 300
    labels = Counter(row["label"] for row in rows)
    assert labels[0] == labels[1] == len(rows) // 2
    pairs = Counter(frozenset((row["text1"], row["text2"])) for row in rows)
    assert [sorted(p) for p, n in pairs.items() if n > 1] == []  # no pair twice, in either order
    kinds = Counter(row["kind"] for row in rows)
    assert all(kinds[kind] >= 15 for kind in CONTRAST_KINDS), kinds
    assert all(kinds[kind] >= 40 for kind in PARAPHRASE_KINDS), kinds
    assert set(Counter(row["domain"] for row in rows)) == set(CONTRAST_DOMAINS)


def test_open_domain_sets_become_paraphrase_labels(tmp_path):
    from recipes.text_similarity.data import OPEN_DOMAIN_FILES, read_open_domain, read_stsb_binary

    def write(relative, header, rows):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(["\t".join(header)] + ["\t".join(r) for r in rows]) + "\n", encoding="utf-8")
        return path

    write(OPEN_DOMAIN_FILES["chinese_sts"], ["id1", "sentence1", "id2", "sentence2", "score"], [
        ("1", "咱俩谁跟谁呀。", "2", "我们俩谁跟谁呀。", "5.0"),
        ("3", "我给了她一只笔。", "4", "我拿了一支笔给她。", "4.0"),
        ("5", "他没拒绝我的要求。", "6", "他拒绝我的要求。", "0.0"),       # a minimal pair: kept as 0
        ("7", "太棒了！", "8", "发动机的能源来自哪里", "0.0"),              # unrelated: drawn to balance
        ("9", "今天很冷", "10", "火车几点开", "0.0"),
        ("11", "今天下雨", "12", "今天下了雨", "2.0"),                     # neither label: left out
    ])
    write(OPEN_DOMAIN_FILES["chinese_stsb_train"], ["sentence1", "sentence2", "score"], [
        ("一架飞机要起飞了。", "一架飞机正在起飞。", "5"), ("三个人在下棋。", "两个人在下棋。", "2"),
        ("一个男人在吹笛子。", "一个人在吹长笛。", "3"), ("猫在睡觉", "狗在跑", "0")])
    long_head = "很" * 70
    write(OPEN_DOMAIN_FILES["nli_probing"],
          ["subset", "category", "condition_or_seed", "source", "sentence1", "sentence2", "label"], [
        ("stress_synonym", "synonym", "verb", "xnli_premise", "我喜欢这本书", "我喜爱这本书", "entailment"),
        ("stress_antonym", "antonym", "adjective", "xnli_premise", "这座楼很高", "这座楼很低", "contradiction"),
        ("semantic_fragments", "negation", "x", "template", "特朗普没去上海", "特朗普去了上海", "contradiction"),
        ("semantic_fragments", "boolean", "x", "template", "他和她都来了", "他来了", "entailment"),   # not a paraphrase
        ("chinese_hans", "overlap", "x", "template", "医生见了律师", "律师见了医生", "neutral"),
        ("stress_antonym", "antonym", "noun", "xnli_premise", long_head + "高", long_head + "低", "contradiction"),
    ])
    sets = read_open_domain(tmp_path, seed=1, max_length=64)
    sts = sets["chinese_sts"]
    assert sum(p.label for p in sts) == 2 and ("他没拒绝我的要求。", "他拒绝我的要求。", 0) in sts
    assert len(sts) == 4                      # 2 positives, the minimal pair, one unrelated pair to balance
    assert read_open_domain(tmp_path, seed=1, max_length=64) == sets          # seeded
    assert [(p.text1, p.label) for p in sets["chinese_stsb_train"]] == [
        ("一架飞机要起飞了。", 1), ("三个人在下棋。", 0), ("猫在睡觉", 0)]
    assert [(p.text2, p.label) for p in sets["nli_probing"]] == [
        ("我喜爱这本书", 1), ("这座楼很低", 0), ("特朗普去了上海", 0)]  # the edit past 64 chars is dropped
    assert read_stsb_binary(tmp_path / OPEN_DOMAIN_FILES["chinese_stsb_train"]) == sets["chinese_stsb_train"]
    (tmp_path / OPEN_DOMAIN_FILES["nli_probing"]).unlink()
    with pytest.raises(SystemExit, match="nli_probing"):
        read_open_domain(tmp_path, seed=1, max_length=64)
