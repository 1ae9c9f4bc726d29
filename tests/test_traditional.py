"""Traditional characters: every task reads them as their simplified twins (OpenCC's tables, char for
char) and answers in the caller's own characters, with offsets into the caller's text."""

import pytest

from taskflow import Taskflow
from taskflow.text import Normalizer, to_simplified

TRADITIONAL = "我覺得這部電影很長，導演是張藝謀，在長江大橋拍的"
SIMPLIFIED = "我觉得这部电影很长，导演是张艺谋，在长江大桥拍的"


def test_traditional_characters_become_simplified_one_for_one():
    assert to_simplified(TRADITIONAL) == SIMPLIFIED
    assert to_simplified("乾燥的天氣，乾隆年間，頭髮") == "干燥的天气，乾隆年间，头发"   # the phrase table picks the reading


@pytest.mark.parametrize("text", [
    "目的是破坏土耳其经济",      # the phrase table alone makes 坏土 (traditional: 坯土) of it
    "他和沈重一起去了沈阳", "东西坏了，很失望", "乾隆皇帝", "慰藉", "颠覆", "覆盖", "ＩＢＭ公司 2024年",
])
def test_simplified_text_is_left_as_it_is(text):
    assert to_simplified(text) == text


# Traditional and simplified in one text: the traditional chars are converted, and a simplified char
# beside them is never changed by a phrase that reads it as traditional (破坏土 -> 破坯土, 沈重 -> 沉重).
MIXED = [
    ("這個目的是破坏土耳其经济", "这个目的是破坏土耳其经济"),
    ("瀋陽的沈重先生說", "沈阳的沈重先生说"),
    ("乾燥的破坏土", "干燥的破坏土"),
]


@pytest.mark.parametrize("text, expected", MIXED, ids=["破坏", "沈重", "乾燥"])
def test_mixed_text_converts_only_its_traditional_chars(text, expected):
    assert to_simplified(text) == expected
    assert Normalizer(["t2s", "width", "lower"])(text) == expected


def test_user_dict_matches_a_simplified_word_inside_mixed_text():
    """Through a task: a user item is matched on the normalised text, so a simplified word next to
    traditional chars must stay itself there, and its offsets index the caller's text."""
    text = "這個目的是破坏土耳其经济"
    (result,) = Taskflow("ner", user_dict=["破坏/ACT"])([text])
    assert {"text": "破坏", "label": "ACT", "start": 5, "end": 7} in result["entities"]


def test_the_step_keeps_offsets_and_composes_with_the_others():
    normalizer = Normalizer(["t2s", "width", "lower"])
    assert normalizer("ＩＢＭ公司的長江") == "ibm公司的长江" and normalizer.keeps_length
    text = "𠀋龜茲國，綝"   # beyond the BMP, and a char whose simplified form is beyond it: kept as they are
    assert len(to_simplified(text)) == len(text) and to_simplified(text).endswith("綝")


def _twins(flow, traditional, simplified):
    """The results for the two texts (or lists of items) of one call."""
    if isinstance(traditional, str):
        return flow([traditional, simplified])
    return flow(traditional), flow(simplified)


@pytest.mark.slow
def test_lexical_analysis_cuts_traditional_text_as_its_simplified_twin():
    trad, simp = _twins(Taskflow("lexical_analysis"), TRADITIONAL, SIMPLIFIED)
    assert trad["tags"] == simp["tags"] and [len(w) for w in trad["segs"]] == [len(w) for w in simp["segs"]]
    assert "".join(trad["segs"]) == TRADITIONAL and "張藝謀" in trad["segs"] and "覺得" in trad["segs"]


@pytest.mark.slow
def test_ner_spans_index_the_traditional_text():
    text = "馬化騰在深圳創立了騰訊公司"
    trad, simp = _twins(Taskflow("ner"), text, to_simplified(text))
    assert [(e["label"], e["start"], e["end"]) for e in trad["entities"]] == \
           [(e["label"], e["start"], e["end"]) for e in simp["entities"]]
    assert {e["text"] for e in trad["entities"]} >= {"馬化騰", "騰訊公司"}
    assert all(text[e["start"]:e["end"]] == e["text"] for e in trad["entities"])


@pytest.mark.slow
def test_sentiment_similarity_and_reading_comprehension_score_traditional_text_as_simplified():
    review = "這家酒店的服務很差，房間也髒，不會再來了"
    trad, simp = _twins(Taskflow("sentiment_analysis"), review, to_simplified(review))
    assert trad["text"] == review and trad["label"] == simp["label"] == "negative"
    assert trad["score"] == pytest.approx(simp["score"], abs=1e-5)

    pair = ["我想辦一張信用卡", "如何申請信用卡"]
    trad, simp = _twins(Taskflow("text_similarity"), [pair], [[to_simplified(t) for t in pair]])
    assert trad[0]["text1"] == pair[0] and trad[0]["similarity"] == pytest.approx(simp[0]["similarity"], abs=1e-5)

    context, question = "騰訊公司由馬化騰於1998年在深圳創立。", "騰訊公司是誰創立的？"
    trad, simp = Taskflow("reading_comprehension")([{"context": context, "question": question},
                                                    {"context": to_simplified(context),
                                                     "question": to_simplified(question)}])
    assert (trad["start"], trad["end"]) == (simp["start"], simp["end"])
    assert trad["answer"] == context[trad["start"]:trad["end"]] == "馬化騰"


def test_the_char_table_is_kept_in_the_cache_home_and_made_again_when_damaged(monkeypatch, tmp_path):
    """OpenCC converts 93,000 chars once per OpenCC version and home; later processes read the pairs."""
    from taskflow import text

    monkeypatch.setenv("PPNLP_HOME", str(tmp_path))
    make = text._t2s_char_table          # the table itself, not this process's copy of it (text.t2s_table)
    table = make()
    kept, = (tmp_path / "taskflow" / ".opencc").iterdir()
    assert len(table) > 3000 and table[ord("覺")] == "觉" and len(kept.read_text(encoding="utf-8")) == 2 * len(table)

    def no_opencc():
        raise AssertionError("the kept table was not read")

    with monkeypatch.context() as patched:
        patched.setattr(text, "_opencc", no_opencc)
        assert make() == table
    kept.write_text("覺", encoding="utf-8")                 # half a pair: damaged
    assert make() == table and len(kept.read_text(encoding="utf-8")) == 2 * len(table)


def test_the_char_table_is_kept_under_the_home_a_taskflow_is_given(tiny_models, tmp_path):
    import subprocess
    import sys

    code = ("import sys; from taskflow import Taskflow; "
            "Taskflow('sentiment_analysis', task_path=sys.argv[1], home=sys.argv[2])(['這部電影很長'])")
    env = {**__import__("os").environ, "PPNLP_HOME": str(tmp_path / "default")}
    subprocess.run([sys.executable, "-c", code, str(tiny_models["sentiment_analysis"]), str(tmp_path / "mine")],
                   check=True, env=env, capture_output=True)
    assert list((tmp_path / "mine" / "taskflow" / ".opencc").glob("t2s-chars-*.txt"))
    assert not (tmp_path / "default").exists()
