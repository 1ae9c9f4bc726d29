"""`taskflow serve --backend ray`: a real server process on a local Ray (127.0.0.1 only), the real client."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("ray.serve", reason="the Ray Serve backend is an extra: pip install '.[ray]'")

from taskflow import Client, Taskflow  # noqa: E402
from taskflow.errors import InvalidInputError  # noqa: E402
from test_ray import _alive, _listening, _on_loopback, _tree, needs_proc  # noqa: E402
from test_serve import _free_port, _same, requests  # noqa: E402


class RayServed:
    """A `taskflow serve --backend ray` process on 127.0.0.1, ready when constructed.  Serve's proxy
    takes connections as soon as it starts and holds them until the HTTP replica is up (seconds), so
    a probe that times out is waited past like a refused one."""

    def __init__(self, tmp_path, config: dict):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = tmp_path / "serve.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        self.log_path = tmp_path / "serve.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "taskflow.cli", "serve", "--config", str(path), "--port", str(self.port),
                 "--log-level", "warning", "--backend", "ray"], stdout=log, stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.session = requests.Session()
        self.session.trust_env = False
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if self.session.get(self.url + "/ready", timeout=2).status_code == 200:
                        return
                except (requests.ConnectionError, requests.Timeout):
                    pass
                time.sleep(0.2)
            raise AssertionError(f"the server exited, or was not ready in time: {self.output()}")
        except BaseException:
            self.stop()
            raise

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def post(self, path: str, body):
        return self.session.post(self.url + path, json=body, timeout=60)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


@needs_proc
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ray_backend_answers_as_the_library_does_and_stops_leaving_no_ray_process(tiny_models, tmp_path):
    """Each route a Ray Serve deployment behind the local backend's API: concurrent callers of two
    tasks get what Taskflow gives them, each with its own call-time options; SIGTERM stops the
    application and the local Ray, exit 0, and none of the Ray's processes is left."""
    config = {"tasks": {
        "sentiment_analysis": {"task_path": str(tiny_models["sentiment_analysis"]), "max_wait_ms": 100},
        "text_similarity": {"task_path": str(tiny_models["text_similarity"])},
    }}
    server = RayServed(tmp_path, config)
    try:
        tree = _tree(server.process.pid)
        sockets = _listening(tree)
        assert len({pid for pid, _, _ in sockets}) >= 5, sockets   # driver, GCS, raylet, proxy, replicas...
        assert [s for s in sockets if not _on_loopback(s[1])] == []
        assert (server.port in {port for _, _, port in sockets}), sockets   # Serve's proxy took --port

        texts = ["这家酒店很干净", "等了一个小时还没上菜", "服务很好"]
        pairs = [["花呗怎么还款", "花呗如何还钱"], {"text1": "今天天气", "text2": "明天天气"}]
        senta = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
        sim = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
        expected = {"plain": senta(texts), "scores": senta(texts, return_all_scores=True), "pairs": sim(pairs)}
        calls = {"plain": lambda: Client(server.url, "sentiment_analysis")(texts),
                 "scores": lambda: Client(server.url, "sentiment_analysis")(texts, return_all_scores=True),
                 "pairs": lambda: Client(server.url, "text_similarity")(pairs)}
        kinds = ["plain", "scores", "pairs"] * 4
        barrier, got = threading.Barrier(len(kinds)), {}

        def call(k):
            barrier.wait()
            got[k] = calls[kinds[k]]()

        threads = [threading.Thread(target=call, args=(k,)) for k in range(len(kinds))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(got) == list(range(len(kinds)))
        for k, results in got.items():
            assert _same(results, expected[kinds[k]]), (kinds[k], results)
        assert all("scores" not in r for k, rs in got.items() if kinds[k] == "plain" for r in rs)

        unknown = server.post("/v1/sentiment_analysi", {"inputs": ["好"]})
        assert unknown.status_code == 404 and "did you mean 'sentiment_analysis'" in unknown.json()["error"]["message"]
        bad = server.post("/v1/sentiment_analysis", {"inputs": ["好", "", "坏"]})
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "InvalidInputError"
        assert bad.json()["error"]["index"] == 1
        with pytest.raises(InvalidInputError) as info:
            Client(server.url, "sentiment_analysis")(["好", "  "])
        assert info.value.index == 1
        listed = server.session.get(server.url + "/v1/tasks", timeout=10).json()["tasks"]
        assert [(t["route"], t["replicas"]) for t in listed] == [("sentiment_analysis", 1), ("text_similarity", 1)]
    finally:
        status = server.stop()
    assert status == 0, server.output()
    deadline = time.monotonic() + 20
    while _alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(tree) == []


def test_an_address_where_nothing_listens_is_one_error_at_once():
    """As a batch job's --address: named, exit 2, without Ray's minutes of retries."""
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "taskflow.cli", "serve", "sentiment_analysis", "--backend", "ray",
                          "--address", "127.0.0.1:1"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("taskflow: error: cannot reach the Ray cluster at '127.0.0.1:1'"), run.stderr
    assert time.monotonic() - started < 60
    local = subprocess.run([sys.executable, "-m", "taskflow.cli", "serve", "sentiment_analysis", "--address",
                            "127.0.0.1:1"], capture_output=True, text=True, timeout=120)
    assert local.returncode == 2 and "--address names a Ray cluster: give --backend ray" in local.stderr
