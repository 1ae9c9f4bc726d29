"""What the training recipes share (taskflow/training.py)."""

from __future__ import annotations

import argparse
import hashlib

import numpy as np
import pytest

from taskflow import training
from taskflow.packages import Manifest
from taskflow.training import (BudgetSchedule, PackageDraft, framework_versions, portable_path, recipe_parser, restore,
                               seed_all, snapshot, update_manifest)


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


def test_budget_schedule_warms_up_then_decays_to_the_floor():
    schedule = BudgetSchedule(lr=1.0, warmup=10, planned=110, evals=4, floor=0.05)
    assert schedule.lr_at(0) == 0.1 and schedule.lr_at(9) == 1.0
    assert schedule.lr_at(60) == 0.5
    assert schedule.lr_at(109) == 0.05 and schedule.lr_at(500) == 0.05
    assert schedule.eval_every == 27
    assert [s for s in range(1, 111) if schedule.evaluate_now(s)] == [27, 54, 81, 108, 110]
    assert schedule.after_step(30) is None          # no budget: never refitted
    assert not schedule.finished(109) and schedule.finished(110)


def test_budget_schedule_fits_the_run_to_the_minutes(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(training.time, "time", lambda: clock[0])
    schedule = BudgetSchedule(lr=1.0, warmup=5, planned=10_000, evals=2, minutes=2, first_check=10,
                              check_every=10, eval_guess=10.0, steps_per_epoch=50)
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
    assert schedule.evaluate_now(80) and schedule.finished(80)


def test_recipe_parser_has_the_options_every_recipe_has():
    parser = recipe_parser("sentiment_analysis", "Recipe: ...", data="folder of TSV files", name="char_cnn")
    args = parser.parse_args(["--out", "pkg"])
    assert (args.data_dir, args.out, args.name, args.version, args.seed) == (None, "pkg", "char_cnn", "1.0.0", 1)
    assert parser.prog == "taskflow train sentiment_analysis"
    with pytest.raises(SystemExit):
        parser.parse_args([])                       # --out is required unless the recipe names a default
    strict = recipe_parser("knowledge_mining", None, data="root", name=None, seed=7, data_required=True, out="x")
    args = strict.parse_args(["--data-dir", "d"])
    assert (args.out, args.name, args.seed) == ("x", None, 7)


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
