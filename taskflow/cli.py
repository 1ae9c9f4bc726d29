"""Command line: ``taskflow TASK "text"``, ``taskflow list``, ``download``, ``pack``, ``train``, ``serve``.

    taskflow sentiment_analysis "这家酒店很干净，服务也好"
    taskflow text_similarity "怎么修改微信密码" "微信密码怎么改"     (a multi-field task takes its fields in turn)
    taskflow sentiment_analysis --input reviews.txt --output results.jsonl [--workers 2] [--resume]
    cat reviews.txt | taskflow sentiment_analysis            (no texts and a pipe: one text a line from stdin)
    taskflow sentiment_analysis --input - --format csv --field review --on-error skip < reviews.csv
                                                             (bad records to stderr, or to --errors FILE)
    taskflow sentiment_analysis --input reviews.jsonl --output out.jsonl --backend ray --workers 4
    taskflow sentiment_analysis --endpoint http://127.0.0.1:8189 --input reviews.txt --output out.jsonl
                                                             (the job's records answered by `taskflow serve`)
    taskflow list
    taskflow download sentiment_analysis
    taskflow pack my_model/ served/                          (lay a package out for a PPNLP_ENDPOINT server)
    taskflow train sentiment_analysis --train my_reviews.csv --out my_model/
    taskflow serve sentiment_analysis ner                    (HTTP on 127.0.0.1:8189; see SERVING.md)
    taskflow --version
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import sys
import warnings
from pathlib import Path

from .errors import CommandParser, InvalidInputError, TaskflowError

COMMANDS = ("list", "download", "pack", "train", "serve")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        status = _dispatch(argv)
        sys.stdout.flush()      # here, not at exit: a closed pipe is then caught below
        return status
    # Wherever they land (while Paddle loads, a model is read, texts are labelled, help is printed):
    # one line, or none, as a Unix tool does; the streaming and job paths say more where they can.
    except KeyboardInterrupt:
        print("taskflow: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # `taskflow list | head -1`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_plain(__doc__.strip()))     # the docstring's markup as plain text
        return 0
    if argv[0] == "--version":
        from . import __version__

        print(f"taskflow {__version__}")
        return 0
    try:
        with _warnings_to_stderr():
            if argv[0] in COMMANDS:
                return globals()[f"_cmd_{argv[0]}"](argv[1:])
            return _cmd_run(argv)
    except (TaskflowError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        # Ours, or a file named on the command line (a user dictionary, a term tree) that is not there.
        print(f"taskflow: error: {exc}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _warnings_to_stderr():
    """While the CLI runs, the library's warnings (records skipped, a worker replaced) go to stderr
    as ``taskflow: ...`` lines, once each, as they happen: not also through a root handler
    (Paddle installs one), and even with --quiet."""
    logger = logging.getLogger("taskflow")
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("taskflow: warning: %(message)s"))   # the library logs warnings only
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is at each record, not as it was when the handler was made."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model name (default: the task's default)")
    parser.add_argument("--mode", help="a named preset of the task, e.g. ner's fast or accurate (see `taskflow list`)")
    parser.add_argument("--home", help="cache root (default: $PPNLP_HOME or ~/.paddlenlp)")
    parser.add_argument("--offline", action="store_true", default=None, help="never use the network")


def _cmd_run(argv: list[str]) -> int:
    parser = CommandParser(prog="taskflow TASK", description="Run a task on texts, a file, or lines piped in.",
                           usage="%(prog)s [TEXT ...] [--input FILE] [--output FILE] [options]")
    parser.add_argument("task", help=argparse.SUPPRESS)
    parser.add_argument("texts", nargs="*", help="texts to process (or --input FILE, or a pipe: one text a line)")
    parser.add_argument("--input", help="file to read: .txt (a record a line), .jsonl, .csv or .tsv; "
                                        "'-' reads standard input (as .txt, or as --format says)")
    parser.add_argument("--format", choices=("txt", "jsonl", "csv", "tsv"),
                        help="the format of standard input or a FIFO (default: the FIFO's extension's, else txt); "
                             "a file is read as its extension says")
    parser.add_argument("--output", help="where to write JSON lines (default, or -: stdout)")
    parser.add_argument("--field", help="key/column(s) holding the input, comma-separated (default: the task's, e.g. text)")
    parser.add_argument("--batch-size", type=int, help="units per forward pass (default: the task's own, e.g. 32 "
                                                       "texts); larger is faster on a GPU and takes more memory")
    parser.add_argument("--workers", type=int, default=1, help="processes, each with its own predictor")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted job into the same --output")
    parser.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                        help="a bad record stops the job (raise) or goes to the errors file (skip); from standard "
                             "input with no errors file (no --errors, output to stdout), to stderr")
    parser.add_argument("--errors", help="errors file for --on-error skip (default: OUTPUT.errors.jsonl)")
    parser.add_argument("--encoding", default="utf-8", help="the input's text encoding (default utf-8), e.g. gbk")
    parser.add_argument("--id-field", help="key/column(s) of --input to copy into each output record, comma-separated "
                                           "(default: every one but --field's)")
    parser.add_argument("--max-record-bytes", type=int, default=1 << 20,
                        help="a longer input line is a bad record (default 1 MiB)")
    parser.add_argument("--worker-timeout", type=float, default=600.0,
                        help="seconds a worker process (or Ray actor) may take to answer one chunk before it "
                             "counts as hung and is killed (default 600); also to start (at least 60) and to exit "
                             "when asked (at most 10)")
    parser.add_argument("--backend", choices=("local", "ray"), default="local",
                        help="where a job's model runs: local (default), processes on this machine; ray, --workers "
                             "Ray actors (the job, its checkpoint and output stay here)")
    parser.add_argument("--address", help="Ray cluster address for --backend ray (default: start a local Ray)")
    parser.add_argument("--endpoint", metavar="URL",
                        help="a job's records are answered by the `taskflow serve` at URL (TASK: its route), not by a "
                             "local model; call-time options (e.g. --top-k) go with each request. --resume compares "
                             "what the server says it runs (task, model, version, fingerprint, its options) and the "
                             "call-time options, not the URL: the same model at another address continues the job")
    parser.add_argument("--api-key", help="--endpoint: the server's API key (default: $TASKFLOW_API_KEY)")
    parser.add_argument("--device", default="cpu", help="cpu (default), gpu or gpu:N (needs paddlepaddle-gpu)")
    parser.add_argument("--threads", type=int, help="Paddle CPU threads per process (default: cores / workers)")
    parser.add_argument("--task-path", help="directory of your own trained package")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--verbose", action="store_true",
                        help="also show Paddle's own log lines and warnings (as TASKFLOW_VERBOSE=1 does)")
    _common_options(parser)
    task_flags = _add_task_options(parser, argv)
    args = parser.parse_intermixed_args(argv)   # options may come before or after the texts
    if args.output == "-":
        args.output = None      # standard output, as --input - is standard input
    if args.texts and args.input:
        parser.error("give either texts or --input FILE, not both")
    if not args.texts and not args.input:
        if not _stdin_is_piped():
            parser.error("give either texts or --input FILE (or pipe texts in, one a line: "
                         f"`cat texts.txt | taskflow {args.task}`)")
        args.input = "-"   # no texts and a pipe: read it, as `--input -` does
    if args.verbose:
        os.environ["TASKFLOW_VERBOSE"] = "1"   # read where Paddle is imported and exports, here and in workers
    from .readers import check_path, stream_kind

    # A FIFO, <(zcat x.gz) or a device as --input is read once, as standard input is: no job, no resume.
    streamed = "standard input" if args.input == "-" else stream_kind(args.input) if args.input else None
    parameters = _endpoint_parameters(args, parser, streamed, task_flags)
    _refuse_unused_job_options(args, parser, streamed)
    fields = args.field.split(",") if args.field else None
    options = dict(model=args.model, mode=args.mode, device=args.device, batch_size=args.batch_size, num_threads=args.threads,
                   task_path=args.task_path, home=args.home, offline=args.offline)
    # A task option given on the command line goes to the task; one left out keeps the task's default.
    options.update({name: getattr(args, name) for name in task_flags if getattr(args, name) is not None})

    if args.input and not streamed:
        check_path(args.input)  # before a model is loaded
    job = bool(args.input and args.output and not streamed)
    target = None
    if args.output and not job:
        from .outputs import output_target

        target = output_target(args.output)
        if streamed and args.input != "-" and not target.direct:
            print(f"taskflow: warning: --input {args.input} is {streamed}: it is read as a stream, with no "
                  f"checkpoint; {args.output} is written when it ends, and a run that stops cannot be resumed",
                  file=sys.stderr)
    from .signals import RESUME_HINT, sigterm_stops_the_job

    # From before Paddle is imported, on every path: SIGTERM or SIGHUP stops the run with one message
    # saying what it leaves, never in Paddle's handler (whose dump would land among the results).
    with sigterm_stops_the_job(own_process=True, left=RESUME_HINT if job else _what_a_stop_leaves(args, target)):
        if args.endpoint:
            from .client import Client

            api_key = args.api_key or os.environ.get("TASKFLOW_API_KEY") or None
            return _run_job(Client(args.endpoint, args.task, api_key=api_key), args, fields, parameters)
        from .pipeline import Taskflow

        flow = Taskflow(args.task, **options)
        if job:
            return _run_job(flow, args, fields)
        if args.texts:
            _write_jsonl(flow(_group_texts(args.texts, flow.task.input_fields, parser)), target)
            return 0
        return _stream(flow, args, fields, target)


def _what_a_stop_leaves(args: argparse.Namespace, target) -> str:
    """What a run that is not a job leaves when it is stopped (SIGTERM, SIGHUP, Ctrl-C)."""
    if target is None:
        return "the results before it were written to standard output, each a whole line"
    if target.direct:
        return f"the results before it were written to {args.output}"
    return f"{args.output} was not written (it is written whole, when the run ends)"


def _stdin_is_piped() -> bool:
    """Whether standard input is a pipe or a file to read (not a terminal, not closed)."""
    stdin = sys.stdin
    try:
        return stdin is not None and stdin.readable() and not stdin.isatty()
    except (ValueError, OSError):   # closed
        return False


def _stream(flow, args: argparse.Namespace, fields, target=None) -> int:
    """A file, standard input or a FIFO, record by record, to stdout or to ``--output`` (``target``:
    a file written whole or not at all; a device or a FIFO, as results come).  Nothing to rename or
    resume (see _refuse_unused_job_options): a bad record stops it, or with ``--on-error skip`` goes
    where :func:`_stream_errors` says, as a job's goes to its errors file.  Results go out as soon as no
    more input is waiting, so a pipe fed a line at a time gets its answer to each line before the next
    arrives."""
    from .jobs import JobSummary, error_line, process_chunk, result_line
    from .readers import InputFile, error_record

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
        print("taskflow: interrupted" + (f"; {_what_a_stop_leaves(args, target)}" if target else ""), file=sys.stderr)
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
    quietly (see main)."""
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


