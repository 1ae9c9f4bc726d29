"""Where a command's or a job's results go, and what writing there means.

The output the user names (:func:`output_target`): a regular file is written into place (a
temporary file beside it, renamed over it at the end); a symbolic link of the user's own there is
followed, and the file it points to written so; a character device or a FIFO (``/dev/null``, a
named pipe) and a descriptor of the process itself (``/dev/stdout``, ``/dev/fd/N``) are written
directly, as results come (:func:`open_direct`; for a job,
:class:`taskflow.checkpoint.DirectFiles`): no ``.partial``, ``.lock`` or checkpoint beside them, no
rename, and no resume.  A block
device or a socket is refused.  None is ever replaced by a regular file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

from .errors import OutputWriteError

__all__ = ["OutputTarget", "output_target", "open_direct", "write_all"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class OutputTarget(NamedTuple):
    """Where an output goes (:func:`output_target`)."""

    path: Path                     # the name given; for a symbolic link to a file (or to none yet), that file
    direct: str | None = None      # what is written directly, e.g. "a character device"; None: a file, atomically
    descriptor: int | None = None  # the descriptor of this process the name stands for (/dev/stdout: 1)


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names through /proc/self/fd (``/dev/stdout``,
    ``/dev/fd/3``, ``/proc/self/fd/3``), or None.  Links are followed one at a time, as the kernel
    does, up to the /proc entry, whose own link ("pipe:[1234]") names no path."""
    own = f"/proc/{os.getpid()}/fd"
    current = os.path.abspath(path)
    for _ in range(40):   # the kernel's own limit on links followed
        parent, name = os.path.realpath(os.path.dirname(current)), os.path.basename(current)
        if parent == own:
            return int(name) if name.isdigit() else None
        current = os.path.join(parent, name)
        if not os.path.islink(current):
            return None
        current = os.path.join(parent, os.readlink(current))
    return None


def output_target(path: str | os.PathLike, flag: str = "--output") -> OutputTarget:
    """What writing ``path`` means.  A regular file (or none yet) is written atomically: a temporary
    file beside it, renamed over it at the end; through a symbolic link, the file the link points to
    (the link stays).  A character device or a FIFO (``/dev/null``, ``mkfifo``) and a descriptor of
    this process (``/dev/stdout``, ``/dev/fd/N``, whatever it is open on) are written directly: a
    rename would replace the device with a regular file, and a FIFO's reader would never see a line.
    A block device (a disk) or a socket is refused.  A directory is left to the caller to refuse.

    A link is followed only when it is the user's own (or root's, as /dev/stdout is), the rule Linux's
    ``fs.protected_symlinks`` applies in shared folders: one planted by someone else at the output's
    name could send the results into their FIFO, or make the job overwrite a file of the user's.
    Such a link is replaced by the output, as any job file's name is (see the module's docstring)."""
    path = Path(path)
    try:
        link = os.lstat(path)
    except OSError:
        link = None
    if link is not None and stat.S_ISLNK(link.st_mode) and link.st_uid not in (os.geteuid(), 0):
        return OutputTarget(path)
    descriptor = _own_descriptor(path)
    if descriptor is not None:
        try:
            mode = os.fstat(descriptor).st_mode
        except OSError:
            raise OutputWriteError(f"{flag} {path} names descriptor {descriptor} of this process, which is not open; "
                                   "name a file, or open the descriptor (e.g. 3>out.jsonl)") from None
        what = "a file" if stat.S_ISREG(mode) else "a pipe" if stat.S_ISFIFO(mode) else _kind(mode)
        return OutputTarget(path, f"descriptor {descriptor} of this process ({what})", descriptor)
    try:
        mode = os.stat(path).st_mode
    except OSError:   # none yet, a dangling link, or unreadable: the write itself says what is wrong
        mode = None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        what = _kind(mode)
        if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            raise OutputWriteError(f"{flag} {path} is {what}; results go to a file, a FIFO or a character device "
                                   "such as /dev/null: name one of those")
        return OutputTarget(path, what)
    if path.is_symlink():
        return OutputTarget(Path(os.path.realpath(path)))
    return OutputTarget(path)


def open_direct(target: OutputTarget) -> int:
    """A descriptor to write ``target`` (:func:`output_target` said it is written directly) at its end.
    Opening a FIFO waits for its reader, as a shell's ``>`` does."""
    try:
        if target.descriptor is not None:
            return os.dup(target.descriptor)   # the same open file: its offset and O_APPEND are kept
        return os.open(target.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | _CLOEXEC)
    except OSError as exc:
        raise OutputWriteError(f"cannot write {target.path} ({target.direct}): {exc.strerror or exc}") from None


def write_all(fd: int, data: bytes, path) -> None:
    """Write all of ``data`` to ``fd`` (a pipe may take part of it at a time); an error names ``path``."""
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except OSError as exc:
            exc.filename = exc.filename or str(path)
            raise
        view = view[written:]
