"""The files of a batch job and its checkpoint: how far the job got, and what made its output.

A job writes ``<output>.partial`` and ``<errors>.partial`` and, after every chunk, replaces
``<output>.partial.ckpt`` atomically with one JSON object::

    {"format": 3, <the job's identity>, "done": records done, "out_bytes": ..., "err_bytes": ...,
     "in_bytes": input bytes those records span, "in_sha256": their sha256}

``resume=True`` continues from there only if three things hold, all checked before any
file is touched (a refused resume leaves every file byte for byte as it was):

* the identity is the same: whatever the driver (:mod:`taskflow.jobs`) says made the
  output (task, model package, options, fields, encoding...); any difference is a
  :class:`~taskflow.errors.ResumeMismatchError` naming it, then and now;
* the input's first ``in_bytes`` bytes (the lines already done, with a BOM and a CSV
  header) hash to ``in_sha256``.  So the lines after the last one done may change: the bad
  line that stopped the job fixed in place, lines appended to a growing file; a change
  to a line already done, or another file at the same path, is refused;
* the partial files hold at least what the checkpoint says is valid; bytes past that
  belong to a chunk that was not finished and are cut off.

While a job runs it holds an exclusive lock (``flock``) on ``<output>.lock`` and on
``<errors>.lock``, removed when it ends: a second job naming the same output or errors
file is refused at once (:class:`~taskflow.errors.OutputInUseError`), whether it would
start over or resume.  A job moves into place only the ``.partial`` files it wrote itself
(checked by inode), and a resume calls a job complete only when the output in place
has the size and records its checkpoint says.

Job files are never opened through a symbolic link (``O_NOFOLLOW``): they sit at names
anyone who can write the output folder can predict.  Files made anew are created with
``O_EXCL``, the checkpoint is written to a private temporary file of a name no one can predict
(:func:`taskflow.files.atomic_write_bytes`) and renamed over its name, and renames replace a link
planted at the target, never what it points to.

The output the user names, and what writing it means (a file, a device, a FIFO, a descriptor
of the process), is :mod:`taskflow.outputs`' concern.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from .errors import InputChangedError, JobError, OutputInUseError, OutputWriteError, ResumeMismatchError
from .files import atomic_write_bytes
from .outputs import OutputTarget, open_direct, write_all
from .readers import InputFile, count_lines

__all__ = ["JobFiles", "DirectFiles", "JobState", "job_state", "SIDE_SUFFIXES", "default_errors_path", "Progress", "CHECKPOINT_FORMAT"]

# 3: the identity of the job (task, model fingerprint, options) and of the input (in_bytes, in_sha256).
CHECKPOINT_FORMAT = 3
_MAX_CHECKPOINT_BYTES = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at a job file's name must not block the open


class Progress(NamedTuple):
    """A state the job can be resumed from: the records done and the bytes valid in each file."""

    done: int         # input records done (written to the output or to the errors file)
    out_bytes: int
    err_bytes: int
    in_bytes: int     # input bytes those records span, from the start of the file
    in_sha256: str    # the sha256 of those bytes


class _InputDigest:
    """A running sha256 of the input's first bytes, read on its own handle as the job advances."""

    def __init__(self, path: Path):
        self._handle = open(path, "rb")
        self.opened = os.fstat(self._handle.fileno())   # what the file was when the job began
        self._sha = hashlib.sha256()
        self.position = 0

    def advance(self, to: int) -> str | None:
        """The sha256 of the first ``to`` bytes, or None when the file is shorter."""
        while self.position < to:
            block = self._handle.read(min(1 << 20, to - self.position))
            if not block:
                return None
            self._sha.update(block)
            self.position += len(block)
        return self._sha.hexdigest()

    def close(self) -> None:
        self._handle.close()


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


# What a job's working files add to its output's name (``side_files``), named here once.
PARTIAL, CHECKPOINT, LOCK = ".partial", ".partial.ckpt", ".lock"
SIDE_SUFFIXES = (CHECKPOINT, PARTIAL, LOCK)     # longest first
ERRORS_SUFFIX = ".errors.jsonl"                 # the errors file's default name, beside the output


