"""Taskflow itself: PaddleNLP's option names, introspection, and a clear word when Paddle is missing."""

import subprocess
import sys

import pytest

from taskflow import Taskflow
from taskflow.errors import OptionError
from taskflow.registry import task_names


def test_paddlenlp_option_names_are_aliases(tiny_models, tmp_path):
    tiny = tiny_models["sentiment_analysis"]
    flow = Taskflow("sentiment_analysis", task_path=tiny, home_path=tmp_path, device_id=-1)
    assert flow.model.home == tmp_path and str(flow.model.options.device) == "cpu"
    flow(["好"])
    assert (tmp_path / "taskflow" / ".exports").is_dir()     # home_path is the cache root (a task_path's export)
    with pytest.raises(OptionError, match="home or home_path"):
        Taskflow("sentiment_analysis", task_path=tiny, home=tmp_path, home_path=tmp_path)
    with pytest.raises(OptionError, match="device_id"):
        Taskflow("sentiment_analysis", task_path=tiny, device_id="gpu")
    from taskflow.pipeline import _paddlenlp_names

    assert _paddlenlp_names({"device_id": 2}, None, None) == (None, "gpu:2")
    assert _paddlenlp_names({}, None, None) == (None, "cpu")            # the default device
    with pytest.raises(OptionError, match="not both"):                  # even device="cpu": never a silent GPU
        Taskflow("sentiment_analysis", task_path=tiny, device="cpu", device_id=0)
    # The constructor's own options are checked for their types like a task option.
    for options, name in (({"mode": ["fast"]}, "mode"), ({"model": 3}, "model"), ({"home": 5}, "home"),
                          ({"offline": "no"}, "offline")):
        with pytest.raises(OptionError, match=name) as info:
            Taskflow("sentiment_analysis", task_path=tiny, **options)
        assert info.value.option == name
    with pytest.raises(OptionError, match="task_path must be a folder's path"):
        Taskflow("sentiment_analysis", task_path=5)


def test_task_list_and_help(tiny_models, capsys):
    assert Taskflow.task_list == task_names() and "ner" in Taskflow.task_list
    Taskflow("ner", task_path=tiny_models["ner"], entity_only=True).help()
    out = capsys.readouterr().out
    assert out.startswith("ner (aliases: named_entity_recognition)")
    assert "entity_labels = None" in out and "entity_only = False" in out and "user_dict = None" in out
    assert "modes: fast -> lexical_analysis/bigru_crf, accurate -> knowledge_mining/termtree" in out
    assert "model: lexical_analysis/tiny" in out and "input: a str" in out
    Taskflow("text_similarity", task_path=tiny_models["text_similarity"]).help()
    out = capsys.readouterr().out
    assert "threshold = None" in out and "input: an item (text1, text2)" in out and ">>> " in out


def test_without_paddle_one_clear_message_names_both_installs(tiny_models):
    code = (
        "import sys; sys.modules['paddle'] = None\n"     # as if paddlepaddle were not installed
        "import taskflow\n"
        "from taskflow import Taskflow\n"
        f"Taskflow('sentiment_analysis', task_path={str(tiny_models['sentiment_analysis'])!r})\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("taskflow.errors.PaddleNotInstalledError")
    assert "taskflow-nlp[cpu]" in last and "paddlepaddle-gpu" in last


def test_a_first_run_prints_results_and_nothing_else(tiny_models, tmp_path):
    """The first call exports the static graph; Paddle's C++ log lines (PIR's "not support input
    out tensor"...) and the ccache warning must not reach the user's terminal or notebook."""
    code = (
        "from taskflow import Taskflow\n"
        f"print(Taskflow('lexical_analysis', task_path={str(tiny_models['lexical_analysis'])!r}, "
        f"home={str(tmp_path)!r})('李明在北京')[0]['segs'] != [])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "True\n"
    assert run.stderr == ""
    assert list(tmp_path.glob("taskflow/.exports/*-*/inference.*"))   # it did export (a task_path's: in .exports)


def test_an_option_of_another_mode_names_that_mode(tiny_models):
    with pytest.raises(OptionError) as info:
        Taskflow("ner", task_path=tiny_models["ner"], term_tree="terms.tsv")
    message = str(info.value)
    assert info.value.option == "term_tree"
    assert "term_tree is an option of ner's mode 'accurate' (this pipeline runs mode 'fast')" in message
    assert "pass mode='accurate'" in message and "unknown option" not in message
    with pytest.raises(OptionError, match="Did you mean 'entity_only'"):      # a typo is still a typo
        Taskflow("ner", task_path=tiny_models["ner"], entity_onyl=True)


def test_entity_labels_offers_the_entity_labels_not_every_tag(tiny_models):
    with pytest.raises(OptionError) as info:
        Taskflow("ner", task_path=tiny_models["ner"], entity_labels=["PERSON", "LOC"])
    message = str(info.value)
    assert "Did you mean 'PER' for 'PERSON'?" in message and "Entity labels: PER, LOC, ORG, TIME" in message
    assert ", vn," not in message and "'vd'" not in message        # the POS tags are not the choices


def test_a_package_that_ships_only_as_an_ensemble_member_is_not_offered_on_its_own():
    from taskflow.errors import UnknownModelError
    from taskflow.packages import available_models

    listed = {row["task"]: row["models"] for row in Taskflow.tasks()}
    # Shipped, and run inside the packages that name them ...
    assert {"drqa_word", "encoder_span"} <= set(available_models("reading_comprehension"))
    assert {"siamese_hard_negatives", "siamese_rnn_hard_negatives"} <= set(available_models("text_similarity"))
    # ... but not offered beside the models a user picks; a default or a mode's package always is.
    assert listed["reading_comprehension"] == ["drqa_char", "reader_ensemble"]
    assert listed["text_similarity"] == ["siamese_char_word", "siamese_rnn_ensemble"]
    # char_cnn_neutral is a member of encoder_ensemble and what neutral=True runs: listed.
    assert listed["sentiment_analysis"] == ["char_cnn", "char_cnn_neutral", "encoder_ensemble"]
    with pytest.raises(UnknownModelError, match="available: drqa_char, reader_ensemble"):
        Taskflow("reading_comprehension", model="drqa_word")


def test_a_pipeline_pickles_by_its_options_and_spawned_processes_can_take_one(tiny_models):
    import multiprocessing
    import pickle

    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], batch_size=4)
    copy = pickle.loads(pickle.dumps(flow))
    assert copy is not flow and copy.spec == flow.spec and copy.task.batch_size == 4
    texts = ["很好", "太差了", "还行吧"]
    assert copy(texts) == flow(texts)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(flow, (texts,)) == flow(texts)
