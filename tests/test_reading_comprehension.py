"""reading_comprehension: input forms, offsets, windows, null answers, top_k, errors, scoring."""

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from make_tiny_models import MRC_CONTEXT

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InputTypeError, InvalidInputError, OptionError
from taskflow.tasks.reading_comprehension.data import (
    FEATURES, Vocab, best_spans, merge, normalise, prepare, windows)
from taskflow.tasks.reading_comprehension.metrics import em_score, evaluate, f1_score, mixed_segmentation

QUESTION = "浙江省的省会是哪里？"
SHIPPED = Path(__file__).resolve().parents[1] / "resources" / "reading_comprehension" / "drqa_char"


@pytest.fixture(scope="module")
def tiny(tiny_models):
    return tiny_models["reading_comprehension"]


@pytest.fixture(scope="module")
def flow(tiny):
    return Taskflow("reading_comprehension", task_path=tiny)


def _check(result, context):
    assert set(result) == {"question", "answer", "start", "end", "score"}
    assert context[result["start"]:result["end"]] == result["answer"]
    assert isinstance(result["score"], float) and 0.0 <= result["score"] <= 1.0


# ------------------------------------------------------------------ inputs

def test_an_item_may_be_a_dict_a_tuple_or_a_list(flow, tiny):
    forms = [{"context": MRC_CONTEXT, "question": QUESTION}, (MRC_CONTEXT, QUESTION), [MRC_CONTEXT, QUESTION],
             {"context": MRC_CONTEXT, "question": QUESTION, "id": 7}]
    outs = [flow(form) for form in forms] + [flow([form]) for form in forms]
    for out in outs:
        assert len(out) == 1
        _check(out[0], MRC_CONTEXT)
        assert out[0]["question"] == QUESTION
        assert out[0]["answer"] == outs[0][0]["answer"]
    alias = Taskflow("question_answering_extractive", task_path=tiny)(forms)
    assert [r["answer"] for r in alias] == [outs[0][0]["answer"]] * 4
    assert flow(iter(forms[:2])) == flow(forms[:2])


@pytest.mark.parametrize("bad, error, index, words", [
    ("只有一段文字", InputTypeError, None, "single str"),
    (42, InputTypeError, None, "got int"),
    ([{"context": "a", "question": "b"}, {"context": "a"}], InvalidInputError, 1, "without 'question'"),
    ([{"context": "a", "question": "b"}, {"question": "b"}], InvalidInputError, 1, "without 'context'"),
    ([{"context": "a", "question": "b"}, {"context": "a", "question": 5}], InputTypeError, 1,
     "'question' of item #1 must be a str, got int"),
    ([{"context": "a", "question": "b"}, {"context": None, "question": "b"}], InputTypeError, 1,
     "'context' of item #1 must be a str, got NoneType"),
    ([{"context": "a", "question": "b"}, {"context": "a", "question": "  "}], InvalidInputError, 1,
     "'question' of item #1 is empty"),
    ([{"context": "a", "question": "b"}, {"context": "", "question": "b"}], InvalidInputError, 1,
     "'context' of item #1 is empty"),
    ([("a", "b"), ("a", b"b")], InputTypeError, 1, "decode"),
    ([("a", "b"), ("a", "b", "c")], InvalidInputError, 1, "exactly 2 texts, got 3"),
    ([("a", "b"), "a"], InputTypeError, 1, "item #1 must be"),
])
def test_bad_inputs_are_typed_errors_naming_index_and_key(flow, bad, error, index, words):
    with pytest.raises(error) as info:
        flow(bad)
    assert getattr(info.value, "index", None) == index
    assert words in str(info.value)


@pytest.mark.parametrize("options, words", [
    ({"top_k": 0}, "top_k"), ({"max_answer_len": "5"}, "max_answer_len"),
    ({"max_seq_len": 16, "doc_stride": 16}, "doc_stride"), ({"handle_impossible_answer": "yes"}, "True or False"),
])
def test_bad_options_are_errors(tiny, options, words):
    with pytest.raises(OptionError, match=words):
        Taskflow("reading_comprehension", task_path=tiny, **options)
    with pytest.raises(TypeError, match="unknown option"):
        Taskflow("reading_comprehension", task_path=tiny, stride=3)


# ------------------------------------------------------------------ offsets

def test_offsets_index_the_original_context(tiny, flow):
    contexts = ["ＡＢＣ公司\n\n在杭州市，　成立于１９９９年。\r\n它是浙江省的公司。", MRC_CONTEXT, " \t杭州 \n ",
                "Ｈｅｌｌｏ　Ｗｏｒｌｄ！" * 5 + "\n" * 30 + "杭州市是浙江省的省会" * 4]
    for context in contexts:
        for result in Taskflow("reading_comprehension", task_path=tiny, top_k=8)(
                (context, "公司在哪里？"))[0]:
            _check(result, context)
            assert result["answer"] == result["answer"].strip()
            assert result["end"] - result["start"] <= flow.task.max_answer_len


