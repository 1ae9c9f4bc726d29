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
    import_paddle,
    inference_settings,
    mkl_cpu_type,
)
from taskflow.manifest import Manifest
from taskflow.packages import write_package

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


AMD = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
INTEL = AMD.replace("AuthenticAMD", "GenuineIntel")


@pytest.mark.parametrize("cpuinfo, environ, expected", [
    (AMD, {}, "5"),                                         # MKL's AVX2 kernels instead of its SSE path
    (AMD, {"MKL_DEBUG_CPU_TYPE": "2"}, None),               # the user's own setting stays
    (AMD.replace(" avx2", ""), {}, None),                   # no AVX2: type 5 would be an illegal instruction
    (INTEL, {}, None),                                      # MKL already picks AVX2/AVX-512 on Intel
    ("", {}, None),
])
def test_mkl_gets_its_avx2_kernels_on_amd_cpus_only(cpuinfo, environ, expected):
    assert mkl_cpu_type(cpuinfo, environ) == expected


def test_importing_paddle_through_taskflow_sets_mkls_cpu_type_on_this_machine(tmp_path):
    # A fresh process: MKL reads the variable at its first call, so it must be set by then.
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MKL_DEBUG_CPU_TYPE"}
    code = ("import os; from taskflow.predictor import import_paddle; import_paddle(); "
            "print(os.environ.get('MKL_DEBUG_CPU_TYPE'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    expected = mkl_cpu_type(Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else "", {})
    assert out.stdout.strip().splitlines()[-1] == str(expected)


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


@pytest.mark.parametrize("options", [PredictorOptions(device="gpu", precision="fp16", tensorrt=True),
                                     PredictorOptions(device="gpu:1", gpu_memory_mb=512), PredictorOptions()],
                         ids=["gpu-fp16-tensorrt", "gpu-fp32", "cpu"])
def test_every_planned_setting_is_a_call_paddle_config_takes(options):
    """Each planned call is made on a real paddle.inference.Config: a wrong name, arity or keyword
    is pybind's TypeError (AttributeError for a name), whatever the build; a CPU build may refuse
    GPU work in its own words, which is not what this checks."""
    from paddle import inference

    from taskflow.predictor import apply_settings

    for call in inference_settings(options, SPECS, PADDLE_MAJOR):
        config = inference.Config()
        try:
            apply_settings(config, [call])
        except (TypeError, AttributeError) as exc:
            pytest.fail(f"paddle.inference.Config.{call[0]}{call[1:]}: {exc}")
        except Exception:          # noqa: BLE001 - a CPU build's refusal of a GPU call is not the API's shape
            pass
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


def test_small_batches_run_without_onednn_and_agree_with_large_ones(tiny_sentiment, tmp_path):
    """A batch of at most SMALL_BATCH rows runs on a second predictor, made at the first such call,
    with oneDNN off (oneDNN keeps kernels per input shape: one-text calls grew memory); both give the
    probabilities of the dynamic graph."""
    from taskflow.predictor import SMALL_BATCH

    texts = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "一般般吧", "房间很小"] * 8
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path, return_all_scores=True, batch_size=32)
    predictor = flow.task.predictor
    assert predictor._roots == {}                       # each predictor is made at its first call
    big = flow(texts)                                   # one batch of 32 rows
    assert list(predictor._roots) == [False]
    small = [flow([t])[0] for t in texts[:4]]           # one row a call
    assert sorted(predictor._roots) == [False, True] and len(texts) > SMALL_BATCH
    for a, b in zip(big, small):
        assert a["scores"] == pytest.approx(b["scores"], abs=1e-5)
    plain = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path, static=False, return_all_scores=True)
    for a, b in zip(plain(texts[:4]), small):
        assert a["scores"] == pytest.approx(b["scores"], abs=1e-5)
    assert predictor._roots[True] is not predictor._roots[False]
    assert predictor._single_options.onednn is False and predictor.options.onednn is True
    # A process that sends one text a call never makes the batches' predictor (the first Taskflow
    # and its results go first: while they live, a Taskflow on the same package shares its predictor).
    del flow, predictor, big
    single = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path, return_all_scores=True)
    assert single([texts[0]])[0]["scores"] == pytest.approx(small[0]["scores"], abs=1e-6)
    assert list(single.task.predictor._roots) == [True]


