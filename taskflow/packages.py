"""Model packages: manifests, the cache, resolution and downloads.

A model package is a directory holding ``manifest.json`` and the files it
lists, each pinned by sha256 and size.  The manifests of the models taskflow
knows ship inside the wheel (``taskflow.resources/<task>/<model>/``), so every
download is checked against a hash that came with the code, never against one
fetched alongside the file.  Default models ship their files there as well,
so the first call works offline on a fresh machine.

Where files come from, in order:

1. ``task_path=``: the user's own package (same layout as ours);
2. the cache, ``$PPNLP_HOME/taskflow/<task>/<model>/<version>/``, verified once;
3. the bundled package in ``taskflow.resources``;
4. a download from ``$PPNLP_ENDPOINT/<task>/<model>/<version>/<file>``,
   unless offline mode (``offline=True`` or ``PPNLP_OFFLINE=1``) is on.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import re
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import quote, unquote, urlsplit

from .errors import (
    CacheWriteError,
    ChecksumError,
    DownloadError,
    ManifestError,
    ModelNotFoundError,
    OfflineModeError,
    OptionError,
    TaskflowError,
    UnknownModelError,
)
from .schema import check_fields

__all__ = [
    "Manifest",
    "ModelPackage",
    "home_dir",
    "is_offline",
    "resolve",
    "available_models",
    "download_file",
    "write_package",
    "pack",
]

MANIFEST = "manifest.json"
_VERIFIED_MARKER = ".verified"
_TRUE = {"1", "true", "yes", "on"}
_SHA256 = re.compile(r"[0-9a-f]{64}")
logger = logging.getLogger("taskflow")

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


def _check_file_name(name: Any, source: str) -> None:
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


# ---------------------------------------------------------------- environment
# Read when needed, never at import time, so a test or a notebook can change them.

def home_dir(home: str | os.PathLike | None = None) -> Path:
    """``home`` if given, else ``$PPNLP_HOME``, else ``~/.paddlenlp``."""
    if home is None:
        home = os.environ.get("PPNLP_HOME") or Path.home() / ".paddlenlp"
    elif not isinstance(home, (str, os.PathLike)):
        raise OptionError(f"home must be a folder's path (str or os.PathLike), got {type(home).__name__} ({home!r})", "home")
    return Path(home).expanduser()


def is_offline(offline: bool | None = None) -> bool:
    """``offline`` if given, else whether ``$PPNLP_OFFLINE`` is set to a true value."""
    if offline is not None:
        if not isinstance(offline, bool):   # bool("no") is True: never coerce
            raise OptionError(f"offline must be True, False or None (then $PPNLP_OFFLINE), got "
                              f"{type(offline).__name__} ({offline!r})", "offline")
        return offline
    return os.environ.get("PPNLP_OFFLINE", "").strip().lower() in _TRUE


def endpoint() -> str | None:
    """Base URL of the static file server that hosts model packages (as set: it may carry a
    user and password, which :func:`redact` strips from anything shown), checked: an address
    that is not ``http(s)://host[:port]/...`` is a :class:`DownloadError` saying why."""
    raw = os.environ.get("PPNLP_ENDPOINT", "").strip()
    value = raw.rstrip("/")
    if not value:
        return None
    if value.endswith(":") and raw.endswith("//"):   # "http://": the scheme and no host, not a scheme "http:"
        value = raw
    try:
        parts = urlsplit(value)
        port_ok = parts.port != 0   # reading .port raises for a port that is not 0 to 65535
        problem = None
    except ValueError as exc:
        problem = "its port is not a number from 1 to 65535" if "Port" in str(exc) else f"it cannot be parsed ({exc})"
    if problem is None:
        if "://" not in value or parts.scheme not in ("http", "https"):
            problem = ("the scheme must be http:// or https://"
                       + (f", not {parts.scheme}://" if "://" in value and parts.scheme else ""))
        elif not parts.hostname:
            problem = "it names no host"
        elif not port_ok:
            problem = "its port is not a number from 1 to 65535"
    if problem:
        shown = redact(value)
        raise DownloadError(f"PPNLP_ENDPOINT {shown!r} is not a usable address: {_scrub(problem, value)}; set it to "
                            "the base URL of a server laid out by `taskflow pack`, e.g. https://models.example.com/taskflow",
                            url=shown)
    return value


