"""Batch jobs over files: streaming, order, resume, error records.

The CLI's ``taskflow TASK --input ... --output ...`` and
``Taskflow.predict_file`` both run :func:`run_file`.  Memory stays flat in
the file's size: records are read (:mod:`taskflow.readers`), processed
(here, or by worker processes: :mod:`taskflow.workers`) and written
(:mod:`taskflow.checkpoint`) a chunk at a time, with at most two chunks per
worker in flight.

Every input record ends in exactly one place: the output (``{"line": N, ...}``)
or the errors file (``--on-error skip``), or the job stops at it.  Before the
output is renamed into place the job checks that the records read equal the
records written plus those skipped, and that it read every line of the input.

Output is written to ``<output>.partial`` and renamed into place when the job
ends; after every chunk a checkpoint records how far it got and what made the
output (:func:`~taskflow.job_identity.job_identity`), so ``resume=True`` continues an
interrupted job exactly where it stopped, byte for byte, and refuses to continue one that
another task, model, option or input made.  An output that is a character device,
a FIFO or a descriptor (``/dev/null``, ``/dev/stdout``) is written directly instead,
as chunks are done, with no side files and no resume (:class:`~taskflow.checkpoint.DirectFiles`);
through a symbolic link, the file it points to is written.

With a :class:`taskflow.Client` in place of the task, the records are answered by the server it
names (``taskflow TASK --endpoint URL``: :class:`~taskflow.endpoint_pool.EndpointPool`); everything
else of the job stays here, and the checkpoint pins the served model
(:func:`~taskflow.job_identity.endpoint_identity`).
"""

from __future__ import annotations

import collections
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .checkpoint import SIDE_SUFFIXES, DirectFiles, JobFiles, JobState, default_errors_path, job_state
from .client import Client
from .endpoint_pool import EndpointPool
from .outputs import OutputTarget, output_target
from .errors import InvalidInputError, JobError, OptionError, ResumeMismatchError
from .files import json_line
from .job_identity import endpoint_identity, job_identity
from .ray_workers import RayPool
from .readers import DEFAULT_MAX_RECORD_BYTES, InputFile, Record, count_lines, count_records, error_record, output_record
from .signals import sigterm_stops_the_job
from .workers import WorkerPool, calling_line, iter_chunks, process_chunk, refuse_in_worker_bootstrap

# JobSummary, result_line and error_line are the CLI's too (it streams to stdout with them).
__all__ = ["run_file", "JobSummary", "result_line", "error_line"]

ON_ERROR = ("raise", "skip")
logger = logging.getLogger("taskflow")
_LOCATION = re.compile(r"^.*?:\d+: ")  # the "file:line: " that starts a bad record's message


@dataclass
class JobSummary:
    """What one run of a job did (``run_file``'s answer); ``messages`` are also logged as warnings."""

    input: str
    output: str
    read: int = 0           # records read by this run
    processed: int = 0      # results written by this run
    skipped: int = 0        # records written to the errors file by this run
    resumed_from: int = 0   # records already done by an earlier run
    errors_file: str | None = None
    messages: list[str] = field(default_factory=list)
    worker_faults: list[str] = field(default_factory=list)  # workers that died, hung or had to be killed
    # Why records were skipped, with their counts (the messages without their "file:line: ").
    skip_reasons: collections.Counter = field(default_factory=collections.Counter)

    def skipped_message(self, errors_path) -> str:
        """One line on the skipped records; a cause shared by all of them is said once, not per line."""
        if not self.skip_reasons:
            return f"the records an earlier run skipped are in {errors_path}"
        if len(self.skip_reasons) == 1:
            (reason, _), = self.skip_reasons.items()
            if not self.processed:
                return (f"every record ({self.skipped}) failed the same way: {reason}; "
                        f"nothing was processed (the records are in {errors_path})")
            return f"{self.skipped} bad record(s) skipped, all because: {reason}; see {errors_path}"
        reason, count = self.skip_reasons.most_common(1)[0]
        return f"{self.skipped} bad record(s) skipped ({count} because: {reason}); see {errors_path}"


# ------------------------------------------------------------------ the job

