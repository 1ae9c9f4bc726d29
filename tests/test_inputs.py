"""What arrives from users, good and bad, on sentiment_analysis (a tiny model)."""

import json
from functools import lru_cache

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.errors import InputTypeError, InvalidInputError, OptionError
from taskflow.text import Normalizer, split_text


@pytest.fixture(scope="module")
def senta(tiny_models):
    return Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], return_all_scores=True)


@pytest.fixture(scope="module")
def reference(senta, tiny_models):
    """A text's label probabilities computed apart from the pipeline: the package's network in the
    dynamic graph, fed the char ids of its vocabulary file (after the manifest's normalisation), one
    chunk at a time; a long text's chunks averaged by their length, as the task says it joins them."""
    import paddle

    package = tiny_models["sentiment_analysis"]
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    vocab = {token: i for i, token in enumerate((package / "vocab.txt").read_text(encoding="utf-8").split("\n"))}
    normalize = Normalizer(manifest["normalization"])
    network = senta.model.build_network()

    @lru_cache(maxsize=None)
    def chunk(text: str) -> tuple[float, ...]:
        ids = [vocab.get(ch, 1) for ch in normalize(text)] or [1]
        with paddle.no_grad():
            return tuple(network(paddle.to_tensor(np.array([ids], dtype="int64"))).numpy()[0].tolist())

    def probabilities(text: str) -> dict[str, float]:
        pieces = split_text(text, manifest["max_length"])
        assert "".join(piece for _, piece in pieces) == text
        mean = np.average([chunk(piece) for _, piece in pieces], axis=0, weights=[len(p) for _, p in pieces])
        return dict(zip(manifest["labels"], mean.tolist()))

    return probabilities


def assert_is_the_networks_answer(result, text, reference):
    """``result`` is what the network says of ``text``: its probabilities, the label of the largest."""
    expected = reference(text)
    assert result["text"] == text
    assert result["scores"] == pytest.approx(expected, abs=1e-5)
    assert result["label"] == max(expected, key=expected.get)
    assert result["score"] == max(result["scores"].values()) == result["scores"][result["label"]]
    assert sum(result["scores"].values()) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (None, InputTypeError, "got NoneType"),
        (42, InputTypeError, "got int (42)"),
        (3.5, InputTypeError, "got float"),
        ("好".encode(), InputTypeError, "decode"),
        ({"text": "好"}, InputTypeError, "got dict"),
        (["好"], InputTypeError, "got list"),
        ("", InvalidInputError, "empty"),
        ("   \t\n", InvalidInputError, "whitespace"),
        ("\ufeff\u200b\x00 ", InvalidInputError, "invisible characters"),   # BOM, zero-width space, NUL
    ],
)
def test_bad_items_get_typed_errors_naming_them(senta, bad, error, words):
    with pytest.raises(error) as info:
        senta(["很好", "还行", bad])
    assert info.value.index == 2
    assert "text #2" in str(info.value)
    assert words in str(info.value)


@pytest.mark.parametrize("bad", [None, 42, b"bytes", {"text": "x"}])
def test_bad_top_level_input_is_a_type_error(senta, bad):
    with pytest.raises(InputTypeError):
        senta(bad)


def test_errors_subclass_builtins(senta):
    with pytest.raises(TypeError):
        senta([None])
    with pytest.raises(ValueError):
        senta([""])


@pytest.mark.parametrize(
    "text",
    [
        "服务很好😀👍",
        "ＡＢＣ全角字符，很好！",
        "這間酒店環境和服務態度亦算不錯",
        "第一行\n第二行\t制表符\r\n",
        "a",
        "🙂",
        "x" * 5 + "很差" * 3,
    ],
)
def test_unusual_but_valid_texts_get_a_result(senta, reference, text):
    (result,) = senta([text])
    assert_is_the_networks_answer(result, text, reference)
    json.dumps(result, ensure_ascii=False)


# Texts the tiny model (seed 0) gives either label, each its own probabilities.
VARIED = ["服务很好😀👍", "ＡＢＣ全角字符，很好！", "這間酒店環境和服務態度亦算不錯", "a", "🙂", "很好", "很差", "还行",
          "这家酒店很干净，服务也好", "等了一个小时还没上菜"]


def test_each_text_gets_its_own_probabilities_and_their_argmax_label(senta, reference):
    results = senta(VARIED)
    for text, result in zip(VARIED, results):
        assert_is_the_networks_answer(result, text, reference)
    # A pipeline that answered every text alike (a constant label, a shared row) would fail here.
    assert {r["label"] for r in results} == {"negative", "positive"}
    assert len({round(r["scores"]["positive"], 6) for r in results}) == len(VARIED)


