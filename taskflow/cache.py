"""The model cache as a user manages it: ``taskflow cache list`` and ``taskflow cache prune``.

``$PPNLP_HOME/taskflow/<task>/<model>/<version>/`` (:mod:`taskflow.packages`) holds a package's
files, its verification marker and its static exports (``static/<format>-<key>/``: ``json`` from
Paddle 3, ``pdmodel`` from Paddle 2); ``.exports/`` holds those of ``task_path`` packages.

While a :class:`~taskflow.model.Model` of a cached package is alive, it holds a shared ``flock`` on
that version's use lock (:func:`held_package`); a batch job's workers load their own models, so they
hold it too.  A prune takes it exclusively, without waiting, before it removes a version, and keeps
one it cannot take.  Unlike a record of who uses what, a lock needs no cleaning up: the kernel lets
go of it when its process ends, however it ends.  A link is listed as one and removed as one, never
followed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import time
import types
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .files import _STALE_TEMP_S, _process_alive, home_dir, sha256_file
from .manifest import MANIFEST, Manifest, ModelPackage
from .packages import _VERIFIED_MARKER, _marker_holds, _stamp, pinned_manifest

try:
    import fcntl
except ImportError:   # no flock (Windows): a loaded package is then not guarded against a prune
    fcntl = None

__all__ = ["PackageUse", "held_package", "scan", "listing", "plan_prune", "prune", "human_size"]

_EXPORT = re.compile(r"(json|pdmodel)-([0-9a-f]{16})")
# files.temp_name's ".NAME.PID.RANDOM.tmp", and the staging folders ".NAME.PID.RANDOM" of exports.py.
_TEMP = re.compile(r"\.(.+)\.(\d+)\.[0-9a-f]{8}(\.tmp)?")


# ------------------------------------------------------------------- in use

def _use_lock(home, task: str, model: str, version: str) -> Path:
    key = hashlib.sha256(f"in-use/{task}/{model}/{version}".encode()).hexdigest()[:32]
    return home_dir(home) / "taskflow" / ".locks" / f"{key}.use.lock"


def _open_lock(path: Path, create: bool) -> int | None:
    """A descriptor to flock ``path`` with (read-only where the cache is), or None where there is none."""
    for flags in (os.O_RDWR | (os.O_CREAT if create else 0), os.O_RDONLY):
        with contextlib.suppress(OSError):
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o666)
    return None


class PackageUse:
    """A shared lock on a cached version's use lock (or none), let go by :meth:`close` or, after
    :meth:`keep_while`, when its owner is collected."""

    def __init__(self, fd: int | None = None):
        self._fd = fd

    def keep_while(self, owner: object) -> None:
        if self._fd is not None:
            weakref.finalize(owner, os.close, self._fd)
            self._fd = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    __del__ = close   # a load that failed half-way lets go of it too


def held_package(resolve_package: Callable[[], ModelPackage], home) -> tuple[ModelPackage, PackageUse]:
    """``resolve_package()`` and, for a package in the cache, a :class:`PackageUse` on it.  Taken after
    resolving, since resolving a bundled package writes nothing into the cache; a prune that removed
    the version in between has left its files gone, and it is resolved again."""
    for _ in range(3):
        package, use = resolve_package(), PackageUse()
        if package.source in ("cache", "download") and fcntl is not None:
            manifest = package.manifest
            fd = _open_lock(_use_lock(home, manifest.task, manifest.name, manifest.version), create=True)
            use = PackageUse(fd)
            try:
                fd is None or fcntl.flock(fd, fcntl.LOCK_SH)   # waits while a prune removes this version
            except OSError:   # a file system without flock: the package runs, unguarded
                use.close()
        if all((package.directory / name).is_file() for name in package.manifest.files):
            break
        use.close()
    return package, use


@contextlib.contextmanager
def _unused(home, task: str, model: str, version: str, create: bool = True):
    """Whether no process holds the version (True where nothing can be locked); held exclusively in the block."""
    fd = _open_lock(_use_lock(home, task, model, version), create) if fcntl is not None else None
    try:
        try:
            fd is None or fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free = True
        except OSError:
            free = False
        yield free
    finally:
        fd is None or os.close(fd)


@contextlib.contextmanager
def _free(lock):
    """A ``filelock`` lock (an export's at its path, a download's) taken without waiting: whether it was."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock)) if isinstance(lock, Path) else lock
    try:
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


# --------------------------------------------------------------------- scan

def _size(path: Path) -> int:
    """Bytes on disk under ``path``, a link counted as itself and never followed."""
    total, walk = 0, os.walk(path) if _is_dir(path) else []   # os.walk would follow a link given as its top
    for folder, dirs, files in [(os.path.dirname(path), [], [os.path.basename(path)]), *walk]:
        for name in dirs + files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(folder, name))
                total += info.st_blocks * 512 if hasattr(info, "st_blocks") else info.st_size
    return total


