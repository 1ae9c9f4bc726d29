"""The project's encoder: the Paddle network against PyTorch's outputs, its contract as a shipped
network, and the pretraining recipe end to end at toy scale.

The parity and contract tests need no PyTorch (CI has none): ``tests/fixtures/encoder_parity.npz``
holds a tiny random encoder's weights, a few padded inputs and PyTorch's outputs, written by
``python -m pretraining.parity_fixture``.  The recipe test runs where PyTorch is installed (see
pretraining/README.md for its venv) and is skipped elsewhere.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow.errors import ManifestError
from taskflow.encoder import CLS, NORMALIZATION, SEP, SPECIAL_TOKENS, CharVocab, add_cls_sep
from taskflow.model import Model, network_class
from taskflow.packages import write_package
from taskflow.predictor import InputSpec, PredictorOptions
from taskflow.text import Normalizer

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "encoder_parity.npz"
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def parity():
    with np.load(FIXTURE) as stored:
        data = {k: stored[k] for k in stored.files}
    data["config"] = json.loads(str(data["config"]))
    data["weights"] = {k[len("weights/"):]: v for k, v in data.items() if k.startswith("weights/")}
    return data


def _package(folder: Path, parity: dict, network_type: str, task: str = "encoder", **fields) -> Path:
    """A model package of the fixture's weights, as ``pretraining/convert.py`` lays one out; a
    classifier's head is the fixture's two-way span layer (its outputs are known from ``hidden``)."""
    weights = {k: v for k, v in parity["weights"].items() if network_type == "transformer_span" or not k.startswith("span.")}
    if network_type == "transformer_classifier":
        weights.update({"head." + k[len("span."):]: v for k, v in parity["weights"].items() if k.startswith("span.")})
    buffer = io.BytesIO()
    np.savez(buffer, **weights)
    folder.mkdir(parents=True)
    (folder / "weights.npz").write_bytes(buffer.getvalue())
    chars = [chr(0x4E00 + i) for i in range(parity["config"]["vocab_size"] - len(SPECIAL_TOKENS))]
    CharVocab([*SPECIAL_TOKENS, *chars]).save(folder / "vocab.txt")
    write_package(folder, {"task": task, "name": folder.name, "version": "1.0.0",
                           "architecture": {"type": network_type, **parity["config"]},
                           "normalization": list(NORMALIZATION), **fields},
                  {"weights.npz": folder / "weights.npz", "vocab.txt": folder / "vocab.txt"})
    return folder


@pytest.fixture(scope="module")
def packages(parity, tmp_path_factory):
    root = tmp_path_factory.mktemp("encoder-packages")
    return {kind: _package(root / kind, parity, kind)
            for kind in ("transformer_encoder", "transformer_span", "transformer_classifier")}


def _predictor(package: Path, *, static: bool = True):
    model = Model.load("encoder", None, task_path=package, options=PredictorOptions(num_threads=1, static=static))
    return model.predictor([InputSpec("input_ids", "int64", (8, 24))])


@pytest.fixture(scope="module")
def static_runs(packages):
    return {kind: _predictor(path) for kind, path in packages.items()}


def test_an_encoder_package_that_allows_bf16_runs_in_it_under_auto_where_the_cpu_has_it(parity, tmp_path):
    """``"cpu_bf16": true`` and the default precision: bf16 on a CPU that computes it natively
    (scores within bf16's rounding of fp32's), and exactly fp32's numbers on any other CPU."""
    from taskflow.predictor import Precision, native_bf16

    package = _package(tmp_path / "bf16", parity, "transformer_encoder", cpu_bf16=True)
    spec = [InputSpec("input_ids", "int64", (8, 24))]
    auto = Model.load("encoder", None, task_path=package, options=PredictorOptions(num_threads=1)).predictor(spec)
    fp32 = Model.load("encoder", None, task_path=package,
                      options=PredictorOptions(num_threads=1, precision="fp32")).predictor(spec)
    (got,), (want,) = auto.run({"input_ids": parity["input_ids"]}), fp32.run({"input_ids": parity["input_ids"]})
    if native_bf16():
        assert auto.options.precision is Precision.BF16 and fp32.options.precision is Precision.FP32
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= 0.05 * scale  # bf16 keeps 8 bits of mantissa; sums stay fp32
    else:
        assert auto.options.precision is Precision.FP32
        np.testing.assert_array_equal(got, want)


def test_small_batches_of_a_bf16_classifier_run_on_onednn_padded_to_a_few_shapes(parity, tmp_path, monkeypatch):
    """A classifier in bf16 whose input declares its pad_id: a batch of 2-16 rows runs on oneDNN
    (bf16) padded to a bucket's shape, its outputs cut back to its rows and within bf16's rounding
    of fp32's, the same whichever batch a row comes in; one row runs on the plain kernels."""
    from taskflow import predictor as predictor_module
    from taskflow.predictor import Precision, bucket_shape

    # Where the CPU lacks bf16, oneDNN emulates it: slower, but the same path and the same answers.
    monkeypatch.setattr(predictor_module, "native_bf16", lambda: True)
    package = _package(tmp_path / "bf16", parity, "transformer_classifier", cpu_bf16=True)
    spec = [InputSpec("input_ids", "int64", (8, 24), pad_id=0)]
    bf16 = Model.load("encoder", None, task_path=package, options=PredictorOptions(num_threads=1)).predictor(spec)
    fp32 = Model.load("encoder", None, task_path=package,
                      options=PredictorOptions(num_threads=1, precision="fp32")).predictor(spec)
    assert bf16.options.precision is Precision.BF16
    ids = parity["input_ids"]                          # 4 rows of different lengths, 0-padded
    (want,) = fp32.run({"input_ids": ids})
    (three,) = bf16.run({"input_ids": ids[:3]})        # padded to 4 rows and 24 positions (the spec's longest)
    assert three.shape == (3, want.shape[1]) and list(bf16._roots) == [False]
    np.testing.assert_allclose(three, want[:3], atol=0.02)
    (two,) = bf16.run({"input_ids": ids[1:3, :20]})    # other rows beside them, another length
    np.testing.assert_allclose(two, three[1:3], atol=0.02)
    (one,) = bf16.run({"input_ids": ids[:1]})          # one row: the plain kernels, in fp32
    assert sorted(bf16._roots) == [False, True]
    np.testing.assert_allclose(one, want[:1], atol=1e-5)
    # Every 2-16-row batch up to 258 positions lands on one of at most 80 shapes that holds it.
    shapes = {(r, n): bucket_shape(r, n, 258) for r in range(2, 17) for n in range(1, 259)}
    assert all(r <= br and n <= bn <= 258 for (r, n), (br, bn) in shapes.items())
    assert len(set(shapes.values())) <= 80


# ------------------------------------------------------------------ parity
def test_the_encoder_reproduces_pytorch_through_the_static_program(parity, static_runs):
    (hidden,) = static_runs["transformer_encoder"].run({"input_ids": parity["input_ids"]})
    np.testing.assert_allclose(hidden, parity["hidden"], atol=TOLERANCE, rtol=0)


def test_the_span_extractor_reproduces_pytorch_through_the_static_program(parity, static_runs):
    start, end = static_runs["transformer_span"].run({"input_ids": parity["input_ids"]})
    np.testing.assert_allclose(start, parity["start"], atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(end, parity["end"], atol=TOLERANCE, rtol=0)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _classifier_expected(parity) -> np.ndarray:
    """What the classifier must give for the fixture's inputs: the span layer on the [CLS] position."""
    weights = parity["weights"]
    return _softmax(parity["hidden"][:, 0] @ weights["span.weight"] + weights["span.bias"])


def test_the_classifier_reads_the_first_position_through_the_static_program(parity, static_runs):
    (probabilities,) = static_runs["transformer_classifier"].run({"input_ids": parity["input_ids"]})
    assert probabilities.shape == (len(parity["input_ids"]), 2)
    np.testing.assert_allclose(probabilities, _classifier_expected(parity), atol=TOLERANCE, rtol=0)


def test_the_dynamic_network_reproduces_pytorch(parity):
    import paddle

    network = network_class("transformer_encoder")(**parity["config"])
    network.set_state_dict({k: paddle.to_tensor(v) for k, v in parity["weights"].items() if not k.startswith("span.")})
    network.eval()
    with paddle.no_grad():
        hidden = network(paddle.to_tensor(parity["input_ids"])).numpy()
    np.testing.assert_allclose(hidden, parity["hidden"], atol=TOLERANCE, rtol=0)


def test_the_fixture_was_written_from_the_pytorch_code_of_this_checkout(parity):
    # Where PyTorch is missing (CI), the parity checks above compare Paddle with outputs of the PyTorch
    # code as it was; a change there shows only here.
    sys.path.insert(0, str(ROOT))
    try:
        from pretraining.parity_fixture import source_hashes
    finally:
        sys.path.remove(str(ROOT))
    pinned = json.loads(str(parity["sources"]))
    changed = [name for name, digest in source_hashes().items() if pinned.get(name) != digest]
    assert not changed, (
        f"{', '.join(changed)} changed since {FIXTURE.name} was written: rewrite it with "
        "`python -m pretraining.parity_fixture` where PyTorch is installed (pretraining/README.md); after a "
        "change that cannot change what the networks compute (a comment), `--sources-only` re-pins the hashes")


def test_the_fixture_has_padding_and_real_rows_of_every_length(parity):
    # The checks above see the attention mask only if some rows are padded and one is not.
    lengths = (parity["input_ids"] > 0).sum(axis=1)
    assert lengths.max() == parity["input_ids"].shape[1] and lengths.min() < lengths.max()
    assert 1 in lengths


# ---------------------------------------------------------------- contract
@pytest.mark.parametrize("kind", ["transformer_encoder", "transformer_span", "transformer_classifier"])
def test_static_export_equals_the_dynamic_graph(parity, packages, static_runs, kind):
    static = static_runs[kind].run({"input_ids": parity["input_ids"]})
    dynamic = _predictor(packages[kind], static=False).run({"input_ids": parity["input_ids"]})
    assert len(static) == len(dynamic)
    for a, b in zip(static, dynamic):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["transformer_encoder", "transformer_span"])
