"""The training loop the recipes and ``taskflow train`` share; the product never imports this at
inference.

* :func:`fit`: the one training loop: progress, a time budget, evaluation on dev, the best
  evaluation's weights kept and put back, patience; :class:`Schedule` sets its learning rate
  (warm-up, linear decay), its length (epochs, or what fits in ``--minutes``) and its evaluation
  points; :class:`Fit` is how the run went, as a manifest records it; :class:`WeightAverage` the
  moving average of the weights it may evaluate and keep instead of the last step's.
* :func:`length_batches`: one epoch's batches of items of similar lengths, in a seeded random order.
* :func:`snapshot` / :func:`restore`: copies of a network's weights, and putting them back.
* :func:`seed_all`: seed Python's, numpy's and Paddle's generators at once.
* :func:`fast_cpu_math`: call before Paddle loads, so MKL uses its fast kernels on AMD CPUs too.
* :func:`log`: a time-stamped line on stderr; :func:`progress`: a tqdm bar with an ETA (off with
  ``--quiet``; off when stderr is not a terminal).

Beside it: :mod:`taskflow.recipe_command` (a recipe's command line), :mod:`taskflow.package_draft`
(the package it writes), :mod:`taskflow.training_data` (the user's own files),
:mod:`taskflow.dev_report` (the dev report) and :mod:`taskflow.corpus_vectors` (the tables a
network starts from).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

__all__ = ["fit", "Fit", "Schedule", "WeightAverage", "length_batches", "snapshot", "restore", "log", "progress",
           "seed_all", "fast_cpu_math"]


def snapshot(network, keep: Callable[[str], bool] = lambda name: True) -> dict:
    """Copies of ``network``'s weights (those whose name ``keep`` accepts), for :func:`restore`."""
    return {k: v.numpy().copy() for k, v in network.state_dict().items() if keep(k)}


def restore(network, state: Mapping) -> None:
    """Put weights from :func:`snapshot` back; weights the snapshot left out stay as they are."""
    import paddle

    current = network.state_dict()
    current.update({k: paddle.to_tensor(v) for k, v in state.items()})
    network.set_state_dict(current)


def log(message: str) -> None:
    print(_stamped(message), file=sys.stderr, flush=True)


def _stamped(message: str) -> str:
    return f"[{time.strftime('%H:%M:%S')}] {message}"


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


def progress(total: int | None, description: str, *, quiet: bool):
    """A training progress bar with an ETA on stderr; none with ``quiet`` or where stderr is no terminal
    (tqdm's ``disable=None``: a log file gets no bar redrawn at every step)."""
    from taskflow.display import progress_bar

    return progress_bar(total=total, desc=description, unit="step", disable=True if quiet else None,
                        dynamic_ncols=True, leave=False)


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