def test_a_char_cnn_batch_runs_on_onednn_padded_to_a_bucket_and_gives_each_rows_own_result(tmp_path, monkeypatch):
    """A batch of more than SMALL_BATCH rows of a network whose input declares its pad_id (every
    classifier: the char CNN masks padding in its pools, n-grams and GRU) is padded to a bucket's
    shape before oneDNN runs it, so that its kernels stay few over calls of every size and length;
    each row's result is the one it gets alone, and the padding rows are cut off."""
    from make_tiny_models import make_tiny_sentiment
    from taskflow.predictor import Predictor, SMALL_BATCH, bucket_shape

    package = make_tiny_sentiment(tmp_path / "tiny", seed=5, wide_buckets=7, deep_weight=0.5, rnn_size=4)
    texts = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "好", "房间很小，但是早餐不错，下次还会再来的"] * 5   # 20 rows, 19 chars
    flow = Taskflow("sentiment_analysis", task_path=package, home=tmp_path / "home", return_all_scores=True)
    shapes, run_static = [], Predictor._run_static

    def recording(self, arrays, *, small):
        shapes.append(arrays[0].shape)
        return run_static(self, arrays, small=small)

    monkeypatch.setattr(Predictor, "_run_static", recording)
    together = flow(texts)
    assert len(texts) > SMALL_BATCH and shapes == [bucket_shape(len(texts), 19, 32)] == [(24, 32)]
    alone = [flow([text])[0] for text in texts[:4]]                # one row: the plain kernels, unpadded
    assert [s[0] for s in shapes[1:]] == [1, 1, 1, 1]
    for row, text in enumerate(texts):
        assert together[row]["scores"] == pytest.approx(alone[row % 4]["scores"], abs=1e-5), text


def _static_dirs(home):
    """Every export under ``home``: a pinned model's beside its cached package, a task_path one's in .exports."""
    root = home / "taskflow"
    found = [*root.glob("*/*/*/static/*"), *root.glob(".exports/*")]
    return sorted(p for p in found if p.is_dir() and not p.name.startswith("."))


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
    del flow    # else the next Taskflow shares its predictor, and never reads the export
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
    # "auto" by default; a package that does not say cpu_bf16 runs in fp32 on every CPU
    assert a.task.options.precision is Precision.AUTO and a.task.predictor.options.precision is Precision.FP32


def test_a_weight_registered_under_two_names_is_stored_once(tmp_path):
    # paddle.nn.GRU registers each weight as both weight_ih_l0 and 0.cell_fw.weight_ih.
    import paddle

    from taskflow.weights import load_weights, save_weights

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


def test_an_int8_table_is_stored_with_row_scales_and_loads_back_close(tmp_path):
    import paddle

    from taskflow.errors import ExportError
    from taskflow.weights import load_weights, save_weights

    paddle.seed(0)
    saved = paddle.nn.Embedding(50, 16)
    saved.weight.set_value(saved.weight.numpy() * np.linspace(0.01, 3.0, 50, dtype="float32")[:, None])
    save_weights(saved, tmp_path / "w.npz", int8=lambda name: name == "weight")
    with np.load(tmp_path / "w.npz") as stored:
        assert stored["weight"].dtype == np.int8 and stored["weight@row_scale"].shape == (50, 1)
    loaded = paddle.nn.Embedding(50, 16)
    load_weights(loaded, tmp_path / "w.npz")
    original, back = saved.weight.numpy(), loaded.weight.numpy()
    assert back.dtype == np.float32
    # Every value within half a step of its row's scale (the largest magnitude / 127), small rows too.
    step = np.abs(original).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(back - original) <= step / 2 + 1e-7)
    # An int8 table without its scales, or scales of another shape, is refused before loading.
    with np.load(tmp_path / "w.npz") as stored:
        table, scales = stored["weight"], stored["weight@row_scale"]
    np.savez(tmp_path / "bare.npz", weight=table)
    np.savez(tmp_path / "bent.npz", **{"weight": table, "weight@row_scale": scales[:10]})
    for name, message in (("bare.npz", "without its scales"), ("bent.npz", "not the float32")):
        with pytest.raises(ExportError, match=message):
            load_weights(paddle.nn.Embedding(50, 16), tmp_path / name)