def run_file(
    task,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    fields: Sequence[str] | None = None,
    chunk_size: int | None = None,
    workers: int = 1,
    worker_spec=None,
    resume: bool = False,
    on_error: str = "raise",
    errors_path: str | os.PathLike | None = None,
    progress: bool | None = None,
    encoding: str = "utf-8",
    id_fields: Sequence[str] | None = None,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    chunk_timeout: float | None = 600.0,
    startup_timeout: float = 300.0,
    shutdown_timeout: float = 10.0,
    backend: str = "local",
    address: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> JobSummary:
    """Run ``task`` over a file into JSON lines, in input order.

    Each output line is the task's result with the input's ``line`` number and
    its other fields (``id_fields``: only those; see :func:`taskflow.readers.output_record`).
    ``on_error="raise"`` stops at the first bad record (naming file and line;
    what was done so far is kept for ``resume=True``); ``"skip"`` writes each
    bad record to ``errors_path`` (default ``<output>.errors.jsonl``) and goes on.
    ``workers=N`` (N > 1) runs N spawned processes, each building its pipeline from
    ``worker_spec`` (``Taskflow.spec``: the jobs layer knows tasks, not how pipelines are made);
    one that gives no answer for ``chunk_timeout`` seconds is taken as hung.  ``backend="ray"``
    runs the chunks on ``workers`` Ray actors instead (:class:`taskflow.ray_workers.RayPool`; a
    local Ray, or the cluster at ``address``), everything else as here.  ``worker_spec`` also says
    the task's options, which the checkpoint pins (:func:`~taskflow.job_identity.job_identity`).
    ``resume=True`` with a checkpoint made by another job raises
    :class:`~taskflow.errors.ResumeMismatchError` and changes no file.
    ``task`` may be a :class:`taskflow.Client` instead: the server it names answers the records
    (:class:`taskflow.endpoint_pool.EndpointPool`), with ``parameters`` (call-time options) on each
    request; the fields default to the route's, a chunk is one request of at most its ``max_inputs``
    and ``max_batch_items``, and the checkpoint pins the served model
    (:func:`~taskflow.job_identity.endpoint_identity`).  The options of a local model (``workers``,
    ``worker_spec``, ``backend``) are refused; the timeouts of workers are not used (the client's
    ``timeout`` bounds a request).
    """
    refuse_in_worker_bootstrap()
    call_site = calling_line()
    _check_endpoint_options(task, parameters, workers=workers, worker_spec=worker_spec, backend=backend)
    _check_job_options(on_error=on_error, workers=workers, worker_spec=worker_spec, fields=fields, id_fields=id_fields,
                       chunk_size=chunk_size, chunk_timeout=chunk_timeout, startup_timeout=startup_timeout,
                       shutdown_timeout=shutdown_timeout, backend=backend, address=address)
    route = _endpoint_route(task, parameters) if isinstance(task, Client) else None
    input_path, output_path = Path(input_path), Path(output_path)
    errors_given = bool(errors_path)
    errors_path = Path(errors_path) if errors_path else default_errors_path(output_path)
    fields_given, fields = fields is not None, tuple(fields or (route["input_fields"] if route else task.input_fields))
    id_fields = None if id_fields is None else tuple(id_fields)
    chunk_size = chunk_size or (_request_size(route) if route else max(64, task.batch_size * 8))
    summary = JobSummary(str(input_path), str(output_path))

    source = InputFile(input_path, fields, encoding=encoding, carry=id_fields, max_record_bytes=max_record_bytes)
    try:
        if fields_given and source.format == "txt":
            raise OptionError(f"fields name columns (keys) of a .jsonl, .csv or .tsv input; a line of {input_path} "
                              "is the text itself (for a pair task, its texts tab-separated)", "fields")
        if output_path.exists() and output_path.resolve() == input_path.resolve():
            raise InvalidInputError(f"--output {output_path} is the input file; choose another path")
        if output_path.is_dir():
            raise InvalidInputError(f"--output {output_path} is a directory; name a file, e.g. {output_path / 'out.jsonl'}")
        pool_options = dict(backend=backend, address=address, spec=worker_spec, workers=workers, source=str(input_path),
                            chunk_timeout=chunk_timeout, startup_timeout=startup_timeout,
                            shutdown_timeout=shutdown_timeout, call_site=call_site,
                            endpoint=None if route is None else (task, dict(parameters or {}), _request_size(route)))
        target = output_target(output_path)
        if target.direct:
            _run_direct(task, source, summary, target, errors_path, errors_given, resume, chunk_size=chunk_size,
                        on_error=on_error, progress=progress, pool_options=pool_options)
            return _said(summary)
        errors_target = output_target(errors_path, "--errors")
        if errors_target.direct:
            raise InvalidInputError(
                f"--errors {errors_path} is {errors_target.direct}: a job's errors file is checkpointed with its "
                "output, to resume, so it must be a regular file; name one (or write the output to a device too: "
                "with --output /dev/null, --errors /dev/null is taken)")
        # Through a symbolic link, the file it points to is the output (its side files sit beside that file).
        output_path = target.path
        _refuse_errors_among_own_files(input_path, output_path, errors_path)
        _refuse_working_file_names(output_path, errors_path)
        identity = (endpoint_identity(route, parameters, source) if route
                    else job_identity(task, worker_spec, source))
        # Held until the files are in place: a second job on this output (or errors file) is refused at once.
        with JobFiles.lock(output_path, errors_path):
            state = job_state(output_path) if resume else JobState.FRESH
            if state is JobState.FINISHING:
                JobFiles.finish_stopped(output_path, errors_path, identity, source)
                state = job_state(output_path)
            if state is JobState.FINISHED:
                summary.messages.append(_finished_job_message(input_path, output_path, errors_path, source))
            else:
                if not resume:
                    _say_progress_dropped(output_path)
                # From the first checkpoint on, SIGTERM stops the job cleanly (a stop inside finish() is finished by resume).
                _run_with_checkpoints(task, source, summary, output_path, errors_path, identity, resume, chunk_size=chunk_size,
                                      on_error=on_error, progress=progress, pool_options=pool_options)
    finally:
        source.close()
    return _said(summary)


def _check_endpoint_options(task, parameters, *, workers: int, worker_spec, backend: str) -> None:
    """A job run against a server (``task`` a :class:`Client`) takes call-time ``parameters`` and no
    option of a local model; a local job takes no ``parameters``."""
    if not isinstance(task, Client):
        if parameters is not None:
            raise OptionError("parameters are the call-time options a job run against a server (task: a "
                              "taskflow.Client) sends with each request; a local job takes them as the Taskflow's "
                              "options, e.g. Taskflow(task, top_k=3)", "parameters")
        return
    for name, used in (("workers", workers != 1), ("backend", backend != "local"),
                       ("worker_spec", worker_spec is not None)):
        if used:
            raise OptionError(f"{name}: a job run against a server has its records answered by {task.url}, which "
                              f"runs its own model (its replicas, its batches); {name} says where a local model "
                              "runs: leave it out", name)
    if parameters is not None and not isinstance(parameters, Mapping):
        raise OptionError(f"parameters must be a dict of call-time options, got {type(parameters).__name__}",
                          "parameters")


def _endpoint_route(task: Client, parameters) -> dict:
    """What the server says of the route a job runs on, before any file is touched, with the job's
    call-time ``parameters`` checked by the server itself (a request of no inputs): a wrong one, or a
    wrong API key, stops the job before it starts."""
    route = task.describe()
    accepted = route.get("parameters") or {}
    unknown = sorted(set(parameters or {}) - set(accepted))
    if unknown:
        raise OptionError(f"{unknown[0]!r} is not a call-time option of {task.url}/v1/{task.task}; it takes "
                          f"{', '.join(accepted) or 'none'} (the others are fixed when the server starts)", unknown[0])
    task([], on_error="skip", **(parameters or {}))
    return route


def _request_size(route: Mapping[str, Any]) -> int:
    """Records a request of an endpoint job holds, at most: what one request may hold and one call of
    the server's model runs (a chunk of that size is one pass of the server's batches, as a local
    job's chunk is one of its own)."""
    limits = route.get("limits") or {}
    return max(1, min(int(limits.get("max_inputs") or 256), int(limits.get("max_batch_items") or 256)))


def _said(summary: JobSummary) -> JobSummary:
    for message in summary.messages:
        logger.warning(message)
    return summary


def _check_job_options(*, on_error, workers, worker_spec, fields, id_fields, chunk_size, chunk_timeout,
                       startup_timeout, shutdown_timeout, backend, address) -> None:
    """Each option of :func:`run_file` is what it names, else an :class:`OptionError` naming it (as a
    wrong option of a call is), before any file is opened."""
    from .task import int_option

    if on_error not in ON_ERROR:
        raise OptionError(f"on_error must be one of {ON_ERROR}, got {on_error!r}", "on_error")
    int_option("workers", workers)
    if backend not in ("local", "ray"):
        raise OptionError(f"backend must be 'local' or 'ray', got {backend!r}", "backend")
    if address is not None and backend != "ray":
        raise OptionError("address names a Ray cluster: pass backend='ray' (--backend ray) with it", "address")
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise OptionError(f"address must name a Ray cluster, e.g. '10.0.0.5:6379' or 'auto', got {address!r}",
                          "address")
    if (workers > 1 or backend == "ray") and worker_spec is None:
        raise OptionError(f"{'workers > 1' if backend == 'local' else 'backend=' + repr(backend)} needs worker_spec "
                          "(Taskflow.spec), to rebuild the pipeline in each process; use Taskflow.predict_file",
                          "worker_spec")
    for name, value in (("chunk_timeout", chunk_timeout), ("startup_timeout", startup_timeout),
                        ("shutdown_timeout", shutdown_timeout)):
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
            raise OptionError(f"{name} must be a positive number of seconds, got {value!r}", name)
    for name, value in (("fields", fields), ("id_fields", id_fields)):
        if value is not None and (isinstance(value, (str, bytes)) or not isinstance(value, Sequence)
                                  or not all(isinstance(v, str) and v for v in value)):
            example = [value] if isinstance(value, str) else ["review"]
            raise OptionError(f"{name} must be a list of column names, e.g. {name}={example!r}; got {value!r}", name)
    if chunk_size is not None:
        int_option("chunk_size", chunk_size, what=" (records per chunk)")


def _run_with_checkpoints(task, source: InputFile, summary: JobSummary, output_path: Path, errors_path: Path,
                          identity: dict, resume: bool, **options) -> None:
    with sigterm_stops_the_job(paddle=not isinstance(task, Client)):
        files = JobFiles(output_path, errors_path, identity, source, resume)
        try:
            try:
                _run(task, source, files, summary, **options)
            except InvalidInputError:
                if files.done == 0:        # a bad first record: nothing to resume, so nothing is left behind
                    files.discard()
                raise
            if files.finish():
                summary.errors_file = str(errors_path)
                summary.messages.append(summary.skipped_message(errors_path))
        finally:
            files.close()


def _run_direct(task, source: InputFile, summary: JobSummary, target: OutputTarget, errors_path: Path,
                errors_given: bool, resume: bool, **options) -> None:
    """A job into a character device, a FIFO or a descriptor (:class:`DirectFiles`): no checkpoint,
    so no resume; said as it starts, since a stop loses what a checkpoint would have kept."""
    path = target.path
    if resume:
        raise InvalidInputError(f"--output {path} is {target.direct}: a job writes into it directly, as results come, "
                                "and keeps no checkpoint, so it cannot be resumed; run without --resume, or name a "
                                "regular file as --output")
    errors = None
    if options["on_error"] == "skip":
        if not errors_given:
            raise InvalidInputError(
                f"--on-error skip with --output {path} ({target.direct}) needs --errors FILE (errors_path=): the "
                f"default, {errors_path}, would sit beside it; name a file, or /dev/null to drop the bad records")
        errors = output_target(errors_path, "--errors")
        if errors.path.is_dir():
            raise InvalidInputError(f"--errors {errors_path} is a directory; name a file")
        if not errors.direct and source.path is not None and _same_file(errors.path, source.path):
            raise InvalidInputError(f"--errors {errors_path} is the input file; choose another path")
    logger.warning("%s is %s: results are written into it directly, as they come, with no checkpoint; "
                   "a job that stops cannot be resumed", path, target.direct)
    files = None
    # Opening a FIFO waits for its reader: a SIGTERM meanwhile stops the job cleanly too.
    with sigterm_stops_the_job(left=f"the results before it were written to {path}; run the job again "
                                    "(there is no checkpoint to resume from)"):
        try:
            files = DirectFiles(target, errors, source)
            _run(task, source, files, summary, **options)
            if files.finish():
                summary.errors_file = str(errors.path)
                summary.messages.append(summary.skipped_message(errors.path))
        finally:
            if files is not None:
                files.close()


def _finished_job_message(input_path: Path, output_path: Path, errors_path: Path, source: InputFile) -> str:
    """``resume`` on an output a job finished (it keeps no checkpoint): nothing to do while the input
    holds exactly the records the output and its errors file account for; otherwise the input grew
    or shrank since, and continuing would skip or mix records, so the job is refused."""
    done = count_lines(output_path) + (count_lines(errors_path) if errors_path.is_file() else 0)
    records = count_records(input_path, encoding=source.encoding, max_record_bytes=source.max_record_bytes)
    if records != done:
        raise ResumeMismatchError(
            f"cannot resume {output_path}: a job finished it with {done} record(s)"
            f"{' (with ' + str(errors_path) + ')' if errors_path.is_file() else ''}, but {input_path} now holds "
            f"{records}. --resume continues a stopped job; a finished one keeps no checkpoint to continue from. "
            "Run without --resume to redo the whole file, or put the new lines in a file of their own",
            {"records": (done, records)})
    return f"{output_path} is complete ({done} record(s) of {input_path}); nothing to resume"


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)   # a hard link, or the same file by another path
    except OSError:
        return False


