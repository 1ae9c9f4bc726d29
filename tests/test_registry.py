import pytest

import taskflow
from taskflow import Task, Taskflow, register_task
from taskflow.errors import RegistryError, UnknownModelError, UnknownTaskError
from taskflow.registry import canonical_name, get_task_class, task_names

# Pinned like spaCy's registry snapshot: adding or renaming a task must update this.
EXPECTED_TASKS = {
    "sentiment_analysis": {"aliases": ["sentiment", "senta"], "default_model": "char_cnn"},
    "text_classification": {"aliases": [], "default_model": ""},     # the user's own model, task_path=
    "lexical_analysis": {"aliases": ["lac", "lexical"], "default_model": "bigru_crf"},
    "word_segmentation": {"aliases": ["segmentation", "cws"], "default_model": "lexical_analysis/bigru_crf"},
    "pos_tagging": {"aliases": ["pos"], "default_model": "lexical_analysis/bigru_crf"},
    "ner": {"aliases": ["named_entity_recognition"], "default_model": "lexical_analysis/bigru_crf",
            "modes": {"fast": "lexical_analysis/bigru_crf", "accurate": "knowledge_mining/termtree"}},
    "knowledge_mining": {"aliases": ["wordtag"], "default_model": "termtree"},
    "text_similarity": {"aliases": ["text_matching"], "default_model": "siamese_char_word"},
    "reading_comprehension": {"aliases": ["question_answering_extractive"], "default_model": "drqa_char"},
}


def test_registry_snapshot():
    rows = {row["task"]: row for row in Taskflow.tasks()}
    assert set(rows) == set(EXPECTED_TASKS)
    for name, expected in EXPECTED_TASKS.items():
        assert rows[name]["aliases"] == expected["aliases"]
        assert rows[name]["default_model"] == expected["default_model"]
        assert rows[name]["modes"] == expected.get("modes", {})
        if expected["default_model"]:
            assert expected["default_model"] in rows[name]["models"], "the default model's manifest must ship"


def test_aliases_and_spelling_resolve_to_the_canonical_name():
    assert canonical_name("senta") == "sentiment_analysis"
    assert canonical_name("Sentiment-Analysis") == "sentiment_analysis"
    assert get_task_class("sentiment") is get_task_class("sentiment_analysis")


def test_unknown_task_suggests_the_closest_and_lists_all():
    with pytest.raises(UnknownTaskError) as info:
        Taskflow("sentiment_analysys")
    message = str(info.value)
    assert "Did you mean 'sentiment_analysis'" in message
    assert "Available tasks: " in message and "sentiment_analysis" in message
    assert isinstance(info.value, ValueError)


def test_non_str_task_name_is_a_typed_error():
    with pytest.raises(UnknownTaskError, match="must be a str"):
        Taskflow(42)


def test_registering_another_class_under_a_taken_name_raises():
    with pytest.raises(RegistryError, match="already belongs to"):
        @register_task("sentiment_analysis")
        class Impostor(Task):
            pass
    with pytest.raises(RegistryError):
        @register_task("brand_new_task", aliases=["senta"])
        class AliasThief(Task):
            pass
    assert "brand_new_task" not in task_names()


def test_reregistering_the_same_class_is_a_no_op():
    cls = get_task_class("sentiment_analysis")
    assert register_task("sentiment_analysis", aliases=list(cls.aliases))(cls) is cls


def test_unknown_model_and_mode_list_the_known_ones():
    with pytest.raises(UnknownModelError, match="available: .*char_cnn"):
        Taskflow("sentiment_analysis", model="nope")
    with pytest.raises(UnknownModelError, match="no mode 'fast'"):
        Taskflow("sentiment_analysis", mode="fast")


def test_unknown_option_is_a_type_error_naming_the_accepted_ones(tiny_sentiment):
    with pytest.raises(TypeError, match="return_all_scores"):
        Taskflow("sentiment_analysis", task_path=tiny_sentiment, retrun_all_scores=True)


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, taskflow; print('paddle' in sys.modules, 'jieba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_public_api_is_small():
    assert sorted(taskflow.__all__) == sorted(["Taskflow", "Task", "TextTask", "register_task", "errors", "__version__"])
