"""reading_comprehension: input forms, offsets, windows, null answers, top_k, errors, scoring; the
joint span scorer, the null threshold, the recipe's held-out selection and the unanswerable sets."""

import html
import importlib.util
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from make_tiny_models import MRC_CONTEXT

from recipes.reading_comprehension.calibrate import package_scores, tune_null_threshold
from recipes.reading_comprehension.train import main as recipe
from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InputTypeError, InvalidInputError, ManifestError, OptionError
from taskflow.tasks.reading_comprehension.data import (
    FEATURES, Vocab, best_spans, ensemble_null, mean_span_scores, merge, normalise, prepare, top_spans, windows)
from taskflow.tasks.reading_comprehension.metrics import em_score, evaluate, f1_score, mixed_segmentation

QUESTION = "浙江省的省会是哪里？"
ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "recipes" / "reading_comprehension" / "dev"


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
    ({"null_threshold": "1"}, "null_threshold"), ({"null_threshold": 99.0}, "between -50 and 50"),
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
    # top_k over the context's every span: wherever "no answer" ranks, it is among them, once.
    ranked = Taskflow("reading_comprehension", task_path=tiny, top_k=1000, handle_impossible_answer=True)(item)[0]
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

@pytest.mark.parametrize("options", [{}, {"mode": "accurate"}], ids=["default", "accurate"])
def test_shipped_model_answers_clear_questions(options):
    qa = Taskflow("reading_comprehension", **options)
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
    # With "no answer" allowed (the null model), the same questions keep their answers, and each asked
    # of another item's context gets the empty answer.
    allowed = Taskflow("reading_comprehension", handle_impossible_answer=True, **options)(items)
    assert [r["answer"] for r in allowed] == answers
    swapped = [{"context": items[(i + 1) % 3]["context"], "question": item["question"]} for i, item in enumerate(items)]
    refused = Taskflow("reading_comprehension", handle_impossible_answer=True, **options)(swapped)
    assert [r["answer"] for r in refused] == [""] * 3


# ------------------------------------------------- joint span scorer (length)

def _best_spans_1_0_0(p_start, p_end, length, max_answer_len, top_k):
    """data.best_spans as 1.0.0 shipped it (verbatim but for the name): what packages without a
    length scorer must keep giving."""
    null = float(p_start[0] * p_end[0])
    if length == 0:
        return [], null
    ps = np.asarray(p_start[1:1 + length], dtype=np.float64)
    pe = np.asarray(p_end[1:1 + length], dtype=np.float64)
    span = min(max_answer_len, length)
    scores = np.full((length, span), -1.0)
    for j in range(span):
        scores[: length - j, j] = ps[: length - j] * pe[j:]
    k = min(top_k, scores.size)
    flat = np.argpartition(-scores.ravel(), k - 1)[:k]
    flat = flat[np.argsort(-scores.ravel()[flat], kind="stable")]
    out = []
    for index in flat:
        i, j = divmod(int(index), span)
        if scores[i, j] >= 0:
            out.append((i, i + j + 1, float(scores[i, j])))
    return out, null


def test_packages_without_a_length_scorer_decode_exactly_as_1_0_0():
    rng = np.random.default_rng(3)
    for length, max_answer_len, top_k in [(0, 4, 1), (1, 4, 1), (7, 3, 5), (40, 64, 1), (40, 10, 200), (300, 64, 3)]:
        p_start, p_end = rng.dirichlet(np.ones(length + 1)), rng.dirichlet(np.ones(length + 1))
        p_start = np.concatenate([p_start, np.zeros(5)]).astype(np.float32)    # the batch's padding
        p_end = np.concatenate([p_end, np.zeros(5)]).astype(np.float32)
        assert best_spans(p_start, p_end, length, max_answer_len, top_k) == \
            _best_spans_1_0_0(p_start, p_end, length, max_answer_len, top_k)


def test_the_tiny_old_format_package_has_two_outputs_and_decodes_by_the_1_0_0_formula(flow):
    item = flow.task.check_item({"context": MRC_CONTEXT, "question": QUESTION}, 0)
    units = flow.task.split(item)
    outputs = flow.task.forward(flow.task.preprocess(units))
    assert len(outputs) == 2
    expected = [(u.start, *_best_spans_1_0_0(outputs[0][row], outputs[1][row], u.end - u.start,
                                             flow.task.max_answer_len, 1)) for row, u in enumerate(units)]
    assert flow.task.postprocess(outputs, units) == expected


def test_joint_decoding_gives_the_probabilities_the_joint_loss_trains():
    """For every target span (NULL included), exp(-joint loss) is the probability best_spans
    gives that span from the network's outputs (softmaxed start / end and the length scores)."""
    paddle = pytest.importorskip("paddle")
    from recipes.reading_comprehension.train import joint_span_loss

    rng = np.random.default_rng(0)
    length, width, longest = 9, 12, 4                   # 9 real chars, 2 pads, spans of at most 4 chars
    start, end = rng.normal(0, 2, width).astype(np.float32), rng.normal(0, 2, width).astype(np.float32)
    start[1 + length:] = end[1 + length:] = -1e4
    length_scores = rng.normal(0, 1, longest + 1).astype(np.float32)
    softmax = lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    spans, null = best_spans(softmax(start), softmax(end), length, longest, 1000, length_scores)
    decoded = {(s, e): score for s, e, score in spans}
    assert len(decoded) == sum(length - j for j in range(longest))          # every span of 1..4 chars
    assert null + sum(decoded.values()) == pytest.approx(1.0)
    targets = [(0, 0, None), (1, 1, (0, 1)), (3, 6, (2, 6)), (length - 3, length, (length - 4, length))]
    for s, e, span in targets:
        loss = joint_span_loss(paddle.to_tensor(start[None]), paddle.to_tensor(end[None]),
                               paddle.to_tensor(length_scores[None]), np.array([s]), np.array([e]))
        assert math.exp(-float(loss)) == pytest.approx(null if span is None else decoded[span], rel=1e-4)
    # A longer max_answer_len cannot give longer spans: the model scores none.
    assert max(e - s for s, e, _ in best_spans(softmax(start), softmax(end), length, 64, 1000, length_scores)[0]) == 4


