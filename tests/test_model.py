"""The model layer: packages found by name, networks by architecture type, normalisation by manifest."""

import json
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow import packages
from taskflow.errors import ChecksumError, ManifestError
from taskflow.model import Model, network_types
from taskflow.text import Normalizer


def _bundle(root, package_dir, task, name, **changes):
    """Copy ``package_dir`` under ``root/task/name`` as if it shipped in resources/, with manifest ``changes``."""
    target = root / task / name
    shutil.copytree(package_dir, target)
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(name=name, **changes)
    (target / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    return target


@pytest.fixture
def resources(tmp_path, monkeypatch):
    """An empty stand-in for the bundled resources/ folder."""
    root = tmp_path / "resources"
    root.mkdir()
    monkeypatch.setattr(packages, "_bundled_root", lambda: root)
    return root


def test_a_new_model_of_an_existing_architecture_is_a_folder_and_no_code(resources, tiny_models, tmp_path):
    tiny = tiny_models["sentiment_analysis"]
    architecture = json.loads((tiny / "manifest.json").read_text())["architecture"]
    # Another name, the architecture type named explicitly, and an architecture field changed
    # (a larger max_kernel would not fit the weights, so change what the weights do not pin).
    _bundle(resources, tiny, "sentiment_analysis", "my_cnn",
            architecture={"type": "sentiment_cnn", **architecture, "dropout": 0.5})
    flow = Taskflow("sentiment_analysis", model="my_cnn", home=tmp_path / "home")
    assert (flow.model.name, flow.model.source, flow.model.network_type) == ("my_cnn", "bundled", "sentiment_cnn")
    reference = Taskflow("sentiment_analysis", task_path=tiny)
    texts = ["这家酒店很干净", "服务太差了"]
    assert [r["score"] for r in flow(texts)] == pytest.approx([r["score"] for r in reference(texts)], abs=1e-6)
    assert "my_cnn" in next(row for row in Taskflow.tasks() if row["task"] == "sentiment_analysis")["models"]


def test_an_unknown_architecture_type_names_the_known_ones(resources, tiny_models, tmp_path):
    tiny = tiny_models["sentiment_analysis"]
    architecture = json.loads((tiny / "manifest.json").read_text())["architecture"]
    _bundle(resources, tiny, "sentiment_analysis", "odd", architecture={**architecture, "type": "transformerz"})
    with pytest.raises(ManifestError, match="transformerz.*bigru_crf") as info:
        Taskflow("sentiment_analysis", model="odd", home=tmp_path / "home")(["好"])
    assert "sentiment_cnn" in str(info.value)
    assert {"sentiment_cnn", "bigru_crf", "siamese", "match", "drqa_reader"} <= set(network_types())


def test_the_manifest_names_the_normalisation_and_the_task_uses_it(tiny_models, tmp_path):
    tiny = tiny_models["sentiment_analysis"]
    legacy = Taskflow("sentiment_analysis", task_path=tiny)
    assert legacy.task.normalize == Normalizer(["t2s", "width", "lower"])   # t2s: a no-op on simplified text
    upper = shutil.copytree(tiny, tmp_path / "upper")
    manifest = json.loads((upper / "manifest.json").read_text())
    # The manifest is the only source: no task-side default stands in for a missing field.
    for field, unset in (("normalization", lambda m: m.pop("normalization")),
                         ("'type'", lambda m: m["architecture"].pop("type"))):
        unnamed = shutil.copytree(tiny, tmp_path / f"without_{field.strip(chr(39))}")
        changed = json.loads(json.dumps(manifest))
        unset(changed)
        (unnamed / "manifest.json").write_text(json.dumps(changed))
        with pytest.raises(ManifestError, match=field):
            Taskflow("sentiment_analysis", task_path=unnamed)(["好"])
    manifest["normalization"] = ["width"]            # this model was trained without lower-casing
    (upper / "manifest.json").write_text(json.dumps(manifest))
    flow = Taskflow("sentiment_analysis", task_path=upper)
    assert flow.task.normalize("ＡＢＣ") == "ABC"
    features = flow.task.preprocess([(0, "ABC")])["input_ids"]
    assert not np.array_equal(features, legacy.task.preprocess([(0, "ABC")])["input_ids"])
    manifest["normalization"] = ["width", "casefold"]
    (upper / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match="casefold"):
        Taskflow("sentiment_analysis", task_path=upper)


def test_normalisation_steps_compose_and_keep_offsets():
    text = "ＩＢＭ\u3000公司，Ａｂ！\tx"
    assert Normalizer(["width"])(text) == "IBM 公司,Ab!\tx"
    assert Normalizer(["width", "lower"])(text) == "ibm 公司,ab!\tx"
    assert Normalizer(["width", "lower", "space"])(text) == "ibm 公司,ab! x"
    assert Normalizer(["width", "lower", "strip"])(text) == "ibm公司abx"
    assert Normalizer("width+lower") == Normalizer(["width", "lower"])
    for steps in (["width"], ["width", "lower"], ["width", "lower", "space"]):
        assert len(Normalizer(steps)(text)) == len(text) and Normalizer(steps).keeps_length
    assert not Normalizer(["strip"]).keeps_length
    assert Normalizer(["lower"])("İ") == "İ"   # str.lower would make it two chars


def test_a_damaged_bundled_file_is_an_error_not_a_silent_download(resources, tiny_models, tmp_path):
    bundled = _bundle(resources, tiny_models["sentiment_analysis"], "sentiment_analysis", "tiny_copy")
    home = tmp_path / "home"
    Taskflow("sentiment_analysis", model="tiny_copy", home=home)
    assert not home.exists()                      # hashed, remembered, and nothing written before an export
    vocab = bundled / "vocab.txt"
    data = bytearray(vocab.read_bytes())
    data[0] ^= 1                                  # same size, other bytes
    vocab.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="bundled package .* is damaged.*reinstall"):
        Taskflow("sentiment_analysis", model="tiny_copy", home=home)


