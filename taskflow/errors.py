"""Every error taskflow raises on purpose, in one place.

Each class subclasses the builtin a caller would already catch
(``ValueError`` for bad input, ``FileNotFoundError`` for a missing model...),
so ``except ValueError`` keeps working, while ``except TaskflowError`` catches
exactly ours.  Messages say what arrived, what is allowed and how to fix it.
On the command line every error is one ``taskflow: error:`` line, argument
errors too (:class:`CommandParser`, for the CLI and the training commands alike).
"""

from __future__ import annotations

import argparse

__all__ = [
    "CommandParser",
    "TaskflowError",
    "InvalidInputError",
    "InputTypeError",
    "UnknownTaskError",
    "UnknownModelError",
    "RegistryError",
    "ModelNotFoundError",
    "OfflineModeError",
    "DownloadError",
    "ChecksumError",
    "CacheWriteError",
    "ManifestError",
    "OptionError",
    "DeviceError",
    "PaddleNotInstalledError",
    "ExportError",
    "UserDictError",
    "TermTreeError",
    "JobError",
    "WorkerError",
    "ResumeMismatchError",
    "OutputInUseError",
    "InputChangedError",
    "OutputWriteError",
    "TrainingDataError",
    "ServerError",
]


class TaskflowError(Exception):
    """Base class of every error raised on purpose by taskflow."""


class InvalidInputError(TaskflowError, ValueError):
    """An input item has the right type but a value the task cannot use.

    ``index`` is the position of the offending item in the caller's batch
    (``None`` when the whole input is wrong).
    """

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


class InputTypeError(TaskflowError, TypeError):
    """An input item has a type the task does not accept."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.index = index


class UnknownTaskError(TaskflowError, ValueError):
    """No task is registered under the requested name."""



class RegistryError(TaskflowError, ValueError):
    """A registration would overwrite a different task under the same name."""


class ManifestError(TaskflowError, ValueError):
    """A model package's manifest.json is missing a field or is malformed."""


class ModelNotFoundError(TaskflowError, FileNotFoundError):
    """A model file is neither in ``task_path``, the cache, the bundled
    resources, nor obtainable from the endpoint."""


class OfflineModeError(ModelNotFoundError):
    """A model file is missing and offline mode forbids downloading it."""


class DownloadError(TaskflowError, OSError):
    """A download failed (HTTP error status, connection failure...)."""

    def __init__(self, message: str, url: str | None = None, status: int | None = None):
        super().__init__(message)
        self.url = url
        self.status = status


class ChecksumError(DownloadError):
    """A file's sha256 or size differs from what its manifest pins."""


class CacheWriteError(TaskflowError, OSError):
    """A model file must be downloaded or copied into the cache, and the cache home cannot be written
    (read-only, no permission, full).  A cache that already holds the files is read as it is."""


class OptionError(TaskflowError, ValueError, TypeError):
    """An option of ``Taskflow(...)`` (or of a task) has a name, type or value it cannot take.

    Raised at construction, before any input is read.  It is both a ``ValueError``
    and a ``TypeError``, so either ``except`` catches it; ``option`` names the option.
    """

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


class UnknownModelError(OptionError):
    """The task has no model (or mode) of the requested name: the option ``model`` or ``mode``
    has a value it cannot take."""


class DeviceError(OptionError):
    """The requested device or precision cannot be used with this Paddle build."""


class PaddleNotInstalledError(TaskflowError, ImportError):
    """PaddlePaddle is needed to run a model but is not installed."""


class ExportError(TaskflowError, RuntimeError):
    """The dynamic-graph network could not be exported to a static graph."""


class UserDictError(TaskflowError, ValueError):
    """A user dictionary (``user_dict=``) has a line, type or format the task cannot use.

    ``source`` names the file (or ``"user_dict"`` for a list) and ``line`` the
    1-based line number, when the error is about one line.
    """

    def __init__(self, message: str, source: str | None = None, line: int | None = None):
        super().__init__(message)
        self.source = source
        self.line = line


class TermTreeError(TaskflowError, ValueError):
    """A term tree file (``term_tree=``) has a line, column or category the task cannot use.

    ``source`` names the file and ``line`` the 1-based line number, when the error is about one line.
    """

    def __init__(self, message: str, source: str | None = None, line: int | None = None):
        super().__init__(message)
        self.source = source
        self.line = line


class JobError(TaskflowError, RuntimeError):
    """A batch job over a file (``predict_file``, ``taskflow TASK --input``) stopped before its end
    for a reason other than a bad record: interrupted, its input changed while it read it...

    What was done is kept: ``resume=True`` (``--resume``) continues where it stopped.
    """


class WorkerError(JobError):
    """A worker process of a batch job could not start, died twice on the same records, or hung."""


class ResumeMismatchError(JobError):
    """``resume=True`` (``--resume``) was asked of a job whose checkpoint was made by another one:
    another task, model package, task option, field, encoding or input file.  Continuing would
    write one output from two runs, so nothing is touched.

    ``changes`` maps each thing that differs to ``(then, now)``.
    """

    def __init__(self, message: str, changes: dict | None = None):
        super().__init__(message)
        self.changes = dict(changes or {})


class OutputInUseError(JobError):
    """Another job is writing the same output (or errors file) now.  Two jobs never share one: the
    second is refused before it touches any file.  Wait for the other to end, or choose another output.

    ``pid`` is the other job's process id, when it could be read.
    """

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class InputChangedError(JobError):
    """A batch job's input file was rewritten in place, cut short or removed while the job read it, or a
    record read after it was written to failed.  The job stops rather than take bytes from a file changing
    under it for a bad line.  The message says whether the records done are still what the file holds
    (then ``resume=True`` goes on) or not (then run the job again from the start).

    ``path`` is the input file, as the job was given it.
    """

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path


class OutputWriteError(TaskflowError, OSError):
    """A batch job cannot write its output, errors or checkpoint file, or ``taskflow pack`` its folder
    (read-only directory, full disk...).

    What was written before is kept: free space (or fix the permissions) and resume; unless the job's
    folder itself was removed, when nothing is, and the message says so.
    """


class TrainingDataError(TaskflowError, ValueError):
    """A file given to ``taskflow train TASK --train/--dev`` cannot be trained on: a missing field,
    a bad tag sequence, a label in dev that train never has, an empty file, a single label...

    ``source`` names the file and ``line`` the 1-based line number, when the error is about one line.
    """

    def __init__(self, message: str, source: str | None = None, line: int | None = None):
        super().__init__(message)
        self.source = source
        self.line = line


class ServerError(TaskflowError, ConnectionError):
    """A served task (``taskflow serve``) did not answer, or answered with an error that is not
    one of taskflow's own; ``status`` is the HTTP status, ``None`` when nothing answered."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class CommandParser(argparse.ArgumentParser):
    """argparse, with its errors as the one ``taskflow: error:`` line every other error is."""

    def error(self, message: str):
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):   # name the unknown flags alone, with the nearest known one
            import difflib

            known = [flag for action in self._actions for flag in action.option_strings]
            unknown = [token.split("=", 1)[0] for token in message[len(prefix):].split() if token.startswith("-")]
            if unknown:
                message = "unknown option " + ", ".join(
                    flag + "".join(f" (did you mean {near}?)" for near in difflib.get_close_matches(flag, known, 1, 0.75))
                    for flag in unknown)
        self.exit(2, f"taskflow: error: {message} (see `{self.prog} --help`)\n")
