"""The contract every registered task keeps, checked on tiny models of each."""

import json

import numpy as np
import pytest
from make_tiny_models import SAMPLE_INPUTS, TINY_BUILDERS

from taskflow import Taskflow
from taskflow.errors import InputTypeError, InvalidInputError
from taskflow.registry import task_names

TASKS = task_names()


def test_every_task_has_a_tiny_model_and_samples():
    assert set(TINY_BUILDERS) == set(TASKS)
    assert set(SAMPLE_INPUTS) == set(TASKS)


@pytest.fixture(scope="module")
def flows(tiny_models):
    return {
        task: (Taskflow(task, task_path=tiny_models[task]), Taskflow(task, task_path=tiny_models[task], static=False))
        for task in TASKS
    }


def _numbers(value):
    """Every float in a nested result, in order, for tolerance comparisons."""
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _numbers(value[k])]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    return []


def _without_numbers(value):
    if isinstance(value, float):
        return None
    if isinstance(value, dict):
        return {k: _without_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_numbers(v) for v in value]
    return value


@pytest.mark.parametrize("task", TASKS)
def test_single_item_in_gives_a_list_of_one(flows, task):
    static, _ = flows[task]
    out = static(SAMPLE_INPUTS[task][0])
    if static.task.single_text_unwrapped:    # PaddleNLP's shape: the word list itself
        assert task in ("word_segmentation", "pos_tagging")
        assert out == static([SAMPLE_INPUTS[task][0]])[0] and isinstance(out, list)
    else:
        assert isinstance(out, list) and len(out) == 1 and out == static([SAMPLE_INPUTS[task][0]])


@pytest.mark.parametrize("task", TASKS)
def test_list_in_gives_same_length_json_serialisable_list_in_order(flows, task):
    static, _ = flows[task]
    samples = SAMPLE_INPUTS[task]
    out = static(samples)
    assert len(out) == len(samples)
    json.dumps(out, ensure_ascii=False)
    # Order is kept: each result equals the result of its item alone.
    for item, result in zip(samples, out):
        alone = static([item])[0]
        assert _without_numbers(alone) == _without_numbers(result)
        np.testing.assert_allclose(_numbers(alone), _numbers(result), atol=1e-5)


@pytest.mark.parametrize("task", TASKS)
def test_empty_list_gives_empty_list(flows, task):
    assert flows[task][0]([]) == []


@pytest.mark.parametrize("task", TASKS)
def test_bad_item_gets_a_typed_error_naming_its_index(flows, task):
    static, _ = flows[task]
    samples = list(SAMPLE_INPUTS[task])
    with pytest.raises((InputTypeError, InvalidInputError)) as info:
        static(samples[:1] + [None] + samples[1:])
    assert info.value.index == 1
    assert "#1" in str(info.value)


@pytest.mark.parametrize("task", TASKS)
def test_static_graph_matches_dynamic_graph(flows, task):
    static, dynamic = flows[task]
    samples = SAMPLE_INPUTS[task]
    a, b = static(samples), dynamic(samples)
    assert _without_numbers(a) == _without_numbers(b)
    np.testing.assert_allclose(_numbers(a), _numbers(b), atol=1e-4)


@pytest.mark.parametrize("task", TASKS)
def test_batch_size_does_not_change_results(tiny_models, task):
    samples = SAMPLE_INPUTS[task] * 3
    one = Taskflow(task, task_path=tiny_models[task], batch_size=1)(samples)
    many = Taskflow(task, task_path=tiny_models[task], batch_size=64)(samples)
    assert _without_numbers(one) == _without_numbers(many)
    np.testing.assert_allclose(_numbers(one), _numbers(many), atol=1e-5)