def _userinfo(url: str) -> str:
    """The ``user:password`` of ``url`` ('' if none), found without parsing it (it may not parse)."""
    netloc = re.split(r"[/?#]", url.split("://", 1)[-1], maxsplit=1)[0]
    return netloc.rpartition("@")[0]


def redact(url: str) -> str:
    """``url`` without the ``user:password@`` part, for messages and logs."""
    userinfo = _userinfo(url)
    return url.replace(userinfo + "@", "", 1) if userinfo else url


def _scrub(text: str, url: str) -> str:
    """``text`` (an error message that may quote ``url``) with ``url``'s credentials removed."""
    userinfo = _userinfo(url)
    if not userinfo:
        return text
    text = text.replace(url, redact(url)).replace(userinfo + "@", "")
    password = userinfo.partition(":")[2]
    for secret in sorted({userinfo, password, unquote(password)}, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


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
            _check_file_name(name, source)
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


# ---------------------------------------------------------------- hashing, io

def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def _temp_name(dest: Path) -> Path:
    # Unique per process and call, so concurrent writers never share a file.
    return dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


# A temporary file this old, of a process that is gone, was left by a download that was killed.
_STALE_TEMP_S = 300


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine.  Where that cannot be asked (not POSIX: there
    signal 0 is no probe) the answer is False, and a temporary file's age alone decides."""
    if pid == os.getpid():
        return True
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # it exists, as another user's process
        return True
    return True


def _remove_stale_temps(dest: Path) -> None:
    """Remove the temporary files that killed downloads of ``dest`` left beside it.

    Called with the download lock of ``dest`` held, and only for its own temporary files
    (``.NAME.PID.RANDOM.tmp``): any live download of it holds that lock too, so none is writing
    now.  A writer that takes no lock (a copy into the cache), or another lock (``download_file``
    called without one), is guarded by the age and the process id: a file is removed only when
    it was not written for a few minutes (a live download writes as its bytes come) and its
    process is gone (one in another PID namespace looks gone: the age still guards it).
    """
    pattern = re.compile(rf"\.{re.escape(dest.name)}\.(\d+)\.[0-9a-f]{{8}}\.tmp")
    try:
        with os.scandir(dest.parent) as listing:
            entries = list(listing)
    except OSError:
        return
    now = time.time()
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if not match:
            continue
        try:
            if (entry.is_file(follow_symlinks=False) and now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TEMP_S
                    and not _process_alive(int(match[1]))):
                os.unlink(entry.path)
        except OSError:
            pass


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def _writing_cache(home: Path):
    """Writing model files under ``home``: a home that cannot be written is a :class:`CacheWriteError`
    naming it and the fix, not a bare ``OSError`` from deep inside a download."""
    try:
        yield
    except TaskflowError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT):
            raise
        raise CacheWriteError(
            f"cannot write the model cache under {home}: {exc.strerror or exc} ({exc.filename}); set PPNLP_HOME "
            "(home=, --home) to a writable folder, or fill this one where it can be written (`taskflow download`) "
            "and then use it as it is") from exc


def _file_lock(home: Path, key: str):
    from filelock import FileLock

    # Locks live under the cache home, outside the model directories (so a failed download leaves
    # those clean), never in a shared temporary folder where another user could plant a symlink.
    lock_dir = home / "taskflow" / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"))


# ----------------------------------------------------------------- resolution

def _bundled_root() -> Path:
    import taskflow.resources as bundled

    return Path(bundled.__file__).parent