def test_a_damaged_cached_file_is_deleted_with_a_warning_and_the_bundled_copy_runs(resources, tiny_models, tmp_path,
                                                                                    caplog):
    _bundle(resources, tiny_models["sentiment_analysis"], "sentiment_analysis", "tiny_copy")
    home = tmp_path / "home"
    cached = packages.copy_to_cache(packages.resolve("sentiment_analysis", "tiny_copy", home=home), home=home).directory
    expected = Taskflow("sentiment_analysis", model="tiny_copy", home=home)(["这家酒店很干净"])
    assert Taskflow("sentiment_analysis", model="tiny_copy", home=home).model.package.source == "cache"
    data = bytearray((cached / "vocab.txt").read_bytes())
    data[0] ^= 1                                  # same size, other bytes
    (cached / "vocab.txt").write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="taskflow"):
        flow = Taskflow("sentiment_analysis", model="tiny_copy", home=home)
    assert flow.model.package.source == "bundled" and flow(["这家酒店很干净"]) == expected
    assert "vocab.txt did not match the manifest's sha256" in caplog.text and "taskflow download" in caplog.text
    assert not (cached / "vocab.txt").exists()    # said once, not hashed again in every process
    caplog.clear()
    with caplog.at_level("WARNING", logger="taskflow"):
        Taskflow("sentiment_analysis", model="tiny_copy", home=home)
    assert "did not match" not in caplog.text


def test_an_own_package_changed_after_it_was_written_says_to_write_it_again(tiny_models, tmp_path):
    own = tmp_path / "own"
    shutil.copytree(tiny_models["sentiment_analysis"], own)
    data = bytearray((own / "vocab.txt").read_bytes())
    data[0] ^= 1
    (own / "vocab.txt").write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="changed after it was written.*train it again") as info:
        Taskflow("sentiment_analysis", task_path=own)
    assert "fetch" not in str(info.value)         # nothing fetches a package of one's own


def test_an_unwritable_home_falls_back_to_a_temporary_export(tiny_models, tmp_path):
    not_a_dir = tmp_path / "home"
    not_a_dir.write_text("a file where the cache should be")
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"], home=not_a_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = flow(["这家酒店很干净"])
    assert result[0]["label"] in ("positive", "negative")
    assert any("cannot write the static-graph export" in str(w.message) for w in caught)


def test_a_task_that_builds_on_another_model_receives_that_model(tiny_models):
    flow = Taskflow("knowledge_mining", task_path=tiny_models["knowledge_mining"])
    assert isinstance(flow.model.required("lexical"), Model)
    assert flow.task.network_model is flow.model.required("lexical")
    with pytest.raises(ManifestError, match="no required model 'tokenizer'"):
        flow.model.required("tokenizer")


def _imported_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout.split()
    return {name for name in out if name.startswith("taskflow.tasks.") and name.count(".") == 2}


def test_one_lookup_imports_only_the_task_asked_for():
    # sentiment_analysis is text_classification with a bundled model: it imports that task, no other.
    assert _imported_after("from taskflow.registry import get_task_class; get_task_class('sentiment')") == {
        "taskflow.tasks.sentiment_analysis", "taskflow.tasks.text_classification"}
    assert _imported_after("from taskflow.registry import get_task_class; get_task_class('text_classification')") == {
        "taskflow.tasks.text_classification"}
    assert _imported_after("from taskflow.registry import get_task_class; get_task_class('cws')") == {
        "taskflow.tasks.lexical_analysis"}
    assert _imported_after("import taskflow") == set()


def test_no_task_package_imports_a_task_that_builds_on_it():
    # The lexical package is built on by knowledge_mining and ner, never the other way round.
    assert _imported_after("import taskflow.tasks.lexical_analysis") == {"taskflow.tasks.lexical_analysis"}
    assert _imported_after("import taskflow.tasks.knowledge_mining") == {
        "taskflow.tasks.lexical_analysis", "taskflow.tasks.knowledge_mining"}


def test_a_manifest_can_turn_onednn_off_for_its_network_and_never_on(tiny_models, tmp_path):
    """``"onednn": false`` (the genre router's: a linear n-gram model runs faster without it) reaches
    that network's predictor; the caller's onednn=False is kept either way; anything else is refused."""
    from taskflow.predictor import PredictorOptions

    def with_onednn(value, folder):
        package = shutil.copytree(tiny_models["sentiment_analysis"], tmp_path / folder)
        manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
        manifest["onednn"] = value
        (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return package

    off = Taskflow("sentiment_analysis", task_path=with_onednn(False, "off"))
    assert off.task.predictor.options.onednn is False
    on = Taskflow("sentiment_analysis", task_path=with_onednn(True, "on"))
    assert on.task.predictor.options.onednn is True
    caller_off = Model.load("sentiment_analysis", None, task_path=with_onednn(True, "caller"),
                            options=PredictorOptions(onednn=False))
    assert caller_off.predictor_options().onednn is False
    assert off(["很好"])[0]["label"] == on(["很好"])[0]["label"]
    with pytest.raises(ManifestError, match="'onednn' must be true or false"):
        Taskflow("sentiment_analysis", task_path=with_onednn("no", "bad"))(["很好"])


def test_the_shipped_genre_router_runs_without_onednn():
    flow = Taskflow("sentiment_analysis", offline=True)
    router_predictor = flow.task.predictors[-1]
    assert flow.task.ensemble.router.model.name == "genre_router" and router_predictor.options.onednn is False
    assert flow.task.predictor.options.onednn is True
