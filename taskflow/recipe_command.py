"""The command line of a recipe (``taskflow train TASK``, ``python -m recipes.<task>.train``).

* :func:`recipe_parser`: a parser with the options every recipe has (``--out``, ``--name``,
  ``--version``, ``--seed``...); :class:`RecipeParser` checks ``--out``, ``--name`` and
  ``--version`` as soon as they are parsed, before any training (:func:`out_problem`,
  :func:`default_name`).
* :func:`option_number` and the option types built with it (:data:`POSITIVE_INT`, :data:`COUNT`,
  :data:`POSITIVE`, :data:`SHARE`, :data:`DROPOUT`, :data:`SEED`): a number out of range is
  argparse's one-line error naming the option.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import taskflow.resources as bundled

from .errors import CommandParser
from .files import home_dir
from .manifest import MANIFEST, name_problem

__all__ = ["recipe_parser", "RecipeParser", "default_name", "out_problem", "option_number", "POSITIVE_INT", "COUNT",
           "POSITIVE", "SHARE", "DROPOUT", "SEED"]


def option_number(kind: type, *, at_least: float | None = None, above: float | None = None,
                  below: float | None = None) -> Callable[[str], Any]:
    """An argparse ``type``: a ``kind`` (int or float) in the range, else argparse's one-line error
    naming the option (a batch size of 0 or a dropout of 1.5 is refused before any training)."""
    shown = lambda bound: f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"  # noqa: E731
    bounds = [f">= {shown(at_least)}" if at_least is not None else "", f"> {shown(above)}" if above is not None else "",
              f"< {shown(below)}" if below is not None else ""]

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if ((at_least is not None and value < at_least) or (above is not None and value <= above)
                or (below is not None and value >= below) or value != value):
            raise argparse.ArgumentTypeError(f"{text} is out of range: it must be {' and '.join(b for b in bounds if b)}")
        return value

    parse.__name__ = kind.__name__
    return parse


POSITIVE_INT = option_number(int, at_least=1)
COUNT = option_number(int, at_least=0)             # 0: none or off
POSITIVE = option_number(float, above=0)
SHARE = option_number(float, above=0, below=1)     # a share of the data, a moving average's decay
DROPOUT = option_number(float, at_least=0, below=1)
SEED = option_number(int, at_least=0, below=2 ** 32)


class RecipeParser(CommandParser):
    """A recipe's command line: after parsing, ``--out``, ``--name`` and ``--version`` are checked
    before any training, not found wrong when the package is written at the end.

    ``own_data``: the parser of ``taskflow train`` (a recipe over the user's own files), whose
    ``--out`` may not lie among the models taskflow ships; the lab's recipes write those."""

    def __init__(self, *args, own_data: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.own_data = own_data

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        out = Path(parsed.out) if getattr(parsed, "out", None) else None
        if out is not None:
            problem = out_problem(out, own_data=self.own_data)
            if problem:
                self.error(problem)
            if not getattr(parsed, "name", None) and not default_name(out):
                self.error(f"--out {out} has no folder name to name the model after; give --name")
        for flag, value in (("--name", getattr(parsed, "name", None) or (default_name(out) if out else None)),
                            ("--version", getattr(parsed, "version", None))):
            problem = None if value is None else name_problem(value)
            if problem:
                self.error(f"{flag} {value!r} names the package's folder in a cache, so it {problem}; "
                           "e.g. my_model, 1.0.0")
        return parsed


def default_name(out: Path) -> str:
    """The model name a package written to ``out`` gets without ``--name``: the folder's name as
    the user spells it (``.`` is the current folder's, a link's its own, not its target's)."""
    return Path(os.path.abspath(out)).name


def out_problem(out: Path, *, own_data: bool = False) -> str | None:
    """Why a package cannot be written to ``out``, or None: everything that would otherwise be
    found after the training, when the package is written."""
    # out, then each folder it would be made in, until one that is there.
    path = out
    for path in [out, *out.parents]:
        if path.is_symlink() and not path.exists():
            return (f"--out {out}: {path} is a symbolic link to {os.readlink(path)}, which does not exist; "
                    "make the folder it points to, or name another --out")
        if path.exists():
            break
    if path.exists() and not path.is_dir():
        return f"--out {out} is a file; name a folder for the package" if path == out else \
            f"--out {out}: {path} is a file, not a folder"
    if path == out and not (out / MANIFEST).is_file() and any(out.iterdir()):
        return (f"--out {out} holds other files and no package; name a new or empty folder "
                "(a package already there is replaced)")
    target = out.resolve()
    shipped = Path(bundled.__file__).parent.resolve()
    cache = (home_dir() / "taskflow").resolve()
    if own_data and (target == shipped or shipped in target.parents):
        return (f"--out {out} is inside the models taskflow ships ({shipped}): a package there would replace "
                "or sit among the bundled models of everyone using this installation; name a folder of your own, "
                "e.g. --out my_model")
    if target == cache or cache in target.parents:
        return (f"--out {out} is inside taskflow's model cache ({cache}), whose packages taskflow downloads "
                "and verifies itself; name a folder of your own, e.g. --out my_model, and run it with task_path=")
    # Made and removed again, so that a folder one cannot write in (read-only, another user's)
    # is found now: the test is the write itself, which no permission bits can foretell for root.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".taskflow-probe-", dir=path))
    except OSError as exc:
        return f"--out {out}: cannot write in {path} ({exc.strerror or exc}); name a folder you can write in"
    return None


def recipe_parser(task: str, doc: str | None, *, data: str | None, name: str | None, seed: int = 1,
                  data_required: bool = False, out: str | None = None, network: bool = True) -> argparse.ArgumentParser:
    """The command line of ``taskflow train <task>``, with the options every recipe has.

    ``--data-dir`` (``data`` says what it holds; ``None``: a recipe that trains only on the
    user's own files has none), ``--out`` (required unless ``out`` is a default), ``--name``
    (``None``: the ``--out`` folder's name), ``--version``, ``--seed`` and, for a recipe that trains
    a network with :func:`fit` (``network``), ``--average-weights``; the recipe adds its own.
    ``doc`` (the recipe's docstring) is the help text as written.
    """
    parser = RecipeParser(prog=f"taskflow train {task}", description=doc, own_data=data is None,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    if data is not None:
        parser.add_argument("--data-dir", required=data_required, help=data)
    parser.add_argument("--out", required=out is None, default=out,
                        help="the folder to write the model package to (a package already there is replaced)")
    parser.add_argument("--name", default=name, help="model name in the manifest (default: %(default)s)"
                        if name else "model name in the manifest (default: the --out folder's name)")
    parser.add_argument("--version", default="1.0.0", help="model version in the manifest")
    parser.add_argument("--seed", type=SEED, default=seed, help="seeds every generator (default: %(default)s)")
    if network:
        parser.add_argument("--average-weights", type=SHARE, metavar="DECAY",
                            help="evaluate and ship a moving average of the weights (e.g. 0.999: about the "
                                 "last 1,000 steps) instead of the last step's; default: off")
    return parser