def available_models(task: str) -> list[str]:
    """Names of the models whose manifests ship with taskflow for ``task``."""
    if name_problem(task):
        return []
    root = _bundled_root() / task
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not name_problem(p.name) and (p / MANIFEST).is_file())


def pinned_manifest(task: str, model: str) -> Manifest:
    """The manifest shipped with taskflow for ``task``/``model``."""
    path = _bundled_root() / str(task) / str(model) / MANIFEST
    # A name that is not one plain part (a path, "..") names no shipped model, whatever is on disk there.
    if name_problem(task) or name_problem(model) or not path.is_file():
        known = available_models(task)
        raise UnknownModelError(
            f"task {task!r} has no model {model!r}; available: {', '.join(known) or 'none'}. "
            "To run your own trained package, pass task_path=<its directory>.", "model"
        )
    manifest = Manifest.load(path)
    if manifest.task != task or manifest.name != model:
        raise ManifestError(f"{path} describes {manifest.task}/{manifest.name}, expected {task}/{model}")
    return manifest


def cache_dir(task: str, model: str, version: str, home: str | os.PathLike | None = None) -> Path:
    """``$PPNLP_HOME/taskflow/<task>/<model>/<version>``, each of the three names checked to be one
    plain folder name (:func:`safe_name`), so no name can lead the path out of the cache.

    Symlinks on the way are followed (a task's folder moved to another disk behind a link): reading
    through them is safe, since every file read is checked against the sha256 its manifest pins,
    wherever it lies.  Before anything is written there, :func:`cache_link_problem` checks who
    made them."""
    root = home_dir(home) / "taskflow"
    for field, value in (("task", task), ("model", model), ("version", version)):
        safe_name(value, field, "cache")
    return root / task / model / version


def cache_link_problem(folder: str | os.PathLike, home: str | os.PathLike | None = None) -> str | None:
    """Why a write into ``folder`` (under ``$PPNLP_HOME/taskflow``) could go where someone else
    chose, or None where it cannot.

    What is checked: each part of the path below ``$PPNLP_HOME/taskflow`` that is a symlink must
    be owned by this user or by root, i.e. made by you (a task's or model's folder moved to another
    disk behind a link is written through), not planted by another user in a cache you share with
    them.  ``$PPNLP_HOME`` and its ``taskflow`` folder may be links of any owner: you chose them by
    setting the home.  Parts not made yet are not links.  Where there are no user ids (Windows),
    nothing is checked."""
    root, folder = home_dir(home) / "taskflow", Path(folder)
    if not hasattr(os, "getuid"):
        return None
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        return f"{folder} is not under the cache folder {root}"
    path = root
    for part in parts:
        path = path / part
        try:
            info = os.lstat(path)
        except OSError:     # not there yet: made by the write itself, as a folder
            return None
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (os.getuid(), 0):
            return (f"{path} is a symlink owned by uid {info.st_uid}, not by you (uid {os.getuid()}) or root: "
                    "in a cache shared with others, a link someone else made could send the write anywhere")
    return None


def _check_cache_links(folder: Path, home: str | os.PathLike | None) -> None:
    """:func:`cache_link_problem` as a :class:`CacheWriteError` with the fix, before a write."""
    problem = cache_link_problem(folder, home)
    if problem:
        raise CacheWriteError(f"refusing to write the model cache folder {folder}: {problem}. Remove the link or "
                              "make it yourself (ln -s), or set PPNLP_HOME (home=, --home) to a folder of your own")


def _check_home_is_a_folder(home: str | os.PathLike | None) -> None:
    """Before writing to the cache: a home (or a folder on its way) that is a file is named as such,
    not left to an errno from deep inside a copy."""
    path = home_dir(home)
    for part in (path / "taskflow", path, *path.parents):
        if part.exists():
            if not part.is_dir():
                raise OptionError(f"the cache home {path} ($PPNLP_HOME, or home=) cannot hold folders: {part} is a "
                                  "file. Point it at a folder, or unset PPNLP_HOME for ~/.paddlenlp", "home")
            return


