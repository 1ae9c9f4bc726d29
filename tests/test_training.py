"""What the training recipes share: the loop (taskflow/training.py), the package they write
(taskflow/package_draft.py), their command line (taskflow/recipe_command.py), the dev report
(taskflow/dev_report.py) and the lab's tuning helpers (recipes/tuning.py)."""

from __future__ import annotations

import argparse
import hashlib
import math
import random

import numpy as np
import pytest

from taskflow import training
from taskflow.manifest import Manifest
from taskflow.package_draft import PackageDraft, framework_versions, portable_path
from taskflow.recipe_command import recipe_parser
from taskflow.training import Schedule, WeightAverage, fit, length_batches, restore, seed_all, snapshot

from recipes.tuning import update_manifest


def test_portable_path_never_records_local_folders(tmp_path):
    data = tmp_path / "shared" / "data"
    inside = data / "mrc" / "cmrc2018" / "train.json"
    inside.parent.mkdir(parents=True)
    inside.write_text("{}", encoding="utf-8")
    assert portable_path(inside, data) == "mrc/cmrc2018/train.json"
    assert portable_path(str(inside), str(data)) == "mrc/cmrc2018/train.json"
    outside = tmp_path / "scratch" / "senta2" / "deepB"
    assert portable_path(outside, data) == "senta2/deepB"
    assert portable_path(outside) == "senta2/deepB"
    assert str(tmp_path) not in portable_path(inside) + portable_path(outside, data)


def test_seed_all_makes_every_generator_repeat():
    import paddle

    def draws():
        rng = seed_all(7)
        return rng.random(), np.random.rand(3).tolist(), paddle.rand([3]).numpy().tolist()

    first, second = draws(), draws()
    assert first == second
    seed_all(8)
    assert np.random.rand(3).tolist() != first[1]


def test_schedule_warms_up_then_decays_to_the_floor():
    schedule = Schedule(lr=1.0, steps_per_epoch=50, epochs=2.2, warmup=10, floor=0.05, evals=4)
    assert schedule.total == 110
    assert schedule.lr_at(0) == 0.1 and schedule.lr_at(9) == 1.0
    assert schedule.lr_at(60) == pytest.approx(0.525)           # halfway through the decay: halfway to the floor
    assert schedule.lr_at(110) == pytest.approx(0.05) and schedule.lr_at(500) == 0.05
    assert schedule.eval_every == 27
    assert [s for s in range(1, 111) if schedule.evaluate_now(s)] == [27, 54, 81, 108]
    assert schedule.after_step(30) is None          # no budget: never refitted
    assert schedule.stop_reason(109) is None and schedule.stop_reason(110) == "--epochs 2.2 done"
    constant = Schedule(lr=0.5, steps_per_epoch=4, epochs=3)
    assert {constant.lr_at(s) for s in range(12)} == {0.5}
    assert constant.per_epoch and not any(constant.evaluate_now(s) for s in range(12))     # fit evaluates each epoch