def _train_tiny(root: Path, *options: str, chars: tuple[str, ...] = ("--no-pretrain",)) -> Path:
    """A tiny package trained for a few steps by the recipe on a fixture of 12 passages (``chars``:
    where the char table starts)."""
    pytest.importorskip("jieba")
    contexts = [("杭州市是浙江省的省会，位于中国东南沿海。西湖在杭州市的西面。", [("浙江省的省会是哪里？", "杭州市"), ("西湖在哪里？", "杭州市的西面")]),
                ("曹雪芹是清代作家，他写了红楼梦。红楼梦是中国古典小说。", [("红楼梦是谁写的？", "曹雪芹"), ("曹雪芹是哪个朝代的作家？", "清代")]),
                ("北京大学创办于一八九八年，是中国的一所大学。", [("北京大学创办于哪一年？", "一八九八年"), ("北京大学是什么？", "中国的一所大学")])]

    def squad(rows, tag):
        paragraphs = [{"id": f"{tag}{i}", "context": c,
                       "qas": [{"id": f"{tag}{i}_{j}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}
                               for j, (q, a) in enumerate(qas)]} for i, (c, qas) in enumerate(rows)]
        return json.dumps({"data": [{"title": p["id"], "paragraphs": [p]} for p in paragraphs]}, ensure_ascii=False)

    data = root / "cmrc"
    data.mkdir()
    # Each context 4 times under other ids (with a char added), so one held-out passage leaves the rest.
    train = [(c + "。" * k, qas) for k in range(4) for c, qas in contexts]
    (data / "train.json").write_text(squad(train, "T"), encoding="utf-8")
    (data / "dev.json").write_text(squad(contexts[2:], "D"), encoding="utf-8")
    (data / "trial.json").write_text(squad(contexts[:2], "R"), encoding="utf-8")
    unanswerable = root / "unanswerable.jsonl"
    unanswerable.write_text("".join(json.dumps({"context": contexts[(i + 1) % 3][0], "question": q}, ensure_ascii=False)
                                    + "\n" for i, (_, qas) in enumerate(contexts) for q, _ in qas), encoding="utf-8")
    out = root / "model"
    assert recipe(["--data-dir", str(data), "--out", str(out), "--char-dim", "8",
                   "--hidden", "6", "--layers", "1", "--min-char", "1", "--min-word", "1", "--window", "24",
                   "--max-seq-len", "32", "--doc-stride", "8", "--max-answer-len", "6", "--epochs", "2",
                   "--batch-size", "4", "--warmup", "2", "--evals", "2", *chars,
                   "--unanswerable", str(unanswerable), *options]) == 0
    return out


@pytest.fixture(scope="module")
def joint_package(tmp_path_factory):
    """The recipe with --span-loss joint (the default)."""
    return _train_tiny(tmp_path_factory.mktemp("joint"))


def test_the_joint_recipe_writes_a_length_scorer_threshold_and_report_figures(joint_package):
    manifest = json.loads((joint_package / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["architecture"]["max_span"] == manifest["max_answer_len"] == 6
    assert manifest["training"]["span_loss"] == "joint"
    # Selected on whole passages held out of train (a tenth at most: one of 12), never on dev or trial.
    assert manifest["training"]["questions"] == 22 and manifest["metrics"]["selection"]["questions"] == 2
    assert "held out" in manifest["metrics"]["selection"]["file"]
    assert set(manifest["metrics"]["report"]) == {"dev.json", "trial.json"}
    assert {"f1", "em", "mean_answer_len", "mean_reference_len"} <= set(manifest["metrics"]["report"]["dev.json"])
    tuning = manifest["null_tuning"]
    assert manifest["null_threshold"] == tuning["null_threshold"] and tuning["unanswerable_questions"] == 6
    assert tuning["answerable_f1_drop"] <= 0.75


def test_the_independent_recipe_decodes_with_the_training_answers_length_prior(tmp_path):
    package = _train_tiny(tmp_path, "--span-loss", "independent")
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    assert "max_span" not in manifest["architecture"] and manifest["training"]["span_loss"] == "independent"
    # 22 training answers: 3, 6, 3, 2, 5 and 7 chars, four times each less the held-out passage's pair.
    prior = np.array(manifest["length_prior"])
    assert len(prior) == 7 and prior[0] == 0.0 and prior[1] == pytest.approx(prior[4]) and prior[3] > prior[2]
    qa = Taskflow("reading_comprehension", task_path=package)
    assert qa.task.length_prior.tolist() == manifest["length_prior"]
    qa(("杭州市是浙江省的省会，位于中国东南沿海。", "浙江省的省会是哪里？"))


def test_a_joint_package_decodes_with_its_length_scores(joint_package):
    qa = Taskflow("reading_comprehension", task_path=joint_package, top_k=3)
    context, question = "杭州市是浙江省的省会，位于中国东南沿海。西湖在杭州市的西面。", "西湖在哪里？"
    item = qa.task.check_item((context, question), 0)
    units = qa.task.split(item)
    outputs = qa.task.forward(qa.task.preprocess(units))
    assert len(outputs) == 3 and outputs[2].shape == (len(units), 7)
    got = qa((context, question))[0]
    spans, _ = merge(context, qa.task.postprocess(outputs, units), 3)
    assert [(r["start"], r["end"]) for r in got] == [(s, e) for s, e, _ in spans]
    joint = [best_spans(outputs[0][row], outputs[1][row], u.end - u.start, 6, 3, outputs[2][row])
             for row, u in enumerate(units)]
    assert [r["score"] for r in got] == pytest.approx([s for *_, s in merge(context, [(u.start, *j) for u, j in
                                                                                     zip(units, joint)], 3)[0]])
    # The length scores decide: make k-char spans overwhelmingly likely and every answer has k chars.
    real = qa.task.forward
    for k in (1, 5):
        def favour_k(features, k=k):
            p_start, p_end, length = real(features)
            length = length.copy()
            length[:, k] += 50.0
            return [p_start, p_end, length]

        qa.task.forward = favour_k
        assert [r["end"] - r["start"] for r in qa((context, question))[0]] == [k, k, k]
    qa.task.forward = real
    dynamic = Taskflow("reading_comprehension", task_path=joint_package, top_k=3, static=False)((context, question))[0]
    assert [(r["start"], r["end"]) for r in dynamic] == [(r["start"], r["end"]) for r in got]


def test_the_word_vector_reader_reads_a_frozen_table_of_the_corpus_word_vectors(tmp_path):
    """--word-vectors: each char also reads its word's corpus vector; the table ships as the corpus
    gave it (centred, unit rows, float16), zero for words the corpus lacks, untouched by training;
    the word ids reach the static predictor, which agrees with the dynamic graph."""
    words = ["杭州市", "浙江省", "省会", "哪里", "红楼梦", "曹雪芹", "北京大学"]
    rng = np.random.default_rng(0)
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    arrays = {}
    for kind, tokens, dim in (("char", list("杭州市浙江省的会红楼梦"), 8), ("word", words, 5)):
        arrays.update({f"{kind}_tokens": np.array(tokens), f"{kind}_counts": np.arange(len(tokens), 0, -1) * 10,
                       f"{kind}_vectors": rng.normal(size=(len(tokens), dim)).astype(np.float16)})
    np.savez(vectors / "vectors.npz", **arrays)
    (vectors / "vectors.json").write_text(json.dumps({"sources": {}}), encoding="utf-8")
    package = _train_tiny(tmp_path, "--word-vectors", chars=("--vectors", str(vectors)))

    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    vocab = Vocab.load(package / "vocab.json")
    assert manifest["architecture"]["word_dim"] == 5
    assert manifest["architecture"]["word_vocab_size"] == len(vocab.word_list) + 1
    expected = arrays["word_vectors"].astype(np.float64)
    expected -= expected.mean(axis=0)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    with np.load(package / "weights.npz") as weights:
        # Stored as int8 rows with their scales (a quarter of float32: the table is most of a package).
        stored = weights["word_embed.weight"]
        table = stored * weights["word_embed.weight@row_scale"]
    assert stored.dtype == np.int8 and table.shape == (len(vocab.word_list) + 1, 5)
    assert not table[0].any()
    covered = 0
    for row, word in enumerate(vocab.word_list, 1):
        if word in words:
            np.testing.assert_allclose(table[row], expected[words.index(word)], atol=5e-3)
            covered += 1
        else:
            assert not table[row].any(), word
    assert covered >= 3 and manifest["training"]["word_vectors"]["coverage"] == round(covered / len(vocab.word_list), 4)

    context, question = "杭州市是浙江省的省会，位于中国东南沿海。西湖在杭州市的西面。", "浙江省的省会是哪里？"
    assert prepare(context, question, vocab).word_ids is None        # a char-only reader is not fed them
    prepared = prepare(context, question, vocab, word_ids=True)
    assert prepared.word_ids[0] == prepared.word_ids[2] == vocab.words["杭州市"] + 1 and prepared.word_ids[3] == 0
    assert prepared.question_word_ids[:3].tolist() == [vocab.words["浙江省"] + 1] * 3
    qa = Taskflow("reading_comprehension", task_path=package, top_k=3)
    assert [spec.name for spec in qa.task.input_specs()][-2:] == ["context_word_ids", "question_word_ids"]
    static = qa((context, question))[0]
    dynamic = Taskflow("reading_comprehension", task_path=package, top_k=3, static=False)((context, question))[0]
    assert [(r["start"], r["end"]) for r in static] == [(r["start"], r["end"]) for r in dynamic]
    assert [r["score"] for r in static] == pytest.approx([r["score"] for r in dynamic], rel=1e-4)


# ------------------------------------------------------------ null threshold

def test_the_manifest_threshold_moves_the_no_answer_decision_as_documented(tiny, tmp_path):
    """ln(null) - ln(best) above null_threshold: the empty answer; below: the best span."""
    from recipes.tuning import update_manifest

    item = {"context": MRC_CONTEXT, "question": QUESTION}
    (_, best, null), = package_scores(Taskflow("reading_comprehension", task_path=tiny).task, [item])
    margin = math.log(null) - math.log(best)
    package = tmp_path / "tiny"
    shutil.copytree(tiny, package)
    answers = {}
    for threshold in (margin - 0.05, margin + 0.05):
        update_manifest(package, {"null_threshold": threshold})
        answers[threshold] = Taskflow("reading_comprehension", task_path=package, handle_impossible_answer=True)(item)[0]
    below, above = answers[margin - 0.05], answers[margin + 0.05]
    assert below["answer"] == "" and below["score"] == pytest.approx(null * math.exp(-(margin - 0.05)))
    assert above["answer"] != "" and above["score"] == pytest.approx(best)
    # The option overrides the manifest; without handle_impossible_answer it would do nothing, so it is refused.
    assert Taskflow("reading_comprehension", task_path=package, handle_impossible_answer=True,
                    null_threshold=margin - 0.05)(item)[0]["answer"] == ""
    with pytest.raises(OptionError, match="pass handle_impossible_answer=True with it"):
        Taskflow("reading_comprehension", task_path=package, null_threshold=-50.0)
    ranked = Taskflow("reading_comprehension", task_path=package, handle_impossible_answer=True, top_k=4)(item)[0]
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)


def test_tuning_picks_the_lowest_threshold_within_the_f1_budget():
    # Margins ln(null / best): answerable 10 questions of F1 1 at margins -5..4; unanswerable at 0..9.
    answerable = [(1.0, math.exp(m), 1.0) for m in range(-5, 5)]
    unanswerable = [(1.0, math.exp(m)) for m in range(0, 10)]
    tuned = tune_null_threshold(answerable, unanswerable, max_f1_drop=20.0)   # 2 of 10 answerable may go
    assert tuned["null_threshold"] == pytest.approx(2.5)       # says no answer for margins 3 and up
    assert tuned["answerable_f1_drop"] == pytest.approx(20.0) and tuned["unanswerable_no_answer"] == 70.0
    strict = tune_null_threshold(answerable, unanswerable, max_f1_drop=0.0)
    assert strict["answerable_f1_drop"] == 0.0 and strict["null_threshold"] > 4 and strict["unanswerable_no_answer"] == 50.0
    # Questions with no span at all always count as "no answer"; wrong answers cost no F1.
    loose = tune_null_threshold([(None, 0.5, 0.0), (1.0, 1e-9, 1.0)], [(None, 0.5), (0.5, 0.4)], max_f1_drop=0.0)
    assert loose["unanswerable_no_answer"] == 100.0 and loose["answerable_f1_drop"] == 0.0


# ------------------------------------------------- selection set, unanswerable sets

def test_the_held_out_selection_slice_is_whole_passages_and_seeded():
    from recipes.reading_comprehension.train import hold_out

    rows = [{"context": f"passage {c}", "question": f"q{c}.{q}"} for c in range(50) for q in range(c % 4 + 1)]
    kept, held = hold_out(rows, 1000, seed=7)
    assert len(held) <= len(rows) // 10 + 3 and len(kept) + len(held) == len(rows)
    assert not {r["context"] for r in kept} & {r["context"] for r in held}
    assert hold_out(rows, 1000, seed=7) == (kept, held) and hold_out(rows, 1000, seed=8)[1] != held


def _make_unanswerable():
    spec = importlib.util.spec_from_file_location("make_unanswerable", DEV / "make_unanswerable.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_builder_pairs_a_question_only_with_passages_without_its_answer():
    build = _make_unanswerable().build
    articles = [{"id": f"A{i}", "title": f"题{i}", "context": context, "questions": [(f"A{i}_Q", question, [answer])]}
                for i, (context, question, answer) in enumerate([
                    ("杭州市是浙江省的省会。", "浙江省的省会是哪里？", "杭州市"),
                    ("西湖在杭州市的西面，湖水清澈。", "西湖的湖水怎样？", "清澈"),
                    ("曹雪芹写了红楼梦。", "红楼梦是谁写的？", "曹雪芹"),
                    ("长江是中国最长的河流。", "中国最长的河流是什么？", "长江")] * 2)]
    for k, article in enumerate(articles):
        article["id"] = f"A{k}"
    parts = build(articles, train=[], seed=0)
    rows = parts["tune"] + parts["report"]
    assert rows
    for row in rows:
        assert not any(a in row["context"] for a in row["absent_answers"])
        assert row["question_id"].split("_")[0] != row["context_id"]
    # 浙江省的省会 is never paired with the passage on 西湖 (it names 杭州市).
    assert not any(r["question"] == "浙江省的省会是哪里？" and "杭州市" in r["context"] for r in rows)


@pytest.mark.parametrize("part", ["tune", "report"])
def test_the_unanswerable_sets_contract(part):
    rows = [json.loads(line) for line in (DEV / f"unanswerable_{part}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) > 400 and len({r["id"] for r in rows}) == len(rows)
    squeeze = lambda text: re.sub(r"[\s\W_]+", "", normalise(text))
    for row in rows:
        assert row["question"].strip() and row["context"].strip() and row["absent_answers"]
        for answer in row["absent_answers"]:
            assert answer not in row["context"] and squeeze(answer) not in squeeze(row["context"]), row["id"]
        assert row["question_id"].rsplit("_QUERY", 1)[0] != row["context_id"]     # another article's passage
    other = "report" if part == "tune" else "tune"
    others = [json.loads(line) for line in (DEV / f"unanswerable_{other}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert not {r["question_id"] for r in rows} & {r["question_id"] for r in others}
    assert not {r["context_id"] for r in rows} & {r["context_id"] for r in others}


def test_a_length_prior_in_the_manifest_decodes_a_package_without_a_length_scorer(tiny, tmp_path):
    from recipes.tuning import update_manifest

    package = tmp_path / "tiny"
    shutil.copytree(tiny, package)
    item = (MRC_CONTEXT, QUESTION)
    plain = Taskflow("reading_comprehension", task_path=package, top_k=3)(item)[0]
    for k in (2, 7):
        prior = [0.0] + [50.0 if n == k else 0.0 for n in range(1, 11)]
        update_manifest(package, {"length_prior": prior})
        qa = Taskflow("reading_comprehension", task_path=package, top_k=3)
        assert [r["end"] - r["start"] for r in qa(item)[0]] == [k, k, k]
        item_units = qa.task.split(qa.task.check_item(item, 0))
        outputs = qa.task.forward(qa.task.preprocess(item_units))
        expected = [(u.start, *best_spans(outputs[0][row], outputs[1][row], u.end - u.start, 10, 3, np.array(prior)))
                    for row, u in enumerate(item_units)]
        assert qa.task.postprocess(outputs, item_units) == expected
    assert [r["end"] - r["start"] for r in plain] != [7, 7, 7]
    update_manifest(package, {"length_prior": ["long"]})
    with pytest.raises(ManifestError, match="length_prior"):
        Taskflow("reading_comprehension", task_path=package)


def test_calibrate_writes_a_length_prior_from_the_training_answers(tiny, tmp_path):
    from recipes.reading_comprehension.calibrate import main as calibrate

    package = tmp_path / "tiny"
    shutil.copytree(tiny, package)
    train = tmp_path / "train.json"
    qas = [{"id": f"Q{i}", "question": "哪里？", "answers": [{"text": "杭州市"[: 1 + i % 3], "answer_start": 0}]}
           for i in range(9)]
    train.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"id": "P", "context": "杭州市", "qas": qas}]}]},
                               ensure_ascii=False), encoding="utf-8")
    assert calibrate(["length-prior", "--package", str(package), "--train", str(train), "--write"]) == 0
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    prior = np.array(manifest["length_prior"])
    assert len(prior) == 1 + manifest["max_answer_len"] and prior[0] == 0.0
    # 3 answers each of 1, 2 and 3 chars (add-one): log(4 / 19) for those, log(1 / 19) for the 7 other lengths.
    np.testing.assert_allclose(prior[1:4], np.log(4 / 19), atol=1e-4)
    np.testing.assert_allclose(prior[4:], np.log(1 / 19), atol=1e-4)
    Taskflow("reading_comprehension", task_path=package)(("杭州市是浙江省的省会", "省会是哪里"))


