"""Model packages: the cache, resolution and packing.

A model package is a directory holding ``manifest.json`` and the files it lists, each pinned by
sha256 and size (:mod:`taskflow.manifest`).  The manifests of the models taskflow knows ship
inside the wheel (``taskflow.resources/<task>/<model>/``), so every download is checked against a
hash that came with the code, never against one fetched alongside the file.  Default models ship
their files there as well, so the first call works offline on a fresh machine.

Where files come from, in order:

1. ``task_path=``: the user's own package (same layout as ours);
2. the cache, ``$PPNLP_HOME/taskflow/<task>/<model>/<version>/``, verified once;
3. the bundled package in ``taskflow.resources``;
4. a download (:mod:`taskflow.downloads`) from ``$PPNLP_ENDPOINT/<task>/<model>/<version>/<file>``,
   unless offline mode (``offline=True`` or ``PPNLP_OFFLINE=1``) is on.

Files are written into place by :mod:`taskflow.files`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

from .downloads import download_file, download_lock, endpoint, redact
from .errors import (
    CacheWriteError,
    ChecksumError,
    ManifestError,
    ModelNotFoundError,
    OfflineModeError,
    OptionError,
    TaskflowError,
    UnknownModelError,
)
from .files import atomic_write_text, copy_into_place, home_dir, sha256_file
from .manifest import MANIFEST, Manifest, ModelPackage, check_file_name, inside, name_problem, safe_name
from .schema import check_fields

__all__ = [
    "is_offline",
    "resolve",
    "available_models",
    "pinned_manifest",
    "cache_dir",
    "cache_link_problem",
    "copy_to_cache",
    "write_package",
    "pack",
]

_VERIFIED_MARKER = ".verified"
_TRUE = {"1", "true", "yes", "on"}
logger = logging.getLogger("taskflow")


def is_offline(offline: bool | None = None) -> bool:
    """``offline`` if given, else whether ``$PPNLP_OFFLINE`` is set to a true value."""
    if offline is not None:
        if not isinstance(offline, bool):   # bool("no") is True: never coerce
            raise OptionError(f"offline must be True, False or None (then $PPNLP_OFFLINE), got "
                              f"{type(offline).__name__} ({offline!r})", "offline")
        return offline
    return os.environ.get("PPNLP_OFFLINE", "").strip().lower() in _TRUE


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
                size=entry["size"], lock=download_lock(home_path, f"{task}/{model}/{manifest.version}/{name}"),
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
            copy_into_place(package.directory / name, cached / name)
        atomic_write_text(cached / MANIFEST, json.dumps(manifest.data, ensure_ascii=False, indent=2) + "\n")
    if not _verified_cache(cached, manifest):
        raise ChecksumError(f"{cached} does not match the manifest of {manifest.task}/{manifest.name} after copying")
    return ModelPackage(cached, manifest, "cache")


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
        check_file_name(name, str(out_dir))
    check_fields(fields, str(out_dir))     # and before the package there is touched: a bad field changes nothing
    out_dir.mkdir(parents=True, exist_ok=True)
    # A package already there is replaced: its manifest goes first, so a write cut short leaves a
    # folder without a manifest (an error that says so), never an old manifest over new weights.
    (out_dir / MANIFEST).unlink(missing_ok=True)
    entries = {}
    for name, source in files.items():
        dest = out_dir / name
        if Path(source).resolve() != dest.resolve():
            copy_into_place(source, dest)
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
        copy_into_place(package_dir / name, out / name)
    return out