def default_errors_path(output: str | os.PathLike) -> Path:
    """Where a job's bad records go unless it is told: ``<output>.errors.jsonl``."""
    return _sibling(Path(output), ERRORS_SUFFIX)


class JobState(str, Enum):
    """Where a job writing an output stands, read from the files beside it (:func:`job_state`):

    ===============================  ===========================  ======================================
    state                            files                        a run with ``resume=True``
    ===============================  ===========================  ======================================
    ``fresh``                        no checkpoint                starts at the first record (as every
                                                                  run without ``resume`` does)
    ``stopped``                      checkpoint, ``.partial``     continues after the last chunk done,
                                                                  if identity and input still hold
    ``stopped while finishing``      output, checkpoint, no       completes the moves into place
                                     ``.partial``                 (:meth:`JobFiles.finish_stopped`)
    ``finished``                     output, no checkpoint        runs nothing and says so
    ===============================  ===========================  ======================================
    """

    FRESH = "fresh"
    STOPPED = "stopped"
    FINISHING = "stopped while finishing"
    FINISHED = "finished"


def job_state(output: str | os.PathLike) -> JobState:
    """The :class:`JobState` of a job writing ``output``."""
    output = Path(output)
    has_checkpoint, has_partial = os.path.lexists(_sibling(output, CHECKPOINT)), os.path.lexists(_sibling(output, PARTIAL))
    if output.exists() and not has_checkpoint:
        return JobState.FINISHED
    if output.exists() and not has_partial:
        return JobState.FINISHING
    return JobState.STOPPED if has_checkpoint else JobState.FRESH


def _refuse_link(path: Path, exc: OSError) -> None:
    if exc.errno == errno.ELOOP or path.is_symlink():
        raise OutputWriteError(
            f"{path} is a symbolic link; a job does not write through links at its own file names "
            "(someone else may have planted it): remove it and rerun"
        ) from None


def _open_regular(path: Path, flags: int) -> int:
    """``os.open`` that refuses a symbolic link and anything but a regular file."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, 0o666)
    except OSError as exc:
        _refuse_link(path, exc)
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputWriteError(f"{path} is not a regular file; remove it and rerun")
    return fd


def _create(path: Path):
    """A new empty file at ``path`` (what was there, a link included, is removed first), read-write."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
    # O_EXCL: if something is planted between the unlink and here, this fails instead of following it.
    return os.fdopen(_open_regular(path, os.O_RDWR | os.O_CREAT | os.O_EXCL), "w+b")


def _reopen(path: Path):
    """An existing file at ``path``, read-write, not through a link (created if absent)."""
    return os.fdopen(_open_regular(path, os.O_RDWR | os.O_CREAT), "r+b")


