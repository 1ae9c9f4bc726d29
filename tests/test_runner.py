"""The runner every call goes through: declared options, call-time options, several callers in one run."""

import inspect
import threading

import pytest

from taskflow import Taskflow
from taskflow.errors import InvalidInputError, OptionError
from taskflow.pipeline import mode_classes
from taskflow.registry import get_task_class, task_names
from taskflow.runner import Request, Runner, chunks
from taskflow.task import Task


def _task_classes():
    classes = []
    for name in task_names():
        registered = get_task_class(name)
        for cls in (registered, *mode_classes(registered).values()):
            if cls not in classes:
                classes.append(cls)
    return classes


@pytest.mark.parametrize("cls", _task_classes(), ids=lambda cls: cls.__name__)
def test_every_option_a_task_takes_is_declared_with_its_default_and_help(cls):
    # The constructors still name their options (they check them): the declaration must say the same.
    signature = {}
    for klass in cls.__mro__:
        if klass is Task:
            break
        if "__init__" in vars(klass):
            for param in inspect.signature(klass.__init__).parameters.values():
                if param.kind is param.KEYWORD_ONLY and param.name != "batch_size":
                    signature.setdefault(param.name, param.default)
    declared = cls.declared_options()
    assert set(declared) == set(signature), cls
    for name, option in declared.items():
        assert option.default == signature[name], (cls, name)
        assert option.help and option.kind in ("bool", "int", "float", "list", "str"), (cls, name)
        assert (option.check is not None) == option.per_call, (cls, name)


@pytest.mark.parametrize("cls", _task_classes(), ids=lambda cls: cls.__name__)
def test_a_task_docstring_lists_its_declared_options_once_and_no_other(cls):
    # help(cls) reads the docstring: its Options section is made from the declaration, never kept by hand.
    doc = inspect.getdoc(cls)
    assert doc.count("Options:") == (1 if cls.declared_options() else 0), cls
    if cls.declared_options():
        section = doc[doc.index("Options:"):].splitlines()[1:]
        listed = [line.split()[0] for line in section if line.startswith("    ") and not line.startswith("        ")]
        assert listed == list(cls.declared_options()), cls


def test_call_time_options_apply_to_that_call_only(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    texts = ["好吃", "难吃", "服务很好"]
    plain = flow(texts)
    scored = flow(texts, return_all_scores=True)
    assert all("scores" not in r for r in plain) and all(set(r["scores"]) == {"negative", "positive"} for r in scored)
    assert [r["label"] for r in scored] == [r["label"] for r in plain]
    assert flow(texts) == plain and flow.task.return_all_scores is False     # the instance is unchanged
    assert list(flow.stream(texts, return_all_scores=True)) == scored


def test_call_time_options_are_checked_before_anything_runs(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    with pytest.raises(OptionError, match="fixed when the Taskflow is built") as info:
        flow(["好"], ensemble=False)
    assert info.value.option == "ensemble"
    with pytest.raises(OptionError, match="Did you mean 'return_all_scores'"):
        flow(["好"], return_all_score=True)
    with pytest.raises(OptionError, match="return_all_scores must be True or False"):
        flow(["好"], return_all_scores="yes")
    with pytest.raises(OptionError, match="fixed when"):      # eagerly, not at the first result
        flow.stream(["好"], neutral=True)


def test_per_call_options_of_the_other_tasks(tiny_models):
    rc = Taskflow("reading_comprehension", task_path=tiny_models["reading_comprehension"])
    item = ("北京是中国的首都，上海是中国最大的城市。", "中国的首都是哪里？")
    one, three = rc(item), rc(item, top_k=3)
    assert isinstance(one[0], dict) and isinstance(three[0], list) and len(three[0]) == 3
    assert three[0][0] == one[0] and rc(item) == one
    with pytest.raises(OptionError, match="fixed when"):
        rc(item, max_seq_len=64)
    sim = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
    pair = ("花呗怎么还款", "花呗如何还钱")
    similarity = sim(pair)[0]["similarity"]
    assert sim(pair, threshold=0.0)[0]["label"] == 1 and sim(pair, threshold=1.0)[0]["label"] == int(similarity >= 1)
    with pytest.raises(OptionError, match="threshold must be a number between 0 and 1"):
        sim(pair, threshold=2)
    ner = Taskflow("ner", task_path=tiny_models["lexical_analysis"])
    text = "李明在北京大学工作"
    assert ner(text, entity_only=True)[0]["words"] == [(e["text"], e["label"]) for e in ner(text)[0]["entities"]]


def test_several_callers_share_one_run_and_each_gets_its_own_results(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    runner = Runner(flow.task)
    seen = []
    real = flow.task.run_items
    flow.task.run_items = lambda items: seen.append(len(items)) or real(items)
    requests = [Request(["好吃", "难吃"]), Request(["", "服务很好"], on_error="skip"), Request(["不错", ""]),
                Request(["一般"], offset=7)]
    runner.run_requests(requests)
    del flow.task.run_items
    assert seen == [4], "the good items of every caller run as one (not those of a caller with a bad one)"
    expected = flow(["好吃", "难吃", "服务很好", "一般"])
    assert requests[0].results == expected[:2] and requests[0].error is None
    assert requests[1].results[0]["error_type"] == "InvalidInputError" and requests[1].results[1] == expected[2]
    assert isinstance(requests[2].error, InvalidInputError) and "#1" in str(requests[2].error)
    assert requests[2].results == []
    assert requests[3].results == [expected[3]]


def test_threads_calling_with_different_options_get_their_own(tiny_models):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    texts = ["好吃", "难吃", "服务很好", "太贵了"] * 10
    plain, scored = flow(texts), flow(texts, return_all_scores=True)
    failures = []

    def call(k):
        for _ in range(5):
            got = flow(texts, return_all_scores=True) if k % 2 else flow(texts)
            if got != (scored if k % 2 else plain):
                failures.append(k)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_chunks_are_lazy_and_keep_order():
    consumed = []

    def numbers():
        for k in range(7):
            consumed.append(k)
            yield k

    it = chunks(numbers(), 3, first=2)
    assert next(it) == [0, 1] and consumed == [0, 1]
    assert list(it) == [[2, 3, 4], [5, 6]]


def test_the_lexical_tasks_of_one_process_share_one_loaded_model_and_predictor(tiny_models):
    from taskflow import model

    lexical = tiny_models["lexical_analysis"]
    flows = [Taskflow(task, task_path=lexical) for task in ("lexical_analysis", "ner", "pos_tagging",
                                                            "word_segmentation")]
    for flow in flows:
        flow("李明在北京大学工作")
    assert len({id(flow.task.network_model) for flow in flows}) == 1
    assert len({id(flow.task.predictor) for flow in flows}) == 1
    shared = [m for m in model._SHARED_MODELS.values() if m is flows[0].task.network_model]
    assert len(shared) == 1, "the process-wide cache holds the one model the four tasks run"