def _has_files(directory: Path, manifest: Manifest) -> bool:
    return all(
        (directory / name).is_file() and (directory / name).stat().st_size == entry["size"]
        for name, entry in manifest.files.items()
    )


def _file_ok(path: Path, entry: Mapping[str, Any]) -> bool:
    return path.is_file() and path.stat().st_size == entry["size"] and sha256_file(path) == entry["sha256"]


# What to do about a file whose bytes are not the ones its manifest pins, where nothing can fetch it.
REWRITE_PACKAGE = ("the package was changed after it was written, or written only in part: train it again, "
                   "or copy it again from where it was made")


def _verify_dir(directory: Path, manifest: Manifest, fix: str = "delete the file to fetch it again") -> None:
    for name, entry in manifest.files.items():
        path = directory / name
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise ChecksumError(f"{path} has sha256 {actual}, but its manifest pins {entry['sha256']}; {fix}")


def _stamp(directory: Path, manifest: Manifest) -> dict:
    """What a verification marker vouches for: the pinned hashes, and each file as it was when
    hashed (size, mtime, inode, ctime), so an edit, even one that keeps the size, is seen; and one
    that puts the old mtime back (``touch -r``) still changes the ctime, which no user can set."""
    files = {}
    for name in sorted(manifest.files):
        info = (directory / name).stat()
        files[name] = [info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns]
    return {"fingerprint": manifest.fingerprint(), "files": files}


def _marker_holds(marker: Path, stamp: dict) -> bool:
    """Whether ``marker`` records ``stamp`` and was written after every file was last changed.

    A file changed within the same clock tick as the marker (file times are coarse) would keep its
    mtime; like git's "racily clean" entries, such a file is hashed again rather than trusted."""
    try:
        if json.loads(marker.read_text(encoding="utf-8")) != stamp:
            return False
        written = marker.stat().st_mtime_ns
    except (OSError, ValueError):
        return False
    return all(mtime < written for _, mtime, *_ in stamp["files"].values())


def _write_marker(marker: Path, stamp: dict) -> None:
    try:
        atomic_write_text(marker, json.dumps(stamp, sort_keys=True))
    except OSError:
        pass   # a read-only cache (copied from another machine): verified again by the next process


def _verified_cache(directory: Path, manifest: Manifest, write: bool = True) -> bool:
    """Whether the cached copy holds the manifest's bytes; ``write``: a marker may be written
    there (see :func:`cache_link_problem`), so the next process trusts it without hashing."""
    if not _has_files(directory, manifest):
        return False
    marker = directory / _VERIFIED_MARKER
    stamp = _stamp(directory, manifest)
    if _marker_holds(marker, stamp):
        return True
    try:
        _verify_dir(directory, manifest)
    except ChecksumError:
        return False
    if write:
        _write_marker(marker, stamp)
    return True


# Bundles verified by this process: {(directory, stamp)}.
_VERIFIED_BUNDLES: set[tuple[str, str]] = set()


def _drop_damaged(cached: Path, manifest: Manifest, write: bool = True) -> None:
    """Delete the cached files whose bytes are not the pinned ones, saying so: the copy bundled or
    fetched in their place is then what runs, and the damage is not hashed again in every process.
    Not where nothing may be written (``write``, see :func:`cache_link_problem`): they are then
    left, and never read."""
    damaged = [name for name, entry in manifest.files.items()
               if write and (cached / name).is_file() and not _file_ok(cached / name, entry)]
    if damaged:
        logger.warning("%s: %s did not match the manifest's sha256 (damaged on disk, or edited) and %s deleted; "
                       "the bundled copy runs where there is one, else it is downloaded again where downloads are on, "
                       "and `taskflow download %s --model %s` writes the cache again", cached, ", ".join(damaged), "was" if len(damaged) == 1 else "were",
                       manifest.task, manifest.name)
        for name in damaged:
            (cached / name).unlink(missing_ok=True)