def test_a_narrow_int8_table_is_stored_with_column_scales(tmp_path):
    """A table of per-label weights (2 columns, a linear model's n-grams) gets one scale per column,
    not a float32 per row that would outweigh the row's two int8 values."""
    import paddle

    from taskflow.errors import ExportError
    from taskflow.weights import load_weights, save_weights

    paddle.seed(0)
    saved = paddle.nn.Embedding(1000, 2)
    saved.weight.set_value(saved.weight.numpy() * np.array([[0.5, 4.0]], dtype="float32"))
    save_weights(saved, tmp_path / "w.npz", int8=lambda name: name == "weight")
    with np.load(tmp_path / "w.npz") as stored:
        assert sorted(stored.files) == ["weight", "weight@column_scale"]
        assert stored["weight"].dtype == np.int8 and stored["weight@column_scale"].shape == (1, 2)
        table, scales = stored["weight"], stored["weight@column_scale"]
    loaded = paddle.nn.Embedding(1000, 2)
    load_weights(loaded, tmp_path / "w.npz")
    original, back = saved.weight.numpy(), loaded.weight.numpy()
    step = np.abs(original).max(axis=0, keepdims=True) / 127       # each column its own step
    assert np.all(np.abs(back - original) <= step / 2 + 1e-7)
    assert step[0, 0] < step[0, 1] / 4
    np.savez(tmp_path / "twice.npz", **{"weight": table, "weight@column_scale": scales,
                                        "weight@row_scale": np.ones((1000, 1), "float32")})
    np.savez(tmp_path / "bent.npz", **{"weight": table, "weight@column_scale": scales[:, :1]})
    for name, message in (("twice.npz", "has scales twice"), ("bent.npz", "not the float32")):
        with pytest.raises(ExportError, match=message):
            load_weights(paddle.nn.Embedding(1000, 2), tmp_path / name)


def test_changed_network_code_gets_a_fresh_export(tiny_sentiment, tmp_path, monkeypatch):
    # Same weights, different network source (a taskflow upgrade): the old program must not be reused.
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)
    flow(["好"])
    exports = lambda: [p.name for p in _static_dirs(tmp_path)]
    first = exports()
    assert len(first) == 1
    Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)(["好"])
    assert exports() == first                       # same code and weights: reused
    before, network = flow.model.weights_key(), flow.model.network_class()
    del flow    # an upgrade is a new process: no model of the old code is left to share
    source = tmp_path / "net.py"
    source.write_text(Path(inspect.getsourcefile(network)).read_text() + "\n# upgraded\n")
    real = inspect.getsourcefile
    monkeypatch.setattr("inspect.getsourcefile", lambda obj: str(source) if obj is network else real(obj))
    upgraded = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=tmp_path)
    assert upgraded.model.weights_key() != before
    upgraded(["好"])
    assert len(exports()) == 2 and first[0] in exports()


# --------------------------------------------- exports nobody else can choose

TEXTS = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "好"]


def _scores(flow):
    return [r["scores"]["positive"] for r in flow(TEXTS)]


@pytest.fixture(scope="module")
def wide_tiny(tmp_path_factory):
    """A tiny sentiment package with the wide n-gram part, so ``deep_weight`` (an architecture
    argument that no weight pins) changes what it computes, as with the shipped char_cnn."""
    from make_tiny_models import make_tiny_sentiment

    return make_tiny_sentiment(tmp_path_factory.mktemp("wide") / "tiny", seed=3, wide_buckets=7, deep_weight=0.5)