def test_schedule_fits_the_run_to_the_minutes(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(training.time, "time", lambda: clock[0])
    schedule = Schedule(lr=1.0, steps_per_epoch=50, epochs=200, warmup=5, evals=2, minutes=2, first_check=10,
                        check_every=10, eval_guess=10.0)
    clock[0] += 10 * 0.5                            # 10 steps at 0.5 s
    line = schedule.after_step(10)
    # 120 s budget - 5 s spent - 2 evaluations of 10 s = 95 s left = 190 more steps
    assert schedule.total == 200 and schedule.eval_every == 100
    assert line == "0.500s/step: 200 steps (4.00 epochs) fit in 2 min"
    with schedule.evaluating():
        clock[0] += 40.0                            # evaluations are slower than guessed
    clock[0] += 10 * 0.5
    schedule.after_step(20)
    # 120 - 50 elapsed - 40 for the one evaluation left = 30 s = 60 more steps
    assert schedule.total == 80 and schedule.eval_every == 100
    assert schedule.stop_reason(80) == "the 80 steps that fit in --minutes 2 done"
    clock[0] += 71.0                                # whatever the fit said, a spent budget ends the run
    assert schedule.stop_reason(21) == "--minutes 2 spent"
    # A refit never runs past what the run planned.
    short = Schedule(lr=1.0, steps_per_epoch=4, epochs=1, evals=1, minutes=50, first_check=4)
    clock[0] += 4 * 0.05
    short.after_step(4)
    assert short.total == 4 and short.stop_reason(4) == "--epochs 1 done"


def test_schedule_with_an_evaluation_each_epoch_is_fitted_once_one_has_been_timed(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(training.time, "time", lambda: clock[0])
    schedule = Schedule(lr=1.0, steps_per_epoch=10, epochs=100, minutes=1, eval_guess=1000.0)
    clock[0] += 10 * 0.5                            # the first epoch: 10 steps at 0.5 s
    assert schedule.after_step(10) is None and schedule.total == 1000    # its evaluation not timed yet
    with schedule.evaluating():
        clock[0] += 5.0                             # the evaluation: 5 s, 0.5 s a step of the epoch
    clock[0] += 0.5
    assert schedule.after_step(11) == "0.500s/step: 60 steps (6.00 epochs) fit in 1 min"
    # 60 s - 10.5 s spent = 49.5 s left, at 1 s a step (evaluation included): 49 more steps
    assert schedule.total == 60


def test_length_batches_hold_similar_lengths_in_a_seeded_order():
    rng = random.Random(0)
    lengths = [rng.randint(1, 300) for _ in range(1000)]
    index = list(range(1000)) + list(range(10))             # the first ten drawn twice an epoch
    first = length_batches(lengths, 8, random.Random(3), index)
    assert first == length_batches(lengths, 8, random.Random(3), index)
    assert first != length_batches(lengths, 8, random.Random(4), index)
    assert sorted(i for batch in first for i in batch) == sorted(index)
    assert all(1 <= len(batch) <= 8 for batch in first)
    padded = sum(max(lengths[i] for i in batch) * len(batch) for batch in first)
    assert padded < 1.05 * sum(lengths[i] for i in index)      # random batches of 8 pad ~50%
    # Random order over the epoch: neither sorted by length nor in the pools' order.
    tops = [max(lengths[i] for i in batch) for batch in first]
    assert tops != sorted(tops) and tops != sorted(tops, reverse=True)


def scripted_run(figures: list[float], **options):
    """A two-weight network trained by plain SGD on a loss whose gradient is constant, so that every
    step moves the weights; ``evaluate()`` reads the dev figures off ``figures`` in turn and records
    the weights it saw."""
    import paddle

    paddle.seed(0)
    network = paddle.nn.Linear(2, 1)
    x = paddle.to_tensor([[1.0, 2.0], [3.0, -1.0]])
    seen = []

    def evaluate():
        seen.append(snapshot(network))
        return {"dev_f1": figures[len(seen) - 1], "note": "scripted"}

    options.setdefault("schedule", Schedule(lr=0.1, steps_per_epoch=2, epochs=len(figures)))
    run = fit(network, lambda: [[0], [1]], lambda batch: network(x[batch]).sum(), evaluate, select="dev_f1",
              optimizer="SGD", grad_clip=None, quiet=True, **options)
    return network, run, seen


def weights_equal(network, state) -> bool:
    return all(np.array_equal(v.numpy(), state[k]) for k, v in network.state_dict().items())


def test_fit_puts_back_the_weights_of_the_best_epoch_when_a_later_one_is_worse():
    network, run, seen = scripted_run([0.2, 0.9, 0.5, 0.1])
    assert [h["epoch"] for h in run.history] == [1, 2, 3, 4] and [h["step"] for h in run.history] == [2, 4, 6, 8]
    assert [h["dev_f1"] for h in run.history] == [0.2, 0.9, 0.5, 0.1] and run.history[0]["note"] == "scripted"
    assert run.best is run.history[1] and run.history[-1]["stopped"] == "--epochs 4 done"
    assert not weights_equal(network, seen[-1])              # the last epoch's weights are not the ones kept
    assert weights_equal(network, seen[1])                   # the best epoch's are
    assert not network.training
    summary = run.summary()
    assert (summary["best_epoch"], summary["best_step"], summary["steps"], summary["epochs"]) == (2, 4, 8, 4.0)
    assert summary["optimizer"] == {"name": "SGD", "lr": 0.1, "warmup": 0, "schedule": "constant", "grad_clip": None}


def test_fit_stops_after_patience_and_keeps_only_the_weights_asked_for():
    network, run, seen = scripted_run([0.2, 0.9, 0.5, 0.1, 0.95, 0.3], patience=2, keep=lambda name: name == "bias")
    assert len(run.history) == 4 and run.history[-1]["stopped"] == "no better dev_f1 for 2 epochs"
    state = network.state_dict()
    assert np.array_equal(state["bias"].numpy(), seen[1]["bias"])           # kept: put back
    assert not np.array_equal(state["weight"].numpy(), seen[1]["weight"])   # not kept: as trained last


def test_fit_evaluates_where_the_schedule_says_at_its_rate():
    schedule = Schedule(lr=0.1, steps_per_epoch=4, epochs=2, warmup=2, floor=0.5, evals=4)
    network, run, seen = scripted_run([0.1, 0.2, 0.3, 0.4], schedule=schedule)
    assert [(h["epoch"], h["step"]) for h in run.history] == [(0.5, 2), (1.0, 4), (1.5, 6), (2.0, 8)]
    assert weights_equal(network, seen[-1])
    # SGD on a loss with a constant gradient: each step moves the weights by the step's rate times it.
    gradient = {0: np.array([[1.0], [2.0]]), 1: np.array([[3.0], [-1.0]])}
    moved = seen[1]["weight"] - seen[0]["weight"]        # steps 2 (batch [0]) and 3 (batch [1]), in some order
    rates = [schedule.lr_at(2), schedule.lr_at(3)]
    assert any(np.allclose(moved, -(rates[0] * gradient[a] + rates[1] * gradient[b]))
               for a, b in ((0, 1), (1, 0)))


def test_weight_average_follows_the_moving_average_with_its_warm_up():
    import paddle

    layer = paddle.nn.Linear(1, 1)
    layer.bias.stop_gradient = True                      # frozen: not averaged
    averaged = WeightAverage(layer.parameters(), 0.9)
    assert [p.name for p in averaged.parameters] == [layer.weight.name]
    expected = layer.weight.numpy().astype("float64")
    for n, value in enumerate([1.0, 5.0, -2.0, 7.0], start=1):
        layer.weight.set_value(np.full([1, 1], value, dtype="float32"))
        averaged.update()
        decay = min(0.9, (1 + n) / (10 + n))             # 0.18, 0.25, 0.31, 0.36: the init fades fast
        expected = decay * expected + (1 - decay) * value
    with averaged.swapped_in():
        assert np.allclose(layer.weight.numpy(), expected)
    assert layer.weight.numpy()[0, 0] == 7.0             # the trained weight is back
    with pytest.raises(ValueError, match="between 0 and 1"):
        WeightAverage(layer.parameters(), 1.0)


def test_fit_with_average_evaluates_and_keeps_the_averaged_weights_but_trains_on():
    import paddle

    network, run, seen = scripted_run([0.1, 0.9, 0.3, 0.2], average=0.5)
    # The trained trajectory is plain SGD at 0.1 with the batches in order, as if no average were kept.
    paddle.seed(0)
    weight = paddle.nn.Linear(2, 1).weight.numpy().astype("float64")
    gradients = [np.array([[1.0], [2.0]]), np.array([[3.0], [-1.0]])]
    average, at_evaluations = weight.copy(), []
    for n in range(1, 9):
        weight = weight - 0.1 * gradients[(n - 1) % 2]
        decay = min(0.5, (1 + n) / (10 + n))
        average = decay * average + (1 - decay) * weight
        if n % 2 == 0:
            at_evaluations.append(average.copy())
    assert all(np.allclose(s["weight"], a) for s, a in zip(seen, at_evaluations))   # averages were evaluated
    assert np.allclose(network.weight.numpy(), at_evaluations[1])                   # and the best one kept
    assert not np.allclose(at_evaluations[-1], weight)          # an average is not the last step's weights
    assert run.summary()["optimizer"]["weight_average"] == "exponential moving average, decay 0.5"


def test_fit_stops_when_the_minutes_are_spent(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(training.time, "time", lambda: clock[0])

    durations = iter([0.1, 0.1] + [10.0] * 100)

    def batches():
        for batch in ([0], [1]):
            clock[0] += next(durations)
            yield batch

    import paddle

    network = paddle.nn.Linear(2, 1)
    x = paddle.to_tensor([[1.0, 2.0], [3.0, -1.0]])
    # Refitted at step 2 to 0.1 s a step: all 200 steps fit in 30 s; then the steps slow down to 10 s.
    schedule = Schedule(lr=0.1, steps_per_epoch=2, epochs=100, evals=1, minutes=0.5, first_check=2, eval_guess=0.0)
    run = fit(network, batches, lambda batch: network(x[batch]).sum(), lambda: {"dev": 0.5}, schedule=schedule,
              select="dev", quiet=True)
    assert schedule.total == 200 and run.steps == 5      # 30.2 s after 5 steps
    assert [(h["step"], h["epoch"]) for h in run.history] == [(5, 2.5)]    # the end is evaluated, mid-epoch
    assert run.history[-1]["stopped"] == "--minutes 0.5 spent"


def test_recipe_parser_has_the_options_every_recipe_has():
    parser = recipe_parser("sentiment_analysis", "Recipe: ...", data="folder of TSV files", name="char_cnn")
    args = parser.parse_args(["--out", "pkg"])
    assert (args.data_dir, args.out, args.name, args.version, args.seed) == (None, "pkg", "char_cnn", "1.0.0", 1)
    assert args.average_weights is None and parser.parse_args(["--out", "p", "--average-weights", "0.999"]).average_weights == 0.999
    assert parser.prog == "taskflow train sentiment_analysis"
    with pytest.raises(SystemExit):
        parser.parse_args([])                       # --out is required unless the recipe names a default
    strict = recipe_parser("knowledge_mining", None, data="root", name=None, seed=7, data_required=True, out="x")
    args = strict.parse_args(["--data-dir", "d"])
    assert (args.out, args.name, args.seed) == ("x", None, 7)
    no_network = recipe_parser("knowledge_mining", None, data="root", name=None, out="x", network=False)
    assert not hasattr(no_network.parse_args([]), "average_weights")     # nothing to average: no such option


def test_package_draft_pins_its_files_and_update_manifest_adds_figures(tmp_path):
    args = argparse.Namespace(out=str(tmp_path / "termtree"), name=None, version="2.0.0")
    with PackageDraft(args, "knowledge_mining") as draft:
        (draft / "b.txt").write_text("b", encoding="utf-8")
        (draft / "a.txt").write_text("a", encoding="utf-8")
        draft / "never_written.txt"
        manifest = draft.write({"description": "test", "framework": framework_versions("numpy")})
        scratch = draft.folder
    assert not scratch.exists()
    assert (manifest.task, manifest.name, manifest.version) == ("knowledge_mining", "termtree", "2.0.0")
    assert list(manifest.files) == ["b.txt", "a.txt"]          # in the order the recipe made them
    assert manifest.files["a.txt"]["sha256"] == hashlib.sha256(b"a").hexdigest()
    assert manifest["framework"] == {"numpy": np.__version__}

    updated = update_manifest(tmp_path / "termtree", {"metrics": {"accuracy": 0.5}})
    again = Manifest.load(tmp_path / "termtree" / "manifest.json")
    assert again.data == updated.data == {**manifest.data, "metrics": {"accuracy": 0.5}}


def test_snapshot_and_restore_bring_back_the_best_weights():
    import paddle

    paddle.seed(0)
    network = paddle.nn.Sequential(paddle.nn.Linear(3, 2), paddle.nn.Linear(2, 1))
    best = snapshot(network)
    only_first = snapshot(network, keep=lambda name: name.startswith("0."))
    assert set(only_first) == {"0.weight", "0.bias"}
    for parameter in network.parameters():
        parameter.set_value(parameter.numpy() + 1.0)
    later = snapshot(network)
    restore(network, only_first)
    state = network.state_dict()
    assert np.array_equal(state["0.weight"].numpy(), best["0.weight"])
    assert np.array_equal(state["1.weight"].numpy(), later["1.weight"])    # left out: unchanged
    restore(network, best)
    assert all(np.array_equal(v.numpy(), best[k]) for k, v in network.state_dict().items())


def test_simplex_grid_lists_every_weighting_with_each_network_in():
    from recipes.tuning import simplex_grid

    assert simplex_grid(2, 0.25) == [(0.25, 0.75), (0.5, 0.5), (0.75, 0.25)]
    grid = simplex_grid(3, 0.1)
    assert len(grid) == 36 and len(set(grid)) == 36          # C(9, 2): 10 tenths, each reader at least one
    assert all(math.isclose(sum(w), 1.0) and min(w) >= 0.1 - 1e-12 for w in grid)
    for readers, step in [(3, 0.5), (2, 0.3), (1, 0.5)]:
        with pytest.raises(ValueError, match="step"):
            simplex_grid(readers, step)


def test_the_dev_report_leaves_unmeasured_figures_empty_and_says_why(capsys):
    from taskflow.dev_report import classification_report, print_report

    report = classification_report(["a", "a", "b"], ["a", "b", "b"], ["a", "b", "c"], {"a": 5, "b": 4, "c": 3})
    assert report["per_label"]["a"] == {"train": 5, "dev": 2, "predicted": 1, "precision": 1.0, "recall": 0.5}
    assert report["per_label"]["c"] == {"train": 3, "dev": 0, "predicted": 0, "precision": None, "recall": None}
    print_report(report, title="dev", headline="accuracy 0.6667")
    out = capsys.readouterr().out
    assert "n/a" in out and "no dev examples of 'c'" in out and "add some to --dev" in out
