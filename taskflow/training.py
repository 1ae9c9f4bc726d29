"""Pieces the training recipes (``tasks/<task>/train.py``) share; the product never imports this.

* :func:`recipe_parser`: a recipe's command line, with the options every recipe has.
* :class:`PackageDraft`: the package a recipe writes: files made in a scratch folder, then a
  manifest pinning each by sha256 and size; :func:`update_manifest` adds figures measured later.
* :func:`framework_versions`: the library versions a manifest records.
* :func:`snapshot` / :func:`restore`: keep the best weights seen during a run.
* :func:`jieba_cut`: jieba's word cutter, or a message saying how to install it.
* :func:`log`: a time-stamped line on stderr.
* :func:`portable_path`: how a manifest names a data file (no local folders).
* :func:`seed_all`: seed Python's, numpy's and Paddle's generators at once.
* :func:`fast_cpu_math`: call before Paddle loads, so MKL uses its fast kernels on AMD CPUs too.
* :class:`BudgetSchedule`: warm-up then linear learning-rate decay over a run
  whose length is fitted to a wall-clock budget.  Recipes run on shared
  2-core machines, so the steps a budget allows are measured, not guessed,
  and refitted as the speed changes; the decay then ends when the budget does.
  :meth:`BudgetSchedule.fit` is the training loop of the recipes that use it.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

__all__ = ["recipe_parser", "PackageDraft", "update_manifest", "framework_versions", "snapshot", "restore",
           "jieba_cut", "log", "portable_path", "seed_all", "fast_cpu_math", "BudgetSchedule"]


def recipe_parser(task: str, doc: str | None, *, data: str, name: str | None, seed: int = 1,
                  data_required: bool = False, out: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``taskflow train <task>``, with the options every recipe has.

    ``--data-dir`` (``data`` says what it holds), ``--out`` (required unless ``out`` is a
    default), ``--name`` (``None``: the ``--out`` folder's name), ``--version`` and ``--seed``;
    the recipe adds its own.  ``doc`` (the recipe's docstring) is the help text as written.
    """
    parser = argparse.ArgumentParser(prog=f"taskflow train {task}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=data_required, help=data)
    parser.add_argument("--out", required=out is None, default=out, help="where to write the model package")
    parser.add_argument("--name", default=name, help="model name in the manifest (default: %(default)s)"
                        if name else "model name in the manifest (default: the --out folder's name)")
    parser.add_argument("--version", default="1.0.0", help="model version in the manifest")
    parser.add_argument("--seed", type=int, default=seed, help="seeds every generator (default: %(default)s)")
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
        self.identity = {"task": task, "name": args.name or self.out.name, "version": args.version}
        self.started = time.time() if started is None else started
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

    def ship_weights(self, network, float16: Callable[[str], bool], name: str = "weights.npz") -> Path:
        """Save ``network``'s weights as they ship (``float16(name)`` ones halved) and load them
        back into it, so that what the recipe evaluates next is exactly what ships."""
        from taskflow.predictor import load_weights, save_weights

        path = self / name
        save_weights(network, path, float16=float16)
        load_weights(network, path)
        network.eval()
        return path

    def write(self, fields: Mapping[str, Any]):
        """Write the package: every file made in the draft, and the manifest (identity, then ``fields``)."""
        from taskflow.packages import write_package

        files = {name: self.folder / name for name in self._names if (self.folder / name).is_file()}
        manifest = write_package(self.out, {**self.identity, **fields}, files)
        size = sum(entry["size"] for entry in manifest.files.values())
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
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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


class BudgetSchedule:
    """Learning rate, evaluation points and the end of a run of at most ``planned`` steps.

    With ``minutes``, the run is refitted at step ``first_check`` and every
    ``check_every`` steps after it: the steps that fit in what is left of the
    budget at the measured speed, time for the remaining evaluations set aside
    (``eval_guess`` seconds each until one has been timed).  ``evals``
    evaluations are spread evenly over the run, and one more comes at its end.

    >>> schedule = BudgetSchedule(lr=1e-3, warmup=10, planned=100, evals=4)
    >>> schedule.lr_at(0), schedule.lr_at(9), schedule.eval_every
    (0.0001, 0.001, 25)
    """

    def __init__(self, *, lr: float, warmup: int, planned: int, evals: int, minutes: float | None = None,
                 steps_per_epoch: int | None = None, first_check: int = 30, check_every: int = 100,
                 eval_guess: float = 30.0, floor: float = 0.02):
        self.base_lr, self.warmup, self.planned = lr, warmup, max(1, planned)
        self.evals, self.minutes, self.steps_per_epoch = max(1, evals), minutes, steps_per_epoch
        self.first_check, self.check_every, self.eval_guess, self.floor = first_check, check_every, eval_guess, floor
        self.total = self.planned
        self.eval_every = max(1, self.total // self.evals)
        self.start = time.time()
        self.eval_seconds, self.evals_done = 0.0, 0

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.base_lr * (step + 1) / self.warmup
        return self.base_lr * max(self.floor, 1 - (step - self.warmup) / max(1, self.total - self.warmup))

    def after_step(self, step: int) -> str | None:
        """Refit the run's length when it is time to; a line worth logging when it changed."""
        due = step == self.first_check or (step > self.first_check and step % self.check_every == 0)
        if not self.minutes or not due:
            return None
        elapsed = time.time() - self.start
        per_step = (elapsed - self.eval_seconds) / step
        per_eval = self.eval_seconds / self.evals_done if self.evals_done else self.eval_guess
        left_for_evals = per_eval * max(1, self.evals - self.evals_done)
        fit = step + int((self.minutes * 60 - elapsed - left_for_evals) / per_step)
        previous, self.total = self.total, max(step + 1, min(self.planned, fit))
        if step == self.first_check:
            self.eval_every = max(1, self.total // self.evals)
        if step == self.first_check or abs(self.total - previous) > 20:
            epochs = f" ({self.total / self.steps_per_epoch:.2f} epochs)" if self.steps_per_epoch else ""
            return f"{per_step:.3f}s/step: {self.total} steps{epochs} fit in {self.minutes:g} min"
        return None

    def evaluate_now(self, step: int) -> bool:
        return step % self.eval_every == 0 or self.finished(step)

    def finished(self, step: int) -> bool:
        return step >= self.total

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """Time an evaluation, so the budget sets it aside from the training speed."""
        start = time.time()
        try:
            yield
        finally:
            self.eval_seconds += time.time() - start
            self.evals_done += 1

    def fit(self, optimizer, epoch: Callable[[], Iterable], loss_of: Callable[[Any], Any],
            evaluate: Callable[[int], None], *, log_every: int = 100) -> int:
        """Train until the run ends: ``epoch()`` gives one pass's batches (drawn afresh each
        pass), ``loss_of(batch)`` a batch's loss; ``evaluate(step)`` runs where the schedule
        puts evaluations, timed.  Returns the steps taken (also :attr:`steps`)."""
        step = 0
        while not self.finished(step):      # the training set is never empty, so each pass takes steps
            for batch in epoch():
                optimizer.set_lr(self.lr_at(step))
                loss = loss_of(batch)
                loss.backward()
                optimizer.step()
                optimizer.clear_grad()
                step += 1
                refit = self.after_step(step)
                if refit:
                    log(refit)
                if step % log_every == 0:
                    log(f"step {step}/{self.total} loss {float(loss):.4f} lr {self.lr_at(step):.2e}")
                if self.evaluate_now(step):
                    with self.evaluating():
                        evaluate(step)
                if self.finished(step):
                    break
        self.steps, self.train_minutes = step, (time.time() - self.start) / 60
        log(f"trained {step} steps in {self.train_minutes:.1f} min")
        return step

    def summary(self, best_step: int, history: list, *, optimizer: str, batch_size: int, grad_clip: float,
                seed: int) -> dict:
        """How the run went (after :meth:`fit`), as a manifest's ``training`` section records it."""
        return {"optimizer": {"name": optimizer, "lr": self.base_lr, "warmup": self.warmup, "schedule": "linear decay",
                              "batch_size": batch_size, "grad_clip": grad_clip, "seed": seed},
                "steps": self.steps, "best_step": best_step, "epochs": round(self.steps / self.steps_per_epoch, 2),
                "train_minutes": round(self.train_minutes, 1), "history": history}
