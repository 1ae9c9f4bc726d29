"""The sentiment robustness suite: its cases, their gold labels, and its scoring."""

from __future__ import annotations

from collections import Counter

import pytest

from recipes.sentiment_analysis.robustness import (
    INVARIANCE_KINDS, KINDS, LABELLED_KINDS, NO_OPINION_CEILING, Case, generate_cases, no_opinion_sentences,
    run_no_opinion, run_suite)
from taskflow import Taskflow

REAL = [  # stand-ins for dev reviews, written here: tests do not read ../shared
    ("酒店离火车站很近，房间干净，早餐种类也多，下次还住这里。", "positive"),
    ("这本书印刷粗糙，错别字很多，内容也很空洞。", "negative"),
    ("电脑运行很快，屏幕显示效果好，散热也不错。", "positive"),
    ("等了一个半小时才送到，饭菜都凉了，汤还洒了一半。", "negative"),
]


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return generate_cases()


@pytest.fixture(scope="module")
def every_case() -> list[Case]:
    return generate_cases(per_kind=None)


def _gold(cases: list[Case]) -> dict[str, str]:
    return {c.text: c.label for c in cases if c.original is None}


def test_the_same_arguments_give_the_same_cases(cases):
    assert generate_cases() == cases
    assert generate_cases(REAL, seed=3) == generate_cases(REAL, seed=3)
    assert generate_cases(seed=1) != cases


def test_every_kind_has_a_usable_number_of_cases_and_labelled_kinds_are_balanced(cases):
    counts = Counter(c.kind for c in cases)
    assert set(counts) == set(KINDS)
    assert all(150 <= n <= 400 for n in counts.values()), counts
    for kind in LABELLED_KINDS:
        labels = Counter(c.label for c in cases if c.kind == kind)
        assert labels["positive"] == labels["negative"] == 150, (kind, labels)


def test_invariance_cases_have_an_original_and_labelled_cases_a_gold_label(cases):
    for case in cases:
        if case.kind in INVARIANCE_KINDS:
            assert case.original and case.original != case.text, case
        else:
            assert case.original is None and case.label in ("positive", "negative"), case


def test_the_reported_sentences_are_in_the_suite(cases):
    pairs = {(c.kind, c.original, c.text) for c in cases}
    assert ("punctuation", "这家店很好", "这家店很好！") in pairs
    assert ("digits", "服务很好", "服务很好40") in pairs and ("digits", "服务很好", "服务很好44") in pairs
    gold = _gold(cases)
    assert gold["不难吃"] == "positive" and gold["yyds!!"] == "positive"
    iphone = [c for c in cases if c.text == "iPhone 15 Pro售价7999元，比去年贵了500块，性价比太低"]
    assert [(c.kind, c.label) for c in iphone] == [("price", "negative")]


@pytest.mark.parametrize("text, label", [
    # negation
    ("不难吃", "positive"), ("没有想象中差", "positive"), ("不是很好", "negative"),
    ("房间一点也不干净", "negative"), ("价格一点也不贵", "positive"), ("价格不贵", "positive"),
    ("菜没有想象中那么好吃", "negative"), ("上菜没有想象中那么慢", "positive"), ("服务不太热情", "negative"),
    ("系统不卡", "positive"), ("服务没得说", "positive"), ("菜不怎么样", "negative"),
    ("不得不说，这家店的菜很好吃", "positive"), ("对这家酒店不满意", "negative"), ("选这款手机不后悔", "positive"),
    # contrast: the clause after the connective decides
    ("便宜但是质量差", "negative"), ("虽然贵但是很好用", "positive"),
    ("虽然这家店的价格有点贵，但是菜非常好吃", "positive"),
    ("虽然这家酒店的房间还算干净，但是服务太差了", "negative"),
    ("这家酒店的房间挺干净的，可是服务特别差", "negative"),
    ("虽然房间有点小，不过总体还是很满意", "positive"),
    # slang
    ("这家店的奶茶yyds", "positive"), ("又踩雷了", "negative"), ("这个蛋糕绝绝子", "positive"),
    ("这家店直接封神", "positive"), ("这个耳机太拉胯了", "negative"), ("大家避雷这家民宿", "negative"),
    ("发现一家宝藏小店", "positive"), ("被这款面膜种草了", "positive"), ("这杯咖啡翻车了", "negative"),
    ("买了这款洗发水，真的会谢", "negative"), ("炸鸡，爱了爱了", "positive"), ("这家酒店，无语", "negative"),
])
def test_template_sentences_carry_the_label_a_chinese_reader_gives_them(every_case, text, label):
    assert _gold(every_case)[text] == label


