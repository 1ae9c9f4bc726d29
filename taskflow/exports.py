"""The static-graph export cache: one folder per network weights and Paddle IR format.

An export folder holds what ``paddle.jit.save`` wrote and a stamp: the full key the folder is
named by (its name shows 16 hex digits of it), the sha256 of each file the network was built from
(its weights: the bytes it read, which the model checked as it read them) and each exported file's
sha256.  An export is used only when its stamp names the key and the sources asked for and every
file still matches, so a folder written by another package, one made from weights swapped in after
the package was verified (by a taskflow that did not yet check them as read), a half-copied cache
or a planted file is exported again, not run.

Nothing here imports Paddle: :func:`cached_export` is handed the routine that writes the static
program (the predictor's), and owns the folder around it: the lock, the staging folder, the stamp
and the rename into place.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Callable, Mapping

from .errors import ExportError, TaskflowError
from .files import sha256_file

__all__ = ["cached_export", "private_export_root"]

_STAMP = "export.json"
# Stamps checked by this process: {(folder, key, files' (name, size, mtime, inode))}.
_CHECKED_EXPORTS: set[tuple] = set()


def cached_export(export_dir: Path, key: str, fmt: str, built_from: Mapping[str, str],
                  write: Callable[[Path], None]) -> tuple[Path, Path]:
    """``(program, params)`` of the export named by ``key`` in ``export_dir``: reused when its
    stamp checks out (a read-only copied cache included), else made there by ``write(folder)``
    (which writes ``inference.<fmt>`` and ``inference.pdiparams`` into an empty folder), else, when
    ``export_dir`` cannot be written, made in a private temporary folder
    (:func:`private_export_root`).  ``fmt``: the Paddle IR format, ``"json"`` or ``"pdmodel"``;
    ``built_from``: file name -> sha256 of the files the network is built from."""
    name = f"{fmt}-{key[:16]}"
    found = _valid_export(export_dir / name, key, fmt, built_from)
    if found:
        return found
    try:
        export_dir.mkdir(parents=True, exist_ok=True)
        lock = _export_lock(export_dir, name)
        lock.acquire()
    except OSError as exc:
        fallback = private_export_root()
        warnings.warn(
            f"cannot write the static-graph export under {export_dir} ({exc.strerror or exc}); "
            f"using {fallback} instead. Set PPNLP_HOME (or home=) to a writable directory to keep it.",
            RuntimeWarning, stacklevel=4,
        )
        export_dir, lock = fallback, _export_lock(fallback, name)
        lock.acquire()
    try:
        return (_valid_export(export_dir / name, key, fmt, built_from)
                or _write_export(export_dir, name, key, fmt, built_from, write))
    finally:
        lock.release()


def _write_export(export_dir: Path, name: str, key: str, fmt: str, built_from: Mapping[str, str],
                  write: Callable[[Path], None]) -> tuple[Path, Path]:
    target = export_dir / name
    staging = export_dir / f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        write(staging)
        if not (staging / f"inference.{fmt}").is_file():
            raise ExportError(f"paddle.jit.save wrote {sorted(os.listdir(staging))}, expected inference.{fmt}")
        _write_stamp(staging, key, built_from)
        # A directory rename is atomic: readers see no export or a whole one.
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    except TaskflowError:   # said already (weights that do not fit, or changed since they were verified)
        raise
    except Exception as exc:
        raise ExportError(f"could not export the network to a static graph in {export_dir}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found = _valid_export(target, key, fmt, built_from)
    if not found:
        raise ExportError(f"the static export in {target} changed while it was written; run again")
    return found


def _write_stamp(folder: Path, key: str, built_from: Mapping[str, str]) -> None:
    files = {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file()}
    (folder / _STAMP).write_text(json.dumps({"key": key, "built_from": dict(built_from), "files": files}, indent=1),
                                 encoding="utf-8")


def _valid_export(folder: Path, key: str, fmt: str, built_from: Mapping[str, str]) -> tuple[Path, Path] | None:
    """``(program, params)`` of the export in ``folder`` if its stamp checks out, else None."""
    model_file, params_file = folder / f"inference.{fmt}", folder / "inference.pdiparams"
    try:
        stamp = json.loads((folder / _STAMP).read_text(encoding="utf-8"))
        files = stamp["files"]
        if stamp["key"] != key or stamp.get("built_from") != dict(built_from) \
                or not {model_file.name, params_file.name} <= set(files):
            return None
        seen = tuple((name, *_identity(folder / name)) for name in sorted(files))
        if (str(folder), key, seen) not in _CHECKED_EXPORTS:
            if any(sha256_file(folder / name) != sha for name, sha in files.items()):
                return None
            _CHECKED_EXPORTS.add((str(folder), key, seen))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return model_file, params_file


def _identity(path: Path) -> tuple[int, int, int]:
    info = os.stat(path, follow_symlinks=False)
    return info.st_size, info.st_mtime_ns, info.st_ino


def _export_lock(folder: Path, name: str):
    from filelock import FileLock

    return FileLock(str(folder / f".{name}.lock"))


_PRIVATE_ROOTS: list[Path] = []


def private_export_root() -> Path:
    """A folder only this user can write, for exports when the cache cannot take them.

    ``<tmp>/taskflow-static-<uid>`` is kept across processes (so each does not export again), but
    only if it is a real folder (not a symlink) owned by this user with no access for others;
    anyone can create that name first in a shared /tmp.  Otherwise, and where there are no user
    ids, a fresh ``mkdtemp`` folder, removed when the process ends."""
    import atexit

    if _PRIVATE_ROOTS:
        return _PRIVATE_ROOTS[0]
    if hasattr(os, "getuid"):
        shared = Path(tempfile.gettempdir()) / f"taskflow-static-{os.getuid()}"
        try:
            os.mkdir(shared, 0o700)
        except FileExistsError:
            pass
        except OSError:
            shared = None
        if shared is not None:
            info = os.lstat(shared)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
                _PRIVATE_ROOTS.append(shared)
                return shared
            warnings.warn(f"{shared} is not a private folder of this user (owner uid {info.st_uid}, mode "
                          f"{stat.S_IMODE(info.st_mode):o}); not using it for static-graph exports",
                          RuntimeWarning, stacklevel=5)
    private = Path(tempfile.mkdtemp(prefix="taskflow-static-"))
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    _PRIVATE_ROOTS.append(private)
    return private