# ---------------------------------------------------------------- ensembles

def test_mean_span_scores_average_the_readers_and_count_a_missing_span_as_zero():
    a = (np.array([[0.2, 0.1, 0.05], [0.3, -1.0, -1.0]]), 0.1)        # 2 chars, spans up to 3 long
    b = (np.array([[0.4], [0.2]]), 0.3)                               # spans of 1 char only
    scores, null = mean_span_scores([a, b])
    np.testing.assert_allclose(scores, [[0.3, 0.05, 0.025], [0.25, -1.0, -1.0]])
    assert null == pytest.approx(0.2)
    # An item's ensemble null: the best span (0.3) times the readers' mean odds of NULL against
    # their own best over the item's windows (lowest null, best span): sqrt(0.1 / 0.3 * 0.2 / 0.4).
    windows = [[(0.3, 0.1), (0.01, 0.9)], [(0.4, 0.3), (0.02, 0.2)]]
    assert ensemble_null(windows, 0.3) == pytest.approx(0.3 * math.sqrt(0.1 / 0.3 * 0.2 / 0.4))
    assert ensemble_null([[(0.3, 0.1)]], 0.3) == pytest.approx(0.1)          # one reader: its own null
    # Weighted (a package's ensemble_weights): the same means with the readers' weights.
    weighted, weighted_null = mean_span_scores([a, b], [0.75, 0.25])
    np.testing.assert_allclose(weighted, [[0.25, 0.075, 0.0375], [0.275, -1.0, -1.0]])
    assert weighted_null == pytest.approx(0.15)
    assert ensemble_null(windows, 0.3, [0.75, 0.25]) == pytest.approx(
        0.3 * math.exp(0.75 * math.log(0.1 / 0.3) + 0.25 * math.log(0.2 / 0.4)))
    assert ensemble_null([[(0.3, 0.1)], [(0.0, 1.0)]], 0.3) is None          # a reader without a span
    spans, _ = top_spans(scores, null, 10)
    assert spans == [(0, 1, pytest.approx(0.3)), (1, 2, pytest.approx(0.25)), (0, 2, pytest.approx(0.05)),
                     (0, 3, pytest.approx(0.025))]
    assert top_spans(np.full((0, 0), -1.0), 0.5, 3) == ([], 0.5)


