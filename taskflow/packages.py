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
import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import (
    ChecksumError,
    DownloadError,
    ManifestError,
    ModelNotFoundError,
    OfflineModeError,
    UnknownModelError,
    UnsafeArchiveError,
)

__all__ = [
    "Manifest",
    "ModelPackage",
    "home_dir",
    "is_offline",
    "resolve",
    "available_models",
    "download_file",
    "extract_archive",
    "write_package",
    "pack",
]

MANIFEST = "manifest.json"
_VERIFIED_MARKER = ".verified"
_TRUE = {"1", "true", "yes", "on"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


# ---------------------------------------------------------------- environment
# Read when needed, never at import time, so a test or a notebook can change them.

def home_dir(home: str | os.PathLike | None = None) -> Path:
    """``home`` if given, else ``$PPNLP_HOME``, else ``~/.paddlenlp``."""
    if home is None:
        home = os.environ.get("PPNLP_HOME") or Path.home() / ".paddlenlp"
    return Path(home).expanduser()


def is_offline(offline: bool | None = None) -> bool:
    """``offline`` if given, else whether ``$PPNLP_OFFLINE`` is set to a true value."""
    if offline is not None:
        return bool(offline)
    return os.environ.get("PPNLP_OFFLINE", "").strip().lower() in _TRUE


def endpoint() -> str | None:
    """Base URL of the static file server that hosts model packages."""
    value = os.environ.get("PPNLP_ENDPOINT", "").strip()
    return value.rstrip("/") or None


# ------------------------------------------------------------------ manifests

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
        files = data["files"]
        if not isinstance(files, Mapping) or not files:
            raise ManifestError(f"{source}: 'files' must be a non-empty object of name -> {{sha256, size}}")
        for name, entry in files.items():
            if not isinstance(entry, Mapping) or "sha256" not in entry or "size" not in entry:
                raise ManifestError(f"{source}: file {name!r} needs 'sha256' and 'size'")
            sha, size = entry["sha256"], entry["size"]
            if not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
                raise ManifestError(f"{source}: file {name!r} has sha256 {sha!r}; expected 64 lowercase hex digits")
            if not (type(size) is int and size >= 0):
                raise ManifestError(f"{source}: file {name!r} has size {size!r}; expected a byte count (int >= 0)")
            # "/" and "\\" are rejected on every OS: a manifest is shared across platforms and names a URL.
            if not name or "/" in name or "\\" in name or name in (MANIFEST, ".", ".."):
                raise ManifestError(f"{source}: file name {name!r} must be a plain file name")
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


def _file_lock(home: Path, key: str):
    from filelock import FileLock

    # Locks live outside the model directories so a failed download leaves those clean.
    lock_dir = home / "taskflow" / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    safe = key.replace(os.sep, "__").replace("/", "__")
    return FileLock(str(lock_dir / f"{safe}.lock"))


# ----------------------------------------------------------------- resolution

def _bundled_root() -> Path:
    import taskflow.resources as bundled

    return Path(bundled.__file__).parent


def available_models(task: str) -> list[str]:
    """Names of the models whose manifests ship with taskflow for ``task``."""
    root = _bundled_root() / task
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file())


def pinned_manifest(task: str, model: str) -> Manifest:
    """The manifest shipped with taskflow for ``task``/``model``."""
    path = _bundled_root() / task / model / MANIFEST
    if not path.is_file():
        known = available_models(task)
        raise UnknownModelError(
            f"task {task!r} has no model {model!r}; available: {', '.join(known) or 'none'}. "
            "To run your own trained package, pass task_path=<its directory>."
        )
    manifest = Manifest.load(path)
    if manifest.task != task or manifest.name != model:
        raise ManifestError(f"{path} describes {manifest.task}/{manifest.name}, expected {task}/{model}")
    return manifest


def cache_dir(task: str, model: str, version: str, home: str | os.PathLike | None = None) -> Path:
    """``$PPNLP_HOME/taskflow/<task>/<model>/<version>``."""
    return home_dir(home) / "taskflow" / task / model / version


