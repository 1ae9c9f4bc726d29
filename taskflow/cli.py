"""Command line: ``taskflow TASK "text"``, ``taskflow list``, ``download``, ``pack``, ``train``.

    taskflow sentiment_analysis "这家酒店很干净"
    taskflow sentiment_analysis --input reviews.txt --output results.jsonl
    taskflow list
    taskflow download sentiment_analysis
    taskflow pack resources/sentiment_analysis/char_cnn served/
    taskflow train sentiment_analysis --data-dir ../shared/data/sentiment --out my_model/
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Iterator

from .errors import InvalidInputError, TaskflowError

COMMANDS = ("list", "download", "pack", "train")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        if argv[0] in COMMANDS:
            return globals()[f"_cmd_{argv[0]}"](argv[1:])
        return _cmd_run(argv)
    except TaskflowError as exc:
        print(f"taskflow: error: {exc}", file=sys.stderr)
        return 2


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="model name (default: the task's default)")
    parser.add_argument("--home", help="cache root (default: $PPNLP_HOME or ~/.paddlenlp)")
    parser.add_argument("--offline", action="store_true", default=None, help="never use the network")


def _cmd_run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="taskflow TASK", description="Run a task on texts or a file.")
    parser.add_argument("task")
    parser.add_argument("texts", nargs="*", help="texts to process (or use --input)")
    parser.add_argument("--input", help="file to read: .txt (a text a line), .jsonl, .csv or .tsv")
    parser.add_argument("--output", help="where to write JSON lines (default: stdout)")
    parser.add_argument("--field", default="text", help="column / JSON key holding the text (default: text)")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--task-path", help="directory of your own trained package")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _common_options(parser)
    args = parser.parse_args(argv)
    if bool(args.texts) == bool(args.input):
        parser.error("give either texts or --input FILE")

    from .pipeline import Taskflow

    flow = Taskflow(
        args.task, model=args.model, device=args.device, batch_size=args.batch_size,
        task_path=args.task_path, home=args.home, offline=args.offline,
    )
    if args.texts:
        results = flow(args.texts)
        _write_jsonl(results, args.output)
        return 0
    _run_file(flow, Path(args.input), args.output, args.field, quiet=args.quiet)
    return 0


def read_items(path: Path, field: str = "text") -> Iterator[tuple[int, object]]:
    """``(line number, item)`` pairs from a .txt, .jsonl, .csv or .tsv file."""
    suffix = path.suffix.lower()
    with open(path, encoding="utf-8", newline="") as handle:
        if suffix in (".csv", ".tsv"):
            reader = csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ",")
            if reader.fieldnames is None or field not in reader.fieldnames:
                raise InvalidInputError(f"{path}: no column {field!r}; columns are {reader.fieldnames}; pick one with --field")
            for row in reader:
                yield reader.line_num, row[field]
        elif suffix == ".jsonl":
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidInputError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                if isinstance(record, dict):
                    if field not in record:
                        raise InvalidInputError(f"{path}:{number}: no key {field!r}; pick one with --field")
                    record = record[field]
                yield number, record
        else:
            for number, line in enumerate(handle, 1):
                yield number, line.rstrip("\r\n")


def _run_file(flow, path: Path, output: str | None, field: str, *, quiet: bool, chunk: int = 1024) -> None:
    from tqdm.auto import tqdm

    from .packages import _temp_name

    out_path = Path(output) if output else None
    tmp = _temp_name(out_path) if out_path else None
    sink = open(tmp, "w", encoding="utf-8") if tmp else sys.stdout
    try:
        with tqdm(unit="items", disable=True if quiet else None, file=sys.stderr) as bar:
            batch: list[tuple[int, object]] = []
            for entry in read_items(path, field):
                batch.append(entry)
                if len(batch) == chunk:
                    _process(flow, path, batch, sink, bar)
                    batch = []
            if batch:
                _process(flow, path, batch, sink, bar)
        if tmp:
            sink.close()
            os.replace(tmp, out_path)
    finally:
        if tmp:
            sink.close()
            tmp.unlink(missing_ok=True)


def _process(flow, path: Path, batch, sink, bar) -> None:
    try:
        results = flow([item for _, item in batch])
    except (InvalidInputError, TypeError) as exc:
        index = getattr(exc, "index", None)
        if index is not None:
            raise type(exc)(f"{path}:{batch[index][0]}: {exc}", index) from exc
        raise
    for result in results:
        sink.write(json.dumps(result, ensure_ascii=False) + "\n")
    bar.update(len(batch))


def _write_jsonl(results, output: str | None) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results)
    if output:
        from .packages import atomic_write_text

        atomic_write_text(output, text)
    else:
        sys.stdout.write(text)


def _cmd_list(argv: list[str]) -> int:
    argparse.ArgumentParser(prog="taskflow list", description="List tasks and models.").parse_args(argv)
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
    parser = argparse.ArgumentParser(prog="taskflow download", description="Fetch a model package into the cache.")
    parser.add_argument("task")
    _common_options(parser)
    args = parser.parse_args(argv)
    from .packages import resolve
    from .pipeline import Taskflow
    from .registry import get_task_class

    package_task, model = Taskflow.locate(get_task_class(args.task), args.model)
    package = resolve(package_task, model, home=args.home, offline=args.offline, progress=True)
    print(f"{package_task}/{model} {package.manifest.version}: {package.directory} ({package.source})")
    return 0


def _cmd_pack(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="taskflow pack",
        description="Copy a model package into DEST/<task>/<model>/<version>/, the layout PPNLP_ENDPOINT serves.",
    )
    parser.add_argument("package_dir")
    parser.add_argument("dest")
    args = parser.parse_args(argv)
    from .packages import pack

    print(pack(args.package_dir, args.dest))
    return 0


def _cmd_train(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print("usage: taskflow train TASK [recipe options]   (see `taskflow train TASK --help`)", file=sys.stderr)
        return 2
    from .registry import canonical_name

    name = canonical_name(argv[0])
    try:
        recipe = importlib.import_module(f"taskflow.tasks.{name}.train")
    except ModuleNotFoundError:
        print(f"taskflow: task {name!r} has no training recipe", file=sys.stderr)
        return 2
    return recipe.main(argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