def _say_progress_dropped(output_path: Path) -> None:
    """A job started again without ``resume`` over one that stopped says what it discards, as it starts."""
    ckpt = JobFiles.side_files(output_path)["checkpoint"]
    if not os.path.lexists(ckpt):
        return
    from .checkpoint import read_checkpoint

    try:
        done = read_checkpoint(ckpt, output_path).get("done")
    except (JobError, OSError):   # damaged, or a planted link the job will replace: only the count is unknown
        done = None
    if done == 0:
        return   # nothing done (the job stopped as it started, e.g. Ray could not be reached): nothing dropped
    what = f"{done:,} record(s)" if type(done) is int else "an unknown number of records"
    logger.warning("%s: an earlier run of this job stopped after %s; starting over, as resume was not asked for "
                   "(--resume continues a stopped job instead)", output_path, what)


def _refuse_working_file_names(output_path: Path, errors_path: Path) -> None:
    """An output or errors file named as a job's working file (``out.jsonl.partial``) is refused: were
    a job on ``out.jsonl`` running, this one would replace its partial output or checkpoint, and the
    lock that keeps two jobs apart is taken on the output's own name."""
    for path, flag in ((output_path, "--output"), (errors_path, "--errors")):
        for suffix in SIDE_SUFFIXES:
            if path.name.endswith(suffix) and len(path.name) > len(suffix):
                raise InvalidInputError(
                    f"{flag} {path} ends in {suffix}, the name of a job's working file (a job on "
                    f"{path.name[:-len(suffix)]} writes it): choose a name that does not end in "
                    f"{', '.join(SIDE_SUFFIXES[:-1])} or {SIDE_SUFFIXES[-1]}")


