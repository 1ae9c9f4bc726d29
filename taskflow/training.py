"""Pieces the training recipes (``tasks/<task>/train.py``) share; the product never imports this.

A recipe is data + network + metric (+ selection); the rest is here:

* :func:`fit`: the one training loop: progress, a time budget, evaluation on dev, the best
  evaluation's weights kept and put back, patience; :class:`Schedule` sets its learning rate
  (warm-up, linear decay), its length (epochs, or what fits in ``--minutes``) and its evaluation
  points; :class:`Fit` is how the run went, as a manifest records it.
* :func:`length_batches`: one epoch's batches of items of similar lengths, in a seeded random order.
* :func:`recipe_parser`: a recipe's command line, with the options every recipe has.
* :class:`PackageDraft`: the package a recipe writes: files made in a scratch folder, then a
  manifest pinning each by sha256 and size; :func:`update_manifest` adds figures measured later.
* :func:`framework_versions`: the library versions a manifest records.
* :func:`snapshot` / :func:`restore`: copies of a network's weights, and putting them back.
* :func:`jieba_cut`: jieba's word cutter, or a message saying how to install it.
* :func:`log`: a time-stamped line on stderr.
* :func:`portable_path`: how a manifest names a data file (no local folders).
* :func:`seed_all`: seed Python's, numpy's and Paddle's generators at once.
* :func:`fast_cpu_math`: call before Paddle loads, so MKL uses its fast kernels on AMD CPUs too.

Training on a user's own files (``taskflow train TASK --train FILE [--dev FILE]``):

* :func:`add_own_data_options`: ``--train``, ``--dev``, ``--text-field``, ``--label-field``,
  ``--encoding``, ``--dev-share``, ``--minutes``, ``--quiet``; :func:`own_data_defaults` gives
  small-data defaults to a recipe's own options when ``--train`` is on the command line.
* :func:`read_labelled`: ``(texts, label, line)`` examples from a CSV/TSV/JSONL file, read by
  :class:`taskflow.readers.InputFile`; a bad line is a :class:`~taskflow.errors.TrainingDataError`
  naming the file and line and saying how to fix it.
* :func:`split_off_dev`, :func:`check_label_sets`, :func:`sorted_labels`.
* :func:`classification_report` / :func:`print_report`: the dev report a package's manifest keeps.
* :func:`progress`: a tqdm bar with an ETA (off with ``--quiet``; off when stderr is not a terminal).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import taskflow.resources as bundled

from .errors import CommandParser
from .packages import MANIFEST, home_dir, name_problem

__all__ = ["fit", "Fit", "Schedule", "length_batches", "recipe_parser", "PackageDraft", "update_manifest",
           "simplex_grid", "framework_versions", "snapshot", "restore", "jieba_cut", "log", "portable_path", "seed_all",
           "fast_cpu_math", "add_own_data_options", "own_data_defaults", "read_labelled", "LabelledExample",
           "split_off_dev", "check_label_sets", "sorted_labels", "classification_report", "print_report", "progress",
           "load_vectors", "pretrained_embeddings", "vectors_report", "option_number", "POSITIVE_INT", "COUNT",
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


class PackageDraft:
    """The model package a recipe writes: its files are made in a scratch folder
    (``draft / "vocab.json"``), and :meth:`write` copies them to ``args.out`` with a manifest
    naming the task, ``args.name`` and ``args.version`` and pinning each file by sha256 and size.

    >>> with PackageDraft(args, "text_similarity") as draft:            # doctest: +SKIP
    ...     draft.ship_weights(network, float16=lambda name: "_emb." in name)
    ...     vocab.save(draft / "vocab.json")
    ...     draft.write({"architecture": ..., "metrics": ...})
    """

    def __init__(self, args: argparse.Namespace, task: str, *, started: float | None = None):
        self.out = Path(args.out)
        self.identity = {"task": task, "name": args.name or default_name(self.out), "version": args.version}
        self.started = time.time() if started is None else started
        self.quiet = bool(getattr(args, "quiet", False))    # own-data runs: --quiet
        self._names: list[str] = []     # in the order asked for, which the manifest keeps

    def __enter__(self) -> "PackageDraft":
        self._scratch = tempfile.TemporaryDirectory(prefix="taskflow-package-")
        self.folder = Path(self._scratch.name)
        return self

    def __exit__(self, *exc) -> None:
        self._scratch.cleanup()

    def __truediv__(self, name: str) -> Path:
        if name not in self._names:
            self._names.append(name)
        return self.folder / name

    def ship_weights(self, network, float16: Callable[[str], bool], name: str = "weights.npz",
                     int8: Callable[[str], bool] = lambda name: False) -> Path:
        """Save ``network``'s weights as they ship (``float16(name)`` ones halved, ``int8(name)`` ones
        quartered) and load them back into it, so that what the recipe evaluates next is exactly what ships."""
        from taskflow.predictor import load_weights, save_weights

        path = self / name
        save_weights(network, path, float16=float16, int8=int8)
        load_weights(network, path)
        network.eval()
        return path

    def write(self, fields: Mapping[str, Any]):
        """Write the package: every file made in the draft, and the manifest (identity, then ``fields``)."""
        from taskflow.packages import write_package

        files = {name: self.folder / name for name in self._names if (self.folder / name).is_file()}
        manifest = write_package(self.out, {**self.identity, **fields}, files)
        size = sum(entry["size"] for entry in manifest.files.values())
        if not self.quiet:
            log(f"wrote {self.out}: {manifest.name} {manifest.version}, {size / 1e6:.1f} MB, "
                f"{(time.time() - self.started) / 60:.1f} min after the start")
        return manifest


def update_manifest(package_dir: str | Path, fields: Mapping[str, Any]):
    """Add or replace ``fields`` (figures measured on the written package, say) in its manifest;
    the files, and so their sha256, stay as they are."""
    from taskflow.packages import Manifest, write_package

    package_dir = Path(package_dir)
    manifest = Manifest.load(package_dir / "manifest.json")
    kept = {k: v for k, v in manifest.data.items() if k != "files"}
    return write_package(package_dir, {**kept, **fields}, {name: package_dir / name for name in manifest.files})


def simplex_grid(networks: int, step: float) -> list[tuple[float, ...]]:
    """Every weighting of an ensemble's ``networks`` in multiples of ``step`` that sums to 1, each
    weight at least one step (a network with weight 0 is not a member): the candidates an
    ``ensemble_weights`` tuning scores."""
    units = round(1 / step)
    if networks < 2 or units < networks or not math.isclose(units * step, 1.0):
        raise ValueError(f"step {step}: give 1/N for a whole N of at least {networks} (the networks)")

    def splits(n: int, parts: int):
        if parts == 1:
            yield (n,)
            return
        for first in range(1, n - parts + 2):
            yield from ((first, *rest) for rest in splits(n - first, parts - 1))
    return [tuple(k / units for k in split) for split in splits(units, networks)]


_MODULES = {"paddlepaddle": "paddle", "numpy": "numpy", "scikit-learn": "sklearn", "jieba": "jieba"}


def framework_versions(*distributions: str) -> dict[str, str]:
    """``{"paddlepaddle": "3.3.1", ...}``: the versions of the libraries a package was trained with.

    Read from the imported modules, not the installed distributions' metadata: paddlepaddle-gpu
    is imported as ``paddle`` too, and has no ``paddlepaddle`` distribution.
    """
    import importlib

    return {name: importlib.import_module(_MODULES.get(name, name)).__version__ for name in distributions}


def snapshot(network, keep: Callable[[str], bool] = lambda name: True) -> dict:
    """Copies of ``network``'s weights (those whose name ``keep`` accepts), for :func:`restore`."""
    return {k: v.numpy().copy() for k, v in network.state_dict().items() if keep(k)}