def _run_job(flow, args: argparse.Namespace, fields, parameters=None) -> int:
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
    # Skipped records and worker failures were said by the job's log (see _say_warnings), even with --quiet.
    if not (summary.read or summary.resumed_from or summary.messages):
        _say_no_records(args.input, args.output)
    if summary.read and not summary.processed:
        return 2   # every record was bad: the job did nothing a caller could want (said above, once)
    # The output is complete, but a worker process died, hung or had to be killed: say so in the exit status.
    return 3 if summary.worker_faults else 0


def _add_task_options(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """A flag for every option of the task named in ``argv`` (and of its modes' classes), made from
    the options the task declares (``Task.declared``): one source of truth, so a new task option
    needs no CLI code.  An option only another mode has says so.  Returns the option names."""
    from .errors import TaskflowError
    from .pipeline import mode_classes
    from .registry import get_task_class

    task = _task_argument(parser, argv)
    try:
        registered = get_task_class(task) if task else None
    except TaskflowError:
        return []   # the run itself reports the unknown task
    if registered is None:
        return []
    parser.prog = f"taskflow {registered.name}"
    modes = mode_classes(registered)
    group = parser.add_argument_group(f"{registered.name} options")
    added: list[str] = []
    for cls in dict.fromkeys([registered, *modes.values()]):
        for name, option in cls.declared_options().items():
            flag = f"--{name.replace('_', '-')}"
            if name in added or flag in parser._option_string_actions:
                continue
            added.append(name)
            only = [mode for mode, klass in modes.items() if name in klass.option_names()]
            text = (_plain(option.help)
                    + (f" (default: {option.default!r})" if option.default is not None else "")
                    + (f" [--mode {only[0]} only]" if name not in registered.option_names() and only else ""))
            if option.kind == "bool":
                group.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=text)
            elif option.kind == "int":
                group.add_argument(flag, dest=name, type=int, default=None, help=text)
            elif option.kind == "float":
                group.add_argument(flag, dest=name, type=float, default=None, help=text)
            elif option.kind == "list":
                group.add_argument(flag, dest=name, type=lambda v: [x.strip() for x in v.split(",") if x.strip()],
                                   default=None, help=text + " (comma-separated)")
            else:   # a path or a name: user_dict, term_tree, user_dict_format...
                group.add_argument(flag, dest=name, default=None, help=text)
    return added


