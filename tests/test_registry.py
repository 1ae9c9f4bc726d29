import pytest

import taskflow
from taskflow import Task, Taskflow, register_task
from taskflow.errors import OptionError, RegistryError, UnknownModelError, UnknownTaskError
from taskflow.registry import canonical_name, get_task_class, task_names

# Pinned like spaCy's registry snapshot: adding or renaming a task must update this.
EXPECTED_TASKS = {
    "sentiment_analysis": {"aliases": ["sentiment", "senta"], "default_model": "char_cnn",
                           "modes": {"fast": "char_cnn", "accurate": "encoder_ensemble"}},
    "text_classification": {"aliases": [], "default_model": ""},     # the user's own model, task_path=
    "lexical_analysis": {"aliases": ["lac", "lexical"], "default_model": "bigru_crf"},
    "word_segmentation": {"aliases": ["segmentation", "cws"], "default_model": "lexical_analysis/bigru_crf",
                          "modes": {"fast": "word_segmentation/jieba", "base": "lexical_analysis/bigru_crf"}},
    "pos_tagging": {"aliases": ["pos"], "default_model": "lexical_analysis/bigru_crf"},
    "ner": {"aliases": ["named_entity_recognition"], "default_model": "lexical_analysis/bigru_crf",
            "modes": {"fast": "lexical_analysis/bigru_crf", "accurate": "knowledge_mining/termtree"}},
    "knowledge_mining": {"aliases": ["wordtag"], "default_model": "termtree"},
    "text_similarity": {"aliases": ["text_matching"], "default_model": "siamese_char_word",
                        "modes": {"fast": "siamese_char_word", "accurate": "siamese_rnn_ensemble"}},
    "reading_comprehension": {"aliases": ["question_answering_extractive"], "default_model": "drqa_char",
                              "modes": {"fast": "drqa_char", "accurate": "reader_ensemble"}},
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


def test_each_name_is_found_in_the_source_of_the_one_package_that_registers_it():
    """A first call imports only the task package that declares its name (read from the source,
    not imported); every registered name and alias is found there."""
    from taskflow.registry import _declared_names

    declared = _declared_names()
    for name, expected in EXPECTED_TASKS.items():
        package = get_task_class(name).__module__
        assert all(declared[key] == package for key in [name, *expected["aliases"]]), name


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
    with pytest.raises(UnknownModelError, match="no mode 'base'; modes: fast, accurate"):
        Taskflow("sentiment_analysis", mode="base")
    with pytest.raises(UnknownModelError, match="no mode 'fast'"):
        Taskflow("text_classification", mode="fast")


def test_unknown_model_or_mode_is_an_option_error_with_the_near_miss():
    with pytest.raises(OptionError, match="modes: fast, accurate. Did you mean 'accurate'") as caught:
        Taskflow("text_similarity", mode="Accurate")
    assert caught.value.option == "mode"
    with pytest.raises(OptionError, match="Did you mean 'accurate'"):
        Taskflow("sentiment_analysis", mode="acurate")
    with pytest.raises(UnknownModelError, match="Did you mean 'char_cnn'") as caught:
        Taskflow("sentiment_analysis", model="char_cn")
    assert caught.value.option == "model" and isinstance(caught.value, (ValueError, TypeError))


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
    assert sorted(taskflow.__all__) == sorted(["Taskflow", "Client", "Task", "TextTask", "register_task", "errors",
                                              "__version__"])


# ------------------------------------------------------------------ model names

def test_a_short_model_name_names_the_one_listed_model_it_ends():
    ner = get_task_class("ner")
    assert Taskflow.locate(ner, "bigru_crf") == ("lexical_analysis", "bigru_crf")
    assert Taskflow.locate(ner, "termtree") == ("knowledge_mining", "termtree")
    assert Taskflow.locate(ner, "bigru_crf", "fast") == ("lexical_analysis", "bigru_crf")
    assert Taskflow.locate(ner, "lexical_analysis/bigru_crf") == ("lexical_analysis", "bigru_crf")
    with pytest.raises(UnknownModelError, match="mode 'fast' runs model 'lexical_analysis/bigru_crf'"):
        Taskflow.locate(ner, "termtree", "fast")
    flow = Taskflow("ner", model="bigru_crf")
    assert (flow.model.task, flow.model.name) == ("lexical_analysis", "bigru_crf")


def test_an_ambiguous_short_name_lists_the_real_names(tmp_path, monkeypatch):
    from taskflow import packages

    for task in ("lexical_analysis", "knowledge_mining"):
        (tmp_path / task / "twin").mkdir(parents=True)
        (tmp_path / task / "twin" / "manifest.json").write_text("{}")
    monkeypatch.setattr(packages, "_bundled_root", lambda: tmp_path)
    ner = get_task_class("ner")
    monkeypatch.setattr(ner, "modes", {"fast": "lexical_analysis/twin", "accurate": "knowledge_mining/twin"})
    with pytest.raises(UnknownModelError, match="'twin' of task 'ner' is ambiguous: it may be "
                                                "lexical_analysis/twin, knowledge_mining/twin; pass the full name"):
        Taskflow.locate(ner, "twin")


def test_only_listed_models_load(tiny_sentiment):
    """A shipped package of another task is no model of this one, whatever its folder."""
    with pytest.raises(UnknownModelError, match="has no model 'lexical_analysis/bigru_crf'; available: char_cnn"):
        Taskflow("sentiment_analysis", model="lexical_analysis/bigru_crf")


@pytest.mark.parametrize("form", ["absolute", "relative", "dotted", "home"])
def test_a_model_name_that_is_a_path_is_refused(tiny_sentiment, tmp_path, monkeypatch, form):
    """model="/any/dir/evil" loaded the package in that folder as if it had shipped with
    taskflow (and wrote its export beside it).  A package of one's own is task_path=."""
    import json
    import shutil

    from taskflow.errors import ModelNotFoundError, OptionError

    evil = shutil.copytree(tiny_sentiment, tmp_path / "dir" / "evil")
    manifest = json.loads((evil / "manifest.json").read_text())
    manifest.update(task=str(tmp_path / "dir"), name="evil")   # what the old look-up asked of it
    (evil / "manifest.json").write_text(json.dumps(manifest))
    before = sorted(p.name for p in evil.iterdir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    name = {"absolute": str(evil), "relative": "dir/evil", "dotted": "./dir/evil", "home": "~/dir/evil"}[form]
    with pytest.raises((OptionError, ModelNotFoundError)) as info:
        Taskflow("sentiment_analysis", model=name)(["很好"])
    assert "task_path=" in str(info.value) and "char_cnn" in str(info.value)
    assert sorted(p.name for p in evil.iterdir()) == before, "nothing may be written beside it"


@pytest.mark.parametrize("control", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u200e"])
def test_a_package_name_with_a_text_direction_control_is_refused(tiny_sentiment, tmp_path, capsys, control):
    """"tiny\u202egpj.exe" shows as "tinyexe.jpg": such a name would list, log and serve as another."""
    import json
    import shutil

    from taskflow.cli import main
    from taskflow.errors import ManifestError

    package = shutil.copytree(tiny_sentiment, tmp_path / "pkg")
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest["name"] = f"tiny{control}gpj.exe"
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert main(["pack", str(package), str(tmp_path / "served")]) == 2
    err = capsys.readouterr().err
    assert f"text-direction controls (U+{ord(control):04X} at 4)" in err and "use a plain name" in err
    assert not (tmp_path / "served").exists() or not any((tmp_path / "served").rglob("*.npz"))
    with pytest.raises(ManifestError, match="text-direction controls"):
        Taskflow("sentiment_analysis", task_path=str(package))


def test_a_paddlenlp_task_taskflow_lacks_is_said_to_be_not_provided():
    from taskflow.errors import UnknownTaskError
    from taskflow.registry import canonical_name

    with pytest.raises(UnknownTaskError, match="'text_summarization' is not provided here") as info:
        canonical_name("text_summarization")
    assert "Did you mean" not in str(info.value)
    with pytest.raises(UnknownTaskError, match="use 'reading_comprehension'"):
        canonical_name("question_answering")
