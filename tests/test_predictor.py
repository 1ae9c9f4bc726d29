"""Predictor configuration, static export caching, devices."""

import inspect
import os
from pathlib import Path
import shutil

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.errors import DeviceError, OptionError
from taskflow.predictor import (
    Device,
    InputSpec,
    Precision,
    PredictorOptions,
    build_config,
    import_paddle,
    inference_settings,
)
from taskflow.packages import Manifest, write_package

paddle = import_paddle()
PADDLE_MAJOR = int(paddle.__version__.split(".")[0])
SPECS = [InputSpec("input_ids", "int64", (32, 256))]


def _calls(options):
    return {name: (args, kwargs) for name, args, kwargs in inference_settings(options, SPECS, PADDLE_MAJOR)}


@pytest.mark.parametrize(
    "text, expected",
    [("cpu", Device("cpu", 0)), ("gpu", Device("gpu", 0)), ("GPU:1", Device("gpu", 1)), ("cuda:2", Device("gpu", 2))],
)
def test_device_strings(text, expected):
    assert Device.parse(text) == expected


@pytest.mark.parametrize("bad", ["tpu", "gpu:x", "cpu:1", 3])
def test_bad_device_is_a_typed_error(bad):
    with pytest.raises(DeviceError):
        Device.parse(bad)


def test_cpu_settings_use_threads_and_onednn():
    calls = _calls(PredictorOptions(num_threads=3))
    assert "disable_gpu" in calls
    assert calls["set_cpu_math_library_num_threads"][0] == (3,)
    assert ("enable_onednn" if PADDLE_MAJOR >= 3 else "enable_mkldnn") in calls
    assert "enable_use_gpu" not in calls
    # Paddle 3.3's create_predictor fails on .json programs with memory_optim.
    assert ("enable_memory_optim" in calls) == (PADDLE_MAJOR < 3)


def test_onednn_off_is_said_explicitly():
    calls = _calls(PredictorOptions(onednn=False))
    assert ("disable_onednn" if PADDLE_MAJOR >= 3 else "disable_mkldnn") in calls


def test_gpu_settings_fp32():
    calls = _calls(PredictorOptions(device="gpu:1", gpu_memory_mb=512))
    assert calls["enable_use_gpu"][0] == (512, 1, "Float32")
    assert "disable_gpu" not in calls and "set_cpu_math_library_num_threads" not in calls
    assert "enable_tensorrt_engine" not in calls


def test_gpu_settings_fp16_with_tensorrt_plan_dynamic_shapes():
    calls = _calls(PredictorOptions(device="gpu", precision="fp16", tensorrt=True))
    assert calls["enable_use_gpu"][0] == (256, 0, "Half")
    trt = calls["enable_tensorrt_engine"][1]
    assert trt["precision_mode"] == "Half" and trt["max_batch_size"] == 32 and trt["use_calib_mode"] is False
    low, high, opt = calls["set_trt_dynamic_shape_info"][0]
    assert low == {"input_ids": [1, 1]} and high == {"input_ids": [32, 256]} and opt == {"input_ids": [8, 64]}


def test_gpu_settings_are_accepted_by_the_paddle_config_api():
    """Each planned call exists on paddle.inference.Config with that arity (the CPU build ignores GPU calls)."""
    from paddle import inference

    for name, args, kwargs in inference_settings(
        PredictorOptions(device="gpu", precision="fp16", tensorrt=True), SPECS, PADDLE_MAJOR
    ):
        method = getattr(inference.Config, name)
        assert callable(method), name
        doc = method.__doc__ or ""
        for key in kwargs:
            assert key in doc, f"{name} has no keyword {key}"
    assert inspect.isclass(inference.PrecisionType)
    assert hasattr(inference.PrecisionType, "Half") and hasattr(inference.PrecisionType, "Float32")


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(precision="fp16"), "fp16"),
        (dict(precision="int3"), "precision"),
        (dict(tensorrt=True), "tensorrt"),
        (dict(num_threads=0), "num_threads"),
    ],
)
def test_invalid_option_combinations(options, words):
    with pytest.raises(OptionError, match=words):
        PredictorOptions(**options)


@pytest.mark.skipif(paddle.is_compiled_with_cuda(), reason="this Paddle has CUDA")
@pytest.mark.parametrize("static", [True, False])
def test_gpu_on_a_cpu_build_fails_at_construction_and_says_how_to_fix(tiny_sentiment, static):
    with pytest.raises(DeviceError, match="paddlepaddle-gpu"):
        Taskflow("sentiment_analysis", task_path=tiny_sentiment, device="gpu", static=static)


@pytest.mark.gpu
@pytest.mark.skipif(not paddle.is_compiled_with_cuda(), reason="needs paddlepaddle-gpu and a CUDA device")
def test_gpu_run_matches_cpu(tiny_sentiment):
    texts = ["这家酒店很干净", "太差了"]
    cpu = Taskflow("sentiment_analysis", task_path=tiny_sentiment)(texts)
    gpu = Taskflow("sentiment_analysis", task_path=tiny_sentiment, device="gpu")(texts)
    np.testing.assert_allclose([r["score"] for r in cpu], [r["score"] for r in gpu], atol=1e-4)


