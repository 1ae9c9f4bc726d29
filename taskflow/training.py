"""Pieces the training recipes (``tasks/<task>/train.py``) share; the product never imports this.

* :func:`log`: a time-stamped line on stderr.
* :func:`portable_path`: how a manifest names a data file (no local folders).
* :func:`seed_all`: seed Python's, numpy's and Paddle's generators at once.
* :func:`fast_cpu_math`: call before Paddle loads, so MKL uses its fast kernels on AMD CPUs too.
* :class:`BudgetSchedule`: warm-up then linear learning-rate decay over a run
  whose length is fitted to a wall-clock budget.  Recipes run on shared
  2-core machines, so the steps a budget allows are measured, not guessed,
  and refitted as the speed changes; the decay then ends when the budget does.
"""

from __future__ import annotations

import os
import random
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["log", "portable_path", "seed_all", "fast_cpu_math", "BudgetSchedule"]


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