def _refuse_errors_among_own_files(input_path: Path, output_path: Path, errors_path: Path) -> None:
    """The errors file (with the partial and lock files beside it) may not be one of the job's other
    files: the job would delete or overwrite it.  Checked before any file is touched."""
    own = {"input": input_path, "output": output_path, **JobFiles.side_files(output_path)}
    for errors_file in (errors_path, *JobFiles.side_files(errors_path, errors=True).values()):
        for what, path in own.items():
            if _same_file(errors_file, path):
                wrote = "is" if errors_file == errors_path else f"would write {errors_file}, which is"
                raise InvalidInputError(
                    f"--errors {errors_path} {wrote} the job's own {what} ({path}); the job would overwrite it: "
                    f"name another file (errors_path=), e.g. {default_errors_path(output_path)}")


def _pool(backend: str, address: str | None, spec, workers: int, endpoint=None, **options):
    """Where the chunks run: None (this process), local worker processes, Ray actors, or a server
    (``endpoint``: its client, the call-time parameters and the inputs one request holds)."""
    if endpoint is not None:
        client, parameters, max_inputs = endpoint
        return EndpointPool(client, parameters, source=options["source"], max_inputs=max_inputs)
    if backend == "ray":
        return RayPool(spec, workers, address=address, **options)
    return WorkerPool(spec, workers, **options) if workers > 1 else None