def test_padding_and_batch_mates_do_not_change_a_texts_outputs(parity, static_runs, kind):
    predictor = static_runs[kind]
    batch = parity["input_ids"]
    together = predictor.run({"input_ids": batch})
    for row, ids in enumerate(batch):
        length = int((ids > 0).sum())
        alone = predictor.run({"input_ids": ids[None, :length]})              # batch 1, no padding
        padded_more = np.zeros((1, batch.shape[1]), dtype=np.int64)           # batch 1, padded to the batch's length
        padded_more[0, :length] = ids[:length]
        padded = predictor.run({"input_ids": padded_more})
        for out_alone, out_padded, out_together in zip(alone, padded, together):
            np.testing.assert_allclose(out_alone[0], out_together[row, :length], atol=1e-5, rtol=0)
            np.testing.assert_allclose(out_padded[0, :length], out_together[row, :length], atol=1e-5, rtol=0)


def test_a_classifiers_probabilities_do_not_depend_on_padding_or_batch_mates(parity, static_runs):
    predictor = static_runs["transformer_classifier"]
    batch = parity["input_ids"]
    (together,) = predictor.run({"input_ids": batch})
    for row, ids in enumerate(batch):
        (alone,) = predictor.run({"input_ids": ids[None, :int((ids > 0).sum())]})
        np.testing.assert_allclose(alone[0], together[row], atol=1e-5, rtol=0)


def test_add_cls_sep_frames_each_row_at_its_own_length():
    ids = np.array([[7, 8, 9], [7, 0, 0], [1, 5, 0]], dtype=np.int64)
    assert add_cls_sep(ids).tolist() == [[CLS, 7, 8, 9, SEP], [CLS, 7, SEP, 0, 0], [CLS, 1, 5, SEP, 0]]
    assert add_cls_sep(ids).dtype == np.int64


def test_sentiment_analysis_runs_an_encoder_classifier_package_framed_and_chunked(parity, tmp_path):
    """``Taskflow`` with a ``transformer_classifier`` package: the texts are framed as [CLS] text [SEP],
    a text over ``max_length`` is cut into chunks whose probabilities are averaged, and a text's
    result does not depend on its batch."""
    package = _package(tmp_path / "senta", parity, "transformer_classifier", task="sentiment_analysis",
                       labels=["negative", "positive"], max_length=8)
    senta = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True)
    model = Model.load("sentiment_analysis", None, task_path=package, options=PredictorOptions(num_threads=1))
    vocab = model.vocab(CharVocab.load)
    (direct,) = model.predictor([InputSpec("input_ids", "int64", (4, 10))]).run(
        {"input_ids": add_cls_sep(np.array([vocab.encode("一丁七万")], dtype=np.int64))})

    short, long_text = "一丁七万", "一丁七万丈三上下。不与丏丐丑丒专且丕世"
    alone = senta(short)[0]
    assert alone["scores"]["positive"] == pytest.approx(float(direct[0, 1]), abs=1e-5)
    assert alone["label"] == ("positive" if direct[0, 1] > direct[0, 0] else "negative")
    together = senta([short, long_text, "丁"])
    assert together[0]["scores"] == pytest.approx(alone["scores"], abs=1e-5)
    assert [r["text"] for r in together] == [short, long_text, "丁"]
    assert sum(together[1]["scores"].values()) == pytest.approx(1.0, abs=1e-5)


def _sentiment_ensemble(parity, tiny_sentiment, folder: Path, **fields) -> Path:
    """The encoder classifier (8-char chunks) with the tiny char CNN inside it as its ensemble member."""
    package = _package(folder, parity, "transformer_classifier", task="sentiment_analysis",
                       labels=["negative", "positive"], max_length=8)
    shutil.copytree(tiny_sentiment, package / "cnn")
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(requires={"cnn": "./cnn"}, ensemble=["cnn"], **fields)
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return package


def test_a_sentiment_ensemble_mixes_each_network_s_probabilities_of_the_same_chunks(parity, tiny_sentiment, tmp_path):
    """Each network reads the package's chunks (the encoder's 8 chars; the char CNN could read 32),
    averages them by length, and the text's probabilities are the networks' mixed by the weights."""
    package = _sentiment_ensemble(parity, tiny_sentiment, tmp_path / "mix", ensemble_weights=[1, 3])
    texts = ["一丁七万", "一丁七万丈三上下。不与丏丐丑丒专且丕世", "丁"]
    mixed = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True)
    encoder = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True, ensemble=False)
    cnn = Taskflow("sentiment_analysis", task_path=str(package / "cnn"), return_all_scores=True)
    assert len(mixed.task.networks) == 2 and mixed.task.weights == pytest.approx([0.25, 0.75])
    assert len(encoder.task.networks) == 1 and cnn.task.temperature is None
    for text, got, alone in zip(texts, mixed(texts), encoder(texts)):
        chunks = [chunk for _, chunk in mixed.task.split(text)]
        assert len(chunks) == (4 if len(text) > 8 else 1)      # cut at the sentence end, then at 8
        lengths = [len(chunk) for chunk in chunks]
        cnn_part = np.average([cnn(chunk)[0]["scores"]["positive"] for chunk in chunks], weights=lengths)
        expected = 0.25 * alone["scores"]["positive"] + 0.75 * cnn_part
        assert got["scores"]["positive"] == pytest.approx(expected, abs=1e-5)
        assert got["label"] == ("positive" if expected > 0.5 else "negative")
    # A batch of one gives the same as a batch of all.
    one_by_one = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True, batch_size=1)
    assert [r["scores"] for r in one_by_one(texts)] == [pytest.approx(r["scores"], abs=1e-6) for r in mixed(texts)]


def test_a_geometric_ensemble_renormalises_the_weighted_mean_of_log_probabilities(parity, tiny_sentiment, tmp_path):
    """ensemble_mixing "geometric": p ~ prod_k p_k ** w_k over the labels, from the same per-network
    probabilities the arithmetic mix averages; an unknown mixing is refused by name."""
    from taskflow.errors import ManifestError
    from recipes.tuning import update_manifest

    package = _sentiment_ensemble(parity, tiny_sentiment, tmp_path / "mix", ensemble_weights=[1, 3])
    texts = ["一丁七万", "一丁七万丈三上下。不与丏丐丑丒专且丕世", "丁"]
    arithmetic = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True)
    per_network = [arithmetic.task.network_probabilities(results, units)
                   for results, units in _each_text_s_chunk_results(arithmetic.task, texts)]
    update_manifest(package, {"ensemble_mixing": "geometric"})
    geometric = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True)
    assert geometric.task.mixing == "geometric" and arithmetic.task.mixing == "arithmetic"
    for probs, got in zip(per_network, geometric(texts)):
        product = probs[0] ** 0.25 * probs[1] ** 0.75
        expected = product / product.sum()
        assert [got["scores"]["negative"], got["scores"]["positive"]] == pytest.approx(expected.tolist(), abs=1e-5)
        assert got["label"] == ["negative", "positive"][int(np.argmax(expected))]
    # Not the arithmetic mean where the networks disagree in strength (a check that can fail).
    assert any(abs(g["scores"]["positive"] - a["scores"]["positive"]) > 1e-4
               for g, a in zip(geometric(texts), arithmetic(texts)))
    update_manifest(package, {"ensemble_mixing": "harmonic"})
    with pytest.raises(ManifestError, match="ensemble_mixing must be one of"):
        Taskflow("sentiment_analysis", task_path=str(package))