@pytest.fixture(scope="module")
def ensemble_package(tiny, joint_package, tmp_path_factory):
    """The tiny reader (2 outputs, its own vocabulary) with the recipe's joint reader (3 outputs,
    another vocabulary) inside it as its ensemble member."""
    from recipes.tuning import update_manifest

    package = tmp_path_factory.mktemp("ensemble") / "pair"
    shutil.copytree(tiny, package)
    shutil.copytree(joint_package, package / "member")
    update_manifest(package, {"requires": {"joint": "./member"}, "ensemble": ["joint"]})
    return package


def _all_spans(package, item, **options):
    results = Taskflow("reading_comprehension", task_path=package, top_k=1000, **options)(item)[0]
    return {(r["start"], r["end"]): r["score"] for r in results}


def test_an_ensemble_scores_each_span_by_its_readers_mean_probability(tiny, joint_package, ensemble_package):
    item = ("杭州市是浙江省的省会，位于中国东南沿海。", QUESTION)     # one window for both readers
    own, member = _all_spans(tiny, item), _all_spans(joint_package, item, max_answer_len=10)
    together = _all_spans(ensemble_package, item)
    assert len(own) > len(member) > 0          # the member scores no span over its 6 chars
    assert together.keys() == own.keys() | member.keys()
    for span, score in together.items():
        assert score == pytest.approx((own.get(span, 0.0) + member.get(span, 0.0)) / 2, rel=1e-6, abs=1e-12), span
    ranked = sorted(together.values(), reverse=True)
    assert list(together.values()) == ranked
    # "No answer" wins by the readers' mean log-margin of NULL over their own best span (thresholds
    # 0: the empty answer scores the null itself).
    empty = lambda package, **options: [r for r in Taskflow(
        "reading_comprehension", task_path=package, top_k=1000, handle_impossible_answer=True, null_threshold=0.0,
        **options)(item)[0] if r["answer"] == ""][0]["score"]
    margin = lambda null, spans: math.log(null) - math.log(max(spans.values()))
    expected = (margin(empty(tiny), own) + margin(empty(joint_package, max_answer_len=10), member)) / 2
    assert math.log(empty(ensemble_package)) - math.log(ranked[0]) == pytest.approx(expected, abs=1e-5)


