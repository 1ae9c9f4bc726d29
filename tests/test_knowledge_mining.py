"""knowledge_mining (wordtag) and ner's accurate mode: term tree, labelling rules, user terms, offsets."""

import gzip
import json

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InvalidInputError, OptionError, TermTreeError, UserDictError
from taskflow.packages import available_models
from taskflow.tasks.knowledge_mining import CATEGORIES, Labeller, TermTree, load_user_dict
from taskflow.tasks.knowledge_mining.categories import NOUN_CLASSES, termid
from taskflow.tasks.knowledge_mining.classifier import CategoryClassifier
from taskflow.tasks.lexical_analysis.tagger import normalize
from taskflow.tasks.lexical_analysis.tags import LAC_TAGS

TEXTS = ["《红楼梦》是清代作家曹雪芹的作品", "ＩＢＭ公司　在 上海。", "Ａ股\t和ｂ股", "我们在上海工作了三年。" * 5, "好"]


@pytest.fixture(scope="module")
def tiny_km(tiny_models):
    return tiny_models["knowledge_mining"]


@pytest.fixture(scope="module")
def wordtag(tiny_km):
    return Taskflow("wordtag", task_path=tiny_km)


def small_tree(*lines):
    return TermTree.from_lines(lines, normalize=normalize)


# ------------------------------------------------------------------ term tree

def test_term_tree_loads_tsv_and_gzip_with_derived_ids(tmp_path):
    text = "term\tcategory\ttermid\tfreq\tsource\n红楼梦\t作品类_实体\t\t334\tmine\n# a comment\n\nＩＢＭ\t组织机构类_企事业单位\n"
    plain, packed = tmp_path / "tree.tsv", tmp_path / "tree.tsv.gz"
    plain.write_text(text, encoding="utf-8")
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    for path in (plain, packed):
        tree = TermTree.load(path, normalize)
        assert len(tree) == 2
        assert tree.lookup("红楼梦")[0].termid == "作品与出版物_eb_红楼梦"
        assert tree.lookup("ibm")[0].category == "组织机构类_企事业单位"   # width and case do not matter
        assert tree.linked("红楼梦", "作品类_概念").term == "红楼梦"        # same top type links
        assert tree.linked("红楼梦", "人物类_实体") is None


def test_a_term_keeps_several_categories_most_frequent_first():
    tree = small_tree("苹果\t饮食类\t\t10", "苹果\t组织机构类_企事业单位\t\t50")
    assert [t.category for t in tree.lookup("苹果")] == ["组织机构类_企事业单位", "饮食类"]
    assert [t.category for t in tree.lookup("苹果", ["饮食类"])] == ["饮食类"]


@pytest.mark.parametrize("line, message", [
    ("红楼梦", "expected 2 to 5"),
    ("红楼梦\t作品类\t\t1", "unknown category '作品类'"),
    ("\t作品类_实体", "the term is empty"),
    ("红楼梦\t作品类_实体\t\tmany", "freq must be a non-negative integer"),
    ("红楼梦\t作品类_实体\t\t²", "freq must be a non-negative integer"),
    ("红楼梦\t作品类_实体\t\t" + "9" * 5000, "freq must be a non-negative integer"),
    ("红楼梦\t作品类_实体\t\t١٢", "freq must be a non-negative integer"),
    ("红楼梦\t作品类_实体\t\t1\tsrc\textra", "expected 2 to 5"),
])
def test_bad_term_tree_line_is_a_typed_error_with_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.tsv"
    path.write_text(f"曹雪芹\t人物类_实体\n{line}\n", encoding="utf-8")
    with pytest.raises(TermTreeError, match=message) as info:
        TermTree.load(path)
    assert info.value.line == 2 and info.value.source == str(path)
    assert f"{path}:2" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_term_tree_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TermTree.load(tmp_path / "missing.tsv")
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes("曹雪芹\t人物类_实体\n".encode() + b"caf\xe9\t\xe9\n")
    with pytest.raises(TermTreeError, match=":2: not valid UTF-8") as info:
        TermTree.load(bad)
    assert info.value.line == 2


def test_save_and_load_round_trip(tmp_path):
    tree = small_tree("红楼梦\t作品类_实体\t\t3\tx", "曹雪芹\t人物类_实体")
    tree.save(tmp_path / "t.tsv.gz")
    again = TermTree.load(tmp_path / "t.tsv.gz", normalize)
    assert sorted((t.term, t.category, t.termid, t.freq) for t in again) == sorted(
        (t.term, t.category, t.termid, t.freq) for t in tree)


