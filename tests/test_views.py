"""Every task's notebook view, drawn from that task's real output shape (tiny real models)."""

import pytest

from taskflow import Taskflow

TEXT = "<b>李明</b>在北京大学 & 上海"
CASES = [
    ("sentiment_analysis", {}, [TEXT]),
    ("lexical_analysis", {}, [TEXT]),
    ("word_segmentation", {}, [TEXT]),
    ("pos_tagging", {}, [TEXT]),
    ("ner", {}, [TEXT]),
    ("ner", {"mode": "accurate"}, [TEXT]),
    ("knowledge_mining", {}, [TEXT]),
    ("text_similarity", {}, [[TEXT, "北京大学在哪"]]),
    ("reading_comprehension", {}, [{"context": TEXT, "question": "李明在哪"}]),
    ("reading_comprehension", {"top_k": 3}, [{"context": TEXT, "question": "李明在哪"}]),
]


def _package(tiny_models, task, options):
    return tiny_models["knowledge_mining" if options.get("mode") == "accurate" else task]


@pytest.mark.parametrize("task, options, inputs", CASES, ids=[f"{t}{o or ''}" for t, o, _ in CASES])
def test_every_view_draws_the_real_output_escaped(tiny_models, task, options, inputs):
    flow = Taskflow(task, task_path=_package(tiny_models, task, options), **options)
    page = flow(inputs)._repr_html_()
    assert "<b>" not in page and "</b>" not in page and "&lt;" in page and "&amp;" in page
    skipped = flow(inputs + [""], on_error="skip")._repr_html_()      # a skipped item is listed, not lost
    assert "InvalidInputError" in skipped or "InputTypeError" in skipped


def test_word_views_highlight_each_word(tiny_models):
    words = Taskflow("word_segmentation", task_path=tiny_models["lexical_analysis"])
    result = words("李明在北京")                          # a single str: the word list itself
    page = words("李明在北京")._repr_html_()
    assert page.count("<mark") == len([w for w in result if w.strip()])
    tagged = Taskflow("pos_tagging", task_path=tiny_models["lexical_analysis"])
    (pairs,) = tagged(["李明在北京"])
    page = tagged("李明在北京")._repr_html_()
    assert page.count("<sub") == len([t for _, t in pairs if t != "w"])


def test_the_best_answer_is_drawn_even_inside_a_worse_one():
    from taskflow.display import html_spans, overlapped

    spans = [(2, 4, "#1 0.90"), (0, 6, "#2 0.50")]        # the best lies inside the second
    page = html_spans("杭州市是省会城市", spans)
    assert ">市是<sub style='font-size:9px;margin-left:2px'>#1 0.90" in page
    assert "#2" not in page and overlapped(spans) == [(0, 6, "#2 0.50")]


def test_no_answer_is_listed_at_its_rank_beside_the_spans():
    from types import SimpleNamespace

    from taskflow.tasks.reading_comprehension import ReadingComprehensionTask

    item = SimpleNamespace(context="今天天气很好。", question="红楼梦的作者是谁？")
    answers = [{"answer": "", "score": 0.71, "start": 0, "end": 0},
               {"answer": "今天天气很好。", "score": 0.002, "start": 0, "end": 7}]
    page = ReadingComprehensionTask.render_html(None, [answers], [item])
    assert "#1 <i>no answer</i> (0.71)" in page and "#2 0.00" in page
    page = ReadingComprehensionTask.render_html(None, [answers[0]], [item])      # top_k=1: one result, no list
    assert "#1 <i>no answer</i> (0.71)" in page
