"""Ray Data on a real local Ray instance (2 CPUs, loopback only)."""

import json
import os

import pytest

ray = pytest.importorskip("ray", reason="the Ray backend is an extra: pip install '.[ray]'")

from taskflow import Taskflow  # noqa: E402
from taskflow.cli import main  # noqa: E402

TEXTS = [f"评论{i}：{'很好' if i % 2 else '太差'}" for i in range(300)]


@pytest.fixture(scope="module")
def local_ray(shared_home):
    # Ray's worker processes take the environment of the process that starts Ray; the session's
    # PPNLP_HOME and HOME are set before any fixture runs (conftest.pytest_configure), so no Ray
    # worker writes to the user's ~/.paddlenlp.  Checked here, on a real worker.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    seen = ray.get(ray.remote(lambda: (os.environ.get("PPNLP_HOME"), os.environ.get("HOME"))).remote())
    assert seen == (str(shared_home), os.environ["HOME"]), seen
    yield
    ray.shutdown()


@pytest.mark.slow
def test_cli_ray_backend_equals_single_process(local_ray, tiny_sentiment, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out_dir = tmp_path / "out"
    assert main(["sentiment_analysis", "--input", str(source), "--output", str(out_dir), "--backend", "ray",
                 "--workers", "2", "--batch-size", "64", "--task-path", str(tiny_sentiment)]) == 0
    rows = [json.loads(line) for f in sorted(out_dir.glob("*.json")) for line in f.read_text().splitlines()]
    expected = Taskflow("sentiment_analysis", task_path=tiny_sentiment)(TEXTS)
    assert len(rows) == len(TEXTS)
    # Ray keeps input order here (preserve_order); compare rows field by field.
    assert [r["text"] for r in rows] == TEXTS
    for row, want in zip(rows, expected):
        assert row["label"] == want["label"] and abs(row["score"] - want["score"]) < 1e-5


@pytest.mark.slow
def test_map_batches_api_passes_other_columns_through(local_ray, tiny_sentiment):
    import taskflow.ray

    dataset = ray.data.from_items([{"id": i, "review": t} for i, t in enumerate(TEXTS[:40])])
    mapped = taskflow.ray.map_batches(dataset, "sentiment_analysis", fields=["review"], batch_size=16,
                                      task_path=str(tiny_sentiment))
    rows = sorted(mapped.take_all(), key=lambda r: r["id"])
    expected = Taskflow("sentiment_analysis", task_path=tiny_sentiment)(TEXTS[:40])
    assert [r["id"] for r in rows] == list(range(40))
    assert [r["label"] for r in rows] == [e["label"] for e in expected]
    assert [r["review"] for r in rows] == TEXTS[:40]


@pytest.mark.slow
def test_the_models_batch_size_and_rays_are_separate(local_ray, tiny_sentiment, tmp_path, monkeypatch):
    import taskflow.ray

    seen = {}
    real = taskflow.ray.map_batches

    def recording(dataset, task, **kwargs):
        seen.update(kwargs)
        return real(dataset, task, **kwargs)

    monkeypatch.setattr(taskflow.ray, "map_batches", recording)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS[:20]) + "\n", encoding="utf-8")
    assert main(["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "out"), "--backend", "ray",
                 "--batch-size", "7", "--ray-batch-size", "5", "--task-path", str(tiny_sentiment)]) == 0
    assert seen["batch_size"] == 7 and seen["ray_batch_size"] == 5
    actor = taskflow.ray.TaskflowPredictor("sentiment_analysis", batch_size=seen["batch_size"],
                                           task_path=str(tiny_sentiment))
    assert actor.flow.task.batch_size == 7                       # what each actor's model runs with
