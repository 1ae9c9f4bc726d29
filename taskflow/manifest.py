"""Model package manifests: what ``manifest.json`` holds, checked when it is read.

A model package is a directory holding ``manifest.json`` and the files it lists, each pinned by
sha256 and size (:class:`Manifest`); a resolved one is a :class:`ModelPackage`.  The fields a
network is built from are checked here (types and ranges), every top-level field is one
:mod:`taskflow.schema` knows, and every name that becomes a folder or file name (task, model,
version, file names) is one plain path part (:func:`safe_name`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import ManifestError, ModelNotFoundError
from .schema import check_fields

__all__ = ["MANIFEST", "Manifest", "ModelPackage", "name_problem", "safe_name", "check_file_name", "inside"]

MANIFEST = "manifest.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")

# ------------------------------------------------------------- names as paths
# A task, model name, version or file name of a manifest becomes one folder or file name (in the
# cache, in a `taskflow pack` tree, in a URL), so each must be one plain part.  Separators of any OS
# and ":" (a Windows drive or stream) would make it several parts or an absolute path; control
# characters have no place in a name.  A leading "." is refused too: names starting with a dot are
# taskflow's own bookkeeping beside the files (.verified, .locks, .exports, temporary .NAME.PID.tmp
# files), which a package must not be able to overwrite or fake, and hidden files are where tools
# keep their settings (.bashrc, .ssh): no model needs one.  That also rules out "." and "..".
_NOT_IN_NAMES = re.compile(r"[/\\:\x00-\x1f\x7f]")
# Direction controls (U+202A-U+202E, U+2066-U+2069, the marks U+200E, U+200F, U+061C) make a name
# show as another one in a listing, a log or a URL ("model\u202egpj.exe" shows as "modelexe.jpg").
_DIRECTION_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_MAX_NAME_BYTES = 200   # leaves room for a temporary name's suffix within the usual 255-byte limit
_RESERVED_FILES = (MANIFEST, "static")   # the manifest itself; the static-export folder in a cached package


def name_problem(value: Any) -> str | None:
    """Why ``value`` cannot be one path part, or None when it can."""
    if not isinstance(value, str):
        return f"must be a str, got {type(value).__name__}"
    if not value or value != value.strip():
        return "must be non-empty, without spaces at either end"
    if value.startswith("."):
        return "must not start with '.' (such names are taskflow's own bookkeeping, or hidden files)"
    if _NOT_IN_NAMES.search(value):
        return "must not hold '/', '\\', ':' or control characters (it names one folder or file)"
    control = _DIRECTION_CONTROLS.search(value)
    if control:
        return (f"must not hold text-direction controls (U+{ord(control.group()):04X} at {control.start()}), "
                "which make a name read as another one")
    if len(value.encode("utf-8")) > _MAX_NAME_BYTES:
        return f"must be at most {_MAX_NAME_BYTES} bytes in UTF-8"
    return None


def safe_name(value: Any, field: str, source: str = "manifest") -> str:
    """``value`` if it can be one folder or file name (see above), else a :class:`ManifestError`
    naming ``field``."""
    problem = name_problem(value)
    if problem:
        raise ManifestError(f"{source}: {field} {value!r} {problem}; use a plain name such as 'my_model' or '1.0.0'")
    return value


def check_file_name(name: Any, source: str) -> None:
    """``name`` can be a file of a package: one plain name (:func:`safe_name`), not a reserved one."""
    safe_name(name, "file name", source)
    if name in _RESERVED_FILES:
        raise ManifestError(f"{source}: file name {name!r} is reserved ({', '.join(_RESERVED_FILES)}); rename the file")


def inside(root: str | os.PathLike, path: str | os.PathLike, what: str = "path") -> Path:
    """``path`` if it stays inside ``root`` once symlinks are followed, else a :class:`ManifestError`.

    Names are checked by :func:`safe_name` already; this catches a symlink planted in the tree
    (a cache folder or a `taskflow pack` destination shared with others) that would redirect a write."""
    root_real, real = Path(root).resolve(), Path(path).resolve()
    if real != root_real and root_real not in real.parents:
        raise ManifestError(f"{what} {str(path)!r} resolves to {str(real)!r}, outside {str(root_real)!r} "
                            "(a symlink in the way?); refusing to write there")
    return Path(path)


# ------------------------------------------------------------------ manifests

_MAX_SIZE = 10 ** 9   # no vocabulary, layer or sequence of a model taskflow can run comes near it
_MAX_LIST = 1 << 16   # values in a list-valued architecture argument, all levels together
_MAX_DEPTH = 3
# Lengths and counts the tasks read from a manifest's top level: each a positive int.
_SIZE_FIELDS = ("max_length", "max_seq_len", "max_question_len", "max_answer_len", "doc_stride", "hash_buckets")
# Architecture arguments that give the network's number of outputs, which 'labels' lists in order.
_OUTPUT_FIELDS = ("num_labels", "num_tags")


def _flattened(value: Any) -> list:
    """The scalars of ``value`` (itself, or the items of nested lists); a list nested deeper than
    :data:`_MAX_DEPTH` or holding more than :data:`_MAX_LIST` values comes back as ``[value]``, which
    the caller refuses as not a scalar."""
    out, stack = [], [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list):
            if depth >= _MAX_DEPTH or len(out) + len(item) > _MAX_LIST:
                return [value]
            stack.extend((x, depth + 1) for x in reversed(item))
        else:
            out.append(item)
    return out


def _check_network_fields(data: Mapping[str, Any], source: str) -> None:
    """The fields a network is built from have the types and ranges it can take: ``architecture``
    (a str ``type`` and scalar arguments or flat lists of them, sizes 0 to 10^9), the sizes of :data:`_SIZE_FIELDS`,
    and ``labels`` (one str or int per output of the network)."""
    def refuse(field: str, value: Any, expected: str) -> ManifestError:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return ManifestError(f"{source}: {field} is {shown}; expected {expected}; fix the package's manifest.json")

    architecture = data.get("architecture")
    if architecture is not None:
        if not isinstance(architecture, Mapping):
            raise refuse("'architecture'", architecture, "an object with the network's 'type' and its arguments")
        if not isinstance(architecture.get("type"), str) or not architecture["type"]:
            raise refuse("architecture 'type'", architecture.get("type"), "the name of a network, e.g. 'sentiment_cnn'")
        for name, value in architecture.items():
            # Lists of such values are arguments too (a dilated CNN's dilations per layer, a
            # negation model's lists of token ids), nested at most _MAX_DEPTH deep.
            for item in _flattened(value):
                if isinstance(item, bool) or isinstance(item, str):
                    continue
                if type(item) is int:
                    if not 0 <= item <= _MAX_SIZE:
                        raise refuse(f"architecture {name!r}", value, f"a size from 0 to {_MAX_SIZE:,}")
                elif type(item) is float:
                    if not math.isfinite(item):
                        raise refuse(f"architecture {name!r}", value, "a finite number")
                else:
                    raise refuse(f"architecture {name!r}", value,
                                 f"a number, a str, a bool or lists of them ({_MAX_LIST:,} values at most, "
                                 f"nested {_MAX_DEPTH} deep)")
    for name in _SIZE_FIELDS:
        if name in data and not (type(data[name]) is int and 1 <= data[name] <= _MAX_SIZE):
            raise refuse(repr(name), data[name], f"a whole number from 1 to {_MAX_SIZE:,}")
    labels = data.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or not all(isinstance(label, str) or type(label) is int for label in labels):
            raise refuse("'labels'", labels, "a list of str (or int), the network's outputs in order")
        for name in _OUTPUT_FIELDS:
            outputs = (architecture or {}).get(name)
            if labels and type(outputs) is int and outputs != len(labels):   # none at all: Model.labels says so
                raise ManifestError(f"{source}: 'labels' lists {len(labels)} label(s) but the network has {outputs} "
                                    f"outputs (architecture {name!r}); list one label per output, in order")


@dataclass(frozen=True)
class Manifest:
    """The parsed ``manifest.json`` of a model package.

    ``files`` maps a file name to ``{"sha256": ..., "size": ...}``; every other
    field (labels, architecture, metrics...) is in ``data``.
    """

    data: Mapping[str, Any]

    REQUIRED = ("task", "name", "version", "files")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "manifest") -> "Manifest":
        if not isinstance(data, Mapping):
            raise ManifestError(f"{source}: expected a JSON object, got {type(data).__name__}")
        missing = [key for key in cls.REQUIRED if key not in data]
        if missing:
            raise ManifestError(f"{source}: missing field(s) {', '.join(missing)}")
        for field in ("task", "name"):
            safe_name(data[field], repr(field), source)
        version = data["version"]
        if isinstance(version, bool) or not isinstance(version, (str, int)):
            raise ManifestError(f"{source}: 'version' {version!r} must be a str such as '1.0.0'")
        safe_name(str(version), "'version'", source)
        files = data["files"]
        if not isinstance(files, Mapping) or not files:
            raise ManifestError(f"{source}: 'files' must be a non-empty object of name -> {{sha256, size}}")
        for name, entry in files.items():
            check_file_name(name, source)
            if not isinstance(entry, Mapping) or "sha256" not in entry or "size" not in entry:
                raise ManifestError(f"{source}: file {name!r} needs 'sha256' and 'size'")
            sha, size = entry["sha256"], entry["size"]
            if not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
                raise ManifestError(f"{source}: file {name!r} has sha256 {sha!r}; expected 64 lowercase hex digits")
            if not (type(size) is int and size >= 0):
                raise ManifestError(f"{source}: file {name!r} has size {size!r}; expected a byte count (int >= 0)")
        _check_network_fields(data, source)
        requires = data.get("requires", {})
        if not isinstance(requires, Mapping):
            raise ManifestError(f"{source}: 'requires' must be an object of role -> 'task/model' or './folder'")
        for role, ref in requires.items():
            # './folder': a package inside this one; 'task/model': a model taskflow pins.
            parts = ref.split("/") if isinstance(ref, str) else []
            if len(parts) != 2 or any(name_problem(p) for p in parts[1:] + ([] if parts[0] == "." else parts[:1])):
                raise ManifestError(f"{source}: requires {role!r} is {ref!r}; expected 'task/model' (a model taskflow "
                                    "ships) or './folder' (a package inside this one)")
        check_fields(data, source)     # an unknown or misspelt field is refused, not silently ignored
        return cls(dict(data))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Manifest":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ModelNotFoundError(f"no {MANIFEST} at {path}: a model package needs one") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}: not valid JSON ({exc})") from None
        except RecursionError:
            raise ManifestError(f"{path}: JSON nested too deeply to be a manifest") from None
        return cls.from_dict(data, source=str(path))

    task = property(lambda self: self.data["task"])
    name = property(lambda self: self.data["name"])
    version = property(lambda self: str(self.data["version"]))
    files = property(lambda self: self.data["files"])

    def __getitem__(self, key: str) -> Any:
        try:
            return self.data[key]
        except KeyError:
            raise ManifestError(f"manifest of {self.name!r} has no field {key!r}") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def fingerprint(self) -> str:
        """A hash of the pinned files, used as the cache's verification marker."""
        blob = json.dumps(self.files, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()

    def digest(self) -> str:
        """A hash of the whole manifest (files, architecture, labels, every field): what a static
        export is keyed by, since any field may change what the network computes."""
        blob = json.dumps(self.data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class ModelPackage:
    """A resolved model package: a directory holding every file of its manifest."""

    directory: Path
    manifest: Manifest
    source: str  # "task_path" | "cache" | "bundled" | "download"

    def path(self, name: str) -> Path:
        if name not in self.manifest.files:
            raise ManifestError(f"{self.manifest.name!r} does not list a file {name!r}")
        return self.directory / name