def _run(task, source: InputFile, files: JobFiles, summary: JobSummary, *, chunk_size: int,
         on_error: str, progress: bool | None, pool_options: dict) -> None:
    """Read, process and write every record after those already done; check that all are accounted for."""
    from tqdm.auto import tqdm

    summary.resumed_from = files.done
    total = (count_records(source.path, encoding=source.encoding, max_record_bytes=source.max_record_bytes)
             if progress is not False else None)
    pool = _pool(**pool_options)
    try:
        # A job resumed inside a chunk (it stopped at a bad line) first finishes that chunk, so the
        # chunks after it, and the batches they are cut into, are a fresh run's.
        chunks = iter_chunks(source, chunk_size, first=chunk_size - files.done % chunk_size)
        outcomes = pool.map(chunks) if pool else (process_chunk(task, c, source.source) for c in chunks)
        unterminated_at = None  # the checkpoint before a last line without a newline: the file may be growing
        with tqdm(total=total, initial=files.done, unit="items", dynamic_ncols=True,
                  disable=None if progress is None else not progress) as bar:
            for chunk in outcomes:
                if chunk[-1][0].terminated:
                    _write_outcomes(chunk, files, summary, on_error, source.source)
                else:
                    _write_outcomes(chunk[:-1], files, summary, on_error, source.source)
                    unterminated_at = files.state()
                    _write_outcomes(chunk[-1:], files, summary, on_error, source.source)
                bar.update(len(chunk))
        summary.read = source.records
        _check_accounting(source, files, summary, unterminated_at)
        if pool:
            summary.worker_faults = pool.close()
            pool = None
    finally:
        if pool:
            pool.abort()