def _verified_bundle(bundled: Path, manifest: Manifest, cached: Path, write: bool = True) -> bool:
    """Whether the bundled copy holds the manifest's bytes, hashed once: nothing else checks a
    wheel's files after install (pip checks RECORD only while installing, and not an edited
    checkout).  The result is remembered for the process, and in a marker in the package's cache
    folder when that folder exists already (its static export made it): resolving a bundled
    package creates nothing in the cache by itself."""
    if not _has_files(bundled, manifest):
        return False
    stamp = {**_stamp(bundled, manifest), "bundle": str(bundled.resolve())}
    key = (str(bundled), json.dumps(stamp, sort_keys=True))
    marker = cached / ".bundled-verified"
    if key in _VERIFIED_BUNDLES or _marker_holds(marker, stamp):
        _VERIFIED_BUNDLES.add(key)
        return True
    try:
        _verify_dir(bundled, manifest)
    except ChecksumError as exc:   # a damaged install is an error, not a silent download
        raise ChecksumError(f"the bundled package {bundled} is damaged: {str(exc).split(';')[0]}; "
                            "reinstall taskflow (pip install --force-reinstall taskflow-nlp)") from None
    _VERIFIED_BUNDLES.add(key)
    if write and cached.is_dir():
        _write_marker(marker, stamp)
    return True


def _url(base: str, *parts: str) -> str:
    return "/".join([base, *(quote(part, safe="") for part in parts)])


def resolve(
    task: str,
    model: str | None,
    *,
    task_path: str | os.PathLike | None = None,
    home: str | os.PathLike | None = None,
    offline: bool | None = None,
    progress: bool | None = None,
) -> ModelPackage:
    """Find (or fetch) the files of a model package, in the order described above."""
    if task_path is not None:
        directory = Path(task_path).expanduser()
        if not directory.is_dir():
            raise ModelNotFoundError(f"task_path {str(directory)!r} is not a directory")
        manifest = Manifest.load(directory / MANIFEST)
        if manifest.task != task:
            raise ManifestError(f"task_path {str(directory)!r} holds a {manifest.task!r} model, not {task!r}")
        missing = [n for n in manifest.files if not (directory / n).is_file()]
        if missing:
            raise ModelNotFoundError(f"task_path {str(directory)!r} lacks {', '.join(missing)} listed in its manifest")
        _verify_dir(directory, manifest, REWRITE_PACKAGE)  # a few ms; catches weights edited without their manifest
        return ModelPackage(directory, manifest, "task_path")

    manifest = pinned_manifest(task, model)
    cached = cache_dir(task, model, manifest.version, home)
    # Read through any link (the files are checked by sha256); markers and deletions only where
    # the links are the user's own.
    writable = cache_link_problem(cached, home) is None
    if _verified_cache(cached, manifest, writable):
        return ModelPackage(cached, manifest, "cache")
    _drop_damaged(cached, manifest, writable)

    bundled = _bundled_root() / task / model
    if _verified_bundle(bundled, manifest, cached, writable):
        return ModelPackage(bundled, manifest, "bundled")

    # A damaged cached file was deleted above: it counts as missing, so it is fetched again.
    missing = [name for name, entry in manifest.files.items() if not _file_ok(cached / name, entry)]
    base = endpoint()
    where = _url(redact(base) if base else "$PPNLP_ENDPOINT", task, model, manifest.version) + "/"
    if is_offline(offline):
        raise OfflineModeError(
            f"offline mode is on and {task}/{model} {manifest.version} lacks {', '.join(missing)} "
            f"in {cached}. Fetch it on a connected machine with `taskflow download {task} --model {model}` "
            f"and copy {cached} over, place the files from {where} there yourself, "
            "or unset PPNLP_OFFLINE / pass offline=False."
        )
    if base is None:
        raise ModelNotFoundError(
            f"{task}/{model} {manifest.version} is not bundled and not in {cached}, and no download "
            "endpoint is configured: set PPNLP_ENDPOINT to the base URL of a server laid out by "
            "`taskflow pack`, or pass task_path=<a local package directory>."
        )
    home_path = home_dir(home)
    _check_home_is_a_folder(home)
    _check_cache_links(cached, home)
    with _writing_cache(home_path):
        for name in missing:
            entry = manifest.files[name]
            download_file(
                _url(base, task, model, manifest.version, name), cached / name, sha256=entry["sha256"],
                size=entry["size"], lock=_file_lock(home_path, f"{task}/{model}/{manifest.version}/{name}"),
                progress=progress,
            )
    if not _verified_cache(cached, manifest):
        raise ChecksumError(f"{cached} does not match the manifest of {task}/{model} {manifest.version} after download")
    return ModelPackage(cached, manifest, "download")


