"""Models: what a task runs.

A :class:`Model` is a resolved package (manifest + verified files, see
:mod:`taskflow.packages`), the network its manifest's ``architecture`` names,
the models it builds on (the manifest's ``requires``), the text normalisation
it was trained with, and — made on first use — its Paddle Inference
predictor with the static export cached beside the package.

``Taskflow`` resolves models (``task_path``, cache, bundled, download; home
and offline setting) with :meth:`Model.load` and hands the model to the task;
the task only prepares inputs for it and reads its outputs.

Networks are found by name: ``architecture.type`` in the manifest is looked up
in one registry that each task package fills with :func:`register_network`
(the class itself is imported only when a network is built, so Paddle loads
only then).  A new model of an existing architecture is therefore a package
folder and no code.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import threading
import warnings
import weakref
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

from .cache import held_package
from .errors import ChecksumError, ManifestError
from .files import home_dir
from .manifest import MANIFEST, Manifest, ModelPackage, inside
from .packages import cache_dir, cache_link_problem, resolve
from .predictor import InputSpec, Predictor, PredictorOptions, check_device, network_options
from .text import Normalizer, t2s_table
from .weights import load_weights

__all__ = ["Model", "register_network", "network_class", "network_types"]

T = TypeVar("T")

# ---------------------------------------------------------------- networks
# architecture type -> "module:attribute"; imported on first use.
_NETWORKS: dict[str, str] = {
    # Networks of the core, shared by tasks (task packages register their own when imported).
    "transformer_encoder": "taskflow.encoder.network:TransformerEncoder",
    "transformer_span": "taskflow.encoder.network:TransformerSpanExtractor",
    "transformer_classifier": "taskflow.encoder.network:TransformerClassifier",
}


def register_network(type_name: str, target: str) -> None:
    """Name a network class for manifests: ``register_network("bigru_crf",
    "taskflow.tasks.lexical_analysis.model:LexicalNet")``.  The module is imported
    only when a network of that type is built."""
    owner = _NETWORKS.get(type_name)
    if owner is not None and owner != target:
        raise ManifestError(f"network type {type_name!r} already names {owner}; cannot also name {target}")
    _NETWORKS[type_name] = target


def network_types() -> list[str]:
    """Every registered network type (task packages register theirs when imported)."""
    from .registry import load_all_tasks

    load_all_tasks()
    return sorted(_NETWORKS)


def network_class(type_name: str) -> type:
    """The class registered under ``type_name``."""
    if type_name not in _NETWORKS:
        from .registry import load_all_tasks

        load_all_tasks()   # a package may run a network another task registers
    if type_name not in _NETWORKS:
        raise ManifestError(
            f"unknown architecture type {type_name!r}; known types: {', '.join(sorted(_NETWORKS)) or 'none'}"
        )
    from .registry import import_task_module

    module, _, attribute = _NETWORKS[type_name].partition(":")
    return getattr(import_task_module(module), attribute)   # under the registry's lock, as task packages are


# ------------------------------------------------------------------ models
WEIGHTS = "weights.npz"

# Predictors alive in this process, by what decides what they compute and how they run: the export
# key (the whole manifest, pinned hashes included, the network's source and the feeds), the export
# folder, the options (device, precision, threads, oneDNN...) and the feeds' spec.  A Taskflow built
# again on the same package (a server building one per request, a loop in a notebook) shares the
# predictor of one still alive instead of making another: each Paddle Inference predictor holds a
# program, its weights and oneDNN's kernels (sentiment_analysis grew by 2.3 MB per construction
# and first call, 200 of them, when each made its own).  A predictor is as safe shared
# as owned: each thread runs its own clone (see Predictor), so two Taskflows on one predictor in two
# threads never share Paddle's scratch tensors.  Weak values: it goes when the last model using it
# goes.  Only packages verified on resolution get here, so a shared predictor never outlives a
# package whose files changed: resolving that package again fails first.
_SHARED_PREDICTORS: "weakref.WeakValueDictionary[tuple, Predictor]" = weakref.WeakValueDictionary()
# Models alive in this process, likewise (Model.load hands out the one alive for the same package,
# options, home and required models), so the vocabularies and tables a model reads once are read
# once per process, not once per Taskflow (1.7 MB for each sentiment_analysis Taskflow kept alive).
# A model holds nothing a caller changes: what differs per Taskflow lives in its task.
_SHARED_MODELS: "weakref.WeakValueDictionary[tuple, Model]" = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()

class Model:
    """A resolved model package with its network, predictor and required models; the manifest
    alone says which network (``architecture.type``) and which normalisation (``normalization``)."""

    def __init__(
        self,
        package: ModelPackage,
        *,
        options: PredictorOptions | None = None,
        home: str | os.PathLike | None = None,
        requires: Mapping[str, "Model"] | None = None,
    ):
        self.package = package
        self.manifest: Manifest = package.manifest
        self.options = options or PredictorOptions()
        self.home = home
        self.requires = dict(requires or {})
        self._predictors: dict[tuple[InputSpec, ...], Predictor] = {}
        self._vocabs: dict[Callable, object] = {}
        self._lock = threading.Lock()

    # --------------------------------------------------------- resolution
    @classmethod
    def load(
        cls,
        task: str,
        name: str | None,
        *,
        task_path: str | os.PathLike | None = None,
        home: str | os.PathLike | None = None,
        offline: bool | None = None,
        options: PredictorOptions | None = None,
        progress: bool | None = None,
    ) -> "Model":
        """Resolve ``task``/``name`` (or ``task_path``) and, recursively, the packages it ``requires``,
        all with the same home, offline setting and predictor options."""
        return cls._load(task, name, task_path=task_path, home=home, offline=offline,
                         options=options or PredictorOptions(), progress=progress, chain=())

    @classmethod
    def _load(cls, task, name, *, task_path, home, offline, options, progress, chain: tuple) -> "Model":
        """:meth:`load`, with ``chain``: the packages that require this one, outermost first (a package
        met again in its own chain is a cycle of ``requires``, refused before it is resolved again)."""
        check_device(options)
        key = str(Path(task_path).resolve()) if task_path is not None else f"{task}/{name}"
        if key in chain:
            cycle = " -> ".join([*chain[chain.index(key):], key])
            raise ManifestError(f"the packages' 'requires' form a cycle ({cycle}); a package cannot build on "
                                "itself: fix the 'requires' of one of them")
        # A cached package is held (a shared lock) while its model lives: `taskflow cache prune` keeps it.
        package, in_use = held_package(lambda: resolve(task, name, task_path=task_path, home=home, offline=offline,
                                                       progress=progress), home)
        requires = {}
        for role, ref in dict(package.manifest.get("requires", {})).items():
            ref = str(ref)
            if ref.startswith("."):   # a package shipped inside this one, and nowhere else
                path = inside(package.directory, package.directory / ref, f"required package {role!r}").resolve()
                requires[role] = cls._load(Manifest.load(path / MANIFEST).task, None, task_path=path, home=home,
                                           offline=offline, options=options, progress=progress, chain=(*chain, key))
            else:
                required_task, _, required_name = ref.rpartition("/")
                requires[role] = cls._load(required_task, required_name, task_path=None, home=home, offline=offline,
                                           options=options, progress=progress, chain=(*chain, key))
        # The same package, options, home and required models as a model still alive: that model
        # (see _SHARED_MODELS); the ids of the required models are theirs while it holds them.
        shared = (cls, str(package.directory), package.source, package.manifest.digest(), options,
                  str(home_dir(home)), tuple((role, id(model)) for role, model in sorted(requires.items())))
        with _SHARED_LOCK:
            model = _SHARED_MODELS.get(shared)
            if model is None:
                model = _SHARED_MODELS[shared] = cls(package, options=options, home=home, requires=requires)
                in_use.keep_while(model)
        in_use.close()   # a model alive already holds the package
        return model

    # ------------------------------------------------------------ package
    task = property(lambda self: self.manifest.task)
    name = property(lambda self: self.manifest.name)
    version = property(lambda self: self.manifest.version)
    source = property(lambda self: self.package.source)

    @property
    def fingerprint(self) -> str:
        """A sha256 over what makes this model compute what it computes: its whole manifest (the
        files' sha256s, architecture, labels, normalisation...) and the fingerprints of the models
        it requires.  Where it came from (task_path, cache, bundle) is not part of it."""
        blob = json.dumps({"manifest": self.manifest.data,
                           "requires": {role: model.fingerprint for role, model in self.requires.items()}},
                          sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def path(self, name: str) -> Path:
        """A file of the package, by its manifest name."""
        return self.package.path(name)

    def required(self, role: str) -> "Model":
        """The model this one builds on in ``role`` (its manifest's ``requires``)."""
        try:
            return self.requires[role]
        except KeyError:
            raise ManifestError(
                f"model {self.name!r} names no required model {role!r} (its requires: "
                f"{', '.join(self.requires) or 'none'}); add it to the manifest's 'requires'"
            ) from None

    def ensemble(self) -> list[tuple[str, "Model"]]:
        """``(role, model)`` for each model the manifest's ``ensemble`` lists (roles of its
        ``requires``): networks that run beside this one on every input, their outputs combined
        by the task (e.g. averaged probabilities); empty for a single network."""
        roles = self.manifest.get("ensemble", [])
        if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
            raise ManifestError(f"model {self.name!r}: 'ensemble' must be a list of roles of its 'requires' "
                                f"(e.g. [\"word_reader\"]); got {roles!r}")
        return [(role, self.required(role)) for role in roles]

    # ------------------------------------------------------ preprocessing
    # The package's own files, read here and nowhere else (as a tokenizer reads its vocabulary), so
    # a task never names a file: what the manifest pins is what runs.

    @property
    def normalizer(self) -> Normalizer:
        """The text normalisation the model was trained with (manifest ``normalization``)."""
        spec = self.manifest.get("normalization")
        if spec is None:
            raise ManifestError(f"model {self.name!r} does not say its 'normalization' (e.g. [\"width\", \"lower\"])")
        try:
            normalizer = Normalizer(spec)
        except ValueError as exc:
            raise ManifestError(f"model {self.name!r}: {exc}") from None
        if "t2s" in normalizer.steps:
            t2s_table(self.home)      # its file under this model's cache home, not the default one
        return normalizer

    @functools.cached_property
    def labels(self) -> tuple:
        """The network's output labels, in output order (manifest ``labels``)."""
        labels = self.manifest.get("labels")
        if not isinstance(labels, (list, tuple)) or not labels:
            raise ManifestError(f"model {self.name!r} lists no 'labels' (the network's outputs, in order), "
                                f"got {labels!r}; add them to its manifest")
        return tuple(labels)

    @property
    def vocab_file(self) -> Path:
        """The vocabulary the manifest pins: its one file named ``vocab.*`` (``vocab.json``, ``vocab.txt``)."""
        names = [name for name in self.manifest.files if name.partition(".")[0] == "vocab"]
        if len(names) != 1:
            found = f"{len(names)} ({', '.join(names)})" if names else "none"
            raise ManifestError(f"model {self.name!r} needs one vocabulary file named vocab.* (vocab.json, vocab.txt) "
                                f"in its manifest's 'files'; it lists {found} among {', '.join(self.manifest.files)}")
        return self.path(names[0])

    def vocab(self, load: Callable[[Path], T]) -> T:
        """The vocabulary read by ``load``, the task's reader of its format (e.g. ``Vocab.load``),
        from :attr:`vocab_file`; read once per reader and shared by every task that runs this model."""
        with self._lock:
            if load not in self._vocabs:
                path = self.vocab_file
                try:
                    vocab = load(path)
                except (ValueError, KeyError, TypeError) as exc:   # JSON, UTF-8 and layout errors alike
                    raise ManifestError(f"model {self.name!r}: cannot read its vocabulary {path}: "
                                        f"{type(exc).__name__}: {exc}") from exc
                self._check_vocab_size(vocab, path)
                self._vocabs[load] = vocab
            return self._vocabs[load]

    def _check_vocab_size(self, vocab, path: Path) -> None:
        """A vocabulary longer than the network's embedding would give ids it has no row for."""
        architecture = self.manifest.get("architecture") or {}
        if hasattr(vocab, "char_list"):   # taskflow.text.Vocab: chars and words
            sizes = {"vocab_size": len(vocab.char_list), "word_vocab_size": len(vocab.word_list)}
        else:
            try:
                sizes = {"vocab_size": len(vocab)}
            except TypeError:
                return
        for field, size in sizes.items():
            limit = architecture.get(field)
            if type(limit) is int and size > limit:
                raise ManifestError(f"model {self.name!r}: its vocabulary {path} has {size:,} entries but the network "
                                    f"embeds {limit:,} (architecture {field!r}); the vocabulary and the weights are "
                                    "from different trainings, or the manifest's size is wrong")

    # ------------------------------------------------------------ network
    @property
    def network_type(self) -> str:
        architecture = self.manifest.get("architecture")
        kind = architecture.get("type") if isinstance(architecture, Mapping) else None
        if not kind:
            raise ManifestError(f"model {self.name!r} has no network: its manifest's architecture names no 'type'")
        return kind

    def network_class(self) -> type:
        return network_class(self.network_type)

    def build_network(self):
        """The network with the package's ``weights.npz`` loaded, in eval mode (from the bytes
        :meth:`weights_bytes` read and checked)."""
        arguments = {k: v for k, v in dict(self.manifest["architecture"]).items() if k != "type"}
        network = self.network_class()(**arguments)
        load_weights(network, self.path(WEIGHTS), self.weights_bytes())
        network.eval()
        return network

    def weights_bytes(self) -> bytes:
        """The bytes of ``weights.npz``, read once and hashed as read: they are what the network is
        built from, so only bytes with the sha256 the manifest pins are ever built into a network or
        a static export.  The package was verified when it was resolved, but the weights are read
        later (at the first call, when the export is made): a file written again meanwhile (a
        `taskflow train --out` into a package a server holds) is refused here, not run, and never
        exported under the verified package's name."""
        path = self.path(WEIGHTS)
        data = path.read_bytes()
        actual, pinned = hashlib.sha256(data).hexdigest(), self.manifest.files[WEIGHTS]["sha256"]
        if actual != pinned:
            fix = {"task_path": "build the Taskflow again once the package is written in full (a training "
                                "that writes it must finish first), or train or copy it again",
                   "bundled": "reinstall taskflow (pip install --force-reinstall taskflow-nlp)"}.get(
                self.source, f"delete it and build the Taskflow again to fetch it (`taskflow download {self.task} "
                             f"--model {self.name}`)")
            raise ChecksumError(f"{path} has sha256 {actual}, but the manifest of {self.task}/{self.name} pins "
                                f"{pinned}: the file changed after the package was verified, and nothing was built "
                                f"from it; {fix}")
        return data

    def weights_key(self) -> str:
        """Identifies the whole manifest (the files' sha256s, the architecture's arguments, every
        field) and the network's source, so a change to any of them gets a fresh static export: an
        upgraded taskflow must not keep running a program the old code exported, nor one package
        run a program exported from another that shares its name and weights."""
        digest = hashlib.sha256(self.manifest.digest().encode())
        digest.update(self.network_type.encode())
        source = inspect.getsourcefile(self.network_class())
        if source:
            digest.update(Path(source).read_bytes())
        return digest.hexdigest()

    def predictor(self, inputs: Sequence[InputSpec]) -> Predictor:
        """The model's predictor for these feeds (the static export, then Paddle Inference), made once
        per spec: tasks that share this model with other feeds (another batch size or window, other
        names) each get their own, never one made for another's feeds."""
        spec = tuple(inputs)
        with self._lock:
            predictor = self._predictors.get(spec)
            if predictor is None:
                # The exported program depends on the feeds' names, dtypes and ranks; their sizes only
                # bound TensorRT's plans, so specs that differ in size alone share one export.
                feeds = repr([(s.name, s.dtype, len(s.max_shape)) for s in spec]).encode()
                export_key = hashlib.sha256(self.weights_key().encode() + feeds).hexdigest()
                options, export_dir = self.predictor_options(), self.export_dir()
                shared = (export_key, str(export_dir), options, spec)
                with _SHARED_LOCK:
                    predictor = _SHARED_PREDICTORS.get(shared)
                if predictor is None:
                    made = Predictor(self.build_network, inputs=spec, export_dir=export_dir, weights_key=export_key,
                                     options=options, built_from={WEIGHTS: self.manifest.files[WEIGHTS]["sha256"]})
                    with _SHARED_LOCK:   # two threads may have made one each: both then use the first kept
                        predictor = _SHARED_PREDICTORS.setdefault(shared, made)
                self._predictors[spec] = predictor
            return predictor

    def predictor_options(self) -> PredictorOptions:
        """The caller's options, with oneDNN off where the manifest says ``"onednn": false``: a
        network of a few table lookups (a linear n-gram model) runs 3-4x faster on the CPU without
        oneDNN's per-run set-up.  The manifest can turn it off, never on.  The precision settled
        (:func:`taskflow.predictor.network_options`): ``auto`` runs the network in bf16 where the
        manifest says ``"cpu_bf16": true`` and the CPU computes bf16 natively."""
        onednn, cpu_bf16 = self.manifest.get("onednn", True), self.manifest.get("cpu_bf16", False)
        for field, value in (("onednn", onednn), ("cpu_bf16", cpu_bf16)):
            if not isinstance(value, bool):
                raise ManifestError(f"model {self.name!r}: {field!r} must be true or false, got {value!r:.40}")
        options = self.options if onednn else dataclasses.replace(self.options, onednn=False)
        return network_options(options, cpu_bf16=cpu_bf16)

    def export_dir(self) -> Path:
        """Where the static export goes: beside the cached package for a model taskflow pins, and for
        a ``task_path`` package in the cache's own ``.exports`` folder, never in one named by that
        package's manifest (a foreign package must not place a program where a pinned model would
        find it).  Exports in either are named by :meth:`weights_key` and checked before reuse; when
        the folder cannot be written and holds no valid export, the predictor exports to a private
        temporary folder instead (see :func:`taskflow.exports.cached_export`), as it does when a link
        on the way was made by another user (:func:`taskflow.packages.cache_link_problem`)."""
        if self.source == "task_path":
            folder = home_dir(self.home) / "taskflow" / ".exports"
        else:
            folder = cache_dir(self.task, self.name, self.version, self.home) / "static"
        problem = cache_link_problem(folder, self.home)
        if problem:
            from .exports import private_export_root

            fallback = private_export_root()
            warnings.warn(f"not writing the static-graph export under {folder}: {problem}; using {fallback} instead. "
                          "Remove the link or make it yourself, or set PPNLP_HOME (home=) to a folder of your own",
                          RuntimeWarning, stacklevel=4)
            return fallback
        return folder

    def __repr__(self) -> str:
        return f"Model({self.task}/{self.name} {self.version}, source={self.source!r})"

