"""Command line: ``taskflow TASK "text"``, ``taskflow list``, ``download``, ``pack``, ``cache``, ``train``, ``serve``.

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
    taskflow cache list [--json]                             (the cache's packages, sizes, states and exports)
    taskflow cache prune [--dry-run] [--yes]                 (remove versions this install does not pin, stale exports)
    taskflow train sentiment_analysis --train my_reviews.csv --out my_model/
    taskflow serve sentiment_analysis ner                    (HTTP on 127.0.0.1:8189; see SERVING.md)
    taskflow --version
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path

from .cli_commands import COMMANDS, common_options
from .cli_jobs import run_job, stream, what_a_stop_leaves, write_jsonl
from .errors import CommandParser, TaskflowError


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
                return COMMANDS[argv[0]](argv[1:])
            return _task_command(argv)
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



def _task_command(argv: list[str]) -> int:
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
    common_options(parser)
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
    with sigterm_stops_the_job(own_process=True, left=RESUME_HINT if job else what_a_stop_leaves(args, target),
                               paddle=not args.endpoint):
        if args.endpoint:
            from .client import Client

            api_key = args.api_key or os.environ.get("TASKFLOW_API_KEY") or None
            return run_job(Client(args.endpoint, args.task, api_key=api_key), args, fields, parameters)
        from .pipeline import Taskflow

        flow = Taskflow(args.task, **options)
        if job:
            return run_job(flow, args, fields)
        if args.texts:
            write_jsonl(flow(_group_texts(args.texts, flow.task.input_fields, parser)), target)
            return 0
        return stream(flow, args, fields, target)


def _stdin_is_piped() -> bool:
    """Whether standard input is a pipe or a file to read (not a terminal, not closed)."""
    stdin = sys.stdin
    try:
        return stdin is not None and stdin.readable() and not stdin.isatty()
    except (ValueError, OSError):   # closed
        return False


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


if __name__ == "__main__":
    sys.exit(main())