def test_a_result_does_not_depend_on_the_texts_beside_it(senta, tiny_models):
    """Batched with others, reordered, repeated, or in batches of 1 or 3: each text's result is
    the one it gets alone (its own row, whatever the padding of its batch)."""
    def assert_same(got, expected):
        assert [(r["text"], r["label"]) for r in got] == [(r["text"], r["label"]) for r in expected]
        for a, b in zip(got, expected):
            assert a["scores"] == pytest.approx(b["scores"], abs=1e-6) and a["score"] == pytest.approx(b["score"])

    alone = [senta([text])[0] for text in VARIED]
    assert_same(senta(VARIED), alone)
    assert_same(senta(VARIED[::-1])[::-1], alone)
    assert_same(senta(VARIED + VARIED[:3]), alone + alone[:3])
    for batch_size in (1, 3):
        small = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], return_all_scores=True,
                         batch_size=batch_size)
        assert_same(small(VARIED), alone)


def test_normalisation_makes_variants_one_text_and_keeps_the_text_as_given(senta):
    """Full-width, traditional and upper-case forms read as the simplified half-width lower-case text
    (the manifest's t2s, width, lower); a changed character is another text."""
    for variant, plain in [("ＡＢＣ很好！", "abc很好!"), ("這間酒店環境不錯", "这间酒店环境不错"), ("ABC很差", "abc很差")]:
        got, expected = senta([variant, plain])
        assert got["text"] == variant and got["scores"] == pytest.approx(expected["scores"], abs=1e-6)
    good, bad = senta(["服务很好", "服务很差"])
    assert abs(good["scores"]["positive"] - bad["scores"]["positive"]) > 1e-3


def test_a_100k_character_text_is_split_and_joined(senta, reference):
    text = "这家酒店很干净，服务也好。" * 7692 + "完"
    assert len(text) == 100_000 - 3
    (result,) = senta(text)
    # Its chunks' probabilities averaged by their length (the last chunk, with 完, is one of its own).
    assert_is_the_networks_answer(result, text, reference)


def test_a_long_texts_chunks_count_by_their_length(senta, reference):
    """Chunks of different lengths and scores: the text's probabilities are their average
    weighted by length, not a plain mean, nor the first or the longest chunk's."""
    text = "等了一个小时还没上菜，服务员态度很差，再也不来了，真的太差了。" + "好。" + "很好" * 10 + "。"
    pieces = [piece for _, piece in split_text(text, 32)]
    assert len(pieces) == len({len(p) for p in pieces}) >= 2
    (result,) = senta(text)
    assert_is_the_networks_answer(result, text, reference)
    plain_mean = np.mean([[reference(p)[label] for label in ("negative", "positive")] for p in pieces], axis=0)
    assert abs(result["scores"]["positive"] - plain_mean[1]) > 1e-4, "the chunks' lengths weigh in"


def test_generators_and_tuples_are_accepted(senta):
    texts = ["很好", "很差"]
    assert senta(t for t in texts) == senta(texts) == senta(tuple(texts))


def test_bad_batch_size_is_an_option_error(tiny_models):
    for bad in (0, -1, 1.5, "8", True):
        with pytest.raises(OptionError, match="batch_size") as info:
            Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], batch_size=bad)
        assert info.value.option == "batch_size" and repr(bad) in str(info.value)
        assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("options, name", [
    ({"return_all_scores": "no"}, "return_all_scores"),   # bool("no") is True: never coerced
    ({"return_all_scores": 1}, "return_all_scores"),
    ({"num_threads": 0}, "num_threads"),
    ({"num_threads": True}, "num_threads"),
    ({"static": "yes"}, "static"),
    ({"device": "tpu"}, "device"),
    ({"return_all_score": True}, "return_all_score"),
])
def test_every_bad_option_is_an_option_error_naming_it(tiny_models, options, name):
    with pytest.raises(OptionError) as info:
        Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], **options)
    assert info.value.option == name and name in str(info.value)


def test_an_unknown_option_close_to_a_known_one_is_suggested(tiny_models):
    with pytest.raises(OptionError, match="Did you mean 'return_all_scores'"):
        Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], return_all_score=True)