def test_hierarchy_covers_every_category():
    tops = TermTree.hierarchy()
    assert sorted(c for cs in tops.values() for c in cs) == sorted(CATEGORIES)
    assert "作品类_实体" in tops["作品与出版物"]
    assert termid("人物类_实体", "曹雪芹") == "人物_eb_曹雪芹"


# ------------------------------------------------------------------ labelling

def words_of(text, pieces):
    """``(start, end, tag)`` words from ``[(word, tag), ...]`` that spell ``text``."""
    out, start = [], 0
    for word, tag in pieces:
        out.append((start, start + len(word), tag))
        start += len(word)
    assert start == len(text)
    return out


def labels_of(labeller, text, pieces):
    return [(text[s:e], c, t) for s, e, c, t in labeller.label(text, words_of(text, pieces))]


def test_rules_tree_and_agreement():
    tree = small_tree("北京大学\t组织机构类", "华为\t人物类_实体\t\t99", "华为\t组织机构类_企事业单位\t\t1",
                      "曹雪芹\t人物类_实体", "坚定不移\t词汇用语")
    labeller = Labeller(tree, None)
    text = "《红楼 梦》是曹雪芹在北京大学写的吗？华为不坚定不移"
    got = labels_of(labeller, text, [
        ("《", "w"), ("红楼", "n"), (" ", "w"), ("梦", "n"), ("》", "w"), ("是", "v"), ("曹雪芹", "PER"), ("在", "p"),
        ("北京", "LOC"), ("大学", "n"), ("写", "v"), ("的", "u"), ("吗", "xc"), ("？", "w"), ("华为", "ORG"),
        ("不", "d"), ("坚定不移", "a"),
    ])
    assert got == [
        ("《", "w", None), ("红楼 梦", "作品类_实体", None), ("》", "w", None), ("是", "肯定词", None),
        ("曹雪芹", "人物类_实体", "人物_eb_曹雪芹"), ("在", "介词", None),
        ("北京大学", "组织机构类", "组织机构_eb_北京大学"),      # merged: the tree's longest match
        ("写", "场景事件", None), ("的", "助词", None), ("吗", "语气词", None), ("？", "w", None),
        ("华为", "组织机构类_企事业单位", "组织机构_eb_华为"),   # tagged ORG: never the tree's person sense
        ("不", "否定词", None), ("坚定不移", "词汇用语", "词汇用语_eb_坚定不移"),
    ]


@pytest.mark.parametrize("pieces, expected", [
    # doubled brackets: the inner pair holds the title, and no bracket joins it
    ([("《", "w"), ("《", "w"), ("红楼梦", "nw"), ("》", "w"), ("》", "w")],
     [("《", "w"), ("《", "w"), ("红楼梦", "作品类_实体"), ("》", "w"), ("》", "w")]),
    # punctuation alone, or nothing, between the brackets is no title
    ([("《", "w"), ("，", "w"), ("》", "w")], [("《", "w"), ("，", "w"), ("》", "w")]),
    ([("《", "w"), ("》", "w"), ("好", "a")], [("《", "w"), ("》", "w"), ("好", "修饰词")]),
])
def test_book_title_rule_needs_a_title_between_one_pair(pieces, expected):
    text = "".join(word for word, _ in pieces)
    assert [(w, c) for w, c, _ in labels_of(Labeller(None, None), text, pieces)] == expected


def test_latin_words_are_foreign_words_whatever_function_tag_they_got():
    labeller = Labeller(None, None)
    assert labeller.label_word("new", "xc") == ("外语单词", None)
    assert labeller.label_word("york", "nz") == ("外语单词", None)
    assert labeller.label_word("呢", "xc")[0] != "外语单词"
    assert Labeller(None, None, rules=False).label_word("new", "xc") == ("助词", None)   # the baseline mapping


def test_weak_sources_only_count_for_words_tagged_as_names():
    tree = small_tree("多云\t人物类_实体\t\t5\tjieba:nr", "李明\t人物类_实体\t\t5\tjieba:nr")
    labeller = Labeller(tree, None, name_only_sources=["jieba:"])
    assert labeller.label_word("多云", "n") == ("词汇用语", None)
    assert labeller.label_word("李明", "PER") == ("人物类_实体", "人物_eb_李明")
    assert Labeller(tree, None).label_word("多云", "n")[0] == "人物类_实体"


def test_baseline_is_the_plain_lac_mapping():
    labeller = Labeller(None, None, rules=False)
    text = "《红楼梦》是曹雪芹的"
    got = labels_of(labeller, text, [("《", "w"), ("红楼梦", "nw"), ("》", "w"), ("是", "v"), ("曹雪芹", "PER"), ("的", "u")])
    assert [c for _, c, _ in got] == ["w", "作品类_实体", "w", "场景事件", "人物类_实体", "助词"]