def copy_to_cache(package: ModelPackage, home: str | os.PathLike | None = None) -> ModelPackage:
    """A bundled (or ``task_path``) package copied into the cache, verified, so the cache folder
    alone is enough on another machine (``taskflow download`` on a connected machine, then copy
    ``$PPNLP_HOME/taskflow`` over).  A package already in the cache is returned as it is."""
    if package.source in ("cache", "download"):
        return package
    manifest = package.manifest
    cached = cache_dir(manifest.task, manifest.name, manifest.version, home)
    _check_home_is_a_folder(home)
    _check_cache_links(cached, home)
    with _writing_cache(home_dir(home)):
        cached.mkdir(parents=True, exist_ok=True)
        for name in manifest.files:
            tmp = _temp_name(cached / name)
            try:
                shutil.copyfile(package.directory / name, tmp)
                os.replace(tmp, cached / name)
            finally:
                tmp.unlink(missing_ok=True)
        atomic_write_text(cached / MANIFEST, json.dumps(manifest.data, ensure_ascii=False, indent=2) + "\n")
    if not _verified_cache(cached, manifest):
        raise ChecksumError(f"{cached} does not match the manifest of {manifest.task}/{manifest.name} after copying")
    return ModelPackage(cached, manifest, "cache")


# ------------------------------------------------------------------ downloads

_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
# Endpoints already warned about in this process: {(what, scheme://host:port)}.
_WARNED: set[tuple[str, str]] = set()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


def _warn_once(what: str, url: str, message: str) -> None:
    key = (what, _origin(url))
    if key not in _WARNED:
        _WARNED.add(key)
        logger.warning(message)


def _check_transport(requested: str, final: str) -> None:
    """Warn (once per endpoint) about plain HTTP and about a redirect to another host. The sha256
    pinned by the manifest still guards the bytes; the warning is for what else travels in the
    clear or goes elsewhere (the request itself, credentials in PPNLP_ENDPOINT)."""
    if urlsplit(final).scheme == "http":
        _warn_once("http", final, f"downloading over plain http from {_origin(final)}: the files are checked by "
                                  "sha256, but the traffic is readable on the way; prefer an https:// PPNLP_ENDPOINT")
    asked, got = urlsplit(requested), urlsplit(final)
    if (asked.hostname, asked.port) != (got.hostname, got.port):
        _warn_once("redirect", requested, f"{_origin(requested)} redirected the download to another host, "
                                          f"{_origin(final)}")