def test_on_error_skip_keeps_every_other_result_in_place(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    texts = ["这家酒店很干净", "", float("nan"), "服务太差了"] * 2500            # 10,000 items, 5,000 bad
    out = flow(texts, on_error="skip")
    assert len(out) == len(texts)
    assert out[0] == flow("这家酒店很干净")[0] and out[3] == flow("服务太差了")[0]
    assert out[1] == {"error": out[1]["error"], "error_type": "InvalidInputError", "index": 1}
    assert out[2]["error_type"] == "InputTypeError" and "float" in out[2]["error"] and out[2]["index"] == 2
    assert out[9998]["index"] == 9998 and "#9998" in out[9998]["error"]
    assert "InvalidInputError" in out._repr_html_()                       # the view lists the skipped ones
    with pytest.raises(InvalidInputError, match="#1"):
        flow(texts)                                                         # strict by default
    with pytest.raises(OptionError, match="on_error"):
        flow(texts, on_error="ignore")


def test_stream_on_error_skip_counts_indexes_from_the_start(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    items = iter(["好", "差", None, "好"] * 3)
    out = list(flow.stream(items, chunk_size=5, on_error="skip"))
    assert [r.get("index") for r in out if "error" in r] == [2, 6, 10]
    assert [r["text"] for r in out if "text" in r] == ["好", "差", "好"] * 3
    with pytest.raises(InputTypeError, match="#2"):
        list(flow.stream(["好", "差", None], chunk_size=2))


def test_stream_refuses_one_item_and_bad_options_before_any_result(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    for one in ("很好", {"text": "很好"}, None, 42):       # not an iterable of items: never a text per char
        with pytest.raises(InputTypeError, match="stream takes an iterable of items"):
            flow.stream(one)                               # raised by the call, not by the first next()
    for options, name in (({"chunk_size": -1}, "chunk_size"), ({"chunk_size": "x"}, "chunk_size"),
                          ({"chunk_size": True}, "chunk_size"), ({"on_error": "ignore"}, "on_error")):
        with pytest.raises(OptionError, match=name):
            flow.stream(["好"], **options)
    assert [r["text"] for r in flow.stream(iter(["好", "差"]), chunk_size=1)] == ["好", "差"]
    pairs = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
    with pytest.raises(InputTypeError, match="for one item, call the Taskflow itself"):
        pairs.stream(("花呗怎么还款", "花呗如何还款"))          # one pair, not two items
    assert len(list(pairs.stream([("花呗怎么还款", "花呗如何还款")]))) == 1


def test_one_pair_with_a_wrong_text_is_one_item_naming_that_text(tiny_models):
    pairs = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
    out = pairs(("花呗怎么还款", None), on_error="skip")
    assert out == [{"error": "'text2' of pair #0 must be a str, got NoneType (None)", "error_type": "InputTypeError",
                    "index": 0}]
    out = pairs([("花呗怎么还款", "花呗如何还款"), "花呗"], on_error="skip")    # a list of items stays a list
    assert "similarity" in out[0] and out[1]["index"] == 1 and "pair #1 must be" in out[1]["error"]
    qa = Taskflow("reading_comprehension", task_path=tiny_models["reading_comprehension"])
    out = qa([None, "曹雪芹写了红楼梦"], on_error="skip")
    assert len(out) == 1 and out[0]["index"] == 0 and "of item #0 must be a str" in out[0]["error"]


def test_numpy_and_pandas_inputs_are_read_as_meant_or_refused_with_the_fix(tiny_models):
    import numpy as np

    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    out = flow(np.array(["好", "差"]))
    assert [type(r["text"]) for r in out] == [str, str]           # plain str back, not numpy's str_
    with pytest.raises(InputTypeError, match="0-d array"):
        flow(np.array("好"))
    pairs = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
    (one,) = pairs(np.array(["花呗怎么还款", "花呗如何还款"]))     # a 1-d array of two texts is one pair
    assert (type(one["text1"]), one["text2"]) == (str, "花呗如何还款")
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"text": ["好", "差"], "stars": [5, 1]})
    with pytest.raises(InputTypeError, match=r"DataFrame, whose items would be its column names: pass one column, "
                                             r"df\['text'\]"):
        flow(frame)                      # iterating a frame gives its column names: never classify those
    assert [r["text"] for r in flow(frame["text"])] == ["好", "差"]
    table = pd.DataFrame({"text1": ["花呗怎么还款", "好"], "text2": ["花呗如何还款", "差"]})
    with pytest.raises(InputTypeError, match=r"df\[\['text1', 'text2'\]\].values.tolist\(\)"):
        pairs(table)
    assert pairs(table.iloc[0]) == pairs([("花呗怎么还款", "花呗如何还款")])         # a row, by its column names
    assert pairs([row for _, row in table.iterrows()]) == pairs(table.to_dict("records"))


@pytest.mark.parametrize("marks", ["\u0301", "\u0301\u0302 \u0308", "\u20dd", "\u0903\u093e"])   # Mn, Mn, Me, Mc
def test_a_text_of_combining_marks_alone_is_no_text(tiny_models, senta, marks):
    with pytest.raises(InvalidInputError, match="text #1 is empty or only whitespace, invisible characters or "
                                                "combining marks"):
        senta(["很好", marks])
    ner = Taskflow("ner", task_path=tiny_models["ner"])
    (record,) = ner([marks], on_error="skip")
    assert record["error_type"] == "InvalidInputError" and record["index"] == 0
    (result,) = senta(["e\u0301"])          # a mark on a char is text
    assert result["text"] == "e\u0301"


@pytest.mark.parametrize("given", [("花呗怎么还款", "花呗如何还款", "花呗"), ["花呗"], ["a", "b", "c", "d"]])
def test_texts_side_by_side_that_are_not_a_pair_say_how_many_a_pair_holds(tiny_models, given):
    pairs = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
    words = f"pair #0 must hold exactly 2 texts, got {len(given)}"
    with pytest.raises(InvalidInputError, match=words):
        pairs(given)
    (record,) = pairs(given, on_error="skip")      # one item of the wrong size: one error record
    assert record["index"] == 0 and words in record["error"]
    with pytest.raises(InvalidInputError, match=words.replace("#0", "#1")):
        pairs([("花呗怎么还款", "花呗如何还款"), given])
