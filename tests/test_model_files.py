"""What a model owns besides its network: the vocabulary and labels its manifest pins (read by the
model, which its tasks ask, never by a task itself), and one predictor per input spec."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.errors import ManifestError
from taskflow.manifest import Manifest
from taskflow.model import Model
from taskflow.packages import write_package
from taskflow.predictor import InputSpec, PredictorOptions
from taskflow.tasks.lexical_analysis import LexicalAnalysisTask, read_vocab as read_lexical_vocab
from taskflow.tasks.ner import NERTask
from taskflow.tasks.text_classification import TextClassificationTask, read_vocab


def _load(path) -> Model:
    task = Manifest.load(path / "manifest.json").task
    return Model.load(task, None, task_path=path, options=PredictorOptions(num_threads=1))


def _repackaged(source, folder, *, rename=None, drop=(), extra=None, **fields):
    """A copy of the package at ``source``: files renamed (``{old: new}``) or dropped, ``extra`` files
    added (``{name: text}``), manifest ``fields`` replaced (``None`` removes one)."""
    manifest = Manifest.load(source / "manifest.json")
    rename = rename or {}
    folder.mkdir(parents=True)
    files = {}
    for name in manifest.files:
        if name not in drop:
            shutil.copyfile(source / name, folder / rename.get(name, name))
            files[rename.get(name, name)] = folder / rename.get(name, name)
    for name, text in (extra or {}).items():
        (folder / name).write_text(text, encoding="utf-8")
        files[name] = folder / name
    data = {k: v for k, v in {**manifest.data, **fields}.items() if k != "files" and v is not None}
    write_package(folder, data, files)
    return folder


# ------------------------------------------------------------ vocabulary, labels

def test_tasks_on_one_model_share_what_it_read(tiny_models):
    lexical = _load(tiny_models["lexical_analysis"])
    la, ner = LexicalAnalysisTask(lexical), NERTask(lexical)
    assert la.chars is ner.chars and la.bigrams is ner.bigrams     # read once, by the model
    assert (la.chars, la.bigrams) == read_lexical_vocab(lexical.vocab_file)
    assert la.labels == ner.labels == list(lexical.manifest["labels"])

    classifier = _load(tiny_models["text_classification"])
    assert TextClassificationTask(classifier).vocab is TextClassificationTask(classifier, batch_size=2).vocab
    assert classifier.labels == ("1", "3", "5")


def test_the_vocabulary_is_the_file_the_manifest_pins(tiny_models, tmp_path):
    source = tiny_models["text_classification"]
    texts = ["这家酒店很干净，服务也好", "等了一个小时还没上菜"]
    renamed = _repackaged(source, tmp_path / "renamed", rename={"vocab.txt": "vocab.v2.txt"})
    # An unpinned file beside it is no vocabulary: only what the manifest lists is read.
    (renamed / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    assert _load(renamed).vocab_file.name == "vocab.v2.txt"
    expected = Taskflow("text_classification", task_path=source)(texts)
    assert Taskflow("text_classification", task_path=renamed)(texts) == expected


def test_a_package_without_one_readable_vocabulary_is_refused_by_name(tiny_models, tmp_path):
    source = tiny_models["text_classification"]
    none = _repackaged(source, tmp_path / "none", drop=["vocab.txt"])
    with pytest.raises(ManifestError, match=r"one vocabulary file named vocab\.\*.*lists none among weights\.npz"):
        Taskflow("text_classification", task_path=none)
    two = _repackaged(source, tmp_path / "two", extra={"vocab.json": "{}"})
    with pytest.raises(ManifestError, match=r"lists 2 \(vocab\.txt, vocab\.json\)"):
        Taskflow("text_classification", task_path=two)
    broken = _repackaged(tiny_models["lexical_analysis"], tmp_path / "broken", drop=["vocab.json"],
                         extra={"vocab.json": json.dumps({"chars": ["[PAD]", "[UNK]"]})})
    with pytest.raises(ManifestError, match=r"cannot read its vocabulary .*vocab\.json: KeyError: 'bigrams'"):
        Taskflow("lexical_analysis", task_path=broken)


def test_a_package_without_labels_is_refused_by_name(tiny_models, tmp_path):
    unlabelled = _repackaged(tiny_models["text_classification"], tmp_path / "unlabelled", labels=None)
    with pytest.raises(ManifestError, match="lists no 'labels'"):
        Taskflow("text_classification", task_path=unlabelled)
    empty = _repackaged(tiny_models["text_classification"], tmp_path / "empty", labels=[])
    with pytest.raises(ManifestError, match=r"lists no 'labels'.*got \[\]"):
        _load(empty).labels


# --------------------------------------------------------------------- predictors

def test_each_input_spec_gets_its_own_predictor(tiny_models):
    model = _load(tiny_models["text_classification"])
    small, large = (model.predictor([InputSpec("input_ids", "int64", (batch, 32))]) for batch in (2, 64))
    assert small is not large
    assert small.inputs[0].max_shape == (2, 32) and large.inputs[0].max_shape == (64, 32)
    assert model.predictor([InputSpec("input_ids", "int64", (2, 32))]) is small     # made once per spec
    assert small.model_file == large.model_file      # sizes bound only TensorRT's plans: one export
    # Other feed names are another program, never the one exported for the first names.
    renamed = model.predictor([InputSpec("token_ids", "int64", (2, 32))])
    assert renamed.model_file != small.model_file
    ids = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], dtype=np.int64)
    np.testing.assert_allclose(renamed.run({"token_ids": ids})[0], small.run({"input_ids": ids})[0], atol=1e-6)


def test_tasks_with_other_batch_sizes_on_one_model_each_get_their_spec(tiny_models):
    lexical = _load(tiny_models["lexical_analysis"])
    few, many = LexicalAnalysisTask(lexical, batch_size=4), LexicalAnalysisTask(lexical, batch_size=64)
    assert few.predictor.inputs[0].max_shape == (4, 16)
    assert many.predictor.inputs[0].max_shape == (64, 16)
    text = "我们在上海工作了三年。" * 3
    assert few.run_items([text]) == many.run_items([text])


def test_every_bundled_package_is_within_its_budget():
    """A fast package (no pretrained encoder) is at most 15 MB (10**6 bytes each), the files its
    manifest pins, with the fast members of its ensemble, which run on every call; a package of the
    pretrained encoder (a ``transformer_*`` network) at most 30 MB, counted alone (an ensemble
    that adds one counts it there).  All of them, the bundle every wheel carries, at most 150 MB."""
    from pathlib import Path

    resources = Path(__file__).resolve().parents[1] / "resources"
    manifests = sorted(resources.glob("*/*/manifest.json"))
    assert len(manifests) >= 4
    size_of = lambda manifest: sum(entry["size"] for entry in manifest.files.values())
    encoder = lambda manifest: str(manifest.get("architecture", {}).get("type", "")).startswith("transformer_")
    for path in manifests:
        manifest = Manifest.load(path)
        members = [Manifest.load(resources / manifest["requires"][role] / "manifest.json")
                   for role in manifest.get("ensemble", [])]
        if encoder(manifest):
            size, budget = size_of(manifest), 30_000_000
        else:
            size, budget = size_of(manifest) + sum(size_of(m) for m in members if not encoder(m)), 15_000_000
        assert size <= budget, f"{path.parent.relative_to(resources)}: {size:,} bytes, over {budget // 10**6} MB"
    assert sum(size_of(Manifest.load(path)) for path in manifests) <= 150_000_000
