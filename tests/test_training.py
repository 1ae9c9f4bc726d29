"""What the training recipes share (taskflow/training.py)."""

from __future__ import annotations

import numpy as np

from taskflow import training
from taskflow.training import BudgetSchedule, portable_path, seed_all


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