def _each_text_s_chunk_results(task, texts):
    """(results, units) per text, as the task's join receives them: its chunks' per-network rows."""
    class Rows(type(task)):
        def join(self, item, results, units):
            return results, units

    rows = Rows(task.model, batch_size=task.batch_size)
    return rows.run_items([rows.check_item(t, i) for i, t in enumerate(texts)])


def test_a_sentiment_ensemble_refuses_members_that_cannot_mix(parity, tiny_sentiment, tmp_path):
    from taskflow.errors import ManifestError
    from recipes.tuning import update_manifest

    package = _sentiment_ensemble(parity, tiny_sentiment, tmp_path / "mix")
    update_manifest(package / "cnn", {"labels": ["negative", "neutral"]})
    with pytest.raises(ManifestError, match="labels"):
        Taskflow("sentiment_analysis", task_path=str(package))
    update_manifest(package / "cnn", {"labels": ["negative", "positive"], "max_length": 6})
    with pytest.raises(ManifestError, match="reads 6 chars, fewer than the package's 8-char chunks"):
        Taskflow("sentiment_analysis", task_path=str(package))
    update_manifest(package / "cnn", {"max_length": 32})
    for bad in ([1], [0, 1], [1, True]):
        update_manifest(package, {"ensemble_weights": bad})
        with pytest.raises(ManifestError, match="ensemble_weights must be 2 positive numbers"):
            Taskflow("sentiment_analysis", task_path=str(package))
    assert Taskflow("sentiment_analysis", task_path=str(package), ensemble=False)("一丁")[0]["label"]


def test_an_ensemble_member_with_more_labels_is_read_on_the_package_s_labels(parity, tmp_path):
    """A three-label member (negative, positive, neutral) beside a two-label encoder: its
    probabilities of negative and positive, renormalised, are what it adds to the mix."""
    from make_tiny_models import make_tiny_sentiment
    from taskflow.errors import ManifestError

    package = _package(tmp_path / "mix", parity, "transformer_classifier", task="sentiment_analysis",
                       labels=["negative", "positive"], max_length=8)
    make_tiny_sentiment(package / "cnn", seed=3, labels=("neutral", "positive", "negative"))
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(requires={"cnn": "./cnn"}, ensemble=["cnn"], ensemble_weights=[1, 3])
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    mixed = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True)
    encoder = Taskflow("sentiment_analysis", task_path=str(package), return_all_scores=True, ensemble=False)
    cnn = Taskflow("sentiment_analysis", task_path=str(package / "cnn"), return_all_scores=True)
    for text in ["一丁七万", "丁"]:
        three = cnn(text)[0]["scores"]
        assert len(three) == 3 and three["neutral"] > 0.01
        expected = 0.25 * encoder(text)[0]["scores"]["positive"] + 0.75 * three["positive"] / (
            three["positive"] + three["negative"])
        got = mixed(text)[0]["scores"]
        assert set(got) == {"negative", "positive"} and got["positive"] == pytest.approx(expected, abs=1e-5)

    # A member that knows only one of the package's labels has no polarity to add: refused on load.
    make_tiny_sentiment(package / "cnn", seed=3, labels=("neutral", "positive", "angry"))
    with pytest.raises(ManifestError,
                       match=r"has the labels \['neutral', 'positive', 'angry'\], fewer than two of the package's"):
        Taskflow("sentiment_analysis", task_path=str(package))