def test_classifier_decides_among_the_categories_the_tag_allows():
    weights = np.zeros((8, len(NOUN_CLASSES)), dtype=np.float32)
    bias = np.zeros(len(NOUN_CLASSES), dtype=np.float32)
    bias[NOUN_CLASSES.index("人物类_实体")] = 5.0
    bias[NOUN_CLASSES.index("组织机构类_企事业单位")] = 1.0
    labeller = Labeller(small_tree("x\tw"), CategoryClassifier(weights, bias, NOUN_CLASSES))
    assert labeller.label_word("某某", "n")[0] == "人物类_实体"
    assert labeller.label_word("某某", "ORG")[0] == "组织机构类_企事业单位"
    assert labeller.label_word("iphone", "nz")[0] == "外语单词"


# ------------------------------------------------------------- the task itself

def test_offsets_round_trip_on_full_width_and_mixed_text(wordtag):
    for text, result in zip(TEXTS, wordtag(TEXTS)):
        assert result["text"] == text
        position = 0
        for item in result["items"]:
            assert item["offset"] == position, (text, item)
            assert text[item["offset"]:item["offset"] + item["length"]] == item["item"]
            assert item["wordtag_label"] in CATEGORIES
            position += item["length"]
        assert position == len(text)


def test_whitespace_is_its_own_w_item(wordtag):
    items = wordtag("ＩＢＭ公司　在 上海。")[0]["items"]
    assert [i["item"] for i in items if i["wordtag_label"] == "w" and i["item"].isspace()] == ["\u3000", " "]


def test_user_terms_override_the_model_and_the_tree(tiny_km, tmp_path):
    text = "长津湖和红楼梦"
    flow = Taskflow("knowledge_mining", task_path=tiny_km, user_dict=["长津湖/作品类_实体", "红楼梦/人物类_概念"])
    items = {i["item"]: i for i in flow(text)[0]["items"]}
    assert items["长津湖"]["wordtag_label"] == "作品类_实体" and items["长津湖"]["termid"] is None   # always there
    assert items["红楼梦"]["wordtag_label"] == "人物类_概念"
    assert items["红楼梦"]["termid"] is None   # the tree knows it as a work, not under 人物
    path = tmp_path / "dict.txt"
    path.write_text("长津 湖/作品类_实体\n", encoding="utf-8")
    items = Taskflow("wordtag", task_path=tiny_km, user_dict=str(path))(text)[0]["items"]
    assert [(i["item"], i["wordtag_label"]) for i in items[:2]][1] == ("湖", "作品类_实体")
    assert items[0]["item"] == "长津"


def test_bad_user_dict_is_a_typed_error_with_line():
    with pytest.raises(UserDictError, match="user_dict:2") as info:
        load_user_dict(["长津湖/作品类_实体", "红楼梦/"])
    assert info.value.line == 2
    with pytest.raises(UserDictError, match="'auto' or 'lac'"):
        load_user_dict(["a"], format="jieba")
    assert load_user_dict(["1/2"]).items["1/2"].tags == (None,)


def test_own_term_tree_replaces_the_shipped_one(tiny_km, tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text("清代\t时间类\n", encoding="utf-8")
    flow = Taskflow("wordtag", task_path=tiny_km, term_tree=str(path))
    assert len(flow.task.tree) == 1
    path.write_text("清代\t朝代\n", encoding="utf-8")
    with pytest.raises(TermTreeError, match=":1: unknown category"):
        Taskflow("wordtag", task_path=tiny_km, term_tree=str(path))


def test_render_html_escapes(wordtag):
    html = wordtag(["<b>红楼梦</b>"])._repr_html_()
    assert "<b>" not in html and "&lt;" in html and "&gt;" in html


# ------------------------------------------------------------ ner accurate mode

def _shape(value):
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, _shape(value[0]) if value else None)
    return type(value).__name__


def test_ner_accurate_has_the_fast_modes_shape(tiny_models, tiny_km):
    # Every tag / category counts, so the random tiny models give entities in both modes.
    fast = Taskflow("ner", mode="fast", task_path=tiny_models["ner"], entity_only=True, entity_labels=LAC_TAGS)
    accurate = Taskflow("ner", mode="accurate", task_path=tiny_km, entity_labels=list(CATEGORIES))
    text = "李明昨天在北京大学见到了王芳"
    a, b = fast(text)[0], accurate(text)[0]
    assert _shape(a) == _shape(b)
    assert set(b) == {"text", "entities", "words"}
    for entity in b["entities"]:
        assert set(entity) == {"text", "label", "start", "end"}
        assert text[entity["start"]:entity["end"]] == entity["text"]
    assert [w for w, _ in b["words"]] == [e["text"] for e in b["entities"]]   # entity_only by default