def test_ensemble_weights_weigh_each_reader_s_probabilities(tiny, joint_package, ensemble_package, tmp_path):
    from recipes.tuning import update_manifest

    item = ("杭州市是浙江省的省会，位于中国东南沿海。", QUESTION)
    own, member = _all_spans(tiny, item), _all_spans(joint_package, item, max_answer_len=10)
    package = tmp_path / "weighted"
    shutil.copytree(ensemble_package, package)
    update_manifest(package, {"ensemble_weights": [3, 1]})
    for span, score in _all_spans(package, item).items():
        assert score == pytest.approx(0.75 * own.get(span, 0.0) + 0.25 * member.get(span, 0.0), rel=1e-6, abs=1e-12)
    for bad in ([1], [1, 0], [1, "2"]):
        update_manifest(package, {"ensemble_weights": bad})
        with pytest.raises(ManifestError, match="ensemble_weights must be 2 positive numbers"):
            Taskflow("reading_comprehension", task_path=package)
    with pytest.raises(ManifestError, match="'ensemble_weights' must be a JSON list"):   # the schema's type
        update_manifest(package, {"ensemble_weights": "equal"})
    assert Taskflow("reading_comprehension", task_path=package, ensemble=False)(item)[0]["answer"]


def test_ensemble_false_runs_the_package_s_own_reader_exactly(tiny, ensemble_package):
    items = [(MRC_CONTEXT, QUESTION), ("杭州市是浙江省的省会。" * 9, "省会是哪里？")]
    alone = Taskflow("reading_comprehension", task_path=ensemble_package, ensemble=False, top_k=3)
    assert len(alone.task.readers) == 1 and len(alone.task.predictors) == 1
    assert alone(items) == Taskflow("reading_comprehension", task_path=tiny, top_k=3)(items)
    both = Taskflow("reading_comprehension", task_path=ensemble_package, top_k=3)
    assert len(both.task.predictors) == 2 and both(items) != alone(items)
    # Long contexts: many windows, batched, each reader fed its own ids and features.
    long_item = ("好" * 300 + "杭州市是浙江省的省会。" + "好" * 300, QUESTION)
    batched = both([long_item])[0]
    one_by_one = Taskflow("reading_comprehension", task_path=ensemble_package, top_k=3, batch_size=1)([long_item])[0]
    assert [(r["start"], r["end"]) for r in batched] == [(r["start"], r["end"]) for r in one_by_one]
    assert [r["score"] for r in batched] == pytest.approx([r["score"] for r in one_by_one], rel=1e-5)