def test_normalise_keeps_length_and_maps_width_case_and_space():
    text = "ＡＢＣ１２３，\n\t　abc"
    assert len(normalise(text)) == len(text)
    assert normalise(text) == "abc123,   abc"
    assert normalise("ＡＢ\nｃ") == "ab c"


# ------------------------------------------------------------------ windows

@pytest.mark.parametrize("length", [1, 31, 32, 33, 100, 1000, 20001])
def test_windows_cover_the_context_with_the_stated_overlap(length):
    found = windows(length, 32, 8)
    assert found[0][0] == 0 and found[-1][1] == length
    for (a, b), (c, d) in zip(found, found[1:]):
        assert b - a == 32 and d - c == min(32, length)
        assert c <= b - 8 and c > a       # overlap of at least doc_stride, always progressing
    assert all(b - a <= 32 for a, b in found)


def test_best_spans_respect_max_answer_len_and_rank():
    p_start = np.array([0.1, 0.6, 0.1, 0.1, 0.1])
    p_end = np.array([0.1, 0.0, 0.1, 0.1, 0.7])
    spans, null = best_spans(p_start, p_end, 4, 2, 3)
    assert null == pytest.approx(0.01)
    assert all(e - s <= 2 for s, e, _ in spans)
    assert [round(x, 3) for *_, x in spans] == sorted([round(x, 3) for *_, x in spans], reverse=True)
    spans, _ = best_spans(p_start, p_end, 4, 4, 1)
    assert spans == [(0, 4, pytest.approx(0.42))]


def test_merge_dedups_overlapping_windows_and_uses_the_lowest_null():
    context = "0123456789"
    per_window = [(0, [(3, 5, 0.5), (0, 1, 0.1)], 0.4), (3, [(0, 2, 0.7), (1, 3, 0.2)], 0.1)]
    spans, null = merge(context, per_window, 5)
    assert spans[0] == (3, 5, 0.7) and len(spans) == 3
    assert null == 0.1


class _MarkerNetwork:
    """A stand-in for the predictor: start on '杭', end on '市', else NULL (deterministic)."""

    def __init__(self, vocab):
        self.start_id, self.end_id = vocab.chars["杭"], vocab.chars["市"]

    def __call__(self, features):
        ids = features["context_ids"]
        p_start = np.where(ids == self.start_id, 10.0, 0.0) + np.where(ids > 0, 1e-3, 0.0)
        p_end = np.where(ids == self.end_id, 10.0, 0.0) + np.where(ids > 0, 1e-3, 0.0)
        p_start[:, 0] += 1.0
        p_end[:, 0] += 1.0
        return [p_start / p_start.sum(1, keepdims=True), p_end / p_end.sum(1, keepdims=True)]


@pytest.mark.parametrize("position", [5, 40, 1000, 19990])
def test_an_answer_after_the_first_window_is_found(tiny, position):
    flow = Taskflow("reading_comprehension", task_path=tiny, batch_size=4)
    flow.task.forward = _MarkerNetwork(flow.task.vocab)
    context = ("好" * position + "杭州市" + "好" * 20000)[:20003]
    result = flow({"context": context, "question": "哪里"})[0]
    assert (result["answer"], result["start"], result["end"]) == ("杭州市", position, position + 3)
    none = Taskflow("reading_comprehension", task_path=tiny, handle_impossible_answer=True)
    none.task.forward = _MarkerNetwork(none.task.vocab)
    empty = none(("好" * 100, "哪里"))[0]
    assert (empty["answer"], empty["start"], empty["end"]) == ("", 0, 0) and empty["score"] > 0.5


