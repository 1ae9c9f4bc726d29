"""The task command's runs over input, for taskflow.cli: a checkpointed job into ``--output FILE``
(:func:`run_job`), a stream (standard input, a FIFO, a file to stdout) record by record
(:func:`stream`), and how results are written to stdout, a file or a device (:func:`write_jsonl`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys

from .errors import InvalidInputError


def what_a_stop_leaves(args: argparse.Namespace, target) -> str:
    """What a run that is not a job leaves when it is stopped (SIGTERM, SIGHUP, Ctrl-C)."""
    if target is None:
        return "the results before it were written to standard output, each a whole line"
    if target.direct:
        return f"the results before it were written to {args.output}"
    return f"{args.output} was not written (it is written whole, when the run ends)"


def stream(flow, args: argparse.Namespace, fields, target=None) -> int:
    """A file, standard input or a FIFO, record by record, to stdout or to ``--output`` (``target``:
    a file written whole or not at all; a device or a FIFO, as results come).  Nothing to rename or
    resume (taskflow.cli refuses the options that need them): a bad record stops it, or with
    ``--on-error skip`` goes where :func:`_stream_errors` says, as a job's goes to its errors file.
    Results go out as soon as no more input is waiting, so a pipe fed a line at a time gets its
    answer to each line before the next arrives."""
    from .jobs import JobSummary, error_line, result_line
    from .readers import InputFile, error_record
    from .workers import process_chunk

    stdin = args.input == "-"
    source = "<stdin>" if stdin else args.input
    skip = args.on_error == "skip"
    errors = _stream_errors(args, target) if skip else None   # None: bad records are said on stderr
    summary = JobSummary(source, args.output or "<stdout>")
    try:
        with contextlib.ExitStack() as files:
            pipe = files.enter_context(_input_stream(args.input))
            reader = files.enter_context(InputFile(
                source, fields or flow.task.input_fields, encoding=args.encoding,
                carry=args.id_field.split(",") if args.id_field else None,
                max_record_bytes=args.max_record_bytes, stream=pipe, format=args.format))
            out = files.enter_context(_output(target))
            errors_out = None
            for chunk in _arrivals(reader, 1024, pipe.ready if pipe else None):
                lines, bad, stop = [], [], None
                for record, result, error in process_chunk(flow.task, chunk, source):
                    if error is None:
                        line, error = result_line(record, result, source)
                    if error is None:
                        lines.append(line.decode("utf-8"))
                    elif skip:
                        bad.append(error_line(error_record(record, error)).decode("utf-8"))
                        summary.skip_reasons[re.sub(r"^.*?:\d+: ", "", error, count=1)] += 1
                        if errors is None:
                            print(f"taskflow: skipped {error}", file=sys.stderr, flush=True)
                    else:
                        stop = error
                        break
                # Every result before a bad record goes out, in order, then the run stops at it (or, with
                # --on-error skip, goes on past it).
                summary.processed += len(lines)
                summary.skipped += len(bad)
                _emit(out, "".join(lines), target)
                if bad and errors is not None:
                    if errors_out is None:   # opened at the first bad record: with none, no errors file
                        errors_out = files.enter_context(_output(errors))
                    _emit(errors_out, "".join(bad), errors)
                if stop is not None:
                    raise InvalidInputError(stop)
            summary.read = reader.records
    except KeyboardInterrupt:
        print("taskflow: interrupted" + (f"; {what_a_stop_leaves(args, target)}" if target else ""), file=sys.stderr)
        return 130
    except BrokenPipeError:   # `taskflow ... | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    if summary.skipped:
        if errors is not None:
            summary.errors_file = str(errors.path)
        print(f"taskflow: warning: {summary.skipped_message(errors.path if errors else 'the lines above')}",
              file=sys.stderr)
    elif errors is not None and not errors.direct and os.path.isfile(errors.path):
        os.unlink(errors.path)   # an older run's errors do not describe this output, as a job's do not
    if not summary.read:
        _say_no_records(source, args.output)
    # Every record was bad: nothing a caller could want, as a job says (its exit status).
    return 2 if summary.read and not summary.processed else 0


def _stream_errors(args: argparse.Namespace, target):
    """Where ``--on-error skip`` writes a streamed run's bad records: ``--errors``, else beside an
    ``--output`` file (as a job's ``OUTPUT.errors.jsonl``), written whole when the run ends, as that
    output is; None for stderr (output to stdout or to a device, and no --errors)."""
    from .checkpoint import default_errors_path
    from .outputs import output_target

    if args.errors:
        errors = output_target(args.errors, "--errors")
    elif target is not None and not target.direct:
        errors = output_target(default_errors_path(target.path), "--errors")
    else:
        return None
    if errors.path.is_dir():
        raise InvalidInputError(f"--errors {errors.path} is a directory; name a file")
    if target is not None and not errors.direct and not target.direct and errors.path.resolve() == target.path.resolve():
        raise InvalidInputError(f"--errors {errors.path} is the --output file; name another file for the bad records")
    return errors


def _say_no_records(source: str, output: str | None) -> None:
    wrote = f"; wrote an empty {output}" if output else ""
    print(f"taskflow: 0 records in {source}{wrote}", file=sys.stderr)


def _arrivals(records, size: int, ready=None):
    """Lists of up to ``size`` records; with ``ready`` (whether the next record can be read without
    waiting), a list also ends where the input pauses."""
    chunk = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size or (ready is not None and not ready()):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Pipe:
    """Standard input as :class:`~taskflow.readers.InputFile` reads a file (``readline``, ``peek``,
    ``read``), reading from its descriptor as lines arrive, and saying whether a line is already there
    (``ready``); a buffered file object cannot say that without waiting for one."""

    def __init__(self, fd: int):
        self._fd, self._buffer, self._eof = fd, bytearray(), False

    @classmethod
    def of_stdin(cls):
        try:
            return cls(sys.stdin.fileno())
        except (AttributeError, OSError, ValueError):   # a stand-in for stdin (a test, an embedding program)
            return _Buffered(sys.stdin.buffer)

    def _fill(self) -> bool:
        if self._eof:
            return False
        data = os.read(self._fd, 1 << 16)
        self._eof = not data
        self._buffer += data
        return bool(data)

    def _take(self, size: int) -> bytes:
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def readline(self, limit: int = -1) -> bytes:
        while True:
            end = self._buffer.find(b"\n") + 1
            if end and (limit < 0 or end <= limit):
                return self._take(end)
            if 0 <= limit <= len(self._buffer):
                return self._take(limit)
            if not self._fill():
                return self._take(len(self._buffer))

    def peek(self, size: int) -> bytes:
        if not self._buffer:   # at most one read, as io.BufferedReader.peek: never wait for more
            self._fill()
        return bytes(self._buffer[:size])

    def read(self, size: int) -> bytes:
        while len(self._buffer) < size and self._fill():
            pass
        return self._take(size)

    def ready(self) -> bool:
        if self._eof or b"\n" in self._buffer:
            return True
        import select

        try:
            return bool(select.select([self._fd], [], [], 0)[0])
        except (OSError, ValueError):   # no select() on this kind of descriptor: read on
            return True


class _Buffered:
    """A binary stream that is not a descriptor, read as :class:`_Pipe` is (always ``ready``)."""

    def __init__(self, stream):
        self._stream = stream
        self.readline, self.read = stream.readline, stream.read

    def peek(self, size: int) -> bytes:
        return self._stream.peek(size)[:size] if hasattr(self._stream, "peek") else b""

    def ready(self) -> bool:
        return True


@contextlib.contextmanager
def _input_stream(path: str | None):
    """What :class:`~taskflow.readers.InputFile` reads an input given as a stream from: standard input
    (``-``), or a FIFO or device opened here (opening a FIFO waits for its writer); None for a file."""
    if path == "-":
        yield _Pipe.of_stdin()
        return
    from .readers import stream_kind

    if path is None or stream_kind(path) is None:
        yield None
        return
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidInputError(f"cannot read --input {path}: {exc.strerror or exc}") from None
    try:
        yield _Pipe(descriptor)
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _output(output):
    """Stdout (None); for a device, a FIFO or a descriptor (``output_target`` says which), the target
    itself, written as results come; else a new file that replaces the target (the file a link points
    to) only once everything was written.  Write to it with :func:`_emit`."""
    if output is None:
        yield sys.stdout
        return
    from .outputs import open_direct
    from .errors import OutputWriteError

    if output.direct:
        descriptor = open_direct(output)
        try:
            yield _DirectOutput(descriptor, output)
        finally:
            os.close(descriptor)
        return
    target = output.path
    if target.is_dir():
        raise InvalidInputError(f"--output {target} is a directory; name a file, e.g. {target / 'out.jsonl'}")
    from .files import written_into_place

    target.parent.mkdir(parents=True, exist_ok=True)   # as a job's --output does

    def failed(exc: OSError) -> OutputWriteError:   # flushing or syncing it: a full disk shows there
        return OutputWriteError(f"cannot write {target}: {exc.strerror or exc}; it was not written")

    with written_into_place(target, "w", encoding="utf-8", on_failure=failed) as out:
        yield out


class _DirectOutput:
    """A device, a FIFO or a descriptor as :func:`_output` yields it: each write goes out whole, at once."""

    def __init__(self, descriptor: int, target):
        self._descriptor, self._target = descriptor, target

    def write(self, text: str) -> None:
        from .outputs import write_all

        write_all(self._descriptor, text.encode("utf-8"), self._target.path)

    def flush(self) -> None:
        pass


def _emit(out, text: str, output) -> None:
    """Write ``text`` (whole lines) to ``out`` and flush it; a stop signal meanwhile is acted on just after.
    A target that cannot take it (a full disk, /dev/full) is one clear error; a closed pipe ends the run
    quietly (see taskflow.cli.main)."""
    from .errors import OutputWriteError
    from .signals import stop_deferred

    try:
        with stop_deferred():
            out.write(text)
            out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        name = "standard output" if output is None else f"{output.path}" + (f" ({output.direct})" if output.direct else "")
        raise OutputWriteError(f"cannot write {name}: {exc.strerror or exc}") from None


def run_job(flow, args: argparse.Namespace, fields, parameters=None) -> int:
    """``--input FILE --output FILE``: a checkpointed job (taskflow.jobs.run_file); ``flow`` a
    :class:`taskflow.Client` with ``--endpoint`` (and ``parameters``, its call-time options)."""
    from .jobs import run_file

    served = args.endpoint is not None
    try:
        summary = run_file(
            flow if served else flow.task, args.input, args.output, fields=fields, workers=args.workers,
            worker_spec=None if served else flow.spec, parameters=parameters,
            resume=args.resume, on_error=args.on_error, errors_path=args.errors,
            progress=False if args.quiet else None, encoding=args.encoding,
            id_fields=args.id_field.split(",") if args.id_field else None, max_record_bytes=args.max_record_bytes,
            chunk_timeout=args.worker_timeout, startup_timeout=max(60.0, args.worker_timeout),
            shutdown_timeout=min(10.0, args.worker_timeout), backend=args.backend, address=args.address,
        )
    except KeyboardInterrupt:
        from .outputs import output_target

        direct = output_target(args.output).direct
        print("taskflow: interrupted; " + (f"the results before it were written to {args.output} ({direct}); run the "
                                           "job again" if direct else "what was done is saved: rerun with --resume to "
                                           "continue"), file=sys.stderr)
        return 130
    # Skipped records and worker failures were said by the job's log (taskflow.cli's _warnings_to_stderr),
    # even with --quiet.
    if not (summary.read or summary.resumed_from or summary.messages):
        _say_no_records(args.input, args.output)
    if summary.read and not summary.processed:
        return 2   # every record was bad: the job did nothing a caller could want (said above, once)
    # The output is complete, but a worker process died, hung or had to be killed: say so in the exit status.
    return 3 if summary.worker_faults else 0


def write_jsonl(results, output) -> None:
    """The results as JSON lines, to stdout (``output`` None) or to ``output`` (an ``output_target``)."""
    from .files import json_text_line

    lines = []
    for number, result in enumerate(results):
        try:
            lines.append(json_text_line(result))
        except ValueError:   # strict JSON only: no NaN or Infinity where no parser reads them
            raise InvalidInputError(f"text #{number}: the result holds a number JSON cannot hold (NaN or "
                                    "infinity); it cannot be written as JSON", number) from None
    with _output(output) as out:
        _emit(out, "".join(lines), output)