def test_the_taskflows_own_cpu_config_is_what_was_asked(tiny_sentiment, tmp_path):
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path, num_threads=2)
    config = flow.task.predictor.config            # the config its predictor was made from
    assert not config.use_gpu()
    assert config.cpu_math_library_num_threads() == 2
    assert config.ir_optim()
    assert config.mkldnn_enabled()


def _static_dirs(home):
    return sorted(p for p in (home / "taskflow").rglob("static/*") if p.is_dir() and not p.name.startswith("."))


def test_export_happens_once_per_weights_and_ir_format(tiny_sentiment, tmp_path):
    Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)(["好"])
    (export,) = _static_dirs(tmp_path)
    expected_format = "json" if PADDLE_MAJOR >= 3 else "pdmodel"
    assert export.name.startswith(expected_format + "-")
    assert (export / f"inference.{expected_format}").is_file() and (export / "inference.pdiparams").is_file()
    stamp = (export / "inference.pdiparams").stat().st_mtime_ns
    Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)(["好"])
    assert _static_dirs(tmp_path) == [export]
    assert (export / "inference.pdiparams").stat().st_mtime_ns == stamp
    assert not [p for p in export.parent.iterdir() if p.name.startswith(".") and p.is_dir()], "staging dir left behind"


def test_new_weights_under_the_same_version_are_exported_again(tiny_sentiment, tmp_path):
    from make_tiny_models import make_tiny_sentiment

    other = make_tiny_sentiment(tmp_path / "other", seed=7)
    # Same name and version as the first package, different weights.
    manifest = Manifest.load(other / "manifest.json")
    original = Manifest.load(tiny_sentiment / "manifest.json")
    fields = {k: v for k, v in manifest.data.items() if k != "files"}
    fields["version"] = original.version
    write_package(other, fields, {name: other / name for name in manifest.files})

    home = tmp_path / "home"
    texts = ["这家酒店很干净，服务也好", "等了一个小时还没上菜"]
    a = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=home, return_all_scores=True)(texts)
    b = Taskflow("sentiment_analysis", task_path=other, home=home, return_all_scores=True)(texts)
    assert len(_static_dirs(home)) == 2
    assert a != b
    dynamic_b = Taskflow("sentiment_analysis", task_path=other, home=home, static=False, return_all_scores=True)(texts)
    np.testing.assert_allclose(
        [r["scores"]["positive"] for r in b], [r["scores"]["positive"] for r in dynamic_b], atol=1e-5
    )


def test_half_written_export_is_not_used(tiny_sentiment, tmp_path):
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)
    expected = flow(["好"])
    (export,) = _static_dirs(tmp_path)
    # A crash between the two files: the params are missing, so export again rather than fail.
    os.remove(export / "inference.pdiparams")
    again = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)(["好"])
    assert again == expected
    shutil.rmtree(tmp_path / "taskflow")


def test_predictor_state_is_per_instance(tiny_sentiment, tmp_path):
    """No global device/thread state: two instances with different settings coexist."""
    a = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path, num_threads=1)
    b = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path, num_threads=2)
    assert a(["好"]) == b(["好"])
    assert a.task.predictor.config.cpu_math_library_num_threads() == 1
    assert b.task.predictor.config.cpu_math_library_num_threads() == 2
    assert a.task.predictor is not b.task.predictor
    assert a.task.options.precision is Precision.FP32


def test_a_weight_registered_under_two_names_is_stored_once(tmp_path):
    # paddle.nn.GRU registers each weight as both weight_ih_l0 and 0.cell_fw.weight_ih.
    import paddle

    from taskflow.predictor import load_weights, save_weights

    paddle.seed(0)
    saved = paddle.nn.GRU(4, 3, direction="bidirect")
    save_weights(saved, tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as stored:
        assert "weight_ih_l0" in stored.files and "0.cell_fw.weight_ih" not in stored.files
    paddle.seed(1)
    loaded = paddle.nn.GRU(4, 3, direction="bidirect")
    load_weights(loaded, tmp_path / "w.npz")
    for name, tensor in saved.state_dict().items():
        np.testing.assert_array_equal(loaded.state_dict()[name].numpy(), tensor.numpy())
    x = paddle.randn([2, 5, 4])
    np.testing.assert_allclose(loaded(x)[0].numpy(), saved(x)[0].numpy(), rtol=1e-6)


def test_changed_network_code_gets_a_fresh_export(tiny_sentiment, tmp_path, monkeypatch):
    # Same weights, different network source (a taskflow upgrade): the old program must not be reused.
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)
    flow(["好"])
    exports = lambda: sorted(p.name for p in tmp_path.glob("taskflow/sentiment_analysis/tiny/*/static/*")
                             if not p.name.startswith("."))
    first = exports()
    assert len(first) == 1
    Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)(["好"])
    assert exports() == first                       # same code and weights: reused
    before = flow.model.weights_key()
    source = tmp_path / "net.py"
    source.write_text(Path(inspect.getsourcefile(flow.model.network_class())).read_text() + "\n# upgraded\n")
    real = inspect.getsourcefile
    monkeypatch.setattr("inspect.getsourcefile", lambda obj: str(source) if obj is flow.model.network_class() else real(obj))
    upgraded = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)
    assert upgraded.model.weights_key() != before
    upgraded(["好"])
    assert len(exports()) == 2 and first[0] in exports()