def test_windows_are_merged_right_with_a_real_paddle_model(tiny):
    """The tiny reader (real Paddle, static graph) over a context of many overlapping windows, run in
    batches: its answers are the best spans of any window, found by running each window alone."""
    flow = Taskflow("reading_comprehension", task_path=tiny, batch_size=3, top_k=3, max_answer_len=6)
    context = "".join(f"{city}是{province}的省会，位于中国。" for city, province in
                      [("杭州市", "浙江省"), ("南京市", "江苏省"), ("广州市", "广东省"), ("成都市", "四川省")] * 3)
    item = flow.task.check_item({"context": context, "question": QUESTION}, 0)
    units = flow.task.split(item)
    assert len(units) >= 4                          # several windows, more than one batch
    brute = {}
    for unit in units:                              # each window alone: a batch of one
        (start, spans, _), = flow.task.postprocess(flow.task.forward(flow.task.preprocess([unit])), [unit])
        for s, e, score in spans:
            s, e = s + start, e + start
            while s < e and context[s].isspace():
                s += 1
            brute[(s, e)] = max(score, brute.get((s, e), -1.0))
    expected = sorted(brute.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    got = flow({"context": context, "question": QUESTION})[0]
    assert [(r["start"], r["end"]) for r in got] == [span for span, _ in expected]
    np.testing.assert_allclose([r["score"] for r in got], [score for _, score in expected], rtol=1e-5)
    assert len({(r["start"], r["end"]) for r in got}) == 3   # a span two windows share counts once


def test_a_20000_char_context_runs_in_bounded_batches(tiny):
    flow = Taskflow("reading_comprehension", task_path=tiny, batch_size=8)
    seen = []
    real = flow.task.preprocess
    flow.task.preprocess = lambda units: (seen.append(len(units)), real(units))[1]
    context = ("杭州市是浙江省的省会。\n" * 2000)[:20000]
    result = flow({"context": context, "question": QUESTION})[0]
    _check(result, context)
    assert max(seen) <= 8 and sum(seen) == len(windows(20000, 32, 8))


# ------------------------------------------------------------ null, top_k

def test_handle_impossible_answer_returns_the_empty_answer_by_the_null_score(tiny):
    item = {"context": MRC_CONTEXT, "question": QUESTION}
    ranked = Taskflow("reading_comprehension", task_path=tiny, top_k=50, handle_impossible_answer=True)(item)[0]
    empties = [r for r in ranked if r["answer"] == ""]
    assert len(empties) == 1 and empties[0]["start"] == empties[0]["end"] == 0
    best = Taskflow("reading_comprehension", task_path=tiny, handle_impossible_answer=True)(item)[0]
    assert best == ranked[0]
    plain = Taskflow("reading_comprehension", task_path=tiny)(item)[0]
    assert plain["answer"] != ""
    assert (best["answer"] == "") == (empties[0]["score"] > plain["score"])


def test_top_k_gives_distinct_spans_best_first(tiny):
    out = Taskflow("reading_comprehension", task_path=tiny, top_k=5, max_answer_len=4)(
        [(MRC_CONTEXT, QUESTION), ("杭州", "哪里")])
    assert [type(r) for r in out] == [list, list]
    first = out[0]
    assert len(first) == 5
    assert len({(r["start"], r["end"]) for r in first}) == 5
    assert [r["score"] for r in first] == sorted((r["score"] for r in first), reverse=True)
    for r in first:
        _check(r, MRC_CONTEXT)
        assert r["end"] - r["start"] <= 4
    assert 1 <= len(out[1]) <= 3    # "杭州" has 3 spans


# ------------------------------------------------------------ display, CLI

def test_render_html_highlights_the_answer_and_escapes(flow):
    context = "<b>杭州</b>市是浙江省的省会 & 城市"
    results = flow({"context": context, "question": "<i>哪里</i>"})
    page = results._repr_html_()
    assert "<b>杭州" not in page and "&lt;i&gt;哪里" in page and "<mark" in page
    answer = results[0]
    assert f">{html.escape(answer['answer'])}<sub" in page or answer["answer"] == ""
    text = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<sub[^>]*>.*?</sub>", "", page)))
    assert context in text, "the whole context is shown"


def test_cli_takes_context_and_question(tiny, capsys):
    assert main(["reading_comprehension", MRC_CONTEXT, QUESTION, "--task-path", str(tiny)]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert line["question"] == QUESTION and MRC_CONTEXT[line["start"]:line["end"]] == line["answer"]


def test_features_flag_question_overlap():
    vocab = Vocab(["[PAD]", "[UNK]", "[NULL]", *"杭州市是浙江省的省会"], [("省会", 3), ("浙江", 3)])
    p = prepare("杭州市是浙江省的省会", "浙江省的省会是哪里", vocab)
    column = {name: p.features[:, i] for i, name in enumerate(FEATURES)}
    assert column["char_in_q"].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert column["word_in_q"].tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 1, 1]
    assert column["trigram_mid_in_q"][5] == 1 and column["bigram_left_in_q"][0] == 0


# ------------------------------------------------------------------ scoring

def test_official_cmrc_scoring():
    assert mixed_segmentation("光荣和ω-force 2019年") == ["光", "荣", "和", "ω", "-", "force", "2019", "年"]
    assert f1_score(["1963年"], "1963") == pytest.approx(2 / 3)
    assert f1_score(["北京大学"], "大学北京") == pytest.approx(0.5)      # longest common substring, not bag
    assert em_score(["《红楼梦》"], "红楼梦") == 1.0
    assert evaluate([["a", "杭州"], ["x"]], ["杭州", "y"]) == {"f1": 50.0, "em": 50.0, "questions": 2}


# ------------------------------------------------------------- shipped model

@pytest.mark.skipif(not (SHIPPED / "manifest.json").is_file(), reason="the shipped model is not built")
def test_shipped_model_answers_clear_questions():
    qa = Taskflow("reading_comprehension")
    items = [
        {"context": "范廷颂是越南罗马天主教枢机。1963年被任为主教；1990年被擢升为天主教河内总教区宗座署理。",
         "question": "范廷颂是什么时候被任为主教的？"},
        {"context": "《红楼梦》是中国古代章回体长篇小说，作者是曹雪芹。全书共一百二十回。",
         "question": "《红楼梦》的作者是谁？"},
        {"context": "珠穆朗玛峰是喜马拉雅山脉的主峰，海拔8848.86米，是世界最高峰。",
         "question": "珠穆朗玛峰的海拔是多少？"},
    ]
    out = qa(items)
    answers = [r["answer"] for r in out]
    assert "1963" in answers[0] and "曹雪芹" in answers[1] and "8848" in answers[2], answers
