"""The model layer: packages found by name, networks by architecture type, normalisation by manifest."""

import contextlib
import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import warnings
import weakref

import numpy as np
import pytest

from taskflow import Taskflow
from taskflow import packages
from taskflow.errors import CacheWriteError, ChecksumError, ManifestError
from taskflow.manifest import Manifest
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


# ------------------------------------------------ weights read once, checked as read

def _scores(flow, texts=("这家酒店很干净，服务也好", "等了一个小时还没上菜", "好")):
    return [r["score"] for r in flow(list(texts))]


def test_weights_swapped_after_verification_are_refused_not_built_or_exported(tiny_models, tmp_path):
    from make_tiny_models import make_tiny_sentiment

    genuine = tmp_path / "genuine"
    shutil.copytree(tiny_models["sentiment_analysis"], genuine)
    other = make_tiny_sentiment(tmp_path / "other", seed=1)      # same network, other weights
    package, home = tmp_path / "package", tmp_path / "home"
    shutil.copytree(genuine, package)
    expected = _scores(Taskflow("sentiment_analysis", task_path=genuine, home=tmp_path / "reference"))
    assert expected != _scores(Taskflow("sentiment_analysis", task_path=other, home=tmp_path / "reference"))

    flow = Taskflow("sentiment_analysis", task_path=package, home=home)       # verified here
    shutil.copyfile(other / "weights.npz", package / "weights.npz")           # written again before the first call
    with pytest.raises(ChecksumError, match=r"weights\.npz has sha256 .* changed after the package was verified"):
        flow(["好"])
    assert not list((home / "taskflow" / ".exports").glob("*/inference.*")), "an export was made from the swapped file"
    shutil.copyfile(genuine / "weights.npz", package / "weights.npz")
    assert _scores(flow) == pytest.approx(expected, abs=1e-6)
    assert _scores(Taskflow("sentiment_analysis", task_path=package, home=home)) == pytest.approx(expected, abs=1e-6)


def test_an_export_not_stamped_with_the_weights_it_was_built_from_is_made_again(tiny_models, tmp_path):
    """An export that an older taskflow made from weights swapped in after verification, under the
    genuine package's key: its stamp names the key and its own files, not the weights it was built
    from, so it is exported again from the verified weights rather than run."""
    from make_tiny_models import make_tiny_sentiment

    genuine = tiny_models["sentiment_analysis"]
    other = make_tiny_sentiment(tmp_path / "other", seed=1)
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    expected = _scores(Taskflow("sentiment_analysis", task_path=genuine, home=home))
    swapped = _scores(Taskflow("sentiment_analysis", task_path=other, home=scratch))
    assert expected != swapped
    exports = lambda root: [p for p in (root / "taskflow" / ".exports").iterdir() if not p.name.startswith(".")]
    (export,), (foreign,) = exports(home), exports(scratch)
    stamp = json.loads((export / "export.json").read_text(encoding="utf-8"))
    for name in stamp["files"]:
        shutil.copyfile(foreign / name, export / name)
    files = {name: hashlib.sha256((export / name).read_bytes()).hexdigest() for name in stamp["files"]}
    (export / "export.json").write_text(json.dumps({"key": stamp["key"], "files": files}), encoding="utf-8")

    assert _scores(Taskflow("sentiment_analysis", task_path=genuine, home=home)) == pytest.approx(expected, abs=1e-6)
    assert json.loads((export / "export.json").read_text(encoding="utf-8"))["built_from"] == {
        "weights.npz": Manifest.load(genuine / "manifest.json").files["weights.npz"]["sha256"]}


# --------------------------------------------------------- models shared in a process

def test_taskflows_on_one_package_share_its_model_and_predictor_while_one_lives(tiny_models, tmp_path):
    tiny, home = tiny_models["sentiment_analysis"], tmp_path / "home"
    first = Taskflow("sentiment_analysis", task_path=tiny, home=home)
    expected = _scores(first)
    for _ in range(20):        # a server or a notebook building the same pipeline again and again
        flow = Taskflow("sentiment_analysis", task_path=tiny, home=home, return_all_scores=False)
        assert _scores(flow) == expected
        assert flow.model is first.model and flow.task.predictor is first.task.predictor
    assert list(first.task.predictor._roots) == [True]       # one Paddle predictor made for all 21
    threads = Taskflow("sentiment_analysis", task_path=tiny, home=home, num_threads=1)
    assert threads.model is not first.model and threads.task.predictor is not first.task.predictor
    assert _scores(threads) == pytest.approx(expected, abs=1e-6)
    # Shared only while alive: the process does not keep models nobody holds.
    model = weakref.ref(first.model)
    del first, flow
    gc.collect()
    assert model() is None