@pytest.fixture
def bundled_tiny(wide_tiny, tmp_path, monkeypatch):
    """That package as if it shipped in resources/ (model "tiny")."""
    from taskflow import packages

    resources = tmp_path / "resources"
    shutil.copytree(wide_tiny, resources / "sentiment_analysis" / "tiny")
    monkeypatch.setattr(packages, "_bundled_root", lambda: resources)
    return resources / "sentiment_analysis" / "tiny"


def _with_architecture(package: Path, out: Path, **changes) -> Path:
    """A copy of ``package`` whose manifest's architecture has ``changes`` (same files, name, version)."""
    import json

    shutil.copytree(package, out)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["architecture"].update(changes)
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return out


def test_a_task_path_package_cannot_change_what_a_pinned_model_runs(bundled_tiny, tmp_path):
    # The proof: the same name, version and weights as a pinned model, one architecture
    # argument changed; run once, it used to leave its export where the pinned model found it.
    clean = _scores(Taskflow("sentiment_analysis", model="tiny", home=tmp_path / "clean", return_all_scores=True))
    evil = _with_architecture(bundled_tiny, tmp_path / "evil", deep_weight=-20.0)
    home = tmp_path / "home"

    poisoned = _scores(Taskflow("sentiment_analysis", task_path=evil, home=home, return_all_scores=True))
    later = _scores(Taskflow("sentiment_analysis", model="tiny", home=home, return_all_scores=True))

    assert not np.allclose(poisoned, clean, atol=1e-2)   # the argument does change the network
    np.testing.assert_allclose(later, clean, atol=1e-6)
    # The task_path package's export is apart, in the cache's own folder, named by a hash only.
    assert sorted(p.parent.name for p in _static_dirs(home)) == [".exports", "static"]


def test_a_damaged_or_foreign_export_is_made_again_not_run(bundled_tiny, tmp_path):
    home = tmp_path / "home"
    expected = _scores(Taskflow("sentiment_analysis", model="tiny", home=home, return_all_scores=True))
    (export,) = _static_dirs(home)
    params = export / "inference.pdiparams"
    damaged = bytearray(params.read_bytes())
    damaged[-8:] = b"\x7f" * 8             # a weight turned into a huge number: runs, but wrongly
    params.write_bytes(bytes(damaged))

    again = _scores(Taskflow("sentiment_analysis", model="tiny", home=home, return_all_scores=True))

    np.testing.assert_allclose(again, expected, atol=1e-6)
    assert params.read_bytes() != bytes(damaged)


def test_an_export_of_another_key_in_the_folder_is_not_run(bundled_tiny, tmp_path):
    home = tmp_path / "home"
    expected = _scores(Taskflow("sentiment_analysis", model="tiny", home=home, return_all_scores=True))
    (export,) = _static_dirs(home)
    # Another package's export, renamed to the folder this model looks in (its stamp says its own key).
    other = _with_architecture(bundled_tiny, tmp_path / "other", deep_weight=-20.0)
    Taskflow("sentiment_analysis", task_path=other, home=tmp_path / "other_home", return_all_scores=True)(["好"])
    (foreign,) = _static_dirs(tmp_path / "other_home")
    shutil.rmtree(export)
    shutil.copytree(foreign, export)

    again = _scores(Taskflow("sentiment_analysis", model="tiny", home=home, return_all_scores=True))

    np.testing.assert_allclose(again, expected, atol=1e-6)


