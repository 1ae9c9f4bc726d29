"""Files written into place: readers see the old file or the new one, never half of one.

Every file taskflow writes for others to read (a cached or packed model file, a manifest, a
verification marker, a job's checkpoint, a command's ``--output``) is written the same way: to a
temporary name beside it that no other process or call uses (``.NAME.PID.RANDOM.tmp``), created
exclusively and never through a symlink planted at that name, synced to disk, then renamed over
the name with ``os.replace``; the temporary file is removed in ``finally`` whatever happened.

Also here: where taskflow keeps its files (:func:`home_dir`), the sha256 of a file, and the one
strict JSON line that results and errors files hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from .errors import OptionError

__all__ = [
    "home_dir",
    "sha256_file",
    "temp_name",
    "remove_stale_temps",
    "temporary_beside",
    "move_into_place",
    "atomic_write_bytes",
    "atomic_write_text",
    "copy_into_place",
    "written_into_place",
    "json_line",
    "json_text_line",
]

# A new file of our own: it fails (EEXIST, ELOOP) instead of opening what someone planted at the name.
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def home_dir(home: str | os.PathLike | None = None) -> Path:
    """``home`` if given, else ``$PPNLP_HOME``, else ``~/.paddlenlp``; read when called, never at
    import time, so a test or a notebook can change it."""
    if home is None:
        home = os.environ.get("PPNLP_HOME") or Path.home() / ".paddlenlp"
    elif not isinstance(home, (str, os.PathLike)):
        raise OptionError(f"home must be a folder's path (str or os.PathLike), got {type(home).__name__} ({home!r})", "home")
    return Path(home).expanduser()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def temp_name(dest: str | os.PathLike) -> Path:
    """A temporary name beside ``dest``, unique per process and call, so concurrent writers never
    share a file; :func:`remove_stale_temps` knows its shape."""
    dest = Path(dest)
    return dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


# A temporary file this old, of a process that is gone, was left by a writer that was killed.
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


def remove_stale_temps(dest: str | os.PathLike) -> None:
    """Remove the temporary files (:func:`temp_name`) that killed writers of ``dest`` left beside it.

    Meant to be called with the lock that the writers of ``dest`` take held (a download's lock):
    any live writer that takes it is not writing now.  A writer that takes no lock (a copy into the
    cache), or another one, is guarded by the age and the process id: a file is removed only when
    it was not written for a few minutes (a live download writes as its bytes come) and its
    process is gone (one in another PID namespace looks gone: the age still guards it).
    """
    dest = Path(dest)
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


@contextlib.contextmanager
def temporary_beside(dest: str | os.PathLike) -> Iterator[Path]:
    """A :func:`temp_name` beside ``dest`` for the block to write (by any means: a download appends
    to it as its bytes come) and then :func:`move_into_place`; removed when the block is left,
    whatever happened."""
    tmp = temp_name(dest)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)


def move_into_place(tmp: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Sync the finished file ``tmp`` to disk, then rename it over ``dest``: readers of ``dest``
    see the old file or this one, also after a crash."""
    descriptor = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(tmp, dest)


@contextlib.contextmanager
def written_into_place(
    dest: str | os.PathLike,
    mode: str = "wb",
    *,
    encoding: str | None = None,
    permissions: int = 0o666,
    on_failure: Callable[[OSError], BaseException] | None = None,
) -> Iterator[IO]:
    """A new file to write, opened with ``mode`` ("wb", or "w" with an ``encoding``), that replaces
    ``dest`` only when the ``with`` block ends without an exception: flushed, synced, closed, then
    renamed over ``dest``.  An exception in the block leaves ``dest`` as it was.

    The file is a :func:`temp_name` beside ``dest``, created exclusively and not through a symlink,
    with ``permissions`` (less the umask); it is gone when the block is left, whatever happened.
    A failure to finish it (a full disk shows at the flush or the sync) is raised as
    ``on_failure(error)`` where that is given, else as it is.

    >>> with written_into_place(folder / "out.txt", "w", encoding="utf-8") as out:
    ...     out.write("done\\n")
    """
    dest = Path(dest)
    tmp = temp_name(dest)
    descriptor = os.open(tmp, _NEW_FILE, permissions)
    try:
        handle = os.fdopen(descriptor, mode, encoding=encoding)
    except BaseException:
        os.close(descriptor)
        tmp.unlink(missing_ok=True)
        raise
    try:
        yield handle
        try:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        except OSError as exc:
            if on_failure is None:
                raise
            raise on_failure(exc) from None
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(OSError):   # what a failed write left in the buffer goes with the file
            handle.close()
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, parents: bool = True,
                       permissions: int = 0o666) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never half.
    ``parents``: make the folders on the way first (else a missing folder is an error);
    ``permissions``: the file's mode bits, less the umask."""
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    with written_into_place(path, permissions=permissions) as handle:
        handle.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def copy_into_place(source: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Copy the bytes of ``source`` to ``dest`` as :func:`written_into_place` writes: ``dest`` is the
    old file or the whole copy, never part of one.  The folder of ``dest`` must exist."""
    with open(source, "rb") as src, written_into_place(dest) as out:
        shutil.copyfileobj(src, out, 1 << 20)


def json_text_line(value: Any) -> str:
    """``value`` as one line of strict JSON with its ``"\\n"``, non-ASCII chars as they are.  NaN and
    Infinity, which no JSON parser reads, are refused (``ValueError``), not written."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False) + "\n"


def json_line(value: Any, *, ascii: bool = False) -> bytes:
    """:func:`json_text_line` in UTF-8, the line a results or errors file holds.  A str that cannot
    be UTF-8 (a lone surrogate) is a ``UnicodeEncodeError`` (a ``ValueError``); with ``ascii``,
    every non-ASCII char is written as a JSON escape instead, so any str can be written."""
    if ascii:
        return (json.dumps(value, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")
    return json_text_line(value).encode("utf-8")