def test_ner_accurate_options(tiny_km):
    with pytest.raises(OptionError, match="PER"):
        Taskflow("ner", mode="accurate", task_path=tiny_km, entity_labels=["PER"])
    flow = Taskflow("ner", mode="accurate", task_path=tiny_km, entity_only=False,
                    user_dict=["北京大学/组织机构类"], entity_labels=["组织机构类"])
    result = flow("我在北京大学")[0]
    assert "".join(w for w, _ in result["words"]) == "我在北京大学"
    assert {"text": "北京大学", "label": "组织机构类", "start": 2, "end": 6} in result["entities"]
    with pytest.raises(TypeError, match="term_tree_path"):
        Taskflow("ner", mode="accurate", task_path=tiny_km, term_tree_path="x")

    # accurate mode takes knowledge_mining's own options too: a tree of one's own decides the category
    tree = tiny_km.parent / "my_tree.tsv"
    tree.write_text("王芳\t组织机构类_企事业单位\t\t9\tmine\n", encoding="utf-8")
    flow = Taskflow("ner", mode="accurate", task_path=tiny_km, term_tree=str(tree))
    default = Taskflow("ner", mode="accurate", task_path=tiny_km)
    assert [t.category for t in flow.task.tree.lookup("王芳", ["组织机构类_企事业单位"])] == ["组织机构类_企事业单位"]
    assert not default.task.tree.lookup("王芳", ["组织机构类_企事业单位"])
    assert flow.task.labeller.label_word("王芳", "ORG") == ("组织机构类_企事业单位", "组织机构_eb_王芳")


def test_the_lexical_model_is_resolved_with_the_callers_settings(tiny_km, tmp_path):
    flow = Taskflow("knowledge_mining", task_path=tiny_km, home=tmp_path, offline=True, num_threads=1)
    lexical = flow.model.required("lexical")
    assert flow.task.network_model is lexical
    assert (lexical.home, lexical.options.num_threads) == (tmp_path, 1)
    assert lexical.package.directory == (tiny_km / "lexical").resolve()
    flow("北京大学")
    assert list((tmp_path / "taskflow" / ".exports").glob("*/inference.*"))   # its export went to the caller's home


def test_cli_mode_with_options_before_and_after_the_text(tiny_km, capsys):
    text = "《红楼梦》是清代作家曹雪芹的作品"
    assert main(["ner", "--mode", "accurate", text, "--task-path", str(tiny_km)]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["text"] == text and set(row) == {"text", "entities", "words"}
    assert main(["ner", "--mode", "slow", text]) == 2
    assert "no mode 'slow'" in capsys.readouterr().err


# ---------------------------------------------------------------- shipped model

@pytest.mark.skipif("termtree" not in available_models("knowledge_mining"), reason="package not built")
def test_shipped_package_on_clear_sentences():
    out = Taskflow("knowledge_mining")(["《红楼梦》是清代作家曹雪芹的作品", "李明在华为技术有限公司工作"])
    items = {i["item"]: i for i in out[0]["items"]}
    assert items["红楼梦"]["wordtag_label"] == "作品类_实体" and items["红楼梦"]["termid"] == "作品与出版物_eb_红楼梦"
    assert items["曹雪芹"]["wordtag_label"] == "人物类_实体"
    assert items["是"]["wordtag_label"] == "肯定词"
    labels = {i["item"]: i["wordtag_label"] for i in out[1]["items"]}
    assert labels["李明"] == "人物类_实体"
    assert labels["华为技术有限公司"] == "组织机构类_企事业单位"
    ner = Taskflow("ner", mode="accurate")("《红楼梦》是清代作家曹雪芹的作品")[0]
    assert {(e["text"], e["label"]) for e in ner["entities"]} >= {("红楼梦", "作品类_实体"), ("曹雪芹", "人物类_实体")}


def test_a_users_own_category_is_an_entity_in_accurate_ner(tiny_km):
    ner = Taskflow("ner", mode="accurate", task_path=tiny_km, user_dict=["长津湖/电影类_实体"])
    result = ner("我看了长津湖")[0]
    assert {"text": "长津湖", "label": "电影类_实体", "start": 3, "end": 6} in result["entities"]