def test_ambiguous_words_and_patterns_are_left_out(every_case):
    labelled = [c.text for c in every_case if c.original is None]
    assert not [t for t in labelled if "拔草" in t or "就是" in t or "离谱" in t]   # read both ways
    assert "菜不是很难吃" not in labelled and "房间不脏" not in labelled     # lukewarm, not praise
    assert "价格不便宜" not in labelled                                      # may be a fact before "but worth it"
    emoji_cases = [c for c in every_case if c.kind == "emoji"]
    assert not [c for c in emoji_cases if "😂" in c.text or "🙂" in c.text]
    for case in emoji_cases:  # an emoji agrees with the base's label
        added = set(case.text) - set(case.original)
        assert added and not added & ({"👍", "😊"} if case.label == "negative" else {"👎", "😡"}), case


def test_real_sentences_become_bases_of_invariances():
    cases = generate_cases(REAL, per_kind=20)
    for kind in INVARIANCE_KINDS:
        originals = {c.original for c in cases if c.kind == kind}
        assert {t for t, _ in REAL} <= originals, kind
    emoji = {c.original: c for c in cases if c.kind == "emoji"}
    assert emoji[REAL[1][0]].label == "negative"
    with pytest.raises(ValueError, match="label"):
        generate_cases([("好", "good")])


def test_run_suite_catches_a_model_that_flips_on_exclamation_marks(cases):
    def flips_on_bang(texts):
        return ["negative" if "!" in t or "！" in t else "positive" for t in texts]

    report = run_suite(flips_on_bang, cases)
    assert set(report) == set(KINDS)
    assert 0 < report["punctuation"]["held"] < 1
    assert report["whitespace"]["held"] == report["year"]["held"] == 1.0   # these never add or drop a '!'
    failure = report["punctuation"]["failures"][0]
    assert failure == {"text": "这家店很好！", "predicted": "negative", "original": "这家店很好",
                       "original_predicted": "positive"}
    assert all(len(r["failures"]) <= 3 for r in report.values())


def test_run_suite_scores_labelled_kinds_against_the_gold_label(cases):
    report = run_suite(lambda texts: ["positive"] * len(texts), cases)
    for kind in LABELLED_KINDS:
        ours = [c for c in cases if c.kind == kind]
        assert report[kind]["n"] == len(ours)
        assert report[kind]["held"] == sum(c.label == "positive" for c in ours) / len(ours)
        assert all(f["expected"] == "negative" for f in report[kind]["failures"])
    assert all(report[kind]["held"] == 1.0 for kind in INVARIANCE_KINDS)


def test_run_suite_refuses_a_predict_that_drops_texts(cases):
    with pytest.raises(ValueError, match="one per text"):
        run_suite(lambda texts: ["positive"] * (len(texts) - 1), cases)


def test_the_shipped_model_gets_a_complete_report(cases):
    """No accuracy threshold: the shipped model fails many of these today."""
    senta = Taskflow("sentiment_analysis", offline=True)
    report = run_suite(lambda texts: [r["label"] for r in senta(texts)], cases)
    assert list(report) == list(KINDS)
    for kind, result in report.items():
        assert result["n"] == sum(c.kind == kind for c in cases) > 0
        assert 0.0 <= result["held"] <= 1.0
        assert result["check"] == ("invariance" if kind in INVARIANCE_KINDS else "label")


def test_no_opinion_statements_hold_for_a_hedging_model_and_fail_for_a_sure_one():
    texts = no_opinion_sentences()
    assert "这本书有三百页" in texts and "手机是黑色的" in texts and len(texts) == len(set(texts)) >= 40
    hedging = run_no_opinion(lambda batch: [0.55] * len(batch))
    assert hedging["held"] == 1.0 and hedging["failures"] == [] and hedging["n"] == len(texts)
    sure = run_no_opinion(lambda batch: [0.99 if "书" in t else 0.6 for t in batch])
    assert 0 < sure["held"] < 1 and sure["mean_confidence"] > 0.6
    assert [f["text"] for f in sure["failures"]] and all("书" in f["text"] for f in sure["failures"])
    assert run_no_opinion(lambda batch: [NO_OPINION_CEILING] * len(batch))["held"] == 1.0   # the ceiling holds
    with pytest.raises(ValueError, match="one per text"):
        run_no_opinion(lambda batch: [0.5])