def restore(network, state: Mapping) -> None:
    """Put weights from :func:`snapshot` back; weights the snapshot left out stay as they are."""
    import paddle

    current = network.state_dict()
    current.update({k: paddle.to_tensor(v) for k, v in state.items()})
    network.set_state_dict(current)


def jieba_cut() -> Callable[[str], list[str]]:
    """jieba's word cutter (with its HMM), for recipes that find their word lists with it."""
    try:
        import jieba
    except ImportError:
        raise SystemExit("the recipe finds its word list with jieba: pip install jieba") from None
    jieba.setLogLevel(60)
    return lambda text: jieba.lcut(text, HMM=True)


def log(message: str) -> None:
    print(_stamped(message), file=sys.stderr, flush=True)


def _stamped(message: str) -> str:
    return f"[{time.strftime('%H:%M:%S')}] {message}"


def portable_path(path: str | Path, root: str | Path | None = None) -> str:
    """A data file as a shipped manifest records it: relative to the data root ``root`` when it
    is below it, else its folder and name, never the folders of the machine it was built on."""
    path = Path(path)
    if root:
        try:
            return path.resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return "/".join(path.parts[-2:])


def seed_all(seed: int) -> random.Random:
    """Seed Python's, numpy's and Paddle's global generators; return a ``random.Random(seed)``
    for the recipe's own draws (shuffles, samples), so a run is repeatable end to end."""
    import numpy as np
    import paddle

    random.seed(seed)
    np.random.seed(seed)
    paddle.seed(seed)
    return random.Random(seed)