def _has_files(directory: Path, manifest: Manifest) -> bool:
    return all(
        (directory / name).is_file() and (directory / name).stat().st_size == entry["size"]
        for name, entry in manifest.files.items()
    )


def _file_ok(path: Path, entry: Mapping[str, Any]) -> bool:
    return path.is_file() and path.stat().st_size == entry["size"] and sha256_file(path) == entry["sha256"]


def _verify_dir(directory: Path, manifest: Manifest) -> None:
    for name, entry in manifest.files.items():
        path = directory / name
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise ChecksumError(
                f"{path} has sha256 {actual}, but its manifest pins {entry['sha256']}; "
                "delete the file to fetch it again"
            )


def _verified_cache(directory: Path, manifest: Manifest) -> bool:
    marker = directory / _VERIFIED_MARKER
    if not _has_files(directory, manifest):
        return False
    if marker.is_file() and marker.read_text().strip() == manifest.fingerprint():
        return True
    try:
        _verify_dir(directory, manifest)
    except ChecksumError:
        return False
    atomic_write_text(marker, manifest.fingerprint())
    return True


# Bundles verified by this process: {(directory, fingerprint)}.
_VERIFIED_BUNDLES: set[tuple[str, str]] = set()


def _verified_bundle(bundled: Path, manifest: Manifest, cached: Path) -> bool:
    """Whether the bundled copy holds the manifest's bytes, hashed once: nothing else checks a
    wheel's files after install (pip checks RECORD only while installing, and not an edited
    checkout).  The result is remembered for the process, and in a marker beside the cache
    when the home is writable (keyed on the files' sizes and times, so an edit is seen)."""
    if not _has_files(bundled, manifest):
        return False
    stamp = manifest.fingerprint() + "".join(
        f"|{(bundled / name).stat().st_mtime_ns}" for name in sorted(manifest.files)) + f"|{bundled.resolve()}"
    key = (str(bundled), stamp)
    marker = cached / ".bundled-verified"
    if key in _VERIFIED_BUNDLES:
        return True
    try:
        if marker.is_file() and marker.read_text(encoding="utf-8") == stamp:
            _VERIFIED_BUNDLES.add(key)
            return True
    except OSError:
        pass
    try:
        _verify_dir(bundled, manifest)
    except ChecksumError as exc:   # a damaged install is an error, not a silent download
        raise ChecksumError(f"the bundled package {bundled} is damaged: {str(exc).split(';')[0]}; "
                            "reinstall taskflow (pip install --force-reinstall taskflow-nlp)") from None
    _VERIFIED_BUNDLES.add(key)
    try:
        atomic_write_text(marker, stamp)
    except OSError:
        pass   # a read-only or odd home: verified again by the next process
    return True


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
        _verify_dir(directory, manifest)  # a few ms; catches weights edited without their manifest
        return ModelPackage(directory, manifest, "task_path")

    manifest = pinned_manifest(task, model)
    cached = cache_dir(task, model, manifest.version, home)
    if _verified_cache(cached, manifest):
        return ModelPackage(cached, manifest, "cache")

    bundled = _bundled_root() / task / model
    if _verified_bundle(bundled, manifest, cached):
        return ModelPackage(bundled, manifest, "bundled")

    # A damaged cached copy (wrong size or bytes) counts as missing, so it is fetched again.
    missing = [name for name, entry in manifest.files.items() if not _file_ok(cached / name, entry)]
    base = endpoint()
    where = f"{base or '$PPNLP_ENDPOINT'}/{task}/{model}/{manifest.version}/"
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
    for name in missing:
        entry = manifest.files[name]
        url = f"{base}/{task}/{model}/{manifest.version}/{name}"
        download_file(
            url, cached / name, sha256=entry["sha256"], size=entry["size"],
            lock=_file_lock(home_path, f"{task}/{model}/{manifest.version}/{name}"),
            progress=progress,
        )
        if entry.get("extract"):
            extract_archive(cached / name, cached)
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
    ``os.replace``.  ``lock`` (a ``filelock`` lock) makes a second process wait
    and then find the file already there instead of downloading it again.
    """
    import requests

    from .display import progress_bar

    dest = Path(dest)
    if lock is None:
        from filelock import FileLock

        key = hashlib.sha1(str(dest.resolve()).encode()).hexdigest()
        lock_dir = Path(tempfile.gettempdir()) / "taskflow-locks"
        lock_dir.mkdir(exist_ok=True)
        lock = FileLock(str(lock_dir / f"{key}.lock"))
    with lock:
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
                    f"{url} has sha256 {actual}, expected {sha256}: the file on the server differs from "
                    "the one this taskflow version pins; nothing was written to the cache",
                    url=url,
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

    last_error: Exception | None = None
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
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
                status = response.status_code
                if status in _RETRY_STATUS:
                    last_error = DownloadError(f"GET {url} answered HTTP {status}", url=url, status=status)
                    continue
                if status >= 400:
                    raise DownloadError(
                        f"GET {url} answered HTTP {status}"
                        + (": the server has no such file; check PPNLP_ENDPOINT and the model version" if status == 404 else ""),
                        url=url, status=status,
                    )
                resumed = have and status == 206
                if not resumed:
                    have = 0
                bar.reset(total=size)
                bar.update(have)
                with open(tmp, "ab" if resumed else "wb") as handle:
                    for block in response.iter_content(chunk_size=1 << 16):
                        handle.write(block)
                        bar.update(len(block))
            got = tmp.stat().st_size
            if size is None or got == size:
                return
            last_error = DownloadError(f"GET {url} ended after {got} of {size} bytes", url=url)
        except DownloadError:
            raise
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            last_error = DownloadError(f"GET {url} failed: {exc}", url=url)
    raise DownloadError(
        f"giving up on {url} after {retries + 1} attempts: {last_error}",
        url=url, status=getattr(last_error, "status", None),
    )


# ------------------------------------------------------------------- archives

def extract_archive(archive: str | os.PathLike, target: str | os.PathLike) -> list[Path]:
    """Extract a .tar(.gz/.bz2/.xz) or .zip into ``target``, refusing any member
    that is absolute, climbs out with ``..``, or is a link or device file."""
    archive, target = Path(archive), Path(target).resolve()
    target.mkdir(parents=True, exist_ok=True)

    def checked(name: str) -> Path:
        dest = (target / name).resolve()
        if os.path.isabs(name) or (dest != target and target not in dest.parents):
            raise UnsafeArchiveError(f"{archive}: member {name!r} would be written outside {target}; refusing to extract")
        return dest

    # (name, is_dir, open) for every member, checked before anything is written.
    with contextlib.ExitStack() as stack:
        if zipfile.is_zipfile(archive):
            zf = stack.enter_context(zipfile.ZipFile(archive))
            members = [(i.filename, i.is_dir(), lambda i=i: zf.open(i)) for i in zf.infolist()]
        elif tarfile.is_tarfile(archive):
            tf = stack.enter_context(tarfile.open(archive))
            members = []
            for info in tf.getmembers():
                if not (info.isfile() or info.isdir()):
                    checked(info.name)
                    raise UnsafeArchiveError(f"{archive}: member {info.name!r} is a link or special file; refusing to extract")
                members.append((info.name, info.isdir(), lambda info=info: tf.extractfile(info)))
        else:
            raise UnsafeArchiveError(f"{archive} is neither a tar nor a zip archive")
        for name, _, _ in members:
            checked(name)
        written: list[Path] = []
        for name, is_dir, open_member in members:
            dest = checked(name)
            if is_dir:
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open_member() as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            written.append(dest)
    return written


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
    out_dir.mkdir(parents=True, exist_ok=True)
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
    the layout a static file server needs to act as ``PPNLP_ENDPOINT``."""
    package_dir = Path(package_dir)
    manifest = Manifest.load(package_dir / MANIFEST)
    _verify_dir(package_dir, manifest)
    out = Path(dest_root) / manifest.task / manifest.name / manifest.version
    out.mkdir(parents=True, exist_ok=True)
    for name in (*manifest.files, MANIFEST):
        tmp = _temp_name(out / name)
        try:
            shutil.copyfile(package_dir / name, tmp)
            os.replace(tmp, out / name)
        finally:
            tmp.unlink(missing_ok=True)
    return out