def _is_dir(path: Path) -> bool:
    """A real folder, not a link to one."""
    with contextlib.suppress(OSError):
        return stat.S_ISDIR(os.lstat(path).st_mode)
    return False


def _children(folder: Path) -> list[Path]:
    """The folders and links in ``folder``, less taskflow's own dot-names."""
    with contextlib.suppress(OSError):
        return sorted(path for path in folder.iterdir()
                      if not path.name.startswith(".") and (path.is_symlink() or _is_dir(path)))
    return []


def _exports(folder: Path) -> list[dict]:
    return [{"path": path, "format": match[1], "size": _size(path)} for path in _children(folder)
            if (match := _EXPORT.fullmatch(path.name))] if _is_dir(folder) else []


def _verified(folder: Path, manifest: Manifest | None) -> str:
    """"yes" where the marker vouches for the files as they are, "export only" for a bundled package's
    cache folder (its files are in the wheel), else "no"."""
    try:
        if manifest is None:   # an older version fetched without its manifest: the files its marker names
            recorded = json.loads((folder / _VERIFIED_MARKER).read_text(encoding="utf-8"))
            manifest = types.SimpleNamespace(files=recorded["files"], fingerprint=lambda: recorded["fingerprint"])
        if not any(os.path.lexists(folder / name) for name in manifest.files):
            return "export only"
        return "yes" if _marker_holds(folder / _VERIFIED_MARKER, _stamp(folder, manifest)) else "no"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "no" if any(path.is_file() for path in folder.glob("[!.]*")) else "export only"


def _version(home, task: Path, model: Path, folder: Path) -> dict:
    pinned = manifest = None
    with contextlib.suppress(Exception):   # a model this install does not know
        pinned = pinned_manifest(task.name, model.name)
    state = "unknown" if pinned is None else "pinned" if pinned.version == folder.name else "old"
    with contextlib.suppress(Exception):
        manifest = pinned if state == "pinned" else Manifest.load(folder / MANIFEST)
    with _unused(home, task.name, model.name, folder.name, create=False) as unused:
        in_use = not unused
    link = None if _is_dir(folder) else os.readlink(folder)
    return {"task": task.name, "model": model.name, "version": folder.name, "path": folder, "size": _size(folder),
            "state": state, "verified": "no" if link else _verified(folder, manifest), "in_use": in_use,
            "link": link, "exports": [] if link else _exports(folder / "static"), "manifest": manifest}


def scan(home=None) -> dict:
    """What the cache under ``home`` holds: its ``versions`` (state: "pinned", "old" where this install
    pins another, "unknown" for a model it does not know), the ``links`` not followed (a task's or a
    model's folder that is a link), ``task_path_exports`` and the ``total`` bytes."""
    root = home_dir(home) / "taskflow"
    versions, links = [], []
    for task in _children(root):
        for model in _children(task) if _is_dir(task) else []:
            if _is_dir(model):
                versions += [_version(home, task, model, folder) for folder in _children(model)]
            else:
                links.append(model)
        if not _is_dir(task):
            links.append(task)
    return {"root": root, "versions": versions, "links": links, "task_path_exports": _exports(root / ".exports"),
            "total": _size(root.resolve()) if root.exists() else 0}   # the home's own link is the user's choice


