"""Results render as HTML in notebooks and stay plain lists."""

import json
import pickle

import pytest

from taskflow import Taskflow
from taskflow.display import Results, html_spans, html_table


@pytest.fixture(scope="module")
def senta(tiny_sentiment):
    return Taskflow("sentiment_analysis", task_path=tiny_sentiment)


def test_results_behave_as_plain_lists(senta):
    out = senta(["很好", "很差"])
    assert isinstance(out, Results) and isinstance(out, list)
    plain = json.loads(json.dumps(out, ensure_ascii=False))
    assert out == plain and plain == out
    assert type(pickle.loads(pickle.dumps(out))) is list


def test_sentiment_renders_a_table_with_escaped_text(senta):
    page = senta(["<script>alert(1)</script>很好", "a & b"])._repr_html_()
    assert "<table" in page and "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;很好" in page and "a &amp; b" in page
    assert page.count("<tr>") == 3  # header + two rows


def test_html_spans_escape_and_highlight():
    text = "<b>李明</b>在北京"
    page = html_spans(text, [(3, 5, "PER"), (10, 12, "LOC"), (4, 6, "overlap")])
    assert "<b>" not in page and "&lt;b&gt;" in page
    assert page.count("<mark") == 2
    assert ">李明<sub" in page and ">北京<sub" in page


def test_html_table_escapes_headers_and_cells():
    page = html_table([{"<k>": "<v>"}])
    assert "<k>" not in page and "<v>" not in page and "&lt;k&gt;" in page


def test_no_results_show_as_no_results(senta):
    for empty in (Results([]), senta([])):
        assert empty == [] and "no results" in empty._repr_html_()
