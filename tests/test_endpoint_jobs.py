"""Batch jobs against a running server: `taskflow TASK --endpoint URL --input FILE --output FILE`.

A real `taskflow serve` process on 127.0.0.1 (tests/test_serve.py's `Served`) and the CLI in a
subprocess, beside the same job run locally on the same tiny model."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from make_tiny_models import make_tiny_sentiment  # noqa: E402
from test_serve import Served, _free_port  # noqa: E402

from taskflow import Client, Taskflow  # noqa: E402
from taskflow.cli import main  # noqa: E402
from taskflow.errors import OptionError  # noqa: E402
from taskflow.jobs import run_file  # noqa: E402

pytestmark = pytest.mark.timeout(600)

KEY = "job-key"
# Requests of 40 items, each waiting 150 ms for others to join it: a job of 2,000 records takes
# seconds, long enough to be stopped in the middle.
SLOW = {"max_inputs": 40, "max_batch_items": 1000, "max_wait_ms": 150}


@pytest.fixture(scope="module")
def other_model(tmp_path_factory):
    """Another sentiment model: other weights, version 0.0.1."""
    return make_tiny_sentiment(tmp_path_factory.mktemp("other") / "sentiment_analysis", seed=1)


@pytest.fixture(scope="module")
def server(tiny_models, other_model, tmp_path_factory):
    tiny = str(tiny_models["sentiment_analysis"])
    config = {"tasks": {
        "sentiment_analysis": {"task_path": tiny},
        "slow": {"task": "sentiment_analysis", "task_path": tiny, **SLOW},
        "other": {"task": "sentiment_analysis", "task_path": str(other_model), **SLOW},
        "text_similarity": {"task_path": str(tiny_models["text_similarity"])},
    }}
    served = Served(tmp_path_factory.mktemp("endpoint"), config, api_key=KEY)
    yield served
    assert served.stop() == 0, served.output()


@pytest.fixture(scope="module")
def long_input(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "reviews.txt"
    path.write_text("".join(f"第{k}条评论：{'很好吃' if k % 3 else '等了一个小时'}" + "还行" * (k % 5) + "\n"
                            for k in range(2000)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def clean_slow_run(server, long_input, tmp_path_factory):
    """The output of the long input run through the `slow` route without a stop (from Python)."""
    out = tmp_path_factory.mktemp("clean") / "out.jsonl"
    summary = run_file(Client(server.url, "slow", api_key=KEY), long_input, out, progress=False)
    assert summary.processed == 2000
    return out.read_bytes()


def _command(*args):
    return [sys.executable, "-m", "taskflow.cli", *map(str, args), "--quiet"]


def _env(api_key=KEY):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("TASKFLOW_API_KEY", None)
    if api_key:
        env["TASKFLOW_API_KEY"] = api_key
    return env


def _cli(*args, api_key=KEY):
    return subprocess.run(_command(*args), capture_output=True, text=True, env=_env(api_key), timeout=300)


def _started(*args):
    return subprocess.Popen(_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def _done(checkpoint) -> int:
    try:
        return json.loads(checkpoint.read_text(encoding="utf-8")).get("done", 0)
    except (OSError, ValueError):
        return 0


def _wait_for_progress(job, checkpoint, timeout=180):
    """Until the job's checkpoint records some records done (the job is in the middle)."""
    deadline = time.monotonic() + timeout
    while _done(checkpoint) == 0:
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "the job made no progress"
        time.sleep(0.05)


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("taskflow: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_a_job_against_the_server_writes_what_the_same_job_writes_locally(server, tiny_sentiment, tmp_path):
    source = tmp_path / "reviews.txt"
    source.write_text("".join(f"第{k}家店{'很干净' if k % 3 else '太差了'}" + "服务" * (k % 7) + "\n"
                              for k in range(600)), encoding="utf-8")
    for extra, options in (((), {}), (("--return-all-scores",), {"return_all_scores": True})):
        local, served = tmp_path / f"local{len(extra)}.jsonl", tmp_path / f"served{len(extra)}.jsonl"
        Taskflow("sentiment_analysis", task_path=tiny_sentiment, **options).predict_file(source, local, progress=False)
        run = _cli("sentiment_analysis", "--endpoint", server.url, "--input", source, "--output", served, *extra)
        assert run.returncode == 0, run.stderr
        assert served.read_bytes() == local.read_bytes()
    assert all("scores" in json.loads(line) for line in served.read_text(encoding="utf-8").splitlines())


def test_pairs_go_to_the_server_as_a_local_job_reads_them(server, tiny_models, tmp_path):
    source = tmp_path / "pairs.txt"
    source.write_text("".join(f"花呗{k}怎么还款\t花呗如何还钱{'了' * (k % 4)}\n" for k in range(70)) + "只有一半\n",
                      encoding="utf-8")
    local, served = tmp_path / "local.jsonl", tmp_path / "served.jsonl"
    Taskflow("text_similarity", task_path=tiny_models["text_similarity"]).predict_file(
        source, local, on_error="skip", progress=False)
    summary = run_file(Client(server.url, "text_similarity", api_key=KEY), source, served, on_error="skip",
                       progress=False)
    assert (summary.processed, summary.skipped) == (70, 1)
    assert served.read_bytes() == local.read_bytes()
    assert (tmp_path / "served.jsonl.errors.jsonl").read_bytes() == (tmp_path / "local.jsonl.errors.jsonl").read_bytes()


def test_a_record_the_server_refuses_is_that_records_error_as_in_a_local_job(server, tiny_sentiment, tmp_path):
    source = tmp_path / "reviews.jsonl"
    lines = [{"id": 1, "text": "很好吃"}, {"id": 2, "text": "   "}, {"id": 3, "text": 42}, None,
             {"id": 5, "text": "太差了"}]
    source.write_text("".join((json.dumps(row, ensure_ascii=False) if row else '{"id": 4, "text": ') + "\n"
                              for row in lines), encoding="utf-8")
    local, served = tmp_path / "local.jsonl", tmp_path / "served.jsonl"
    Taskflow("sentiment_analysis", task_path=tiny_sentiment).predict_file(source, local, on_error="skip",
                                                                          progress=False)
    # The key on the command line this time, not from the environment.
    run = _cli("sentiment_analysis", "--endpoint", server.url, "--api-key", KEY, "--input", source,
               "--output", served, "--on-error", "skip", api_key=None)
    assert run.returncode == 0, run.stderr
    assert "3 bad record(s) skipped" in run.stderr
    assert served.read_bytes() == local.read_bytes()
    assert [json.loads(line)["line"] for line in served.read_text(encoding="utf-8").splitlines()] == [1, 5]
    errors = tmp_path / "served.jsonl.errors.jsonl"
    assert errors.read_bytes() == (tmp_path / "local.jsonl.errors.jsonl").read_bytes()
    assert [json.loads(line)["line"] for line in errors.read_text(encoding="utf-8").splitlines()] == [2, 3, 4]
    # Without skip, the job stops at the record the server refused, named by file and line.
    stopped = _cli("sentiment_analysis", "--endpoint", server.url, "--input", source, "--output",
                   tmp_path / "stopped.jsonl")
    assert stopped.returncode == 2
    assert f"{source}:2: text is empty" in _one_error_line(stopped.stderr)


def test_a_job_stopped_by_sigterm_resumes_to_a_clean_runs_output(server, long_input, clean_slow_run, tmp_path):
    out = tmp_path / "out.jsonl"
    job = _started("slow", "--endpoint", server.url, "--input", long_input, "--output", out)
    _wait_for_progress(job, tmp_path / "out.jsonl.partial.ckpt")
    job.send_signal(signal.SIGTERM)
    _, stderr = job.communicate(timeout=120)
    assert job.returncode == 2, stderr
    assert "stopped by SIGTERM" in _one_error_line(stderr) and not out.exists()
    done = _done(tmp_path / "out.jsonl.partial.ckpt")
    assert 0 < done < 2000
    resumed = _cli("slow", "--endpoint", server.url, "--input", long_input, "--output", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == clean_slow_run


def test_a_server_that_goes_away_stops_the_job_and_resume_continues_on_the_same_model_only(
        server, tiny_sentiment, long_input, clean_slow_run, tmp_path):
    own = Served(tmp_path, {"tasks": {"slow": {"task": "sentiment_analysis", "task_path": str(tiny_sentiment),
                                               **SLOW}}}, api_key=KEY)
    out, checkpoint = tmp_path / "out.jsonl", tmp_path / "out.jsonl.partial.ckpt"
    try:
        job = _started("slow", "--endpoint", own.url, "--input", long_input, "--output", out)
        _wait_for_progress(job, checkpoint)
    finally:
        assert own.stop() == 0
    _, stderr = job.communicate(timeout=180)
    assert job.returncode == 2, stderr
    line = _one_error_line(stderr)
    assert "the server did not answer the records at lines" in line and own.url in line and "--resume" in line
    kept = checkpoint.read_bytes()
    assert 0 < _done(checkpoint) < 2000
    # Another model behind the same task: refused, naming it, and nothing changed.
    refused = _cli("other", "--endpoint", server.url, "--input", long_input, "--output", out, "--resume")
    assert refused.returncode == 2
    line = _one_error_line(refused.stderr)
    assert "cannot resume" in line and "model: sentiment_analysis/tiny 0.0.0" in line
    assert "sentiment_analysis/tiny 0.0.1 (fingerprint" in line
    assert checkpoint.read_bytes() == kept
    # The same model at another address (and route name) continues the job.
    resumed = _cli("slow", "--endpoint", server.url, "--input", long_input, "--output", out, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == clean_slow_run


def test_no_server_at_the_endpoint_is_one_error_line(tmp_path):
    source = tmp_path / "reviews.txt"
    source.write_text("很好\n", encoding="utf-8")
    url = f"http://127.0.0.1:{_free_port()}"
    run = _cli("sentiment_analysis", "--endpoint", url, "--input", source, "--output", tmp_path / "out.jsonl")
    assert run.returncode == 2
    line = _one_error_line(run.stderr)
    assert url in line and "Connection refused" in line and "taskflow serve" in line
    assert "HTTPConnectionPool" not in line      # the reason, not urllib3's wrappers around it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reviews.txt"]


def test_a_job_a_server_answers_does_not_import_paddle(tmp_path):
    import subprocess
    import sys

    source = tmp_path / "reviews.txt"
    source.write_text("很好\n", encoding="utf-8")
    code = ("import sys; from taskflow.cli import main; "
            f"status = main(['sentiment_analysis', '--endpoint', 'http://127.0.0.1:{_free_port()}', "
            f"'--input', {str(source)!r}, '--output', {str(tmp_path / 'out.jsonl')!r}]); "
            "print(status, 'paddle' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["2", "False"], run.stderr     # no server there: one error, and no Paddle


@pytest.mark.parametrize("extra, named", [
    (["--workers", "2"], "--workers"), (["--backend", "ray"], "--backend ray"), (["--model", "tiny"], "--model"),
    (["--mode", "fast"], "--mode"), (["--task-path", "pkg"], "--task-path"), (["--device", "gpu"], "--device"),
    (["--neutral"], "--neutral"),
])
def test_what_the_server_chose_is_refused_by_name(extra, named, tmp_path, capsys):
    source = tmp_path / "reviews.txt"
    source.write_text("很好\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["sentiment_analysis", "--endpoint", "http://127.0.0.1:9", "--input", str(source), "--output",
              str(tmp_path / "out.jsonl"), *extra])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taskflow: error: {named}: not with --endpoint") and "chose the model" in err
    assert err.count("\n") == 1


def test_the_endpoint_takes_a_job_only_and_the_api_key_needs_it(capsys):
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--endpoint", "http://127.0.0.1:9"])
    assert "--endpoint runs a batch job against a server" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--api-key", KEY])
    assert "it goes with --endpoint URL" in capsys.readouterr().err


def test_the_route_says_what_a_job_pins_and_run_file_checks_the_options(server, tiny_sentiment, tmp_path):
    client = Client(server.url, "sentiment_analysis", api_key=KEY)
    route = client.describe()
    local = Taskflow("sentiment_analysis", task_path=tiny_sentiment)
    assert route["fingerprint"] == local.model.fingerprint and route["package"] == "sentiment_analysis/tiny 0.0.0"
    assert route["options"] == {"neutral": False, "return_all_scores": False, "ensemble": True}
    source = tmp_path / "reviews.txt"
    source.write_text("很好\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    for options, option in (({"workers": 2}, "workers"), ({"backend": "ray"}, "backend"),
                            ({"parameters": {"top_k": 3}}, "top_k"),
                            ({"parameters": {"return_all_scores": "yes"}}, "return_all_scores")):
        with pytest.raises(OptionError) as info:
            run_file(client, source, out, progress=False, **options)
        assert info.value.option == option
    with pytest.raises(OptionError) as info:
        run_file(local.task, source, out, parameters={"return_all_scores": True})
    assert info.value.option == "parameters"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reviews.txt"]
