"""The shipped models give what they gave when tests/fixtures/shipped_outputs.json was recorded
(recorded with the code from before the model/task split, commit a179794; see
tests/fixtures/record_shipped_outputs.py), on both graph modes and both Paddle API levels."""

import json
from pathlib import Path

import pytest

from taskflow import Taskflow

from record_shipped_outputs import CASES, key

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "shipped_outputs.json").read_text(encoding="utf-8"))


def _same(got, want, where="result", tolerance=1e-4):
    """Equal, floats within ``tolerance`` (1e-4: Paddle 2.6 and 3.x kernels differ in the last digits)."""
    if isinstance(want, float):
        assert got == pytest.approx(want, abs=tolerance), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for k in want:
            _same(got[k], want[k], f"{where}[{k!r}]", tolerance)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]", tolerance)
    else:
        assert got == want, where


@pytest.mark.slow
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
@pytest.mark.parametrize("task, options, data", CASES, ids=[f"{t}{o or ''}" for t, o, _ in CASES])
def test_shipped_model_outputs_are_unchanged(task, options, data, static):
    got = json.loads(json.dumps(Taskflow(task, static=static, precision="fp32", **options)(data), ensure_ascii=False))
    _same(got, RECORDED[key(task, options, static)], task)


BF16_CASES = [(t, o, d) for t, o, d in CASES if o.get("mode") == "accurate" and t != "ner"]


@pytest.mark.slow
@pytest.mark.parametrize("task, options, data", BF16_CASES, ids=[f"{t}{o}" for t, o, _ in BF16_CASES])
def test_the_default_precision_gives_the_recorded_answers(task, options, data):
    """precision="auto", the default: the accurate modes' encoders run in bf16 on a CPU that
    computes it natively, and give the recorded labels and answers, scores within 0.02 of fp32's;
    on any other CPU the recorded numbers themselves."""
    from taskflow.predictor import native_bf16

    flow = Taskflow(task, **options)
    got = json.loads(json.dumps(flow(data), ensure_ascii=False))
    _same(got, RECORDED[key(task, options, True)], task, tolerance=0.02 if native_bf16() else 1e-4)