def download_file(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str,
    size: int | None = None,
    lock=None,
    retries: int = 4,
    backoff: float = 0.5,
    timeout: float = 30.0,
    progress: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Fetch ``url`` into ``dest`` and check its sha256; safe across processes.

    Streams into a process-unique temporary file next to ``dest``; a dropped
    connection is resumed with an HTTP Range request (or restarted when the
    server ignores ranges), transient errors are retried with exponential
    backoff, and only a file whose hash matches is moved into place with
    ``os.replace``.  With ``size``, a server that sends more bytes than that is
    cut off at once (:class:`ChecksumError`), so an endless answer cannot fill
    the disk.  ``lock`` (a ``filelock`` lock; by default one under the cache
    home) makes a second process wait and then find the file already there
    instead of downloading it again.  Credentials in ``url`` never appear in an
    error message.
    """
    import requests

    from .display import progress_bar

    dest = Path(dest)
    if lock is None:
        try:
            lock = _file_lock(home_dir(), str(dest.resolve()))
        except OSError:   # no writable cache home: beside the file, in a folder this download writes anyway
            from filelock import FileLock

            dest.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(dest.with_name(f".{dest.name}.lock")))
    shown = redact(url)
    with lock:
        _remove_stale_temps(dest)
        if dest.is_file() and (size is None or dest.stat().st_size == size) and sha256_file(dest) == sha256:
            return dest
        created_dir = not dest.parent.exists()  # only a folder we made is removed on failure
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_name(dest)
        try:
            with requests.Session() as session, progress_bar(
                total=size, unit="B", unit_scale=True, unit_divisor=1024,
                desc=dest.name, disable=None if progress is None else not progress, leave=False,
            ) as bar:
                _stream_with_retries(session, url, tmp, size, bar, retries, backoff, timeout, sleep)
            actual = sha256_file(tmp)
            if actual != sha256:
                raise ChecksumError(
                    f"{shown} has sha256 {actual}, expected {sha256}: the file on the server differs from "
                    "the one this taskflow version pins; nothing was written to the cache",
                    url=shown,
                )
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
            if created_dir and not dest.exists():
                _remove_empty_dirs(dest.parent)
    return dest


def _remove_empty_dirs(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def _stream_with_retries(session, url, tmp: Path, size, bar, retries, backoff, timeout, sleep) -> None:
    import requests

    shown = redact(url)

    def too_long(got: int) -> ChecksumError:
        return ChecksumError(f"GET {shown} sent more than the {size} bytes its manifest pins ({got} so far); "
                             "stopped: the server holds another file, check PPNLP_ENDPOINT", url=shown)

    last_error: Exception | None = None
    for attempt in range(retries + 1):
        if attempt:
            delay = backoff * 2 ** (attempt - 1)
            # Said as it happens: a stalled server otherwise keeps a script waiting minutes without a word.
            logger.warning("%s; trying again in %g s (attempt %d of %d)", last_error, delay, attempt + 1, retries + 1)
            sleep(delay)
        have = tmp.stat().st_size if tmp.exists() else 0
        if size is not None and have >= size:
            if have > size:
                tmp.unlink()
                have = 0
            else:
                return
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with session.get(url, stream=True, timeout=timeout, headers=headers) as response:
                _check_transport(url, response.url)
                status = response.status_code
                if status in _RETRY_STATUS:
                    last_error = DownloadError(f"GET {shown} answered HTTP {status}", url=shown, status=status)
                    continue
                if status >= 400:
                    raise DownloadError(
                        f"GET {shown} answered HTTP {status}"
                        + (": the server has no such file; check PPNLP_ENDPOINT and the model version" if status == 404 else ""),
                        url=shown, status=status,
                    )
                resumed = have and status == 206
                if not resumed:
                    have = 0
                announced = response.headers.get("Content-Length", "")
                if size is not None and announced.isdigit() and have + int(announced) > size:
                    raise too_long(have + int(announced))
                bar.reset(total=size)
                bar.update(have)
                got = have
                with open(tmp, "ab" if resumed else "wb") as handle:
                    for block in response.iter_content(chunk_size=1 << 16):
                        got += len(block)
                        if size is not None and got > size:   # no Content-Length, or a wrong one
                            raise too_long(got)
                        handle.write(block)
                        bar.update(len(block))
            got = tmp.stat().st_size
            if size is None or got == size:
                return
            last_error = DownloadError(f"GET {shown} ended after {got} of {size} bytes", url=shown)
        except DownloadError:
            raise
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            last_error = DownloadError(f"GET {shown} failed: {_scrub(str(exc), url)}", url=shown)
        except requests.RequestException as exc:
            # Not worth a retry (a redirect loop, a body that is not its Content-Encoding, a URL requests
            # refuses); "from None": requests' own exception quotes the URL with its credentials.
            raise DownloadError(f"GET {shown} failed: {_scrub(str(exc), url)}", url=shown) from None
    raise DownloadError(
        f"giving up on {shown} after {retries + 1} attempts: {last_error}",
        url=shown, status=getattr(last_error, "status", None),
    )


# ---------------------------------------------------------- writing packages

def write_package(
    out_dir: str | os.PathLike,
    fields: Mapping[str, Any],
    files: Mapping[str, str | os.PathLike],
) -> Manifest:
    """Write a model package: copy ``files`` (name -> source path) into ``out_dir``
    and a manifest made of ``fields`` plus each file's sha256 and size.

    Training recipes call this; the manifest is written last and atomically,
    so a half-written package never looks complete.
    """
    out_dir = Path(out_dir)
    for name in files:   # before anything is copied: a name is where a file is written
        _check_file_name(name, str(out_dir))
    check_fields(fields, str(out_dir))     # and before the package there is touched: a bad field changes nothing
    out_dir.mkdir(parents=True, exist_ok=True)
    # A package already there is replaced: its manifest goes first, so a write cut short leaves a
    # folder without a manifest (an error that says so), never an old manifest over new weights.
    (out_dir / MANIFEST).unlink(missing_ok=True)
    entries = {}
    for name, source in files.items():
        dest = out_dir / name
        if Path(source).resolve() != dest.resolve():
            tmp = _temp_name(dest)
            try:
                shutil.copyfile(source, tmp)
                os.replace(tmp, dest)
            finally:
                tmp.unlink(missing_ok=True)
        entries[name] = {"sha256": sha256_file(dest), "size": dest.stat().st_size}
    manifest = Manifest.from_dict({**fields, "files": entries}, source=str(out_dir))
    atomic_write_text(out_dir / MANIFEST, json.dumps(manifest.data, ensure_ascii=False, indent=2) + "\n")
    return manifest


def pack(package_dir: str | os.PathLike, dest_root: str | os.PathLike) -> Path:
    """Copy a verified package into ``dest_root/<task>/<model>/<version>/``,
    the layout a static file server needs to act as ``PPNLP_ENDPOINT``.

    Task, name, version and file names are single plain names (checked when the manifest is
    read), and the folder written to must stay inside ``dest_root`` with symlinks followed: a
    package from elsewhere cannot make it write anywhere else."""
    from .errors import OutputWriteError

    package_dir, dest_root = Path(package_dir), Path(dest_root)
    if not package_dir.is_dir():
        raise ModelNotFoundError(f"{package_dir} is not a folder: name a package's folder (its manifest.json and files)")
    if dest_root.exists() and not dest_root.is_dir():
        raise OptionError(f"the destination {dest_root} is a file: name a folder to lay packages out in", "dest")
    if dest_root.resolve() == package_dir.resolve() or package_dir.resolve() in dest_root.resolve().parents:
        raise OptionError(f"the destination {dest_root} is inside the package {package_dir}: name a folder outside it",
                          "dest")
    manifest = Manifest.load(package_dir / MANIFEST)
    _verify_dir(package_dir, manifest, REWRITE_PACKAGE)
    out = inside(dest_root, dest_root / manifest.task / manifest.name / manifest.version, "pack folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(f"cannot make {out}: {exc.strerror or exc}") from None
    inside(dest_root, out, "pack folder")   # again: a symlink could have been planted while it was made
    for name in (*manifest.files, MANIFEST):
        tmp = _temp_name(out / name)
        try:
            shutil.copyfile(package_dir / name, tmp)
            os.replace(tmp, out / name)
        finally:
            tmp.unlink(missing_ok=True)
    return out