def _task_argument(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The task ``argv`` names: its first positional argument, past the values of the options that come
    before it (``taskflow --mode fast ner ...``: not "fast"), as argparse will read them."""
    takes_value = {flag: action.nargs != 0 for action in parser._actions for flag in action.option_strings}
    args = iter(argv)
    for arg in args:
        if arg == "--":
            return next(args, None)
        if not arg.startswith("-"):
            return arg
        if arg == "-" or "=" in arg:
            continue
        # argparse takes a unique prefix of a long option (--mod for --mode) as that option.
        known = [arg] if arg in takes_value else [flag for flag in takes_value
                                                   if arg.startswith("--") and flag.startswith(arg)]
        if len(known) == 1 and takes_value[known[0]]:
            next(args, None)
    return None


def _plain(doc: str) -> str:
    """reStructuredText roles and literals as plain text: ``x`` and :class:`X` as x and X."""
    import re

    return re.sub(r":\w+:`~?\.?([^`]*)`", r"\1", doc).replace("``", "")


def _refuse_unused_job_options(args: argparse.Namespace, parser: argparse.ArgumentParser,
                               streamed: str | None = None) -> None:
    """Options that only a job into --output FILE honours are refused elsewhere, never silently ignored.
    ``streamed`` says what the input is when it is read as a stream (standard input, a FIFO)."""
    # A stream (standard input, a FIFO) takes --on-error skip and --errors too; it cannot take what needs a
    # checkpoint or reading the input again.
    streams_take = ("--on-error", "--errors") if streamed else ()
    job_only = [flag for flag, used in (("--workers", args.workers != 1), ("--resume", args.resume),
                                        ("--on-error", args.on_error != "raise"), ("--errors", args.errors is not None),
                                        ("--worker-timeout", args.worker_timeout != 600.0),
                                        ("--backend ray", args.backend == "ray")) if used and flag not in streams_take]
    if job_only and not (args.input and not streamed and args.output):
        if streamed and args.input != "-":
            why = (f"; --input {args.input} is {streamed}, read once as a stream, with no checkpoint (copy it to a "
                   "file to run a job on it)")
        elif streamed:
            why = "; standard input is read once, as a stream, with no checkpoint"
        else:
            why = ("; streaming to stdout stops at the first bad record (--on-error skip also works on standard "
                   "input: --input - < FILE)" if args.input else "")
        parser.error(f"{', '.join(job_only)} {'needs' if len(job_only) == 1 else 'need'} --input FILE and --output FILE "
                     f"(a job with a checkpoint and an errors file){why}")
    if streamed and args.errors is not None and args.on_error != "skip":
        parser.error("--errors names where --on-error skip writes the bad records; add --on-error skip")
    if args.address and args.backend != "ray":
        parser.error("--address names a Ray cluster: give --backend ray with it")
    input_only = [flag for flag, used in (("--encoding", args.encoding != "utf-8"), ("--field", args.field),
                                          ("--id-field", args.id_field), ("--format", args.format),
                                          ("--max-record-bytes", args.max_record_bytes != 1 << 20)) if used]
    if input_only and not args.input:
        parser.error(f"{', '.join(input_only)} apply to --input FILE")
    from .readers import FORMATS

    suffix = Path(args.input).suffix.lower() if args.input and args.input != "-" else ""
    if args.format and not streamed and FORMATS.get(suffix) != args.format:
        parser.error(f"--format names the format of standard input or a FIFO; {args.input} is read as its extension "
                     f"({suffix or 'none'}) says: rename it to .{args.format}, or pipe it in "
                     f"(--input - --format {args.format} < {args.input})")
    # What the input is read as: --format, else its extension's format; a stream with neither is .txt.
    read_as = args.format or FORMATS.get(suffix) or ("txt" if streamed else None)
    if args.field and read_as == "txt":
        parser.error("--field names columns (keys) of a .jsonl, .csv or .tsv input; a .txt line is the text "
                     "itself (for a pair task, its texts tab-separated)"
                     + ("; standard input or a FIFO is read as .txt unless --format names jsonl, csv or tsv"
                        if streamed else ""))


def _endpoint_parameters(args: argparse.Namespace, parser: argparse.ArgumentParser, streamed: str | None,
                         task_flags: list[str]) -> dict | None:
    """``--endpoint``: the call-time options the job sends with each request (None without it).  What
    the server fixed when it started (the model, where and how it runs, the task's other options) is
    refused, named, and so is anything but a job into --output FILE."""
    if args.endpoint is None:
        if args.api_key is not None:
            parser.error("--api-key is the key of a server: it goes with --endpoint URL")
        return None
    if not (args.input and args.output) or streamed:
        parser.error("--endpoint runs a batch job against a server: it needs --input FILE and --output FILE"
                     + (f" (--input {args.input} is {streamed}, read once as a stream, with no checkpoint)"
                        if streamed else "") + "; for a few texts, use taskflow.Client or POST /v1/TASK")
    fixed = [flag for flag, used in (
        ("--model", args.model), ("--mode", args.mode), ("--task-path", args.task_path),
        ("--device", args.device != "cpu"), ("--threads", args.threads), ("--batch-size", args.batch_size),
        ("--home", args.home), ("--offline", args.offline), ("--workers", args.workers != 1),
        ("--backend ray", args.backend == "ray"), ("--address", args.address),
        ("--worker-timeout", args.worker_timeout != 600.0)) if used]
    from .errors import TaskflowError
    from .pipeline import mode_classes
    from .registry import get_task_class

    declared: dict = {}
    try:
        registered = get_task_class(args.task)
    except TaskflowError:
        registered = None     # a route named otherwise than a task: it got no task flags
    if registered is not None:
        for cls in dict.fromkeys([registered, *mode_classes(registered).values()]):
            for name, option in cls.declared_options().items():
                declared.setdefault(name, option)
    given = {name: getattr(args, name) for name in task_flags if getattr(args, name) is not None}
    fixed += [f"--{name.replace('_', '-')}" for name in given if not (name in declared and declared[name].per_call)]
    if fixed:
        parser.error(f"{', '.join(fixed)}: not with --endpoint: the server at {args.endpoint} chose the model and "
                     "runs it (its model, mode, device, threads, batches, replicas and the task's options are set "
                     "where it starts, e.g. in taskflow serve --config); a job run against it takes the task's "
                     "call-time options only")
    return given


def _group_texts(texts: list[str], fields, parser: argparse.ArgumentParser) -> list:
    """Positional texts as items: one text each, or for a task whose items have
    several fields (text_similarity's text1, text2) consecutive groups of that many."""
    if len(fields) == 1:
        return texts
    if len(texts) % len(fields):
        parser.error(f"this task takes {len(fields)} texts per item ({', '.join(fields)}); got {len(texts)} texts")
    return [dict(zip(fields, texts[i:i + len(fields)])) for i in range(0, len(texts), len(fields))]


def _write_jsonl(results, output) -> None:
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


def _cmd_list(argv: list[str]) -> int:
    CommandParser(prog="taskflow list", description="List tasks and models.").parse_args(argv)
    from .pipeline import Taskflow

    for row in Taskflow.tasks():
        aliases = f" (aliases: {', '.join(row['aliases'])})" if row["aliases"] else ""
        print(f"{row['task']}{aliases}")
        for model in row["models"]:
            mark = " [default]" if model == row["default_model"] else ""
            print(f"    {model}{mark}")
        for mode, model in row["modes"].items():
            print(f"    mode {mode} -> {model}")
    return 0


def _cmd_download(argv: list[str]) -> int:
    parser = CommandParser(
        prog="taskflow download",
        description="Put a model package, the packages it builds on, and its static-graph export into the cache "
                    "($PPNLP_HOME/taskflow): copy that folder to a machine without network and run there offline.")
    parser.add_argument("task")
    _common_options(parser)
    args = parser.parse_args(argv)
    from .packages import copy_to_cache, resolve
    from .pipeline import Taskflow
    from .registry import get_task_class

    refs, seen = ["/".join(Taskflow.locate(get_task_class(args.task), args.model, args.mode))], set()
    while refs:  # the package, then the packages it builds on (its manifest's "requires"), each once
        ref = refs.pop(0)
        if ref in seen:
            continue
        seen.add(ref)
        package_task, _, model = ref.rpartition("/")
        package = resolve(package_task, model, home=args.home, offline=args.offline, progress=True)
        source = package.source
        package = copy_to_cache(package, args.home)   # bundled ones too: the cache alone must be enough
        print(f"{package_task}/{model} {package.manifest.version}: {package.directory} ({source})")
        refs += [ref for ref in package.manifest.get("requires", {}).values() if not ref.startswith(".")]
    # Building the pipeline once exports the static graph into the cache, next to the package.
    flow = Taskflow(args.task, model=args.model, mode=args.mode, home=args.home, offline=args.offline)
    if flow.task.runs_network:      # not jieba's fast segmentation
        flow.task.predictors
        print(f"static graph: {flow.task.network_model.export_dir()}")
    return 0


def _cmd_pack(argv: list[str]) -> int:
    parser = CommandParser(
        prog="taskflow pack",
        description="Copy a model package into DEST/<task>/<model>/<version>/, the layout PPNLP_ENDPOINT serves.",
    )
    parser.add_argument("package_dir")
    parser.add_argument("dest")
    args = parser.parse_args(argv)
    from .packages import pack

    print(pack(args.package_dir, args.dest))
    return 0


def _cmd_serve(argv: list[str]) -> int:
    try:
        from .server import parse_command, serve_local
    except ImportError as exc:
        if exc.name not in ("fastapi", "uvicorn", "prometheus_client", "pydantic", "starlette"):
            raise
        print(f"taskflow: error: taskflow serve needs the serve extra ({exc.name} is not installed): "
              "pip install 'taskflow-nlp[serve]'", file=sys.stderr)
        return 2
    parsed = parse_command(argv)     # the arguments and the routes they name, or the exit status of a refusal
    if isinstance(parsed, int):
        return parsed
    if parsed[0].backend == "ray":
        from .serve_ray import serve_on_ray

        return serve_on_ray(*parsed)
    return serve_local(*parsed)


def _cmd_train(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    argv = [arg for arg in argv if arg != "--verbose"]
    if not argv or argv[0] in ("-h", "--help"):
        print(_train_usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0].startswith("-"):
        print(_train_usage(), file=sys.stderr)
        print(f"taskflow: error: name the task first: taskflow train TASK {argv[0]} ...", file=sys.stderr)
        return 2
    from .registry import canonical_name

    name = canonical_name(argv[0])
    try:
        recipe = importlib.import_module(f"taskflow.tasks.{name}.train")
    except ModuleNotFoundError:
        print(f"taskflow: error: task {name!r} cannot be trained on your own files; tasks that can: "
              f"{', '.join(_trainable_tasks())}", file=sys.stderr)
        return 2
    if verbose:
        os.environ["TASKFLOW_VERBOSE"] = "1"
    try:
        with _quiet_paddle():
            return recipe.main(argv[1:]) or 0
    except KeyboardInterrupt:
        print("taskflow: interrupted before the package was written; --minutes N stops training at a time and "
              "keeps the best epoch so far", file=sys.stderr)
        return 130


def _train_usage() -> str:
    return ("usage: taskflow train TASK --train FILE [--dev FILE] --out DIR [options]\n"
            "       trains a model package on your own labelled file (see `taskflow train TASK --help`)\n\n"
            f"tasks: {', '.join(_trainable_tasks())}\n"
            "--verbose also shows Paddle's own warnings (as TASKFLOW_VERBOSE=1 does)")


def _trainable_tasks() -> list[str]:
    import taskflow.tasks as tasks

    root = Path(tasks.__path__[0])
    return sorted(folder.name for folder in root.iterdir() if (folder / "train.py").is_file())


@contextlib.contextmanager
def _quiet_paddle():
    """Training as quiet as inference (see taskflow.predictor.import_paddle): Paddle's own warnings,
    such as "No ccache found" on every import, are not shown unless --verbose / TASKFLOW_VERBOSE=1."""
    from .predictor import verbose

    with warnings.catch_warnings():
        if not verbose():
            warnings.filterwarnings("ignore", module=r"paddle(\.|$)")
            warnings.filterwarnings("ignore", message=".*ccache.*")
        yield


if __name__ == "__main__":
    sys.exit(main())