def result_line(record: Record, result: Any, source: str) -> tuple[bytes | None, str | None]:
    """``(line, None)``: the output line of one result, strict JSON in UTF-8; or ``(None, why)``
    when the result cannot be one (a bad record, named by ``source`` and its line)."""
    try:
        return json_line(output_record(record, result)), None
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        return None, f"{source}:{record.line}: the result cannot be written as UTF-8 ({exc.reason}: {bad!r})"
    except ValueError:
        return None, (f"{source}:{record.line}: the result holds a number JSON cannot hold (NaN or infinity); "
                      "it cannot be written as JSON")


def error_line(value: dict) -> bytes:
    """An errors-file line; what cannot be UTF-8 (a lone surrogate in the input) is written as a JSON escape."""
    try:
        return json_line(value)
    except UnicodeEncodeError:
        return json_line(value, ascii=True)


def _write_outcomes(outcomes: list, files: JobFiles, summary: JobSummary, on_error: str, source: str) -> None:
    out_lines, err_lines = [], []
    in_bytes = files.state().in_bytes  # the input done so far ends here
    for record, result, error in outcomes:
        if error is None:
            line, error = result_line(record, result, source)
            if line is not None:
                out_lines.append(line)
        if error is not None:
            if on_error == "raise":
                # A line read from a file written to under the job is not said to be a bad line of the file.
                reason = _LOCATION.sub("", str(error).split("; ", 1)[0], count=1)
                files.check_input(record.end, f"line {record.line} was read after that and failed: {reason}")
                files.write(out_lines, [], files.done + len(out_lines), in_bytes)  # all before it were good
                summary.processed += len(out_lines)
                after = files.after_stop if files.done else "run the job again"   # nothing done: nothing kept
                raise InvalidInputError(f"{error}. Fix the line and {after}, or use --on-error skip")
            err_lines.append(error_line(error_record(record, error)))
            summary.skip_reasons[_LOCATION.sub("", str(error), count=1)] += 1
        in_bytes = record.end
    files.write(out_lines, err_lines, files.done + len(outcomes), in_bytes)
    summary.processed += len(out_lines)
    summary.skipped += len(err_lines)


def _check_accounting(source: InputFile, files: JobFiles, summary: JobSummary, unterminated_at) -> None:
    """Before the output goes into place: every record read is written or skipped, and every line was read."""
    if summary.read != summary.processed + summary.skipped or files.done != summary.resumed_from + summary.read:
        raise JobError(f"internal check failed: read {summary.read} record(s) but wrote {summary.processed} and "
                       f"skipped {summary.skipped}; the output is left as {files.out_tmp or files.output}; "
                       "please report this")
    files.check_input(source.offset)
    size = source.path.stat().st_size
    if size != source.offset:
        if unterminated_at is not None:
            files.rewind(unterminated_at)  # that last line was read before it was complete: do it again
        then = ("the records read so far are saved: rerun with --resume (resume=True) to process the rest"
                if files.resumable else f"the job stopped: {files.after_stop}")
        raise JobError(f"{source.source} changed while the job read it ({source.offset:,} bytes read, it now has "
                       f"{size:,}); {then}")
    header = 1 if source.format in ("csv", "tsv") and source.lines else 0
    lines = count_lines(source.path, source.offset)
    # A CSV record whose quoted field holds line breaks spans lines: its records are counted as read.
    records = (count_records(source.path, encoding=source.encoding, max_record_bytes=source.max_record_bytes)
               if source.format == "csv" else lines - header)
    if lines != source.lines or files.done != records:
        raise JobError(f"internal check failed: {source.source} has {lines} line(s) but {files.done} record(s) were "
                       f"accounted for; the output is left as {files.out_tmp or files.output}; please report this")