def human_size(size: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024


def listing(home=None, as_json: bool = False) -> str:
    """What ``taskflow cache list`` prints: an aligned table, or JSON."""
    found = scan(home)
    if as_json:
        found["versions"] = [{k: v for k, v in version.items() if k != "manifest"} for version in found["versions"]]
        return json.dumps(found, default=str, ensure_ascii=False, indent=1)
    root = found["root"]
    if not found["versions"] and not found["task_path_exports"] and not found["links"]:
        return f"the cache {root} is empty" if root.exists() else f"no cache at {root} (nothing downloaded yet)"
    rows = [("TASK", "MODEL", "VERSION", "SIZE", "STATE", "VERIFIED", "IN USE", "EXPORTS")]
    rows += [(v["task"], v["model"], v["version"], human_size(v["size"]), v["state"], v["verified"],
              "yes" if v["in_use"] else "-", f"link -> {v['link']}" if v["link"] else
              ", ".join(f"{e['format']} {human_size(e['size'])}" for e in v["exports"]) or "-")
             for v in found["versions"]]
    rows += [(e["path"].name, "(task_path export)", "", human_size(e["size"]), "", "", "", e["format"])
             for e in found["task_path_exports"]]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines += [f"{path.relative_to(root)} -> {os.readlink(path)}: a link, not followed" for path in found["links"]]
    pinned = sum(v["state"] == "pinned" for v in found["versions"])
    lines.append(f"{len(found['versions'])} versions ({pinned} pinned by this install), "
                 f"{human_size(found['total'])} in all under {root}")
    return "\n".join(lines)


# -------------------------------------------------------------------- prune

@dataclass
class Removal:
    path: Path
    size: int
    why: str
    lock: Callable[[], contextlib.AbstractContextManager] = field(repr=False)   # held while removing: yields if free
    still: Callable[[], bool] = field(default=lambda: True, repr=False)         # checked again under the lock


def _export_ok(export: dict, weights_sha: str | None) -> bool:
    """Whether the export's stamp names its folder (and, given ``weights_sha``, the package's weights)
    and its files hold the bytes the stamp records."""
    folder = export["path"]
    try:
        stamp = json.loads((folder / "export.json").read_text(encoding="utf-8"))
        files = stamp["files"]
        return (_is_dir(folder) and stamp["key"][:16] == folder.name.rpartition("-")[2]
                and (weights_sha is None or stamp.get("built_from") == {"weights.npz": weights_sha})
                and {f"inference.{export['format']}", "inference.pdiparams"} <= set(files)
                and all(sha256_file(folder / name) == sha for name, sha in files.items()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _export_removal(export: dict, weights_sha: str | None, why: str) -> Removal:
    folder = export["path"]
    return Removal(folder, export["size"], why, lambda: _free(folder.with_name(f".{folder.name}.lock")),
                   lambda: not _export_ok(export, weights_sha))


def _stale_temp(path: Path, pid: str) -> bool:
    """files.py's rule for a leftover temporary: not written for a few minutes, by a process that is gone."""
    with contextlib.suppress(OSError):
        return time.time() - os.lstat(path).st_mtime > _STALE_TEMP_S and not _process_alive(int(pid))
    return False


def _temporaries(root: Path, skip: set[Path]) -> list[Removal]:
    """Leftover temporaries under ``root``.  No lock is needed: a live writer's file is never stale (its
    process runs, and a download writes as its bytes come), which is what files.py relies on too."""
    found = []
    for folder, dirs, files in os.walk(root):
        if Path(folder) in skip:
            dirs[:] = []
            continue
        for name in (*dirs, *files):
            match, path = _TEMP.fullmatch(name), Path(folder) / name
            if match and _stale_temp(path, match[2]):
                found.append(Removal(path, _size(path), "a temporary file left by a process that is gone",
                                     lambda: contextlib.nullcontext(True),
                                     lambda path=path, pid=match[2]: _stale_temp(path, pid)))
        dirs[:] = [name for name in dirs if not _TEMP.fullmatch(name)]
    return found


def plan_prune(home=None) -> tuple[list[Removal], list[tuple[Path, str]]]:
    """What a prune removes (versions this install does not pin, static exports that do not match
    their package, task_path exports that do not check out, leftover temporaries), and what it keeps
    for a reason worth saying.  Whose package a task_path export was cannot be told (its stamp
    records the weights' sha256, not where they were), so a valid one is kept."""
    found, removals, kept = scan(home), [], []
    for v in found["versions"]:
        if v["state"] == "pinned":
            weights = v["manifest"].files.get("weights.npz", {}).get("sha256", "none") if v["manifest"] else "none"
            removals += [_export_removal(e, weights, "a static export that does not match its package")
                         for e in v["exports"] if not _export_ok(e, weights)]
        elif v["in_use"]:
            kept.append((v["path"], "in use by a running process"))
        else:
            why = (f"a link (to {v['link']}): the link goes, not what it points to" if v["link"] is not None else
                   "a model this install does not know" if v["state"] == "unknown" else
                   "not the version this install pins")
            removals.append(Removal(v["path"], v["size"], why,
                                    lambda v=v: _unused(home, v["task"], v["model"], v["version"])))
    removals += [_export_removal(e, None, "a task_path export whose stamp does not check out")
                 for e in found["task_path_exports"] if not _export_ok(e, None)]
    if found["root"].is_dir():
        removals += _temporaries(found["root"], {removal.path for removal in removals})
    return removals, kept + [(path, "a link: not followed") for path in found["links"]]


def _remove(path: Path, root: Path) -> None:
    if _is_dir(path):
        shutil.rmtree(path)     # never follows a link inside, and refuses a link in place of the folder
    else:
        path.unlink(missing_ok=True)
    parent = path.parent
    while parent != root and root in parent.parents:   # a model's or a task's folder left empty goes too
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def prune(removals: list[Removal], home=None) -> tuple[list[Removal], list[tuple[Path, str]]]:
    """Remove what :func:`plan_prune` found, each under its lock and checked again there: what was
    removed, and what was left (in use now, being written, or not removable)."""
    root, done, left = home_dir(home) / "taskflow", [], []
    for removal in removals:
        with removal.lock() as free:
            if not free:
                left.append((removal.path, "in use by a running process, or being written"))
                continue
            if removal.still():
                try:
                    _remove(removal.path, root)
                except OSError as exc:
                    left.append((removal.path, f"cannot remove it: {exc.strerror or exc}"))
                    continue
                done.append(removal)
    return done, left