def fast_cpu_math() -> None:
    """MKL picks slow generic kernels on AMD CPUs unless told otherwise (4x on matmul on the
    project's machines); it reads this when Paddle loads and ignores it on Intel.  A user's own
    setting wins."""
    if "paddle" not in sys.modules:
        os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")


# ------------------------------------------------------------------ the trainer

def length_batches(lengths: Sequence[int], batch_size: int, rng: random.Random,
                   index: Iterable[int] | None = None) -> list[list[int]]:
    """One epoch of batches of item indices, each of items of similar ``lengths[i]``.

    The items (``index``, default all of them; an index listed twice is drawn twice) are
    shuffled, sorted by length within pools of 50 batches, cut into batches, and the batches
    shuffled: little padding (most of a CPU step's waste) in a batch, a random order over the
    epoch, and the same epoch again from the same ``rng`` state.

    >>> length_batches([3, 1, 2, 9, 8], 2, random.Random(0))
    [[1, 2], [0, 4], [3]]
    """
    order = list(range(len(lengths)) if index is None else index)
    rng.shuffle(order)
    pool, batches = batch_size * 50, []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start:start + pool], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


class Schedule:
    """The learning rate, the evaluation points and the end of a run of :func:`fit`.

    The run is ``epochs`` (a fraction is allowed) of ``steps_per_epoch`` steps.  The rate warms up
    linearly over ``warmup`` steps, then decays linearly to ``floor`` times ``lr`` at the run's end
    (``floor=1``: constant).  The network is evaluated after each epoch, or, with ``evals``, that
    many times evenly over the run; always once more at its end.

    ``minutes`` makes the run a wall-clock budget.  Recipes run on shared 2-core machines, so the
    steps a budget allows are measured, not guessed: at step ``first_check`` (with an evaluation
    each epoch: just after the first) and every ``check_every`` steps after it the run is refitted
    to the steps that fit in what is left at the measured speed, time for the remaining evaluations
    set aside (``eval_guess`` seconds each until one has been timed), so that the decay ends when
    the budget does.  A run that overruns anyway stops when the budget is spent.

    >>> schedule = Schedule(lr=1e-3, steps_per_epoch=25, epochs=4, warmup=10, floor=0.05, evals=4)
    >>> schedule.lr_at(0), schedule.lr_at(9), schedule.total, schedule.eval_every
    (0.0001, 0.001, 100, 25)
    """

    def __init__(self, *, lr: float, steps_per_epoch: int, epochs: float, warmup: int = 0, floor: float = 1.0,
                 evals: int | None = None, minutes: float | None = None, first_check: int = 30,
                 check_every: int = 100, eval_guess: float = 30.0):
        self.lr, self.warmup, self.floor = lr, warmup, floor
        self.steps_per_epoch, self.epochs, self.minutes = max(1, steps_per_epoch), epochs, minutes
        self.planned = self.total = max(1, int(epochs * self.steps_per_epoch))
        self.per_epoch = evals is None
        self.evals = max(1, math.ceil(self.planned / self.steps_per_epoch) if evals is None else evals)
        self.eval_every = self.steps_per_epoch if self.per_epoch else max(1, self.total // self.evals)
        # An evaluation each epoch: refit once the first has been timed, as it may take longer than the epoch.
        self.first_check = self.steps_per_epoch + 1 if self.per_epoch else first_check
        self.check_every, self.eval_guess = check_every, eval_guess
        self.start = time.time()
        self.eval_seconds, self.evals_done = 0.0, 0

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        return self.lr * max(self.floor, 1 - (1 - self.floor) * (step - self.warmup) / max(1, self.total - self.warmup))

    def after_step(self, step: int) -> str | None:
        """Refit the run's length to the budget when it is time to; a line worth logging when it changed."""
        due = step == self.first_check or (step > self.first_check and step % self.check_every == 0)
        if not self.minutes or not due:
            return None
        elapsed = time.time() - self.start
        per_step = (elapsed - self.eval_seconds) / step
        per_eval = self.eval_seconds / self.evals_done if self.evals_done else self.eval_guess
        left = self.minutes * 60 - elapsed
        if self.per_epoch:      # each step carries its share of its epoch's evaluation
            fit = step + int(left / max(per_step + per_eval / self.steps_per_epoch, 1e-9))
        else:
            fit = step + int((left - per_eval * max(1, self.evals - self.evals_done)) / max(per_step, 1e-9))
        previous, self.total = self.total, min(self.planned, max(step + 1, fit))
        if step == self.first_check and not self.per_epoch:
            self.eval_every = max(1, self.total // self.evals)
        if step == self.first_check or abs(self.total - previous) > 20:
            return (f"{per_step:.3f}s/step: {self.total} steps ({self.total / self.steps_per_epoch:.2f} epochs) "
                    f"fit in {self.minutes:g} min")
        return None

    def evaluate_now(self, step: int) -> bool:
        """Whether an evaluation is due after ``step`` (besides those at each epoch's end and the run's)."""
        return not self.per_epoch and step % self.eval_every == 0

    def stop_reason(self, step: int) -> str | None:
        """Why the run ends after ``step`` steps, or ``None`` while it goes on."""
        if self.minutes and time.time() - self.start > self.minutes * 60:
            return f"--minutes {self.minutes:g} spent"
        if step >= self.total:
            if self.total < self.planned:
                return f"the {self.total} steps that fit in --minutes {self.minutes:g} done"
            return f"--epochs {self.epochs:g} done"
        return None

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """Time an evaluation, so that the budget sets it aside from the training speed."""
        start = time.time()
        try:
            yield
        finally:
            self.eval_seconds += time.time() - start
            self.evals_done += 1

    def describe(self) -> dict:
        return {"lr": self.lr, "warmup": self.warmup,
                "schedule": "constant" if self.floor >= 1 else f"linear decay to {self.floor:g} x lr"}


class Fit:
    """How a :func:`fit` run went.

    ``history`` holds one dict per evaluation: its ``epoch`` and ``step``, the figures ``evaluate()``
    gave, the mean ``train_loss`` since the evaluation before and the ``minutes`` since the start;
    the last one says why the run ``stopped``.  ``best`` is the entry whose weights the network
    holds after the run.
    """

    def __init__(self, select: str, schedule: Schedule, optimizer: str, grad_clip: float | None,
                 average: float | None = None):
        self.select, self.schedule, self.optimizer, self.grad_clip = select, schedule, optimizer, grad_clip
        self.average = average
        self.history: list[dict] = []
        self.best: dict | None = None
        self.steps, self.minutes = 0, 0.0

    def summary(self) -> dict:
        """The run as a manifest's ``training`` section records it."""
        averaging = {"weight_average": f"exponential moving average, decay {self.average:g}"} if self.average else {}
        return {"optimizer": {"name": self.optimizer, **self.schedule.describe(), "grad_clip": self.grad_clip,
                              **averaging},
                "selection": f"the evaluation with the best {self.select}", "steps": self.steps,
                "epochs": round(self.steps / self.schedule.steps_per_epoch, 2), "best_epoch": self.best["epoch"],
                "best_step": self.best["step"], "train_minutes": round(self.minutes, 1), "history": self.history}


class WeightAverage:
    """An exponential moving average of trainable ``parameters`` (Polyak averaging).

    The average of the last ~``1 / (1 - decay)`` steps sits nearer the middle of the basin the
    optimiser wanders in than any one step's weights, so it scores higher and, above all, steadier
    from one evaluation to the next: a recipe that keeps the best of a few evaluations then picks
    on the model rather than on where the last step happened to land.  Early on the decay is
    ``min(decay, (1 + n) / (10 + n))`` after ``n`` updates, so the average is not held back by the
    random init.  Buffers (a batch norm's running statistics) are not averaged.
    """

    def __init__(self, parameters, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"a weight-averaging decay is between 0 and 1 (0.999 averages ~1000 steps), not {decay}")
        self.decay, self.updates = decay, 0
        self.parameters = [p for p in parameters if not p.stop_gradient]
        self.shadow = [p.detach().clone() for p in self.parameters]

    def update(self) -> None:
        import paddle

        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        with paddle.no_grad():
            self.shadow = [s * decay + p.detach() * (1.0 - decay) for s, p in zip(self.shadow, self.parameters)]

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The averaged weights in the network for the ``with`` block, the trained ones after it."""
        trained = [p.detach().clone() for p in self.parameters]
        for p, s in zip(self.parameters, self.shadow):
            p.set_value(s)
        try:
            yield
        finally:
            for p, t in zip(self.parameters, trained):
                p.set_value(t)


def fit(network, batches: Callable[[], Iterable], loss_of: Callable[[Any], Any], evaluate: Callable[[], Mapping],
        *, schedule: Schedule, select: str, optimizer: str = "Adam", grad_clip: float | None = 5.0, parameters=None,
        keep: Callable[[str], bool] = lambda name: True, patience: int | None = None, average: float | None = None,
        quiet: bool = False, log_every: int = 100, description: str = "training") -> Fit:
    """Train ``network``, then put back its weights of the evaluation that scored best: the
    training loop of every recipe.

    ``batches()`` gives one epoch's batches (drawn afresh each epoch, see :func:`length_batches`),
    ``loss_of(batch)`` the loss of one.  ``optimizer`` names a ``paddle.optimizer`` class, run over
    ``parameters`` (default: all the network's) with global-norm clipping at ``grad_clip`` (``None``:
    none) and the ``schedule``'s rate.  Where the schedule says, the network is evaluated (in eval mode):
    ``evaluate()`` gives a dict of figures, kept in the history, whose ``select`` one (higher is
    better) picks the weights kept (those whose name ``keep`` accepts, see :func:`snapshot`).  The
    run ends as the schedule says, or after ``patience`` evaluations without a better figure.
    With ``average`` (a decay such as 0.999, ``--average-weights``), what is evaluated and kept
    is the moving average of the weights (:class:`WeightAverage`), not the last step's.

    Progress: a bar with an ETA where stderr is a terminal, time-stamped lines (one every
    ``log_every`` steps, one per evaluation) where it is not, nothing with ``quiet``.
    """
    import paddle

    run = Fit(select, schedule, optimizer, grad_clip, average)
    averaged = WeightAverage(network.parameters() if parameters is None else parameters, average) if average else None
    trainer = getattr(paddle.optimizer, optimizer)(
        learning_rate=schedule.lr, grad_clip=None if grad_clip is None else paddle.nn.ClipGradByGlobalNorm(grad_clip),
        parameters=network.parameters() if parameters is None else parameters)
    best_figure, best_state, losses, shown = None, None, [], {}
    step = epoch = since_best = 0
    stopped = None
    unit = "epochs" if schedule.per_epoch else "evaluations"
    schedule.start = time.time()
    with progress(schedule.total, description, quiet=quiet) as bar:
        say = _reporter(bar, quiet)

        def checkpoint() -> str | None:
            """Evaluate, keep the weights if they are the best so far; why to stop, if patience ran out."""
            nonlocal best_figure, best_state, since_best
            network.eval()
            with averaged.swapped_in() if averaged else nullcontext():
                with schedule.evaluating():
                    figures = dict(evaluate())
                improved = run.best is None or figures[select] > best_figure
                if improved:
                    best_state = snapshot(network, keep)
            network.train()
            entry = {"epoch": epoch if schedule.per_epoch else round(step / schedule.steps_per_epoch, 2),
                     "step": step, **{k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()},
                     "train_loss": round(sum(losses) / max(1, len(losses)), 4),
                     "minutes": round((time.time() - schedule.start) / 60, 2)}
            losses.clear()
            run.history.append(entry)
            if improved:
                run.best, best_figure = entry, figures[select]
            since_best = 0 if improved else since_best + 1
            say(f"epoch {entry['epoch']} (step {step}): " + ", ".join(f"{k} {_figure(v)}" for k, v in figures.items())
                + (" *" if improved else ""))
            shown.update({select: _figure(figures[select]), "best_epoch": run.best["epoch"]})
            if patience is not None and since_best >= patience:
                return f"no better {select} for {patience} {unit}"
            return None

        while stopped is None:
            epoch += 1
            network.train()
            drawn = 0
            for batch in batches():
                drawn += 1
                trainer.set_lr(schedule.lr_at(step))
                loss = loss_of(batch)
                loss.backward()
                trainer.step()
                trainer.clear_grad()
                if averaged:
                    averaged.update()
                step += 1
                losses.append(float(loss))
                refit = schedule.after_step(step)
                if bar.total != schedule.total:
                    bar.total = schedule.total
                    bar.refresh()
                bar.update(1)
                bar.set_postfix({"epoch": epoch, "loss": f"{losses[-1]:.3f}", **shown}, refresh=False)
                if bar.disable and refit:
                    say(refit)
                if bar.disable and step % log_every == 0:
                    say(f"step {step}/{schedule.total} (epoch {epoch}) loss {sum(losses) / len(losses):.4f} "
                        f"lr {schedule.lr_at(step):.2e}")
                end = schedule.stop_reason(step)
                if end or schedule.evaluate_now(step):
                    lost_patience = checkpoint()
                    stopped = end or lost_patience
                if stopped:
                    break
            if not drawn:
                from .errors import TrainingDataError

                raise TrainingDataError("an epoch of training drew no batches: the training set is empty")
            if stopped is None and schedule.per_epoch:
                stopped = checkpoint()
        run.history[-1]["stopped"] = stopped
        run.steps, run.minutes = step, (time.time() - schedule.start) / 60
        restore(network, best_state)
        network.eval()
        say(f"trained {step} steps in {run.minutes:.1f} min ({stopped}); kept epoch {run.best['epoch']}, "
            f"{select} {_figure(best_figure)}")
    return run


def _figure(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _reporter(bar, quiet: bool) -> Callable[[str], None]:
    """Where a run's lines go: above the bar on a terminal, to the log otherwise, nowhere when quiet."""
    if quiet:
        return lambda line: None
    if bar.disable:
        return log
    return lambda line: bar.write(_stamped(line), file=sys.stderr)


# ------------------------------------------------------------ the user's own files

def add_own_data_options(parser: argparse.ArgumentParser, *, text_field: str | None, label_field: str | None = "label",
                         formats: str = "a .csv, .tsv or .jsonl file") -> argparse._ArgumentGroup:
    """The options of ``taskflow train TASK --train FILE``, in a group of their own (``None``: a
    format whose records have no named fields, such as BIO, takes no ``--text-field`` / ``--label-field``)."""
    group = parser.add_argument_group(
        "training on your own data", "Give --train (and --dev); the vocabulary comes from "
        "the --train file, the epoch is picked on --dev, and the dev report is printed and kept in the manifest.")
    group.add_argument("--train", help=f"your training examples: {formats}")
    group.add_argument("--dev", help="examples to pick the epoch on and report (same format; default: --dev-share "
                                     "of --train, held out)")
    group.add_argument("--dev-share", type=SHARE, default=0.1,
                       help="share of --train held out as dev when no --dev is given (default: %(default)s)")
    if text_field is not None:
        # a pair task names its two texts' fields, comma-separated; any other, one
        what = "keys/columns of the two texts, comma-separated" if "," in text_field else "key/column of the text"
        group.add_argument("--text-field", default=text_field, help=f"{what} (default: %(default)s)")
    if label_field is not None:
        group.add_argument("--label-field", default=label_field, help="key/column of the label (default: %(default)s)")
    group.add_argument("--encoding", default="utf-8", help="the files' text encoding (default utf-8), e.g. gbk")
    if "--minutes" not in parser._option_string_actions:     # a recipe with a budget of its own keeps its option
        group.add_argument("--minutes", type=POSITIVE, help="time budget for training: stop (keeping the best epoch so "
                                                         "far) when it is spent")
    group.add_argument("--quiet", action="store_true", help="no progress bar, no report on stdout")
    return group


def own_data_defaults(parser: argparse.ArgumentParser, argv: list[str], defaults: Mapping[str, Any]) -> None:
    """Small-data defaults for a recipe's own options (smaller network, more epochs...), in force
    when ``--train`` is on the command line; options the user gives still win.  The package is
    then named after its ``--out`` folder, not after the shipped model."""
    if any(arg == "--train" or arg.startswith("--train=") for arg in argv):
        parser.set_defaults(name=None, **defaults)


class LabelledExample(tuple):
    """``(texts, label, line)``: one example of a user's file (``texts`` a str, or a tuple for pairs)."""

    def __new__(cls, texts, label: str, line: int):
        return super().__new__(cls, (texts, label, line))

    texts = property(lambda self: self[0])
    label = property(lambda self: self[1])
    line = property(lambda self: self[2])


_FIX = {"csv": "fix or delete that line (a text with a comma must be quoted: \"a, b\")",
        "tsv": "fix or delete that line (a text may not hold a tab)",
        "jsonl": "fix or delete that line (one JSON object a line)",
        "txt": "save the examples as .csv, .tsv or .jsonl with a text and a label field"}


def read_labelled(path: str | os.PathLike, text_fields: Iterable[str], label_field: str, *,
                  encoding: str = "utf-8") -> list[LabelledExample]:
    """Every example of ``path``, in order; any line that is not one is a :class:`TrainingDataError`
    naming the file and line (training on a file with silently skipped lines would hide the problem)."""
    from .errors import InvalidInputError, TrainingDataError
    from .readers import InputFile

    text_fields = tuple(text_fields)
    source = str(path)
    if Path(path).suffix.lower() == ".txt":
        raise TrainingDataError(f"{source}: a .txt file has no label field; {_FIX['txt']}", source)
    try:
        reader = InputFile(path, [*text_fields, label_field], encoding=encoding, carry=[])
    except InvalidInputError as exc:
        raise TrainingDataError(_training_flags(str(exc)), source) from None
    examples = []
    with reader:
        for record in reader:
            if record.error is not None:
                raise TrainingDataError(f"{_training_flags(record.error)}; {_FIX[reader.format]}", source, record.line)
            if not isinstance(record.item, list):     # a JSON line that is a bare value, not an object
                raise TrainingDataError(
                    f"{source}:{record.line}: a JSON {type(record.item).__name__}, not an object with the keys "
                    f"{', '.join(map(repr, [*text_fields, label_field]))}; {_FIX['jsonl']}", source, record.line)
            *texts, label = record.item
            where = f"{source}:{record.line}"
            if reader.header is not None and [*texts, label] == [*text_fields, label_field]:
                # Two files joined with `cat`: the second one's header would train a label named after a column.
                raise TrainingDataError(
                    f"{where}: the header row again ({', '.join([*text_fields, label_field])}), as where two files "
                    "were joined; delete that line", source, record.line)
            for field, text in zip(text_fields, texts):
                if not isinstance(text, str) or not text.strip():
                    raise TrainingDataError(
                        f"{where}: {field!r} is {'empty' if isinstance(text, str) else type(text).__name__} "
                        f"({text!r}); every example needs a text: fill it in or delete the line", source, record.line)
            if isinstance(label, bool) or not isinstance(label, (str, int)) or not str(label).strip():
                if label is None or isinstance(label, str):
                    fix = "fill it in or delete the line"
                elif isinstance(label, float) and label.is_integer():
                    fix = f"write it as the integer {int(label)} or the string \"{int(label)}\""
                else:
                    fix = f"write it as a string (\"{label}\")" if isinstance(label, (bool, float)) else \
                        "write one string or integer"
                raise TrainingDataError(
                    f"{where}: label {label_field!r} is {label!r} ({type(label).__name__}); a label is a non-empty "
                    f"string or an integer: {fix}", source, record.line)
            examples.append(LabelledExample(texts[0] if len(texts) == 1 else tuple(texts), str(label).strip(),
                                            record.line))
    if not examples:
        raise TrainingDataError(f"{source} holds no examples (it is empty, or has only its header row)", source)
    return examples


def _training_flags(message: str) -> str:
    # InputFile's messages name the batch job's flag; training names its fields with these.
    return message.replace("choose with --field", "choose with --text-field / --label-field")


def split_off_dev(examples: list, share: float, rng: random.Random, label_of: Callable[[Any], Any]) -> tuple[list, list]:
    """``(train, dev)``: about ``share`` of the examples held out, from every label that has more
    than one example (so dev never holds a label train lacks), at least one in all."""
    if not 0 < share < 1:
        from .errors import OptionError

        raise OptionError(f"--dev-share must be between 0 and 1 (exclusive), got {share}", "dev_share")
    by_label: dict[Any, list[int]] = {}
    for index, example in enumerate(examples):
        by_label.setdefault(label_of(example), []).append(index)
    held: set[int] = set()
    for indices in by_label.values():
        if len(indices) > 1:
            picked = list(indices)
            rng.shuffle(picked)
            held.update(picked[:min(len(indices) - 1, max(1, round(len(indices) * share)))])
    if not held:
        from .errors import TrainingDataError

        raise TrainingDataError(
            f"no label has two examples or more ({len(by_label)} labels in {len(examples)} examples), so none can "
            "be held out as dev: is --label-field the label column? Otherwise give a --dev file")
    return [e for i, e in enumerate(examples) if i not in held], [e for i, e in enumerate(examples) if i in held]


def sorted_labels(labels: Iterable[str]) -> list[str]:
    """The label set in a stable order: numerically when every label is an integer ("1".."5" stars),
    else alphabetically."""
    found = set(labels)
    if all(label.lstrip("-").isdigit() for label in found):
        return sorted(found, key=int)
    return sorted(found)


def check_label_sets(train: list[LabelledExample], dev: list[LabelledExample], train_file: str,
                     dev_file: str | None) -> None:
    """A classifier needs two labels or more in train, and dev may hold only labels train has."""
    from .errors import TrainingDataError

    train_labels = {e.label for e in train}
    if len(train_labels) < 2:
        raise TrainingDataError(
            f"{train_file}: every example has the label {next(iter(train_labels))!r}; a classifier needs "
            "examples of two labels or more (is --label-field the right column?)", train_file)
    for example in dev:
        if example.label not in train_labels:
            where = f"{dev_file}:{example.line}" if dev_file else f"held-out example (line {example.line})"
            raise TrainingDataError(
                f"{where}: label {example.label!r} never occurs in {train_file} (its labels: "
                f"{', '.join(map(repr, sorted_labels(train_labels)))}); the model can only learn labels it is "
                f"trained on: add examples of {example.label!r} to the training file, or fix the label",
                dev_file, example.line)


def classification_report(gold: list[str], predicted: list[str], labels: list[str],
                          train_counts: Mapping[str, int]) -> dict:
    """Dev accuracy, and per label: its train and dev examples, precision and recall on dev.  A
    figure with nothing to count is None (null), not 0: a label with no dev examples has no recall,
    one never predicted no precision."""
    correct = sum(g == p for g, p in zip(gold, predicted))
    per_label = {}
    for label in labels:
        hits = sum(g == p == label for g, p in zip(gold, predicted))
        in_dev, as_predicted = gold.count(label), predicted.count(label)
        per_label[label] = {"train": int(train_counts.get(label, 0)), "dev": in_dev, "predicted": as_predicted,
                            "precision": round(hits / as_predicted, 4) if as_predicted else None,
                            "recall": round(hits / in_dev, 4) if in_dev else None}
    return {"examples": len(gold), "accuracy": round(correct / len(gold), 4) if gold else 0.0,
            "per_label": per_label}


def print_report(report: Mapping[str, Any], *, title: str, headline: str, quiet: bool = False) -> None:
    """The dev report as a small table on stdout (``headline`` names the overall figure)."""
    if quiet:
        return
    print(f"{title}: {headline}")
    rows = report["per_label"]
    columns = [c for c in ("train", "dev", "predicted", "precision", "recall", "f1") if any(c in r for r in rows.values())]
    width = max([5, *map(_display_width, rows)])
    print(f"  {'label':<{width}}  " + "  ".join(f"{c:>9}" for c in columns))
    for label, row in rows.items():
        padding = " " * (width - _display_width(label))
        print(f"  {label}{padding}  " + "  ".join(f"{'n/a' if row.get(c, '') is None else row.get(c, ''):>9}"
                                                 for c in columns))
    unmeasured = [label for label, row in rows.items() if row.get("dev") == 0]
    if unmeasured:
        print(f"  no dev examples of {', '.join(map(repr, unmeasured))}: how well the model knows "
              f"{'it' if len(unmeasured) == 1 else 'them'} is not measured; add some to --dev")


def _display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: Chinese labels (酒店, 手机) take two a character."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def progress(total: int | None, description: str, *, quiet: bool):
    """A training progress bar with an ETA on stderr; none with ``quiet`` or where stderr is no terminal
    (tqdm's ``disable=None``: a log file gets no bar redrawn at every step)."""
    from taskflow.display import progress_bar

    return progress_bar(total=total, desc=description, unit="step", disable=True if quiet else None,
                        dynamic_ncols=True, leave=False)


# ------------------------------------------------------------------ corpus vectors (pretraining/vectors.py)
def load_vectors(path: str | os.PathLike, kind: str) -> tuple[list[str], "np.ndarray"]:
    """``(tokens, float32 matrix)`` of one kind (``char``, ``bigram``, ``word``) from the ``vectors.npz``
    that ``python -m pretraining.vectors`` writes (a folder or the file); tokens most frequent first."""
    import numpy as np

    path = Path(path)
    if path.is_dir():
        path = path / "vectors.npz"
    with np.load(path, allow_pickle=False) as data:
        if f"{kind}_tokens" not in data:
            raise SystemExit(f"{path} has no {kind} vectors (trained kinds: "
                             f"{sorted(k[:-7] for k in data.files if k.endswith('_tokens'))})")
        return [str(t) for t in data[f"{kind}_tokens"]], data[f"{kind}_vectors"].astype(np.float32)


def vectors_report(path: str | os.PathLike) -> dict:
    """The ``vectors.json`` that ``python -m pretraining.vectors`` wrote beside ``vectors.npz`` (``{}``
    without one), its data folders as a manifest names them (:func:`portable_path`): what a recipe
    records of the vectors it started from."""
    path = Path(path)
    about = (path if path.is_dir() else path.parent) / "vectors.json"
    if not about.is_file():
        return {}
    report = json.loads(about.read_text(encoding="utf-8"))
    sources = report.get("sources") or {}
    report["sources"] = {k: portable_path(v) if k in ("corpus", "labelled_train") and v else v
                         for k, v in sources.items()}
    return report


def pretrained_embeddings(vocab: Sequence[str], tokens: Sequence[str], matrix: "np.ndarray", dim: int, *,
                          scale: float, seed: int = 0) -> tuple["np.ndarray", float]:
    """An embedding table for ``vocab`` (row i is ``vocab[i]``): the corpus vector where there is one,
    else a uniform random row in ``[-scale, scale]`` (the network's own init); and the share of
    ``vocab`` covered.  Vectors are centred and rescaled to that init's spread, so a pretrained row
    and a random one start at the same size; vectors wider than ``dim`` keep their first ``dim``
    principal components.  Row 0 (padding) stays zero."""
    import numpy as np

    matrix = matrix - matrix.mean(axis=0, keepdims=True)
    if matrix.shape[1] > dim:
        _, _, components = np.linalg.svd(matrix[:50_000], full_matrices=False)
        matrix = matrix @ components[:dim].T
    matrix = matrix / (float(matrix.std()) or 1.0) * (scale / np.sqrt(3.0))   # a uniform init's std
    index = {token: row for row, token in enumerate(tokens)}
    table = np.random.default_rng(seed).uniform(-scale, scale, size=(len(vocab), dim)).astype(np.float32)
    hits = 0
    for row, token in enumerate(vocab):
        found = index.get(token)
        if found is not None:
            table[row, : matrix.shape[1]] = matrix[found]
            hits += 1
    table[0] = 0.0
    return table, hits / max(1, len(vocab))