def test_a_shared_predictor_runs_concurrent_calls_on_clones_from_a_pool(tiny_models, tmp_path):
    tiny, home = tiny_models["sentiment_analysis"], tmp_path / "home"
    texts = [f"这家酒店很干净，服务也好{'好' * i}" for i in range(12)]
    expected = [_scores(Taskflow("sentiment_analysis", task_path=tiny, home=home), [t]) for t in texts]
    flows = [Taskflow("sentiment_analysis", task_path=tiny, home=home) for _ in range(4)]
    predictor = flows[0].task.predictor
    assert len({id(f.task.predictor) for f in flows}) == 1
    got, used = {}, set()
    barrier = threading.Barrier(len(flows))
    checked_out = predictor._checked_out

    @contextlib.contextmanager
    def watched(small):
        with checked_out(small) as bound:
            used.add(id(bound[0]))
            barrier.wait(timeout=30) if len(used) <= len(flows) and not barrier.broken else None
            yield bound

    def work(k):
        for i in range(k, len(texts), len(flows)):
            got[i] = _scores(flows[k], [texts[i]])

    predictor._checked_out = watched
    workers = [threading.Thread(target=work, args=(k,)) for k in range(len(flows))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    del predictor._checked_out
    assert [got[i] for i in range(len(texts))] == [pytest.approx(e, abs=1e-6) for e in expected]
    assert len(used) == len(flows)       # four calls at once ran on four Paddle predictors, none shared


def test_new_threads_reuse_idle_predictors_instead_of_making_their_own(tiny_models, tmp_path):
    tiny, home = tiny_models["sentiment_analysis"], tmp_path / "home"
    flow = Taskflow("sentiment_analysis", task_path=tiny, home=home)
    flow(["好吃"])
    predictor = flow.task.predictor
    seen = set()

    def call():
        with predictor._checked_out(True) as bound:
            seen.add(id(bound[0]))
        flow(["服务很好"])

    for _ in range(30):                   # a thread per request, one after another
        thread = threading.Thread(target=call)
        thread.start()
        thread.join()
    assert len(seen) == 1, "each new thread took the warm predictor, none made its own"
    assert len(predictor._idle[True]) == 1


# ------------------------------------------------------ a cache folder behind a symlink

def test_a_task_folder_moved_behind_a_symlink_is_read_and_written_through_it(resources, tiny_models, tmp_path):
    tiny = tiny_models["sentiment_analysis"]
    _bundle(resources, tiny, "sentiment_analysis", "linked")
    home, disk = tmp_path / "home", tmp_path / "other_disk" / "sentiment_analysis"
    disk.mkdir(parents=True)
    (home / "taskflow").mkdir(parents=True)
    (home / "taskflow" / "sentiment_analysis").symlink_to(disk, target_is_directory=True)

    flow = Taskflow("sentiment_analysis", model="linked", home=home)    # only the bundled copy is read
    assert flow.model.source == "bundled"
    assert _scores(flow) == pytest.approx(_scores(Taskflow("sentiment_analysis", task_path=tiny)), abs=1e-6)
    assert list(disk.glob("linked/*/static/*/inference.pdiparams"))     # its export went through the link
    cached = packages.copy_to_cache(flow.model.package, home)
    assert cached.source == "cache" and (disk / "linked" / cached.manifest.version / "weights.npz").is_file()
    assert packages.resolve("sentiment_analysis", "linked", home=home).source == "cache"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="giving a symlink another owner needs root")
def test_a_symlink_another_user_made_in_the_cache_is_read_through_but_never_written_through(resources, tiny_models,
                                                                                            tmp_path):
    tiny = tiny_models["sentiment_analysis"]
    _bundle(resources, tiny, "sentiment_analysis", "planted")
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "taskflow").mkdir(parents=True)
    link = home / "taskflow" / "sentiment_analysis"
    link.symlink_to(elsewhere, target_is_directory=True)
    os.lchown(link, 4242, 4242)

    model = Model.load("sentiment_analysis", "planted", home=home)
    assert model.source == "bundled"
    with pytest.raises(CacheWriteError, match="owned by uid 4242"):
        packages.copy_to_cache(model.package, home)
    with pytest.warns(RuntimeWarning, match="owned by uid 4242"):
        assert elsewhere not in model.export_dir().parents
    assert list(elsewhere.iterdir()) == []