def test_an_unwritable_home_exports_to_a_private_folder_not_a_planted_one(tiny_sentiment, tmp_path, monkeypatch):
    import stat
    import warnings

    shared_tmp = tmp_path / "shared_tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(shared_tmp))
    monkeypatch.setattr("taskflow.exports._PRIVATE_ROOTS", [])   # as in a fresh process
    planted = shared_tmp / f"taskflow-static-{os.getuid()}"
    planted.mkdir(mode=0o777)
    os.chmod(planted, 0o777)                   # made first by someone else: anyone may write in it
    not_a_dir = tmp_path / "home"
    not_a_dir.write_text("a file where the cache should be")
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, home=not_a_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flow(["好"])

    used = flow.task.predictor.model_file.parent.parent
    assert planted not in flow.task.predictor.model_file.parents
    assert os.listdir(planted) == []
    info = os.lstat(used)
    assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700
    messages = [str(w.message) for w in caught]
    assert any("cannot write the static-graph export" in m for m in messages)
    assert any(str(planted) in m and "not a private folder" in m for m in messages)


def test_a_read_only_copied_cache_runs_its_export(bundled_tiny, tmp_path, monkeypatch):
    import errno
    import warnings

    first = tmp_path / "first"
    expected = _scores(Taskflow("sentiment_analysis", model="tiny", home=first, return_all_scores=True))
    copied = tmp_path / "copied"
    shutil.copytree(first, copied)             # new inodes and times: only the stamp's hashes still hold

    def refuse(real):
        def guarded(self, *args, **kwargs):
            if copied in Path(self).absolute().parents:
                raise PermissionError(errno.EACCES, "Read-only file system", str(self))
            return real(self, *args, **kwargs)
        return guarded

    # Root passes permission checks, so "read-only" is every write under the copy failing.
    for name in ("mkdir", "touch", "write_text", "write_bytes"):
        monkeypatch.setattr(Path, name, refuse(getattr(Path, name)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flow = Taskflow("sentiment_analysis", model="tiny", home=copied, return_all_scores=True)
        scores = _scores(flow)

    np.testing.assert_allclose(scores, expected, atol=1e-6)
    assert copied in flow.task.predictor.model_file.parents
    assert not [w for w in caught if "static-graph export" in str(w.message)]


def test_a_required_package_is_found_inside_its_package_only(tiny_models, tmp_path):
    from taskflow.errors import ManifestError

    package = shutil.copytree(tiny_models["knowledge_mining"], tmp_path / "km")
    elsewhere = shutil.move(str(package / "lexical"), str(tmp_path / "elsewhere"))
    (package / "lexical").symlink_to(elsewhere, target_is_directory=True)

    with pytest.raises(ManifestError, match="outside"):
        Taskflow("knowledge_mining", task_path=package)


# ---------------------------------------------------------------- weights

def test_weights_are_judged_by_their_headers_before_any_array_is_read(tiny_sentiment, tmp_path, monkeypatch):
    from taskflow.errors import ExportError
    from taskflow.model import Model

    model = Model.load("sentiment_analysis", None, task_path=tiny_sentiment)
    network = model.network_class()(**{k: v for k, v in model.manifest["architecture"].items() if k != "type"})
    with np.load(model.path("weights.npz")) as stored:
        arrays = {name: stored[name] for name in stored.files}
    first = next(iter(network.state_dict()))
    rows, *rest = arrays[first].shape
    arrays[first] = np.zeros((rows * 1000, *rest), dtype=arrays[first].dtype)   # compresses to almost nothing
    np.savez_compressed(tmp_path / "weights.npz", **arrays)
    read = []
    real = np.lib.npyio.NpzFile.__getitem__
    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", lambda self, key: read.append(key) or real(self, key))

    from taskflow.weights import load_weights

    with pytest.raises(ExportError, match=f"{first} has shape"):
        load_weights(network, tmp_path / "weights.npz")
    assert read == []


def test_a_weights_file_that_is_no_npz_is_an_export_error(tiny_sentiment, tmp_path):
    from taskflow.errors import ExportError
    from taskflow.model import Model
    from taskflow.weights import load_weights

    model = Model.load("sentiment_analysis", None, task_path=tiny_sentiment)
    network = model.network_class()(**{k: v for k, v in model.manifest["architecture"].items() if k != "type"})
    (tmp_path / "weights.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ExportError, match="not a weights file"):
        load_weights(network, tmp_path / "weights.npz")


@pytest.mark.parametrize("rows", [4, 40])      # the small-batch predictor and the other one
def test_a_predictor_creation_cut_short_by_ctrl_c_is_made_again_at_the_next_call(tiny_models, monkeypatch, rows):
    from taskflow.predictor import Predictor

    texts = [f"这家酒店很干净，服务也好{i}" for i in range(rows)]
    # A plain list: results hold their Taskflow, whose predictor the next one would share.
    expected = list(Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])(texts))
    real, calls = Predictor._create, []

    def interrupted_once(config):
        calls.append(config)
        made = real(config)                      # Paddle has taken the config ...
        if len(calls) == 1:
            raise KeyboardInterrupt              # ... when the interrupt lands
        return made

    monkeypatch.setattr(Predictor, "_create", staticmethod(interrupted_once))
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    with pytest.raises(KeyboardInterrupt):
        flow(texts)
    assert flow(texts) == expected and len(calls) >= 2 and len({id(c) for c in calls}) == len(calls)


# ------------------------------------------------------ threads and processes of one's own

_OTHER_THREAD = """
import json, sys, threading
# Paddle's dynamic-graph mode is per thread, and on only in the thread that imported Paddle.  (zlib
# before Paddle, as importing taskflow does: Paddle 2.6 imported first breaks numpy's .npz inflate.)
import zlib
importer = threading.Thread(target=__import__, args=("paddle",))
importer.start(); importer.join()
results = {}

def build_and_call(static):
    from taskflow import Taskflow
    try:
        flow = Taskflow("sentiment_analysis", task_path=sys.argv[1], static=static, return_all_scores=True)
        results[static] = [r["scores"]["positive"] for r in flow(["这家酒店很干净", "太差了"])]
    except Exception as exc:
        results[static] = f"{type(exc).__name__}: {exc}"[:500]

for static in (True, False):
    worker = threading.Thread(target=build_and_call, args=(static,))
    worker.start(); worker.join()
print(json.dumps({str(k): v for k, v in results.items()}))
"""


def test_a_network_is_exported_and_run_from_a_thread_other_than_the_one_that_imported_paddle(tiny_sentiment,
                                                                                             tmp_path):
    # A fresh process (Paddle's mode is process state) with a fresh cache, so the export is made there.
    import json
    import subprocess
    import sys

    env = {**os.environ, "PPNLP_HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", _OTHER_THREAD, str(tiny_sentiment)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(isinstance(v, list) for v in results.values()), results
    np.testing.assert_allclose(results["True"], results["False"], atol=1e-5)


_POOL = """
import multiprocessing, sys

def label(job):
    flow, text = job
    return flow(text)[0]["label"]

if __name__ == "__main__":
    from taskflow import Taskflow
    flow = Taskflow("sentiment_analysis", task_path=sys.argv[1])
    with multiprocessing.get_context("spawn").Pool(2) as pool:     # ends its workers with SIGTERM
        print(pool.map(label, [(flow, "好吃"), (flow, "难吃"), (flow, "一般")]))
"""


def test_a_spawn_pool_of_pickled_taskflows_ends_without_paddle_dumps(tiny_sentiment, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "pool.py"
    script.write_text(_POOL, encoding="utf-8")
    out = subprocess.run([sys.executable, str(script), str(tiny_sentiment)], capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("[") == 1 and "FatalError" not in out.stdout, out.stdout[-2000:]
    assert "FatalError" not in out.stderr and "Termination signal" not in out.stdout + out.stderr


def test_paddle_keeps_its_crash_handlers_but_gives_sigterm_back():
    """Only SIGTERM's handler is put back (a process asked to end ends quietly, by the default
    action); Paddle's dump for a real crash (SIGSEGV) stays."""
    import subprocess
    import sys

    code = """
import signal
def caught():
    mask = int(next(l for l in open("/proc/self/status") if l.startswith("SigCgt")).split()[1], 16)
    return {s: bool(mask >> (s - 1) & 1) for s in (signal.SIGSEGV, signal.SIGTERM)}
from taskflow.predictor import import_paddle
import_paddle()
print(caught()[signal.SIGSEGV], caught()[signal.SIGTERM], signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
"""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the caught signals from /proc")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-3:] == ["True", "False", "True"]


# ------------------------------------------------------------------ bf16 on the CPU
def test_cpu_bf16_turns_on_onednn_s_bf16_passes_with_a_call_config_takes(monkeypatch):
    from paddle import inference

    from taskflow import predictor
    from taskflow.predictor import apply_settings

    monkeypatch.setattr(predictor, "native_bf16", lambda: True)
    calls = _calls(PredictorOptions(precision="bf16"))
    name = "enable_onednn_bfloat16" if PADDLE_MAJOR >= 3 else "enable_mkldnn_bfloat16"
    assert name in calls and calls[name] == ((), {})
    apply_settings(inference.Config(), [(name, (), {})])      # a name Config has (no getter to read it back)
    # oneDNN off: no bf16 pass asked for (it would have nothing to run on)
    assert name not in _calls(PredictorOptions(precision="bf16", onednn=False))
    assert name not in _calls(PredictorOptions()) and name not in _calls(PredictorOptions(precision="fp32"))


def test_bf16_is_refused_where_it_would_be_emulated_or_on_a_gpu(monkeypatch):
    from taskflow import predictor

    monkeypatch.setattr(predictor, "native_bf16", lambda: False)
    with pytest.raises(DeviceError, match="AVX512-BF16 or AMX.*precision='auto' or 'fp32'"):
        PredictorOptions(precision="bf16")
    monkeypatch.setattr(predictor, "native_bf16", lambda: True)
    with pytest.raises(DeviceError, match="on GPU use precision='fp16'"):
        PredictorOptions(device="gpu", precision="bf16")
    with pytest.raises(DeviceError, match="precision must be one of 'auto', 'fp32', 'bf16', 'fp16'"):
        PredictorOptions(precision="int8")


@pytest.mark.parametrize("native", [True, False], ids=["bf16-cpu", "other-cpu"])
def test_auto_runs_in_bf16_only_the_packages_that_allow_it_on_a_cpu_that_has_it(monkeypatch, native):
    from taskflow import predictor
    from taskflow.predictor import Precision, network_options, precision_in_effect

    monkeypatch.setattr(predictor, "native_bf16", lambda: native)
    auto = PredictorOptions()
    want = Precision.BF16 if native else Precision.FP32
    assert network_options(auto, cpu_bf16=True).precision is want
    assert network_options(auto, cpu_bf16=False).precision is Precision.FP32
    # the dynamic graph, a network without oneDNN and the GPU compute in fp32 under "auto"
    for other in (PredictorOptions(static=False), PredictorOptions(onednn=False), PredictorOptions(device="gpu")):
        assert network_options(other, cpu_bf16=True).precision is Precision.FP32
    assert network_options(PredictorOptions(precision="fp32"), cpu_bf16=True).precision is Precision.FP32
    if native:   # "bf16" asked for: every network on oneDNN, whatever its package says
        assert network_options(PredictorOptions(precision="bf16"), cpu_bf16=False).precision is Precision.BF16
        assert network_options(PredictorOptions(precision="bf16", onednn=False), cpu_bf16=False).precision \
            is Precision.FP32
    # what a job pins: "auto" on one kind of CPU is not "auto" on the other
    assert precision_in_effect(auto) == ("auto/bf16" if native else "auto/fp32")
    assert precision_in_effect(PredictorOptions(precision="fp32")) == "fp32"


def test_cpu_has_bf16_reads_the_first_processor_s_flags():
    from taskflow.predictor import cpu_has_bf16

    assert cpu_has_bf16("processor : 0\nflags : fpu avx2 amx_bf16 amx_tile\n\nprocessor : 1\nflags : fpu")
    assert not cpu_has_bf16("processor : 0\nflags : fpu avx2 avx512f avx512_vnni\n")
    assert not cpu_has_bf16("")