def _lock(path: Path, output: Path) -> int:
    """An exclusive lock on ``<path>.lock`` (created, with this process's id in it), or an
    :class:`OutputInUseError` naming the job that holds it."""
    lock = _sibling(path, LOCK)
    while True:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_regular(lock, os.O_RDWR | os.O_CREAT)
        except OutputWriteError:
            raise
        except OSError as exc:
            raise OutputWriteError(f"cannot write the output {output}: {exc.strerror or exc} ({exc.filename}); "
                                   "choose a writable --output") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise OutputWriteError(f"cannot lock {lock}: {exc.strerror or exc}") from exc
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            pid = int(holder) if holder.isdigit() else None
            raise OutputInUseError(
                f"another job is writing {path} (process {pid if pid else 'unknown'}; it holds {lock}); "
                "two jobs never share an output or errors file: wait for that one to end, or choose another "
                "--output (--errors)", pid) from None
        try:
            # The job that held it removes the file on release: a lock taken on a removed file is no lock.
            if os.path.samestat(os.fstat(fd), os.lstat(lock)):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _unlock(path: Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(_sibling(path, LOCK))   # while still held, so no one else locks the file being removed
    os.close(fd)


def _same_inode(handle, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.lstat(path))
    except FileNotFoundError:
        return False


def read_checkpoint(path: Path, output: Path) -> dict:
    """The checkpoint's JSON object, or a :class:`JobError` saying it is damaged."""
    def damaged(why: str) -> JobError:
        return JobError(f"cannot resume {output}: its checkpoint {path} is damaged ({why}); "
                        "run without --resume to start over")

    try:
        fd = _open_regular(path, os.O_RDONLY)
    except OutputWriteError:
        raise
    except OSError as exc:
        raise damaged(exc.strerror or str(exc)) from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(_MAX_CHECKPOINT_BYTES + 1)
    if len(data) > _MAX_CHECKPOINT_BYTES:
        raise damaged(f"over {_MAX_CHECKPOINT_BYTES:,} bytes")
    try:
        state = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise damaged(f"not JSON: {exc}") from None
    if not isinstance(state, dict):
        raise damaged(f"a JSON {type(state).__name__}, not an object")
    return state


def _load(ckpt: Path, output: Path, identity: dict) -> Progress:
    """The progress a checkpoint records, if this job made it; else a typed error."""
    state = read_checkpoint(ckpt, output)
    version = state.get("format")
    if type(version) is int and version != CHECKPOINT_FORMAT:
        raise ResumeMismatchError(
            f"cannot resume {output}: its checkpoint {ckpt} was written by another version of taskflow "
            f"(format {version}; this one reads {CHECKPOINT_FORMAT}); finish the job with that version, "
            "or run without --resume to start over", {"format": (version, CHECKPOINT_FORMAT)})
    values = [state.get(name) for name in Progress._fields]
    if not (version == CHECKPOINT_FORMAT and all(type(v) is int and v >= 0 for v in values[:4])
            and isinstance(values[4], str) and len(values[4]) == 64):
        raise JobError(f"cannot resume {output}: its checkpoint {ckpt} is damaged (it needs format, "
                       f"{', '.join(Progress._fields)}: counts and a sha256); run without --resume to start over")
    changes = identity_changes(state, identity)
    if changes:
        raise _mismatch(output, changes)
    return Progress(*values)


def _check_input(digest: _InputDigest, progress: Progress, output: Path, source: str) -> None:
    """The input's first ``in_bytes`` are the ones the done records were read from."""
    found = digest.advance(progress.in_bytes)
    if found is None:
        raise _mismatch(output, {"input": (f"{progress.done} record(s) done in its first {progress.in_bytes:,} bytes",
                                           f"{digest.position:,} bytes in all")},
                        f"{source} is now shorter than the part already done; is it the same file?")
    if found != progress.in_sha256:
        raise _mismatch(output, {"input": (f"sha256 {progress.in_sha256[:12]} of its first {progress.in_bytes:,} bytes",
                                           f"sha256 {found[:12]}")},
                        f"the {progress.done} record(s) already done are not what {source} now holds "
                        "(a line already done was changed, or this is another file; a fix to a line after them is fine)")


def _shown(key: str, value: Any) -> str:
    if key == "model" and isinstance(value, dict):
        return f"{value.get('package')} (fingerprint {str(value.get('fingerprint'))[:12]})"
    if isinstance(value, dict) and set(value) == {"file", "sha256"}:  # an option naming a file
        return f"{value['file']} (sha256 {str(value['sha256'])[:12]})"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def identity_changes(saved: dict, identity: dict) -> dict[str, tuple[Any, Any]]:
    """``{what: (then, now)}`` for each part of ``identity`` that ``saved`` holds otherwise;
    a dict of options is compared option by option."""
    changes: dict[str, tuple[Any, Any]] = {}
    for key, now in identity.items():
        then = saved.get(key)
        if then == now:
            continue
        if isinstance(then, dict) and isinstance(now, dict) and key == "options":
            for name in sorted(set(then) | set(now), key=str):
                if then.get(name) != now.get(name):
                    changes[f"option {name}"] = (then.get(name), now.get(name))
        else:
            changes[key] = (then, now)
    return changes


def _mismatch(output: Path, changes: dict[str, tuple[Any, Any]], why: str = "") -> ResumeMismatchError:
    listed = "; ".join(f"{key}: {_shown(key, then)} then, {_shown(key, now)} now" for key, (then, now) in changes.items())
    return ResumeMismatchError(
        f"cannot resume {output}: {why or 'its checkpoint was made by another job'} ({listed}). "
        "Continuing would mix two runs in one output, so nothing was changed: rerun with the settings and "
        "input that made it, or without --resume to start over", changes)


class JobFiles:
    """The output and error files of a job, with their checkpoint.

    Opening checks a resume and cuts the files back to the checkpoint; :meth:`write` appends a
    chunk's lines and checkpoints; :meth:`finish` renames the files into place.
    """

    resumable = True
    after_stop = "rerun with --resume (resume=True) to continue"   # what to do once the job stopped

    def __init__(self, output: Path, errors: Path, identity: dict, source: InputFile, resume: bool):
        self.output, self.errors = output, errors
        self.out_tmp, self.err_tmp = _sibling(output, PARTIAL), _sibling(errors, PARTIAL)
        self.ckpt = _sibling(output, CHECKPOINT)
        self.identity = {"format": CHECKPOINT_FORMAT, **identity}
        self.out = self.err = None
        self._input, self._input_name = source.path, source.source
        self._digest = _InputDigest(source.path)
        try:
            # A resume is checked in full before any file is touched.
            progress = self._check_resume(source) if resume and os.path.lexists(self.ckpt) else None
            try:
                output.parent.mkdir(parents=True, exist_ok=True)
                if progress is None:
                    # First the checkpoint: a job stopped from here on resumes from the start, whatever
                    # an older job left in the partial files.
                    self._save(Progress(0, 0, 0, source.offset, self._digest.advance(source.offset)))
                    self.out, self.err = _create(self.out_tmp), _create(self.err_tmp)
                else:
                    self.out, self.err = _reopen(self.out_tmp), _reopen(self.err_tmp)
                    for handle, valid in ((self.out, progress.out_bytes), (self.err, progress.err_bytes)):
                        handle.truncate(valid)  # bytes past the checkpoint belong to a chunk that was not finished
                        handle.seek(valid)
                    self.progress = progress
            except OutputWriteError:
                raise
            except OSError as exc:
                raise OutputWriteError(f"cannot write the output {output}: {exc.strerror or exc} ({exc.filename}); "
                                       "choose a writable --output") from exc
        except BaseException:
            self.close()
            raise

    @staticmethod
    def side_files(path: Path, *, errors: bool = False) -> dict[str, Path]:
        """The files a job keeps beside its output (``errors=True``: beside its errors file), by what they are."""
        files = {"partial output": _sibling(path, PARTIAL), "checkpoint": _sibling(path, CHECKPOINT),
                 "lock file": _sibling(path, LOCK)}
        if errors:
            files = {"partial errors file": files["partial output"], "lock file": files["lock file"]}
        return files

    @staticmethod
    @contextlib.contextmanager
    def lock(output: Path, errors: Path):
        """Hold the job's output and errors file for the whole run: a second job that names either is
        refused with :class:`OutputInUseError` (see the module's docstring)."""
        held = []
        try:
            for path in dict.fromkeys((output, errors)):
                held.append((path, _lock(path, output)))
            yield
        finally:
            for path, fd in reversed(held):
                _unlock(path, fd)

    # ------------------------------------------------------------ resuming
    def _check_resume(self, source: InputFile) -> Progress:
        progress = _load(self.ckpt, self.output, self.identity)
        _check_input(self._digest, progress, self.output, source.source)
        for path, size in ((self.out_tmp, progress.out_bytes), (self.err_tmp, progress.err_bytes)):
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode):
                _refuse_link(path, OSError(errno.ELOOP, "a symbolic link"))
            if size and (info is None or info.st_size < size):
                have = "is missing" if info is None else f"has {info.st_size:,}"
                raise JobError(f"cannot resume {self.output}: {path} is shorter than its checkpoint says "
                               f"({size:,} bytes; it {have}); run without --resume to start over")
        if source.skip(progress.done) != progress.done or source.offset != progress.in_bytes:
            # The bytes are the ones hashed, so only a line that grew past them gets here: the last record
            # done was read while its line was still being written.
            raise JobError(f"cannot resume {self.output}: the {progress.done} record(s) done end at byte "
                           f"{progress.in_bytes:,} of {source.source}, but its line {source.lines} now runs on past "
                           "it (was it still being written?); run without --resume to start over")
        return progress

    @classmethod
    def finish_stopped(cls, output: Path, errors: Path, identity: dict, source: InputFile) -> None:
        """A job stopped while moving its files into place (its checkpoint is left, its ``.partial`` gone):
        finish it, if it was this job."""
        if job_state(output) is not JobState.FINISHING:
            return
        ckpt = _sibling(output, CHECKPOINT)
        progress = _load(ckpt, output, {"format": CHECKPOINT_FORMAT, **identity})
        digest = _InputDigest(source.path)
        try:
            _check_input(digest, progress, output, source.source)
        finally:
            digest.close()
        cls._check_finished(output, errors, progress)
        cls.complete(output, errors)

    @staticmethod
    def _check_finished(output: Path, errors: Path, progress: Progress) -> None:
        """The output in place (and the errors file, at either of its names) is what the checkpoint describes:
        its size, and one line per record done."""
        found = [(output, progress.out_bytes)]
        if progress.err_bytes:   # with none, complete() removes whatever errors file is there
            err_tmp = _sibling(errors, PARTIAL)
            found.append((err_tmp if os.path.lexists(err_tmp) else errors, progress.err_bytes))
        sizes = []
        for path, _ in found:
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                info = None
            sizes.append(info.st_size if info is not None and stat.S_ISREG(info.st_mode) else None)
        if sizes == [size for _, size in found]:
            records = sum(count_lines(path) for path, _ in found)
            if records == progress.done:
                return
        else:
            records = None
        wrote = " and ".join(f"{size:,} bytes to {path}" for path, size in found)
        has = " and ".join(f"{path} {'is missing' if size is None else f'has {size:,} bytes'}"
                           for (path, _), size in zip(found, sizes))
        counted = "" if records is None else f", {records} record(s) in all"
        raise JobError(f"cannot resume {output}: its checkpoint says the finished job wrote {progress.done} record(s), "
                       f"{wrote}; but {has}{counted}. It was changed after the job, or written by another one; "
                       "run without --resume to start over")

    # ------------------------------------------------------------ writing
    @property
    def done(self) -> int:
        return self.progress.done

    def state(self) -> Progress:
        return self.progress

    def write(self, out_lines: list[bytes], err_lines: list[bytes], done: int, in_bytes: int) -> None:
        """Append encoded lines, make them durable, then checkpoint ``done`` records up to input byte ``in_bytes``."""
        try:
            self.out.writelines(out_lines)
            self.err.writelines(err_lines)
            for handle in (self.out, self.err):
                handle.flush()
                os.fsync(handle.fileno())
            digest = self._digest.advance(in_bytes)
            if digest is None:
                raise JobError(f"internal check failed: the input ended before byte {in_bytes:,} that a record "
                               "was read from; please report this")
            self._save(Progress(done, self.out.tell(), self.err.tell(), in_bytes, digest))
        except OSError as exc:
            # The partial files gone from their names (their folder removed, say): no record of this run is on disk.
            gone = [path for handle, path in ((self.out, self.out_tmp), (self.err, self.err_tmp))
                    if not _same_inode(handle, path)]
            if gone:
                folder = next((path.parent for path in gone if not path.parent.is_dir()), None)
                what = (f"{folder} was removed while the job ran, and the job's partial output with it" if folder
                        else f"{gone[0]} was removed or replaced while the job ran")
                raise OutputWriteError(f"{what} ({exc.strerror or exc}): the job stopped and nothing of this run "
                                       "was kept; run it again from the start") from exc
            raise OutputWriteError(
                f"cannot write {exc.filename or self.out_tmp}: {exc.strerror or exc}; the job stopped after "
                f"{self.done} record(s), which are saved. Free space (or fix the permissions) and rerun with "
                "--resume (resume=True)"
            ) from exc

    def check_input(self, read: int, failed: str | None = None) -> None:
        """An :class:`InputChangedError` when the input is not the file the job has been reading (``read``
        bytes of it so far): removed, cut shorter than that, or its records already done changed.  A file
        that only grew (lines appended) passes, unless a record read from it ``failed`` (which, and why):
        a record read from a file written to under the job is not taken for a bad line of the file.
        The done bytes are hashed again only when the file's size, time or inode moved since the job began."""
        try:
            now = os.stat(self._input)
        except FileNotFoundError:
            raise self._changed("it was removed", failed, resumable=False) from None
        then = self._digest.opened
        same = (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)
        if same and (now.st_size, now.st_mtime_ns) == (then.st_size, then.st_mtime_ns):
            return
        digest = _InputDigest(self._input)
        try:
            kept = digest.advance(self.progress.in_bytes) == self.progress.in_sha256
        finally:
            digest.close()
        if not kept:
            raise self._changed(f"its first {self.progress.in_bytes:,} bytes, those of the {self.done} record(s) "
                                "done, are not what they were", failed, resumable=False)
        if same and now.st_size < read:
            raise self._changed(f"it now has {now.st_size:,} bytes, fewer than the {read:,} already read", failed,
                                resumable=True)
        if failed is not None:
            raise self._changed("it was written to after the job began", failed, resumable=True)

    def _changed(self, why: str, failed: str | None, *, resumable: bool) -> InputChangedError:
        message = f"{self._input_name} changed while the job ran ({why})"
        if failed is not None:
            message += f"; {failed}"
        if resumable:
            message += ("; the job stopped, and the records done are still what the file holds: rerun with --resume "
                        "(resume=True) to go on from there with the file as it is now (fix that line first if it is "
                        "bad in the file too)" if failed else "; the job stopped, and the records done are still what "
                        "the file holds: rerun with --resume (resume=True) to do the rest as it is now")
        else:
            message += ("; the job stopped, and what it did was read from the file as it was before, so it cannot be "
                        "resumed: run the job again (without --resume) on the file as it is now")
        return InputChangedError(message, self._input_name)

    def _save(self, progress: Progress) -> None:
        record = json.dumps({**self.identity, **progress._asdict()}, ensure_ascii=False).encode("utf-8")
        # Private (0600), and no folder made anew: a folder removed under the job is an error (see write).
        atomic_write_bytes(self.ckpt, record, parents=False, permissions=0o600)
        self.progress = progress

    def rewind(self, progress: Progress) -> None:
        """Make an earlier checkpoint the current one (what was written after it is dropped on resume)."""
        self._save(progress)

    def finish(self) -> bool:
        """Move the files into place (only the ones this job wrote); True when an errors file was written."""
        for handle, path in ((self.out, self.out_tmp), (self.err, self.err_tmp)):
            if not _same_inode(handle, path):
                raise JobError(f"{path} is not the file this job wrote: it was replaced or removed while the job ran "
                               "(another program writing the same output?), so nothing was moved into place; "
                               "rerun the job")
        self.out.close()
        self.err.close()
        return self.complete(self.output, self.errors)

    @staticmethod
    def complete(output: Path, errors: Path) -> bool:
        """Rename the finished files into place, the checkpoint last (so a job stopped in here is
        finished by ``resume=True``); True when an errors file was written."""
        out_tmp, err_tmp = _sibling(output, PARTIAL), _sibling(errors, PARTIAL)
        try:
            if os.path.lexists(out_tmp):
                os.replace(out_tmp, output)
            if not os.path.lexists(err_tmp):
                has_errors = os.path.lexists(errors)  # moved into place by the run that was stopped in here
            elif os.lstat(err_tmp).st_size:
                has_errors = True
                os.replace(err_tmp, errors)
            else:
                has_errors = False
                os.unlink(err_tmp)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(errors)  # an older run's errors do not describe this output
            JobFiles._drop_checkpoint(_sibling(output, CHECKPOINT))
        except OSError as exc:
            raise OutputWriteError(f"cannot move the finished output {output} into place: {exc}") from exc
        return has_errors

    def discard(self) -> None:
        """Remove this job's working files: for a job that stopped before it wrote anything, whose
        checkpoint would only say "nothing done" (closed first, so the lock is given back)."""
        self.close()
        for path in (self.out_tmp, self.err_tmp, self.ckpt):
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    @staticmethod
    def _drop_checkpoint(path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def close(self) -> None:
        for handle in (self.out, self.err):
            if handle is not None:
                with contextlib.suppress(OSError):  # a full disk fails the flush too; the checkpoint is what counts
                    handle.close()
        self._digest.close()


class DirectFiles(JobFiles):
    """The files of a job whose output is written directly (:func:`output_target`: a character device,
    a FIFO, a descriptor of this process): each chunk's lines go out as they are done, with no
    ``.partial``, ``.lock`` or checkpoint beside the output and nothing renamed, so the job cannot be
    resumed.  ``errors`` (None: no errors file, ``on_error="raise"``) is written as records fail: a
    file opened at the first one (truncated), or itself written directly; with none failing, an older
    run's errors file at that name is removed, as a checkpointed job does.  The input is followed as a
    checkpointed job follows it (:meth:`check_input`)."""

    resumable = False

    def __init__(self, output: OutputTarget, errors: OutputTarget | None, source: InputFile):
        self.output, self.errors = output.path, errors.path if errors else None
        self.out_tmp = self.err_tmp = self.ckpt = None
        self.what = output.direct
        self.after_stop = (f"run the job again ({self.output} is {self.what}, written directly: there is no "
                           "checkpoint to resume from)")
        self._errors_target, self._err_fd, self._err_bytes = errors, None, 0
        self._out_fd = None
        self._input, self._input_name = source.path, source.source
        self._digest = _InputDigest(source.path)
        try:
            self.progress = Progress(0, 0, 0, source.offset, self._digest.advance(source.offset))
            self._out_fd = open_direct(output)
        except BaseException:
            self.close()
            raise

    def write(self, out_lines: list[bytes], err_lines: list[bytes], done: int, in_bytes: int) -> None:
        """Write a chunk's lines out (no fsync: a FIFO or a device has no disk to sync), then note ``done``."""
        data = b"".join(out_lines)
        errors = b"".join(err_lines)
        try:
            write_all(self._out_fd, data, self.output)
            if errors:
                write_all(self._errors_fd(), errors, self.errors)
        except BrokenPipeError:
            raise   # the reader went away (`head`): the CLI ends quietly, as on a closed standard output
        except OSError as exc:
            raise OutputWriteError(
                f"cannot write {exc.filename or self.output}: {exc.strerror or exc}; the job stopped after "
                f"{self.done} record(s), which were written; {self.after_stop}") from None
        digest = self._digest.advance(in_bytes)
        if digest is None:
            raise JobError(f"internal check failed: the input ended before byte {in_bytes:,} that a record "
                           "was read from; please report this")
        self._err_bytes += len(errors)
        self.progress = Progress(done, self.progress.out_bytes + len(data), self._err_bytes, in_bytes, digest)

    def _errors_fd(self) -> int:
        if self._err_fd is None:
            target = self._errors_target
            if target.direct:
                self._err_fd = open_direct(target)
            else:
                target.path.parent.mkdir(parents=True, exist_ok=True)
                self._err_fd = os.open(target.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _CLOEXEC, 0o666)
        return self._err_fd

    def _changed(self, why: str, failed: str | None, *, resumable: bool) -> InputChangedError:
        message = f"{self._input_name} changed while the job ran ({why})"
        if failed is not None:
            message += f"; {failed}"
        return InputChangedError(f"{message}; the job stopped: {self.after_stop}", self._input_name)

    def _save(self, progress: Progress) -> None:
        self.progress = progress   # nothing to save: a direct output has no checkpoint

    def finish(self) -> bool:
        """True when an errors file was written."""
        if self._err_fd is not None:
            return True
        target = self._errors_target
        if target is not None and not target.direct:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.lstat(target.path).st_mode):
                    os.unlink(target.path)   # an older run's errors do not describe this output
        return False

    def close(self) -> None:
        for fd in (self._out_fd, self._err_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._out_fd = self._err_fd = None
        self._digest.close()