def test_the_sentiment_recipe_tunes_an_ensemble_s_weights_then_its_temperature(parity, tiny_sentiment, tmp_path):
    """Each weighting's dev accuracy in the manifest (the mean over the splits, here all of one size,
    so the pooled accuracy) is what the task gives with those weights."""
    from recipes.sentiment_analysis.train import ENSEMBLE_SELECTION, main
    from recipes.tuning import update_manifest

    package = _sentiment_ensemble(parity, tiny_sentiment, tmp_path / "mix")
    chars = [chr(0x4E00 + i) for i in range(60)]
    rng = random.Random(0)
    rows = {rel: [("".join(rng.choices(chars, k=rng.randint(2, 20))), rng.randint(0, 1)) for _ in range(12)]
            for rel in ENSEMBLE_SELECTION}
    for rel, items in rows.items():
        (tmp_path / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.startswith("smp2020_ewect/"):      # six emotions: 2 happy (positive), 1 angry (negative)
            body = "label\ttext_a\n" + "".join(f"{2 if y else 1}\t{t}\n" for t, y in items)
        else:
            body = "label\ttext\n" + "".join(f"{y}\t{t}\n" for t, y in items)
        (tmp_path / "data" / rel).write_text(body, encoding="utf-8")
    assert main(["--ensemble-weights", str(package), "--data-dir", str(tmp_path / "data")]) == 0
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    tuning = manifest["ensemble_weights_tuning"]
    assert [row[:2] for row in tuning["grid"]] == [pytest.approx([k / 10, 1 - k / 10]) for k in range(1, 10)]
    assert [row[:2] for row in tuning["grid_geometric"]] == [row[:2] for row in tuning["grid"]]
    texts = [t for items in rows.values() for t, _ in items]
    gold = [y for items in rows.values() for _, y in items]
    scratch = tmp_path / "scratch"
    shutil.copytree(package, scratch)
    update_manifest(scratch, {"temperature": None})
    for mixing, grid in (("arithmetic", tuning["grid"]), ("geometric", tuning["grid_geometric"])):
        for own, member, accuracy in grid:
            update_manifest(scratch, {"ensemble_weights": [own, member], "ensemble_mixing": mixing})
            labels = [r["label"] for r in Taskflow("sentiment_analysis", task_path=str(scratch))(texts)]
            assert accuracy == round(float(np.mean([label == ["negative", "positive"][y]
                                                    for label, y in zip(labels, gold)])), 4)
    # The best of both grids, arithmetic first among equals.
    mixing, best = max([("arithmetic", row) for row in tuning["grid"]] + [("geometric", row) for row in
                                                                          tuning["grid_geometric"]],
                       key=lambda pair: pair[1][-1])
    assert manifest["ensemble_weights"] == best[:2] and tuning["accuracy"] == best[-1]
    assert manifest["ensemble_mixing"] == mixing
    assert isinstance(manifest["temperature"], float) and manifest["temperature"] > 0    # fitted on the mix after


def test_text_similarity_runs_an_encoder_classifier_as_a_symmetric_cross_encoder(parity, tmp_path):
    """A ``transformer_classifier`` package for text_similarity reads ``[CLS] a [SEP] b [SEP]`` in both
    orders and averages them; texts are read as the fast matcher reads them (no punctuation), cut to
    ``max_length`` each, and a pair's score does not depend on its batch."""
    package = _package(tmp_path / "pairs", parity, "transformer_classifier", task="text_similarity",
                       labels=[0, 1], max_length=6, threshold=0.5, normalization=["t2s", "width", "lower", "strip"])
    match = Taskflow("text_similarity", task_path=str(package))
    model = Model.load("text_similarity", None, task_path=package, options=PredictorOptions(num_threads=1))
    vocab = model.vocab(CharVocab.load)
    predictor = model.predictor([InputSpec("input_ids", "int64", (4, 15))])

    def direct(a: str, b: str) -> float:
        rows = [[CLS, *vocab.encode(x), SEP, *vocab.encode(y), SEP] for x, y in ((a, b), (b, a))]
        (probabilities,) = predictor.run({"input_ids": np.array(rows, dtype=np.int64)})
        return float(probabilities[:, 1].mean())

    pairs = [["一丁七", "万丈三上"], ["一丁七，万丈三上下不与", "丁七"], ["丁", "丁。"]]
    results = match(pairs)
    assert results[0]["similarity"] == pytest.approx(direct("一丁七", "万丈三上"), abs=1e-5)
    assert results[1]["similarity"] == pytest.approx(direct("一丁七万丈三", "丁七"), abs=1e-5)   # no comma, 6 chars
    assert results[2]["similarity"] == 1.0                                                        # read identically
    assert [r["label"] for r in results] == [int(r["similarity"] >= 0.5) for r in results]
    swapped = match([[b, a] for a, b in pairs])
    assert [r["similarity"] for r in swapped] == pytest.approx([r["similarity"] for r in results], abs=1e-6)
    assert match(pairs[:1])[0]["similarity"] == pytest.approx(results[0]["similarity"], abs=1e-5)
    with pytest.raises(Exception, match="bi-encoder"):
        Taskflow("text_similarity", task_path=str(package), return_embeddings=True)


def _chars(first: int, count: int) -> str:
    """``count`` chars of the fixture's vocabulary (U+4E00 onwards), from its ``first``."""
    return "".join(chr(0x4E00 + (first + i) % 45) for i in range(count))


def test_reading_comprehension_runs_a_span_encoder_over_windows_of_question_and_context(parity, tmp_path):
    """A ``transformer_span`` package reads ``[CLS] question [SEP] window [SEP]``: a context longer
    than a window is read in overlapping windows, [CLS] is the window's NULL, and the answer is the
    best span of NULL-first softmaxed logits over all windows, in the caller's context offsets."""
    package = _package(tmp_path / "reader", parity, "transformer_span", task="reading_comprehension",
                       max_seq_len=24, doc_stride=4, max_question_len=5, max_answer_len=5)
    qa = Taskflow("reading_comprehension", task_path=str(package), top_k=3)
    model = Model.load("reading_comprehension", None, task_path=package, options=PredictorOptions(num_threads=1))
    vocab = model.vocab(CharVocab.load)
    predictor = model.predictor([InputSpec("input_ids", "int64", (4, 24))])

    context, question = _chars(3, 40), _chars(30, 7)          # the question is cut to 5 chars
    q = vocab.encode(model.normalizer(question))[:5]       # t2s maps some of these chars (丟 -> 丢)
    expected = {}
    for begin, end in ((0, 16), (12, 28), (24, 40)):           # 24 - 5 - 3 = 16 chars a window, 4 shared
        ids = np.array([[CLS, *q, SEP, *vocab.encode(model.normalizer(context[begin:end])), SEP]], dtype=np.int64)
        start, stop = predictor.run({"input_ids": ids})
        p = [_softmax(np.concatenate([x[0, :1], x[0, 7:7 + end - begin]]).astype(np.float64)) for x in (start, stop)]
        for i in range(end - begin):
            for j in range(i, min(i + 5, end - begin)):
                key = (begin + i, begin + j + 1)
                expected[key] = max(expected.get(key, 0.0), p[0][i + 1] * p[1][j + 1])
    best = sorted(expected.items(), key=lambda kv: -kv[1])[:3]
    answers = qa({"context": context, "question": question})[0]
    assert [(a["start"], a["end"]) for a in answers] == [key for key, _ in best]
    assert [a["score"] for a in answers] == pytest.approx([score for _, score in best], rel=1e-4)
    assert all(a["answer"] == context[a["start"]:a["end"]] and len(a["answer"]) <= 5 for a in answers)


def test_a_span_encoder_refuses_windows_it_cannot_read(parity, tmp_path):
    from taskflow.errors import OptionError

    package = _package(tmp_path / "reader", parity, "transformer_span", task="reading_comprehension",
                       max_seq_len=24, doc_stride=4, max_question_len=5, max_answer_len=5)
    with pytest.raises(OptionError, match="24 positions"):
        Taskflow("reading_comprehension", task_path=str(package), max_seq_len=32)
    with pytest.raises(OptionError, match="context chars a window"):
        Taskflow("reading_comprehension", task_path=str(package), max_seq_len=12, doc_stride=4)


def test_a_span_encoder_votes_in_an_ensemble_reading_each_window_in_pieces(parity, tiny_models, tmp_path):
    """A member encoder reads each of the package's windows in pieces of its own positions (as it
    was fine-tuned), and a span scores its readers' mean probability: the encoder's is its best
    over the pieces that hold the span whole, 0 where none does."""
    char_reader = tiny_models["reading_comprehension"]          # windows of 32 chars, answers of 10
    package = tmp_path / "ensemble"
    shutil.copytree(char_reader, package)
    _package(package / "encoder", parity, "transformer_span", task="reading_comprehension",
             max_seq_len=24, doc_stride=4, max_question_len=5, max_answer_len=10)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(requires={"encoder": "./encoder"}, ensemble=["encoder"])
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")

    def spans(path, item, **options):
        results = Taskflow("reading_comprehension", task_path=str(path), top_k=1000, **options)(item)[0]
        return {(r["start"], r["end"]): r["score"] for r in results}

    item = (_chars(0, 30), _chars(3, 5))                  # one window of the char reader's
    encoder = Taskflow("reading_comprehension", task_path=str(package / "encoder"))
    windows = encoder.task.split(encoder.task.check_item(item, 0))
    assert [(w.start, w.end) for w in windows] == [(0, 16), (12, 28), (14, 30)]
    assert all(encoder.task.readers[0].pieces(w.prepared[0], w.start, w.end) == [(w.start, w.end)]
               for w in windows)                                        # alone: one piece a window
    member = Taskflow("reading_comprehension", task_path=str(package)).task.readers[1]
    assert member.pieces(member.prepare(encoder.task.check_item(item, 0)), 0, 30) == [(0, 16), (12, 28), (14, 30)]
    own = spans(char_reader, item)
    alone = spans(package / "encoder", item)               # windows of 24 - 5 - 3 = 16 chars: the same pieces
    together = spans(package, item)
    assert len(own) == 30 * 10 - 45 and set(alone) < set(own) and (10, 20) not in alone
    assert together.keys() == own.keys()
    for span, score in together.items():
        assert score == pytest.approx((own[span] + alone.get(span, 0.0)) / 2, rel=1e-4, abs=1e-12), span
    # Batched with a long context (many windows, several pieces each), answers stay the same.
    long_item = (_chars(0, 90), _chars(3, 5))
    batched = Taskflow("reading_comprehension", task_path=str(package), top_k=3)([long_item, item])
    one_by_one = Taskflow("reading_comprehension", task_path=str(package), top_k=3, batch_size=1)([long_item, item])
    assert [[(a["start"], a["end"]) for a in r] for r in batched] == [[(a["start"], a["end"]) for a in r] for r in one_by_one]


def test_a_focused_encoder_reads_only_the_pieces_that_hold_the_other_readers_best_spans(parity, tiny_models, tmp_path):
    """With ``encoder_focus`` k, the member encoder reads, of each window, the pieces holding the
    other readers' k best spans: a span there scores the mean as before, a span in no piece read
    the other readers' share alone."""
    char_reader = tiny_models["reading_comprehension"]
    package = _reader_with_encoder(tmp_path / "ensemble", parity, char_reader, encoder_focus=1)

    def spans(path, item, **options):
        results = Taskflow("reading_comprehension", task_path=str(path), top_k=1000, **options)(item)[0]
        return {(r["start"], r["end"]): r["score"] for r in results}

    item = (_chars(0, 30), _chars(3, 5))
    own = spans(char_reader, item)
    best = max(own, key=own.get)
    flow = Taskflow("reading_comprehension", task_path=str(package))
    assert flow.task.encoder_focus == 1
    member = flow.task.readers[1]
    read = member.focus(member.prepare(flow.task.check_item(item, 0)), 0, 30, [(*best, own[best])])
    assert len(read) == 1 and read[0][0] <= best[0] and best[1] <= read[0][1]
    (a, b), = read
    units = flow.task.split(flow.task.check_item(item, 0))
    outputs = flow.task.run_networks(units)
    assert outputs[-1] == [read] and len(outputs[-2]) == 1       # the encoder read one row: that piece
    piece = {(s + a, e + a): score for (s, e), score in spans(package / "encoder", (item[0][a:b], item[1])).items()}
    mixed = {span: (score + piece.get(span, 0.0)) / 2 for span, score in own.items()}
    answer = flow(item)[0]
    assert (answer["start"], answer["end"]) == max(mixed, key=mixed.get)
    assert answer["score"] == pytest.approx(max(mixed.values()), rel=1e-4)
    # Batched with a long context, answers stay the same, and the encoder reads fewer rows.
    long_item = (_chars(0, 90), _chars(3, 5))
    batched = Taskflow("reading_comprehension", task_path=str(package))([long_item, item])
    one_by_one = Taskflow("reading_comprehension", task_path=str(package), batch_size=1)([long_item, item])
    assert [(a["start"], a["end"]) for a in batched] == [(a["start"], a["end"]) for a in one_by_one]


def _reader_with_encoder(package, parity, char_reader, **fields):
    """The tiny char reader with a member span encoder reading windows of 16 chars (4 overlap)."""
    shutil.copytree(char_reader, package)
    _package(package / "encoder", parity, "transformer_span", task="reading_comprehension",
             max_seq_len=24, doc_stride=4, max_question_len=5, max_answer_len=10)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(requires={"encoder": "./encoder"}, ensemble=["encoder"], **fields)
    (package / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return package


def test_the_encoder_focus_tuner_scores_each_focus_as_the_product_answers_with_it(parity, tiny_models, tmp_path):
    """The tuner reads every piece once and decodes each focus from the kept outputs: its F1 for
    a focus is the F1 of the product running with that focus."""
    from recipes.reading_comprehension.calibrate import tune_encoder_focus
    from taskflow.tasks.reading_comprehension.metrics import evaluate

    package = _reader_with_encoder(tmp_path / "ensemble", parity, tiny_models["reading_comprehension"])
    rows = [{"context": _chars(k, 40 + 9 * k), "question": _chars(k + 3, k + 6), "answers": [_chars(k + 3, k + 6)]}
            for k in range(6)]
    tuned = tune_encoder_focus(package, rows, candidates=(1, 2), max_f1_drop=100.0)
    grid = tuned["encoder_focus_tuning"]["grid"]
    assert [row[0] for row in grid] == [0, 1, 2] and grid[0][3] == 1.0 and 0 < grid[1][3] <= grid[2][3] < 1
    assert tuned["encoder_focus"] == 1                      # the fewest spans within the (here unbounded) drop
    for focus, f1, _, _ in grid:
        manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
        manifest.pop("encoder_focus", None)
        (package / "manifest.json").write_text(json.dumps({**manifest, **({"encoder_focus": focus} if focus else {})}),
                                               encoding="utf-8")
        answers = [out["answer"] for out in Taskflow("reading_comprehension", task_path=str(package))(
            [(row["context"], row["question"]) for row in rows])]
        assert evaluate([row["answers"] for row in rows], answers)["f1"] == pytest.approx(f1, abs=1e-3), focus


def test_encoder_focus_is_a_positive_int_for_an_ensemble_with_an_encoder(tiny_models, tmp_path):
    package = tmp_path / "reader"
    shutil.copytree(tiny_models["reading_comprehension"], package)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    for focus in (0, "2", True):
        (package / "manifest.json").write_text(json.dumps({**manifest, "encoder_focus": focus}), encoding="utf-8")
        # A str or a bool is refused by the manifest's schema (a JSON int), 0 by the reader.
        with pytest.raises(ManifestError, match="encoder_focus must be a positive int|"
                                                "'encoder_focus' must be a JSON int"):
            Taskflow("reading_comprehension", task_path=str(package), ensemble=False)
    (package / "manifest.json").write_text(json.dumps({**manifest, "encoder_focus": 2}), encoding="utf-8")
    Taskflow("reading_comprehension", task_path=str(package))       # no ensemble: nothing to focus
    shutil.copytree(tiny_models["reading_comprehension"], package / "member")
    (package / "manifest.json").write_text(json.dumps({**manifest, "encoder_focus": 2, "requires": {"word": "./member"},
                                                       "ensemble": ["word"]}), encoding="utf-8")
    with pytest.raises(ManifestError, match="its ensemble has none"):
        Taskflow("reading_comprehension", task_path=str(package))


def test_span_logits_put_padding_out_of_reach(parity, static_runs):
    start, end = static_runs["transformer_span"].run({"input_ids": parity["input_ids"]})
    padding = parity["input_ids"] == 0
    assert (start[padding] < -1e3).all() and (end[padding] < -1e3).all()
    assert (np.abs(start[~padding]) < 1e3).all()


def test_a_package_says_how_its_text_is_read(packages):
    model = Model.load("encoder", None, task_path=packages["transformer_encoder"])
    vocab = model.vocab(CharVocab.load)
    text = model.normalizer("一Ｂ\u3000丁")      # full-width B and the ideographic space, normalised char for char
    assert text == "一b 丁"
    assert vocab.encode(text) == [vocab.ids["一"], 1, 1, vocab.ids["丁"]]   # 'b' and ' ' are not in this vocabulary


def test_a_vocabulary_keeps_the_space_and_refuses_a_wrong_layout(tmp_path):
    vocab = CharVocab([*SPECIAL_TOKENS, " ", "中"])
    vocab.save(tmp_path / "vocab.txt")
    assert CharVocab.load(tmp_path / "vocab.txt").encode("中 国") == [6, 5, 1]
    with pytest.raises(ValueError, match="starts with"):
        CharVocab(["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"])
    with pytest.raises(ValueError, match="single chars"):
        CharVocab([*SPECIAL_TOKENS, "中国"])


# ------------------------------------------------------- the recipe, toy scale
_SYLLABLES = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"


def _write_corpus(folder: Path) -> list[Path]:
    """Two corpus parts of made-up Chinese documents, with full-width letters to normalise."""
    rng = random.Random(3)
    paths = []
    for part in range(2):
        documents = []
        for _ in range(60):
            words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3)))) for _ in range(30)]
            documents.append("，".join(words) + "。ＡＢＣ" * rng.choice((0, 1)))
        path = folder / f"toy.{part:02d}.txt.gz"
        path.write_bytes(gzip.compress(("\n".join(documents) + "\n").encode("utf-8")))
        paths.append(path)
    return paths


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_recipe_pretrains_resumes_exactly_converts_and_fine_tunes_to_packages_paddle_runs(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    convert, finetune_span, portable, pretrain, vocab_recipe, recipe_model = _import_recipe()

    corpus = [str(p) for p in _write_corpus(tmp_path)]
    vocab_recipe.main(["--corpus", *corpus, "--out", str(tmp_path / "vocab.txt"), "--size", "400", "--min-count", "1"])
    vocab = CharVocab.load(tmp_path / "vocab.txt")
    assert "b" in vocab.ids and "Ｂ" not in vocab.ids and "，" not in vocab.ids and "," in vocab.ids

    size = ["--layers", "2", "--hidden", "32", "--heads", "4", "--ffn", "64", "--max-len", "40", "--seq-len", "32",
            "--batch-size", "8", "--warmup-steps", "2", "--total-steps", "8", "--log-every", "2", "--threads", "1",
            "--heldout", "8", "--objective", "electra", "--segmenter", "jieba"]
    pytest.importorskip("jieba")
    whole = tmp_path / "whole"
    assert pretrain.main(["--corpus", *corpus, "--vocab", str(tmp_path / "vocab.txt"), "--out", str(whole), *size]) == 0
    pieces = tmp_path / "pieces"
    assert pretrain.main(["--corpus", *corpus, "--vocab", str(tmp_path / "vocab.txt"), "--out", str(pieces), *size,
                          "--max-steps", "3"]) == 0
    assert torch.load(pieces / "checkpoint.pt", weights_only=False)["step"] == 3
    # The second piece names only its corpus (and where it is): the run's settings come from the checkpoint.
    assert pretrain.main(["--corpus", *corpus, "--resume", str(pieces / "checkpoint.pt"), "--threads", "1"]) == 0

    whole_state = torch.load(whole / "checkpoint.pt", weights_only=False)
    pieces_state = torch.load(pieces / "checkpoint.pt", weights_only=False)
    assert pieces_state["step"] == whole_state["step"] == 8
    assert pieces_state["data"] == whole_state["data"]
    for name, tensor in whole_state["model"].items():
        assert torch.equal(tensor, pieces_state["model"][name]), name

    def training_lines(run):
        rows = [json.loads(line) for line in (run / "loss.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if k not in ("minutes", "tokens_per_s")} for row in rows if "lr" in row]

    assert [row["step"] for row in training_lines(pieces)] == [2, 4, 6, 8]
    assert training_lines(pieces) == training_lines(whole)

    # --evaluate-only scores a checkpoint on the held-out sequences of the parts it is given, as the
    # run's own last save did, and writes nothing.
    files, log_text = sorted(p.name for p in whole.iterdir()), (whole / "loss.jsonl").read_text()
    capsys.readouterr()
    assert pretrain.main(["--corpus", *corpus, "--resume", str(whole / "checkpoint.pt"), "--evaluate-only",
                          "--threads", "1"]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = [json.loads(line) for line in log_text.splitlines() if "eval_loss" in line][-1]
    assert scored["step"] == 8 and scored["heldout_sequences"] == 8
    assert scored["eval_loss"] == pytest.approx(saved["eval_loss"], rel=1e-4)
    assert sorted(p.name for p in whole.iterdir()) == files and (whole / "loss.jsonl").read_text() == log_text

    # A packed checkpoint (pieces small enough to leave the GPU machine) continues the run, inexactly.
    pieces_dir = tmp_path / "packed"
    assert len(portable.pack(pieces / "checkpoint.pt", pieces_dir, max_mib=0.05)) > 2
    portable.unpack(pieces_dir, tmp_path / "resumed" / "checkpoint.pt")
    packed = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=False)
    assert "optimizer" not in packed and {t.dtype for t in packed["model"].values()} == {torch.float16}
    # A tied weight (the MLM head's output matrix is an input embedding) is stored once, not per name.
    source = torch.load(pieces / "checkpoint.pt", weights_only=False)["model"]
    tied = [(a, b) for a, b in itertools.combinations(source, 2)
            if source[a].shape == source[b].shape and torch.equal(source[a], source[b])]
    assert tied and all(packed["model"][a].data_ptr() == packed["model"][b].data_ptr() for a, b in tied)
    assert pretrain.main(["--corpus", *corpus, "--resume", str(tmp_path / "resumed" / "checkpoint.pt"),
                          "--total-steps", "12", "--rewarm-steps", "4", "--threads", "1"]) == 0
    resumed = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=False)
    assert resumed["step"] == 12 and "optimizer" in resumed and resumed["args"]["rewarm_from"] == 8
    lr_at_10 = next(row["lr"] for row in training_lines(tmp_path / "resumed") if row["step"] == 10)
    # The schedule at step 10 of 12 (warm-up 2), times the second warm-up's 3rd of 4 steps.
    assert lr_at_10 == pytest.approx(6e-4 * (1 - 0.9 * (10 - 2) / (12 - 2)) * (10 - 8 + 1) / 4)
    (pieces_dir / "checkpoint.001").write_bytes(b"damaged")
    with pytest.raises(SystemExit, match="damaged"):
        portable.unpack(pieces_dir, tmp_path / "again.pt")

    package = tmp_path / "package"
    convert.main([str(pieces / "checkpoint.pt"), "--out", str(package)])
    model = Model.load("encoder", None, task_path=package, options=PredictorOptions(num_threads=1))
    assert model.network_type == "transformer_encoder" and list(model.manifest["normalization"]) == list(NORMALIZATION)
    texts = ["的一是在不了，ＡＢＣ", "中大为"]
    ids = np.zeros((2, 12), dtype=np.int64)
    for row, text in enumerate(texts):
        encoded = [CLS, *CharVocab.load(model.path("vocab.txt")).encode(model.normalizer(text)), SEP]
        ids[row, :len(encoded)] = encoded
    (hidden,) = model.predictor([InputSpec("input_ids", "int64", (8, 40))]).run({"input_ids": ids})

    encoder = recipe_model.Encoder(recipe_model.EncoderConfig(**pieces_state["config"]["encoder"])).eval()
    encoder.load_state_dict({k[len("encoder."):]: v for k, v in pieces_state["model"].items() if k.startswith("encoder.")})
    with torch.no_grad():
        expected = encoder(torch.from_numpy(ids)).numpy()
    np.testing.assert_allclose(hidden, expected, atol=TOLERANCE, rtol=0)

    # float16 storage halves the matrices on disk; Paddle reads them back as float32.
    halved = tmp_path / "package16"
    convert.main([str(pieces / "checkpoint.pt"), "--out", str(halved), "--float16"])
    with np.load(halved / "weights.npz") as stored, np.load(package / "weights.npz") as full:
        assert {stored[k].dtype.name for k in stored.files if stored[k].ndim >= 2} == {"float16"}
        assert {stored[k].dtype.name for k in stored.files if stored[k].ndim < 2} == {"float32"}
        assert set(stored.files) == set(full.files)
    small = Model.load("encoder", None, task_path=halved, options=PredictorOptions(num_threads=1))
    (hidden16,) = small.predictor([InputSpec("input_ids", "int64", (8, 40))]).run({"input_ids": ids})
    assert hidden16.dtype == np.float32
    np.testing.assert_allclose(hidden16, expected, atol=2e-2, rtol=0)

    # Fine-tuning for reading comprehension from the same checkpoint, to a package Paddle runs.
    rng = random.Random(4)
    documents = [line[:70] for path in corpus for line in gzip.decompress(Path(path).read_bytes()).decode().split("\n")
                 if len(line) >= 70]
    for split, chosen in (("train", documents[:40]), ("trial", documents[40:50]), ("dev", documents[50:60])):
        _squad(tmp_path / f"{split}.json", chosen, rng)
    span_package = tmp_path / "span_package"
    assert finetune_span.main([
        "--encoder", str(pieces / "checkpoint.pt"), "--train", str(tmp_path / "train.json"),
        "--select", str(tmp_path / "trial.json"), "--report", str(tmp_path / "dev.json"), "--out", str(span_package),
        "--max-seq-len", "40", "--doc-stride", "8", "--max-question-len", "12", "--max-answer-len", "8",
        "--epochs", "2", "--batch-size", "16", "--threads", "1", "--checkpoint", str(tmp_path / "span.pt")]) == 0
    reader = Model.load("reading_comprehension", None, task_path=span_package, options=PredictorOptions(num_threads=1))
    assert reader.network_type == "transformer_span"
    assert [h["epoch"] for h in reader.manifest["training"]["history"]] == [1.0, 2.0]
    assert {"f1", "em", "mean_answer_len"} <= set(reader.manifest["metrics"]["report"])
    assert reader.manifest["max_seq_len"] == 40 and reader.manifest["doc_stride"] == 8

    examples = finetune_span.read_squad(tmp_path / "dev.json")
    windows = finetune_span.make_windows(examples, CharVocab.load(reader.path("vocab.txt")), max_seq_len=40,
                                         doc_stride=8, max_question_len=12)
    ids, _, _ = finetune_span.collate(windows[:8])
    start, end = reader.predictor([InputSpec("input_ids", "int64", (8, 40))]).run({"input_ids": ids.numpy()})
    saved = torch.load(tmp_path / "span.pt", weights_only=False)
    span_model = recipe_model.SpanExtractor(recipe_model.EncoderConfig(**saved["config"])).eval()
    span_model.load_state_dict(saved["model"])
    with torch.no_grad():
        expected_start, expected_end = (t.numpy() for t in span_model(ids))
    np.testing.assert_allclose(start, expected_start, atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(end, expected_end, atol=TOLERANCE, rtol=0)

    # The README's tables come from what the runs wrote.
    from pretraining import summary

    curve = summary.curve(pieces, points=2).splitlines()
    assert [line.split(" | ")[0] for line in curve[2:4]] == ["| 4", "| 8"]
    assert curve[3].split(" | ")[-1].strip(" |") != ""          # the held-out loss of the final save
    (row,) = summary.pilot([f"{pieces}={span_package}"]).splitlines()[2:]
    selection = reader.manifest["metrics"]["selection"]
    assert f"| {selection['f1']} | {selection['em']} |" in row and "| 2 x 32 |" in row and "| electra | jieba |" in row


def _squad(path: Path, documents: list[str], rng: random.Random) -> list[tuple[str, str, int]]:
    """A SQuAD-format file: per document, one question whose answer is a few chars of it."""
    rows, paragraphs = [], []
    for number, context in enumerate(documents):
        start = rng.randrange(3, len(context) - 4)
        answer = context[start:start + rng.choice((2, 3, 4))]
        question = context[start - 3:start] + "之后是什么？"
        rows.append((context, answer, start))
        paragraphs.append({"context": context, "qas": [{"id": f"Q{number}", "question": question,
                                                        "answers": [{"text": answer, "answer_start": start}]}]})
    path.write_text(json.dumps({"data": [{"paragraphs": paragraphs}]}, ensure_ascii=False), encoding="utf-8")
    return rows


def _import_recipe():
    sys.path.insert(0, str(ROOT))
    try:
        from pretraining import convert, finetune_span, portable, pretrain, vocab as vocab_recipe
        from pretraining import model as recipe_model
    finally:
        sys.path.remove(str(ROOT))
    return convert, finetune_span, portable, pretrain, vocab_recipe, recipe_model


def test_reading_comprehension_windows_point_at_the_answer_in_every_window_that_holds_it(tmp_path):
    pytest.importorskip("torch")
    finetune_span = _import_recipe()[1]
    rng = random.Random(5)
    documents = ["".join(rng.choice(_SYLLABLES) for _ in range(90)) + "ＡＢ" for _ in range(6)]
    rows = _squad(tmp_path / "qa.json", documents, rng)
    vocab = CharVocab([*SPECIAL_TOKENS, *sorted(set("".join(documents) + "之后是什么？ab"))])
    examples = finetune_span.read_squad(tmp_path / "qa.json")
    windows = finetune_span.make_windows(examples, vocab, max_seq_len=40, doc_stride=8, max_question_len=16)
    for index, (context, answer, start) in enumerate(rows):
        mine = [w for w in windows if w.example == index]
        assert mine[0].begin == 0 and mine[-1].end == len(context) and len(mine) > 2
        assert all(a.end - b.begin == 8 for a, b in zip(mine, mine[1:]) if b.end < len(context))
        holding = [w for w in mine if w.begin <= start and start + len(answer) <= w.end]
        assert holding and all(w.start_label > 0 for w in holding)
        for w in holding:
            assert vocab.decode(w.ids[w.start_label:w.end_label + 1]) == Normalizer(NORMALIZATION)(answer)
            assert len(w.ids) <= 40 and w.ids[0] == CLS and w.ids[w.offset - 1] == SEP and w.ids[-1] == SEP
        assert all(w.start_label == w.end_label == 0 for w in mine if all(w is not h for h in holding))


def test_an_epoch_draws_every_answer_window_and_a_share_of_the_others():
    pytest.importorskip("torch")
    finetune_span = _import_recipe()[1]
    windows = [finetune_span.Window(i // 4, np.zeros(3, dtype=np.int64), 2, 0, 1, *((2, 2) if i % 4 == 0 else (0, 0)))
               for i in range(400)]
    holding = {i for i, w in enumerate(windows) if w.start_label}
    rng = random.Random(0)
    assert sorted(finetune_span.epoch_order(windows, 1.0, rng)) == list(range(400))
    assert sorted(finetune_span.epoch_order(windows, 0.0, rng)) == sorted(holding)
    first, second = (finetune_span.epoch_order(windows, 0.3, rng) for _ in range(2))
    for drawn in (first, second):
        others = set(drawn) - holding
        assert holding <= set(drawn) and len(drawn) == len(set(drawn)) and 60 <= len(others) <= 120
    assert set(first) != set(second) and first != sorted(first)    # drawn afresh, and shuffled


def _toy_checkpoint(torch, path: Path, recipe_model, chars: str) -> None:
    """A pretraining checkpoint as pretrain.py saves one (the fields fine-tuning reads), of a
    random 2 x 32 encoder over ``chars``."""
    config = recipe_model.EncoderConfig(vocab_size=len(SPECIAL_TOKENS) + len(chars), hidden_size=32, num_layers=2,
                                        num_heads=4, ffn_size=64, max_len=128)
    torch.manual_seed(0)
    encoder = recipe_model.Encoder(config)
    torch.save({"config": {"encoder": config.__dict__, "objective": "mlm"}, "step": 0, "tokens": 0,
                "model": {f"encoder.{k}": v for k, v in encoder.state_dict().items()},
                "vocab": [*SPECIAL_TOKENS, *chars]}, path)


def _classifier_recipe():
    """``pretraining.finetune_classifier`` and ``pretraining.model`` (where PyTorch is installed)."""
    sys.path.insert(0, str(ROOT))
    try:
        from pretraining import finetune_classifier
        from pretraining import model as recipe_model
    finally:
        sys.path.remove(str(ROOT))
    return finetune_classifier, recipe_model


def _saved_classifier(torch, path: Path):
    """The fine-tuned model that ``--checkpoint`` saved, in eval mode."""
    finetune_classifier, recipe_model = _classifier_recipe()
    saved = torch.load(path, weights_only=True)
    model = finetune_classifier.Classifier(recipe_model.EncoderConfig(**{**saved["config"], "dropout": 0.0}))
    model.load_state_dict(saved["model"])
    return model.eval(), CharVocab(saved["vocab"])


def _write_tsv(path: Path, header: list[str], rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")


@pytest.mark.timeout(300)
def test_classifier_fine_tuning_learns_a_toy_rule_and_reports_every_split(tmp_path):
    torch = pytest.importorskip("torch")
    finetune_classifier, recipe_model = _classifier_recipe()
    rng = random.Random(5)
    filler = "房间服务价格味道质量这个还是有点的了"
    _toy_checkpoint(torch, tmp_path / "checkpoint.pt", recipe_model, filler + "好差")

    def review():   # the label is which of 好 / 差 the text holds: learnable from one char
        label = rng.randint(0, 1)
        chars = [rng.choice(filler) for _ in range(rng.randint(3, 12))]
        chars.insert(rng.randint(0, len(chars)), "好" if label else "差")
        return label, "".join(chars)

    data = tmp_path / "sentiment"
    for name in ("chnsenticorp", "online_shopping_10_cats", "waimai_10k"):
        for split, count in (("train", 120), ("dev", 40), ("test", 40)):
            _write_tsv(data / name / f"{split}.tsv", ["label", "text"], [review() for _ in range(count)])
    out = tmp_path / "package"
    assert finetune_classifier.main(["sentiment", "--encoder", str(tmp_path / "checkpoint.pt"), "--data-dir", str(data),
                                     "--out", str(out), "--epochs", "6", "--lr", "2e-3", "--batch-size", "16",
                                     "--max-chars", "100", "--threads", "1", "--checkpoint", str(tmp_path / "model.pt")]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    splits = [f"{n}/{s}" for n in ("chnsenticorp", "online_shopping_10_cats", "waimai_10k") for s in ("dev", "test")]
    assert set(manifest["metrics"]) == {*splits, "suite_negation", "suite_contrast", "suite_slang"}
    assert manifest["training"]["items"] == 360 and "threshold" not in manifest
    assert manifest["task"] == "sentiment_analysis" and manifest["labels"] == ["negative", "positive"]
    assert min(manifest["metrics"][s] for s in splits) >= 0.9, manifest["metrics"]

    # The package Paddle runs is the fine-tuned model: through Taskflow it gives PyTorch's probabilities.
    model, vocab = _saved_classifier(torch, tmp_path / "model.pt")
    inputs = finetune_classifier.Inputs(vocab, 100)
    texts = ["房间好", "房间差", "价格有点好的了", "服务还是差"]
    probabilities = finetune_classifier.positive_probability(model, inputs, texts)
    assert probabilities[0] > 0.5 > probabilities[1]
    results = Taskflow("sentiment_analysis", task_path=str(out), return_all_scores=True)(texts)
    np.testing.assert_allclose([r["scores"]["positive"] for r in results], probabilities, atol=TOLERANCE, rtol=0)

    # A second stage (--init) starts from the package's encoder and head, not the bare encoder's ...
    saved_config = torch.load(tmp_path / "model.pt", weights_only=True)["config"]
    restored = finetune_classifier.Classifier(recipe_model.EncoderConfig(**{**saved_config, "dropout": 0.0}))
    finetune_classifier.load_package_weights(restored, out, vocab)
    np.testing.assert_allclose(finetune_classifier.positive_probability(restored.eval(), inputs, texts), probabilities,
                               atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="vocab.txt"):
        finetune_classifier.load_package_weights(restored, out, CharVocab([*SPECIAL_TOKENS, *filler, "差", "好"]))
    # ... and trains statements of fact towards equal probabilities beside the labelled texts: at a
    # vanishing learning rate it scores what the first stage scored.
    from recipes.sentiment_analysis.augment import fact_sentences

    second = tmp_path / "second"
    assert finetune_classifier.main(["sentiment", "--encoder", str(tmp_path / "checkpoint.pt"), "--data-dir", str(data),
                                     "--out", str(second), "--init", str(out), "--augment", "--augment-kinds",
                                     "no_opinion", "--epochs", "0.2", "--lr", "1e-12", "--batch-size", "16",
                                     "--max-chars", "100", "--threads", "1"]) == 0
    staged = json.loads((second / "manifest.json").read_text(encoding="utf-8"))
    assert staged["training"]["items"] == 360 + len(fact_sentences())
    assert {s: staged["metrics"][s] for s in splits} == {s: manifest["metrics"][s] for s in splits}


def test_sentiment_augmentation_is_sized_by_augment_scale_as_the_char_recipe_sizes_it(tmp_path):
    pytest.importorskip("torch")
    finetune_classifier = _classifier_recipe()[0]
    from recipes.sentiment_analysis.train import augmented, read_statements

    data = tmp_path / "sentiment"
    reviews = [(1, "这家店的服务很好，菜也好吃"), (0, "房间太小了，隔音也差"), (1, "物流很快，质量不错"), (0, "味道一般，价格偏贵")]
    for name in ("chnsenticorp", "online_shopping_10_cats", "waimai_10k"):
        for split in ("train", "dev", "test"):
            _write_tsv(data / name / f"{split}.tsv", ["label", "text"], reviews * 5)
    statements = tmp_path / "questions.tsv"
    _write_tsv(statements, ["text_a", "text_b", "label"],
               [(f"花呗第{i}期怎么还款", f"借呗额度{i}元怎么提升", 0) for i in range(40)])

    def made(*options):
        args = finetune_classifier.parse_args(["sentiment", "--encoder", "x", "--data-dir", str(data), "--out",
                                               str(tmp_path / "out"), "--augment", *options])
        return len(finetune_classifier.sentiment_data(args)[0]) - 60

    kinds = "negation,contrast,slang,no_opinion"
    whole, half = (made("--augment-kinds", kinds, "--neutral-text", str(statements), "--augment-scale", scale)
                   for scale in ("1", "0.5"))
    assert 0 < half < whole
    texts, labels = [t for _, t in reviews * 15], [y for y, _ in reviews * 15]
    assert half == len(augmented(texts, labels, kinds.split(","), seed=0, scale=0.5,
                                 statements=read_statements([statements], 1500))[0])
    with pytest.raises(SystemExit):
        made("--augment-scale", "0")


@pytest.mark.timeout(300)
def test_pair_fine_tuning_writes_a_cross_encoder_package_that_taskflow_runs_as_pytorch_scores(tmp_path):
    torch = pytest.importorskip("torch")
    finetune_classifier, recipe_model = _classifier_recipe()
    rng = random.Random(6)
    chars = "怎么修改微信密码明天气如何用卡还款酒店几点退房快递多久能到"
    _toy_checkpoint(torch, tmp_path / "checkpoint.pt", recipe_model, chars + "呢")

    def pair():
        text = "".join(rng.choice(chars) for _ in range(rng.randint(3, 8)))
        label = rng.randint(0, 1)
        return text, text[::-1] if label else "".join(rng.choice(chars) for _ in range(len(text))), label

    data = tmp_path / "matching"
    for relative, count in {"bq_corpus/train.tsv": 60, "afqmc/train.tsv": 30, "lcqmc/dev.tsv": 30,
                            "bq_corpus/dev.tsv": 20, "lcqmc/test.tsv": 20, "bq_corpus/test.tsv": 20,
                            "afqmc/dev.tsv": 20}.items():
        _write_tsv(data / relative, ["text_a", "text_b", "label"], [pair() for _ in range(count)])
    out = tmp_path / "pairs"
    assert finetune_classifier.main(["similarity", "--encoder", str(tmp_path / "checkpoint.pt"), "--data-dir", str(data),
                                     "--out", str(out), "--epochs", "1", "--batch-size", "16", "--threads", "1",
                                     "--lcqmc-held-out", "10", "--checkpoint", str(tmp_path / "model.pt")]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["task"] == "text_similarity" and 0.0 <= manifest["threshold"] <= 1.0
    assert manifest["normalization"] == ["t2s", "width", "lower", "strip"]
    assert {"lcqmc_dev_held_out", "bq_dev", "lcqmc_test", "bq_test", "afqmc_dev"} <= set(manifest["metrics"])
    # The everyday contrast set is scored whole and per kind, each kind's share weighing into the whole.
    contrast = [r for r in map(json.loads, (ROOT / "recipes/text_similarity/dev/contrast_dev.jsonl").open(encoding="utf-8"))]
    kinds = {r["kind"] for r in contrast}
    assert {"contrast_dev", *(f"contrast_dev/{k}" for k in kinds)} <= set(manifest["metrics"])
    whole = sum(manifest["metrics"][f"contrast_dev/{k}"] * sum(r["kind"] == k for r in contrast) for k in kinds)
    assert abs(whole / len(contrast) - manifest["metrics"]["contrast_dev"]) < 1e-3

    model, vocab = _saved_classifier(torch, tmp_path / "model.pt")
    inputs = finetune_classifier.Inputs(vocab, 62, finetune_classifier.READING["similarity"])
    pairs = [("怎么修改微信密码？", "微信密码怎么改"), ("明天天气如何", "信用卡还款呢"), ("酒店几点退房", "快递多久能到")]
    expected = finetune_classifier.positive_probability(model, inputs, pairs)
    results = Taskflow("text_similarity", task_path=str(out))(pairs)
    np.testing.assert_allclose([r["similarity"] for r in results], expected, atol=TOLERANCE, rtol=0)

    # OCNLI's contradictions join as label 0 (its entailments and neutrals stay out), and the
    # generated kinds are the ones named, as in the fast recipe.
    _write_tsv(data / "ocnli" / "train.tsv", ["text_a", "text_b", "label", "genre"],
               [("他明天去北京", "他明天不去北京", "contradiction", "news"), ("我们赢了", "我们输了", "contradiction", "news"),
                ("天气很好", "天气不错", "entailment", "news"), ("她在读书", "她喜欢猫", "neutral", "news")])

    def training(*options):
        args = finetune_classifier.parse_args(["similarity", "--encoder", "x", "--data-dir", str(data), "--out",
                                               str(tmp_path / "unused"), "--lcqmc-held-out", "10", *options])
        return finetune_classifier.similarity_data(args)[0]

    plain, with_ocnli = training(), training("--ocnli")
    assert len(with_ocnli) == len(plain) + 2
    assert sorted(set(with_ocnli) - set(plain)) == [(("他明天去北京", "他明天不去北京"), 0), (("我们赢了", "我们输了"), 0)]
    with pytest.raises(SystemExit):
        finetune_classifier.parse_args(["sentiment", "--encoder", "x", "--data-dir", str(data), "--out", "o", "--ocnli"])
    with pytest.raises(SystemExit):     # --kinds names what --hard-negatives generates
        training("--kinds", "antonym")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_gpu_script_pretrains_packs_and_brings_the_checkpoint_back_within_eight_files(tmp_path):
    """pretraining/gpu_finetune.sh with ONLY=pretrain, on the CPU: the resumed checkpoint reaches STEPS
    and comes back as tar pieces that unpack to it; a piece that would make a ninth file stays behind
    (a GPU command brings back at most 8 files: a checkpoint was once lost to that count)."""
    torch = pytest.importorskip("torch")
    portable, pretrain, vocab_recipe = (_import_recipe()[i] for i in (2, 3, 4))
    corpus = [str(p) for p in _write_corpus(tmp_path)]
    vocab_recipe.main(["--corpus", *corpus, "--out", str(tmp_path / "vocab.txt"), "--size", "400", "--min-count", "1"])
    assert pretrain.main(["--corpus", *corpus, "--vocab", str(tmp_path / "vocab.txt"), "--out", str(tmp_path / "run"),
                          "--layers", "1", "--hidden", "32", "--heads", "4", "--ffn", "64", "--max-len", "40",
                          "--seq-len", "32", "--batch-size", "8", "--warmup-steps", "2", "--total-steps", "4",
                          "--threads", "1", "--heldout", "8"]) == 0
    portable.pack(tmp_path / "run" / "checkpoint.pt", tmp_path / "packed")

    def run_script(out: Path, work: Path) -> str:
        env = {**os.environ, "OUT": str(out), "W": str(work), "PY": sys.executable, "ONLY": "pretrain",
               "CHECKPOINT": str(tmp_path / "packed"), "CORPUS": " ".join(corpus), "STEPS": "6",
               "DEVICE": "cpu", "DATA": str(tmp_path / "no_data"), "PYTHONPATH": str(ROOT)}
        done = subprocess.run(["bash", "pretraining/gpu_finetune.sh"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = tmp_path / "out"
    assert "brought back: mlm" in run_script(out, tmp_path / "w1")
    assert sorted(p.name for p in out.iterdir()) == ["mlm.tar.aa", "pretrain.log"]
    with tarfile.open(fileobj=io.BytesIO((out / "mlm.tar.aa").read_bytes())) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    portable.unpack(tmp_path / "back" / "mlm", tmp_path / "back" / "checkpoint.pt")
    assert torch.load(tmp_path / "back" / "checkpoint.pt", weights_only=False)["step"] == 6

    full = tmp_path / "full"
    full.mkdir()
    for i in range(7):   # with the run's own log, eight files are there before the piece
        (full / f"earlier.{i}").write_text("x")
    assert "left in" in run_script(full, tmp_path / "w2")
    assert not list(full.glob("mlm.tar.*"))


def test_corpus_shards_hold_a_part_s_ids_and_refuse_a_damaged_piece_or_another_vocabulary(tmp_path):
    from pretraining import shards
    from pretraining.data import load_part, read_piece, vocab_digest

    corpus = tmp_path / "part.txt.gz"
    documents = [f"第{i}篇文档。它讲的是天气和城市，ABC {i}。" * (1 + i % 4) for i in range(300)]
    with gzip.open(corpus, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(documents) + "\n")
    chars = sorted({c for d in documents for c in d.lower()})
    vocab_file = tmp_path / "vocab.txt"
    vocab = CharVocab([*SPECIAL_TOKENS, *chars])
    vocab.save(vocab_file)
    out = tmp_path / "shards"
    # Pieces of ~2,000 ids: several, each ending after a document's [SEP].
    assert shards.main(["--corpus", str(corpus), "--vocab", str(vocab_file), "--out", str(out),
                        "--piece-mib", str(2000 * 1.1 / 1048576)]) == 0
    pieces = sorted(out.glob("*.u16.xz"))
    assert len(pieces) > 2
    whole = load_part(corpus, vocab, segmenter=None, cache_dir=None, log=lambda _: None).ids
    read = [load_part(p, vocab, segmenter=None, cache_dir=None, log=lambda _: None).ids for p in pieces]
    assert all(ids[-1] == SEP for ids in read)
    np.testing.assert_array_equal(np.concatenate(read), whole)

    with pytest.raises(ValueError, match="tokenised with vocabulary"):
        read_piece(pieces[0], vocab_digest(CharVocab([*SPECIAL_TOKENS, *chars[:-1]])))
    damaged = bytearray(pieces[1].read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    pieces[1].write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="sha256 differs"):
        read_piece(pieces[1])
    with pytest.raises(ValueError, match="whole-word masking needs the text"):
        load_part(pieces[0], vocab, segmenter="jieba", cache_dir=None)