def _tuning_files(folder: Path) -> tuple[Path, Path]:
    """A one-question answerable set (SQuAD format) and a one-question unanswerable set (JSON lines)."""
    answerable = folder / "answerable.json"
    answerable.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"id": "p", "context": MRC_CONTEXT, "qas": [
        {"id": "q", "question": QUESTION, "answers": [{"text": "杭州市", "answer_start": MRC_CONTEXT.index("杭州市")}]}]}]}]},
        ensure_ascii=False), encoding="utf-8")
    unanswerable = folder / "unanswerable.jsonl"
    unanswerable.write_text(json.dumps({"context": "西湖的湖水清澈。", "question": QUESTION}, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    return answerable, unanswerable


def test_the_ensemble_s_own_null_threshold_is_tuned_and_used(ensemble_package, tmp_path):
    from recipes.tuning import update_manifest

    package = tmp_path / "pair"
    shutil.copytree(ensemble_package, package)
    update_manifest(package, {"null_threshold": 7.5, "ensemble_null_threshold": -2.5})
    assert Taskflow("reading_comprehension", task_path=package).task.null_threshold == -2.5
    assert Taskflow("reading_comprehension", task_path=package, ensemble=False).task.null_threshold == 7.5
    assert Taskflow("reading_comprehension", task_path=package, handle_impossible_answer=True,
                    null_threshold=1.0).task.null_threshold == 1.0
    answerable, unanswerable = _tuning_files(tmp_path)
    from recipes.reading_comprehension.calibrate import main as calibrate

    assert calibrate(["null-threshold", "--package", str(package), "--answerable", str(answerable),
                      "--unanswerable", str(unanswerable), "--write"]) == 0
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["null_threshold"] == 7.5 and manifest["ensemble_null_threshold"] != -2.5
    assert manifest["ensemble_null_tuning"]["null_threshold"] == manifest["ensemble_null_threshold"]
    assert Taskflow("reading_comprehension", task_path=package).task.null_threshold == \
        manifest["ensemble_null_threshold"]


# ------------------------------------------------------------------ null model

def test_question_bigram_coverage_counts_the_questions_distinct_bigrams_found_in_the_context():
    from taskflow.tasks.reading_comprehension.data import question_bigram_coverage

    assert question_bigram_coverage("杭州是哪个省的省会？", "杭州市是浙江省的省会。") == 0.5   # 4 of 8, punctuation dropped
    assert question_bigram_coverage("ＡＢ是什么", "ab是一种") == 0.5                        # normalised: ab, b是 of 4
    assert question_bigram_coverage("西湖在哪里", "长江是中国最长的河流") == 0.0
    assert question_bigram_coverage("湖", "长江") == 1.0                                    # no bigram to miss


def test_a_null_model_decides_no_answer_by_its_score_for_the_readers_it_was_fitted_on(tiny, tmp_path):
    from taskflow.tasks.reading_comprehension.data import question_bigram_coverage
    from recipes.tuning import update_manifest

    item = {"context": MRC_CONTEXT, "question": QUESTION}
    (_, best, null), = package_scores(Taskflow("reading_comprehension", task_path=tiny).task, [item])
    margin = math.log(null) - math.log(best)
    coverage = question_bigram_coverage(QUESTION, MRC_CONTEXT)
    package = tmp_path / "tiny"
    shutil.copytree(tiny, package)
    fields = {"features": ["margin", "question_bigram_coverage"], "weights": [0.5, -4.0], "bias": 1.0,
              "ensemble": False}
    z = 1.0 + 0.5 * margin - 4.0 * coverage
    for threshold, empty in ((z - 0.05, True), (z + 0.05, False)):
        update_manifest(package, {"null_threshold": 40.0, "null_model": {**fields, "threshold": threshold}})
        qa = Taskflow("reading_comprehension", task_path=package, handle_impossible_answer=True, top_k=1000)
        assert qa.task.null_threshold == threshold
        ranked = qa(item)[0]
        empty_score = [r["score"] for r in ranked if r["answer"] == ""]
        assert (ranked[0]["answer"] == "") == empty
        assert empty_score == pytest.approx([min(1.0, best * math.exp(z - threshold))])
    # Fitted for an ensemble, it stays out of a lone reader's decision (its own threshold then).
    update_manifest(package, {"null_model": {**fields, "ensemble": True, "threshold": -50.0}})
    qa = Taskflow("reading_comprehension", task_path=package, handle_impossible_answer=True)
    assert qa.task.null_model is None and qa.task.null_threshold == 40.0 and qa(item)[0]["answer"] != ""
    update_manifest(package, {"null_model": {**fields, "weights": [1.0]}})
    with pytest.raises(ManifestError, match="null_model.*calibrate null-model"):
        Taskflow("reading_comprehension", task_path=package)


def test_fitting_a_null_model_separates_questions_the_context_does_not_hold():
    from recipes.reading_comprehension.calibrate import fit_null_model

    context = "杭州市是浙江省的省会，位于中国东南沿海，西湖在城市西部。"
    asked = ["杭州市是哪个省的省会", "西湖在城市的哪里", "杭州位于中国哪里", "浙江省的省会是哪里"]
    elsewhere = ["长江有多长", "珠穆朗玛峰的高度是多少", "李白是哪个朝代的诗人", "熊猫吃什么"]
    # The margins alone overlap (answerable 0.5 above some unanswerable): coverage tells them apart.
    answerable = [(q, context, 1.0, math.exp(m), 1.0) for q, m in zip(asked, (-3.0, -1.0, 0.5, -2.0))]
    unanswerable = [(q, context, 1.0, math.exp(m)) for q, m in zip(elsewhere, (0.0, 1.0, 2.0, -0.5))]
    fitted = fit_null_model(answerable, unanswerable, max_f1_drop=0.0)
    assert fitted["features"] == ["margin", "question_bigram_coverage"] and fitted["ensemble"] is True
    assert fitted["weights"][1] < 0 < fitted["weights"][0]
    assert fitted["tuning"]["answerable_f1_drop"] == 0.0 and fitted["tuning"]["unanswerable_no_answer"] == 100.0


def test_calibrate_null_model_writes_the_fit_and_the_task_uses_it(ensemble_package, tmp_path):
    from recipes.reading_comprehension.calibrate import main as calibrate

    package = tmp_path / "pair"
    shutil.copytree(ensemble_package, package)
    answerable, unanswerable = _tuning_files(tmp_path)
    assert calibrate(["null-model", "--package", str(package), "--answerable", str(answerable),
                      "--unanswerable", str(unanswerable), "--write"]) == 0
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    fitted = manifest["null_model"]
    assert fitted["ensemble"] is True and fitted["tuning"]["answerable_file"] == "answerable.json"
    task = Taskflow("reading_comprehension", task_path=package).task
    assert task.null_model is not None and task.null_threshold == fitted["threshold"]
    assert Taskflow("reading_comprehension", task_path=package, ensemble=False).task.null_model is None


def test_an_ensemble_naming_no_required_reader_is_a_manifest_error(tiny, tmp_path):
    from recipes.tuning import update_manifest

    package = tmp_path / "pair"
    shutil.copytree(tiny, package)
    update_manifest(package, {"ensemble": ["word_reader"]})
    with pytest.raises(ManifestError, match="word_reader.*requires"):
        Taskflow("reading_comprehension", task_path=package)
    update_manifest(package, {"ensemble": [3]})
    with pytest.raises(ManifestError, match="ensemble"):
        Taskflow("reading_comprehension", task_path=package)


def test_calibrate_ensemble_weights_scores_each_weighting_as_the_task_runs_it(ensemble_package, tmp_path):
    """The tuning decodes cached network outputs; each weighting's F1 / EM must be what the task
    gives with those weights in the manifest, and the best is written."""
    from recipes.reading_comprehension.calibrate import main as calibrate
    from taskflow.tasks.reading_comprehension.metrics import evaluate
    from recipes.tuning import update_manifest

    package = tmp_path / "pair"
    shutil.copytree(ensemble_package, package)
    contexts = [MRC_CONTEXT, "杭州市是浙江省的省会，位于中国东南沿海。", "西湖在杭州市西部，湖水清澈，四季景色不同。"]
    rows = [(c, q, c[2:len(c) // 2]) for c in contexts for q in (QUESTION, "西湖在哪里？")]
    answerable = tmp_path / "answerable.json"
    answerable.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [
        {"id": f"p{i}", "context": c, "qas": [{"id": f"q{i}", "question": q, "answers": [
            {"text": a, "answer_start": c.index(a)}]}]} for i, (c, q, a) in enumerate(rows)]}]}, ensure_ascii=False),
        encoding="utf-8")
    assert calibrate(["ensemble-weights", "--package", str(package), "--answerable", str(answerable),
                      "--step", "0.25", "--write"]) == 0
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    tuning = manifest["ensemble_weights_tuning"]
    assert [row[:2] for row in tuning["grid"]] == [[0.25, 0.75], [0.5, 0.5], [0.75, 0.25]]
    scratch = tmp_path / "scratch"
    shutil.copytree(package, scratch)
    reference_length = np.mean([len(a) for _, _, a in rows])
    for own, member, f1, em, ratio in tuning["grid"]:
        update_manifest(scratch, {"ensemble_weights": [own, member]})
        answers = [r["answer"] for r in Taskflow("reading_comprehension", task_path=scratch)(
            [{"context": c, "question": q} for c, q, _ in rows])]
        direct = evaluate([[a] for _, _, a in rows], answers)
        assert (f1, em) == (round(direct["f1"], 3), round(direct["em"], 3))
        assert ratio == round(np.mean([len(a) for a in answers]) / reference_length, 3)
    best = max(tuning["grid"], key=lambda row: row[2])
    assert manifest["ensemble_weights"] == best[:2] and tuning["f1"] == best[2]
    assert Taskflow("reading_comprehension", task_path=package).task.weights == pytest.approx(best[:2])
    # A length limit chooses among the weightings within it, and refuses when none is.
    limit = min(row[4] for row in tuning["grid"]) + 0.0005    # the grid is rounded to 3 places
    assert calibrate(["ensemble-weights", "--package", str(package), "--answerable", str(answerable),
                      "--step", "0.25", "--max-length-ratio", str(limit), "--write"]) == 0
    limited = json.loads((package / "manifest.json").read_text(encoding="utf-8"))["ensemble_weights_tuning"]
    within = max((row for row in limited["grid"] if row[4] <= limit), key=lambda row: row[2])
    assert limited["length_ratio"] == within[4] <= limit and limited["f1"] == within[2]
    with pytest.raises(SystemExit, match="no weighting keeps the answers within"):
        calibrate(["ensemble-weights", "--package", str(package), "--answerable", str(answerable),
                   "--step", "0.25", "--max-length-ratio", str(limit / 2)])


def test_top_k_answers_are_distinct_and_as_many_as_asked_where_the_context_has_them(tiny_models):
    context = "作者是 曹 雪 芹 。"      # spans of one char: 7 that are not spaces, and spaces between them
    for top_k in (2, 4, 7):
        flow = Taskflow("reading_comprehension", task_path=tiny_models["reading_comprehension"], top_k=top_k,
                        max_answer_len=1)
        (answers,) = flow({"context": context, "question": "作者是谁？"})
        spans = [(a["start"], a["end"]) for a in answers]
        assert len(answers) == top_k and len(set(spans)) == top_k           # trimmed duplicates do not eat them
        assert all(a["answer"].strip() == a["answer"] != "" for a in answers)
    flow = Taskflow("reading_comprehension", task_path=tiny_models["reading_comprehension"], top_k=10, max_answer_len=1)
    assert len(flow({"context": context, "question": "作者是谁？"})[0]) == 7      # no more than there are
