"""The command line's sub-commands: ``taskflow list``, ``download``, ``pack``, ``cache``, ``train``
and ``serve`` (:data:`COMMANDS`, which taskflow.cli dispatches to).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from pathlib import Path

from .errors import CommandParser


def common_options(parser: argparse.ArgumentParser) -> None:
    """The options the task command and ``taskflow download`` share: which model, and where its files come from."""
    parser.add_argument("--model", help="model name (default: the task's default)")
    parser.add_argument("--mode", help="a named preset of the task, e.g. ner's fast or accurate (see `taskflow list`)")
    parser.add_argument("--home", help="cache root (default: $PPNLP_HOME or ~/.paddlenlp)")
    parser.add_argument("--offline", action="store_true", default=None, help="never use the network")


def list_command(argv: list[str]) -> int:
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


def download_command(argv: list[str]) -> int:
    parser = CommandParser(
        prog="taskflow download",
        description="Put a model package, the packages it builds on, and its static-graph export into the cache "
                    "($PPNLP_HOME/taskflow): copy that folder to a machine without network and run there offline.")
    parser.add_argument("task")
    common_options(parser)
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


def pack_command(argv: list[str]) -> int:
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


def cache_command(argv: list[str]) -> int:
    parser = CommandParser(prog="taskflow cache", description="See what the model cache ($PPNLP_HOME/taskflow) holds, "
                                                              "and remove what this install no longer uses.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{list,prune}")
    listing = commands.add_parser("list", help="every package: size, state, verified, in use, static exports")
    listing.add_argument("--json", action="store_true", help="JSON for scripts instead of a table")
    pruning = commands.add_parser("prune", help="remove versions this install does not pin, stale static exports "
                                                "and leftover temporary files; never a package a process has loaded")
    pruning.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    pruning.add_argument("--yes", action="store_true", help="remove without asking")
    for command in (listing, pruning):
        command.add_argument("--home", help="cache root (default: $PPNLP_HOME or ~/.paddlenlp)")
    args = parser.parse_args(argv)
    from . import cache

    if args.command == "list":
        print(cache.listing(args.home, as_json=args.json))
        return 0
    removals, kept = cache.plan_prune(args.home)
    for path, why in kept:
        print(f"keep {path}: {why}")
    for removal in removals:
        print(f"{'would remove' if args.dry_run else 'remove'} {removal.path} ({cache.human_size(removal.size)}): "
              f"{removal.why}")
    total = cache.human_size(sum(removal.size for removal in removals))
    if not removals or args.dry_run:
        print(f"would free {total}" if removals else "nothing to prune")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            print("taskflow: error: nothing removed: pass --yes to prune without a terminal to ask on", file=sys.stderr)
            return 2
        if input(f"remove these {len(removals)} ({total})? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing removed")
            return 1
    done, left = cache.prune(removals, args.home)
    for path, why in left:
        print(f"left {path}: {why}")
    print(f"removed {len(done)}, freed {cache.human_size(sum(removal.size for removal in done))}")
    return 0


def serve_command(argv: list[str]) -> int:
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


def train_command(argv: list[str]) -> int:
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



COMMANDS = {"list": list_command, "download": download_command, "pack": pack_command, "cache": cache_command,
            "train": train_command, "serve": serve_command}
