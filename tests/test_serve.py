"""`taskflow serve`: a real server process on 127.0.0.1, real HTTP clients."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")
requests = pytest.importorskip("requests")

from taskflow import Client, Taskflow  # noqa: E402
from taskflow.errors import InvalidInputError, OptionError, ServerError  # noqa: E402

KEY = "s3cret-key"


def _same(got, expected) -> bool:
    """JSON results equal to a local call's, floats to 1e-6 (JSON turns tuples into lists)."""
    if isinstance(expected, dict):
        return isinstance(got, dict) and got.keys() == expected.keys() and all(_same(got[k], v)
                                                                           for k, v in expected.items())
    if isinstance(expected, (list, tuple)):
        return isinstance(got, list) and len(got) == len(expected) and all(map(_same, got, expected))
    if isinstance(expected, float):
        return got == pytest.approx(expected, abs=1e-6)
    return got == expected


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A `taskflow serve` process on 127.0.0.1, ready when constructed."""

    def __init__(self, tmp_path: Path, config: dict, *args: str, api_key: str | None = None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = tmp_path / f"serve-{self.port}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if api_key:
            env["TASKFLOW_API_KEY"] = api_key
        self.log_path = tmp_path / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "taskflow.cli", "serve", "--config", str(path), "--port", str(self.port),
             "--log-level", "warning", *args], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.session = requests.Session()
        self.session.trust_env = False
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited: {self.output()}")
            try:
                if self.session.get(self.url + "/ready", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"the server was not ready in time: {self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def post(self, path: str, body, **kwargs):
        return self.session.post(self.url + path, json=body, timeout=60, **kwargs)

    def metric(self, name: str, route: str, headers=None) -> float:
        text = self.session.get(self.url + "/metrics", headers=headers or {}, timeout=10).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and f'route="{route}"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.log.close()


@pytest.fixture(scope="module")
def served(tiny_models, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    config = {"tasks": {
        "sentiment_analysis": {"task_path": str(tiny_models["sentiment_analysis"]), "max_wait_ms": 50,
                               "max_inputs": 64},
        "text_similarity": {"task_path": str(tiny_models["text_similarity"])},
        "reviews": {"task": "sentiment_analysis", "task_path": str(tiny_models["sentiment_analysis"])},
    }}
    server = Served(tmp, config)
    yield server
    assert server.stop() == 0, server.output()


def test_two_tasks_answer_as_the_library_does(served, tiny_models):
    texts = ["这家酒店很干净", "等了一个小时还没上菜", "服务很好"]
    local = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    got = served.post("/v1/sentiment_analysis", {"inputs": texts})
    assert got.status_code == 200, got.text
    assert _same(got.json()["results"], local(texts))
    assert {"x-queue-time", "x-inference-time", "x-total-time"} <= set(got.headers)
    pairs = [["花呗怎么还款", "花呗如何还钱"], {"text1": "今天天气", "text2": "明天天气"}]
    sim = Taskflow("text_similarity", task_path=tiny_models["text_similarity"])
    got = served.post("/v1/text_similarity", {"inputs": pairs})
    assert got.status_code == 200 and _same(got.json()["results"], sim(pairs))
    listed = served.session.get(served.url + "/v1/tasks", timeout=10).json()["tasks"]
    assert [t["route"] for t in listed] == ["sentiment_analysis", "text_similarity", "reviews"]
    assert listed[0]["parameters"]["return_all_scores"]["default"] is False
    assert served.session.get(served.url + "/health", timeout=10).json() == {"status": "ok"}
    paths = served.session.get(served.url + "/openapi.json", timeout=10).json()["paths"]
    # The input routes parse their own bodies; their documented body is still the pydantic shape.
    body = paths["/v1/{task}"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["inputs"] and {"inputs", "parameters", "on_error"} <= set(body["properties"])
    assert "data" in paths["/taskflow/{task}"]["post"]["requestBody"]["content"]["application/json"]["schema"]["required"]


def test_paddlenlp_route_and_shapes(served, tiny_models):
    local = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    got = served.post("/taskflow/sentiment_analysis", {"data": {"text": ["好吃", "难吃"]}})
    assert got.status_code == 200 and _same(got.json()["result"], local(["好吃", "难吃"]))
    one = served.post("/taskflow/reviews", {"data": {"text": "好吃"}, "parameters": {"return_all_scores": True}})
    assert _same(one.json()["result"], local(["好吃"], return_all_scores=True))


def test_parameters_apply_to_their_request_only(served):
    texts = ["好吃", "难吃"] * 5
    results = {}

    def call(k):
        parameters = {"return_all_scores": True} if k % 2 else {}
        results[k] = served.post("/v1/sentiment_analysis", {"inputs": texts, "parameters": parameters}).json()

    threads = [threading.Thread(target=call, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for k, body in results.items():
        assert all(("scores" in r) == bool(k % 2) for r in body["results"]), k
    fixed = served.post("/v1/sentiment_analysis", {"inputs": ["好"], "parameters": {"task_path": "/etc"}})
    assert fixed.status_code == 422 and fixed.json()["error"]["option"] == "task_path"
    assert served.post("/v1/sentiment_analysis", {"inputs": ["好"], "parameters": {"neutral": True}}).status_code == 422


def test_concurrent_requests_are_batched_together(served):
    before_requests = served.metric("taskflow_batch_requests_sum", "sentiment_analysis")
    before_batches = served.metric("taskflow_batch_requests_count", "sentiment_analysis")
    barrier = threading.Barrier(16)
    statuses = []

    def call(k):
        barrier.wait()
        statuses.append(served.post("/v1/sentiment_analysis", {"inputs": [f"第{k}条评论，还不错"]}).status_code)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200] * 16
    requests_run = served.metric("taskflow_batch_requests_sum", "sentiment_analysis") - before_requests
    batches = served.metric("taskflow_batch_requests_count", "sentiment_analysis") - before_batches
    assert requests_run == 16 and batches < 16, (requests_run, batches)      # some batch held several requests


def test_bad_requests_get_typed_errors_and_never_a_traceback(served):
    bad = served.post("/v1/sentiment_analysis", {"inputs": ["好", "", "坏"]})
    assert bad.status_code == 422
    assert bad.json()["error"]["type"] == "InvalidInputError" and bad.json()["error"]["index"] == 1
    skipped = served.post("/v1/sentiment_analysis", {"inputs": ["好", "", "坏"], "on_error": "skip"}).json()["results"]
    assert skipped[1]["error_type"] == "InvalidInputError" and skipped[0]["label"] and skipped[2]["label"]
    unknown = served.post("/v1/sentiment_analysi", {"inputs": ["好"]})
    assert unknown.status_code == 404 and "did you mean 'sentiment_analysis'" in unknown.json()["error"]["message"]
    too_many = served.post("/v1/sentiment_analysis", {"inputs": ["好"] * 65})
    assert too_many.status_code == 422 and too_many.json()["error"]["type"] == "TooManyInputs"
    shape = served.post("/v1/sentiment_analysis", {"texts": ["好"]})
    assert shape.status_code == 422 and "inputs" in shape.json()["error"]["message"]
    not_json = served.session.post(served.url + "/v1/sentiment_analysis", data=b'{"inputs": ["\xe5\xa5', timeout=10,
                                   headers={"content-type": "application/json"})
    assert not_json.status_code == 422 and not_json.json()["error"]["type"] == "RequestValidationError"
    big = served.session.post(served.url + "/v1/sentiment_analysis", data=b"{" + b" " * (9 * 1024 * 1024) + b"}",
                              headers={"content-type": "application/json"}, timeout=60)
    assert big.status_code == 413
    # Without a Content-Length (chunked), the body is counted as it is read.
    chunked = served.session.post(served.url + "/v1/sentiment_analysis", timeout=60,
                                  data=(b" " * (1024 * 1024) for _ in range(9)), headers={"content-type": "application/json"})
    assert chunked.status_code == 413
    for response in (bad, unknown, too_many, shape, not_json, big, chunked):
        assert "Traceback" not in response.text


def test_the_client_calls_like_a_taskflow(served, tiny_models):
    local = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    client = Client(served.url, "sentiment_analysis")
    assert _same(client(["好吃", "难吃"]), local(["好吃", "难吃"]))
    assert _same(client("好吃", return_all_scores=True), local("好吃", return_all_scores=True))
    with pytest.raises(InvalidInputError) as info:
        client(["好", "  "])
    assert info.value.index == 1
    with pytest.raises(OptionError) as info:
        client(["好"], top_k=3)
    assert info.value.option == "top_k"
    with pytest.raises(ServerError, match="no answer"):
        Client(f"http://127.0.0.1:{_free_port()}", "sentiment_analysis", retries=0)(["好"])


def test_a_full_queue_is_a_429_with_retry_after(tiny_models, tmp_path):
    config = {"tasks": {"sentiment_analysis": {"task_path": str(tiny_models["sentiment_analysis"]),
                                               "max_queue_items": 2, "max_wait_ms": 1500, "max_batch_items": 1000}}}
    server = Served(tmp_path, config)
    try:
        barrier = threading.Barrier(6)
        answers = []

        def call():
            barrier.wait()
            answers.append(server.post("/v1/sentiment_analysis", {"inputs": ["好吃"]}))

        threads = [threading.Thread(target=call) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(a.status_code for a in answers)
        assert statuses.count(429) >= 1 and statuses.count(200) >= 2, statuses
        refused = next(a for a in answers if a.status_code == 429)
        assert refused.headers["retry-after"] == "1" and refused.json()["error"]["type"] == "QueueFull"
    finally:
        assert server.stop() == 0


def test_a_client_that_leaves_takes_its_items_out_and_timeouts_answer_504(tiny_models, tmp_path):
    config = {"tasks": {
        "slow": {"task": "sentiment_analysis", "task_path": str(tiny_models["sentiment_analysis"]),
                 "max_wait_ms": 3000, "max_batch_items": 1000, "timeout_s": 1.0},
    }}
    server = Served(tmp_path, config)
    try:
        late = server.post("/v1/slow", {"inputs": ["好吃"]})
        assert late.status_code == 504 and late.json()["error"]["type"] == "Timeout"
        with pytest.raises(requests.exceptions.ReadTimeout):
            server.session.post(server.url + "/v1/slow", json={"inputs": ["好吃"] * 3}, timeout=0.3)
        time.sleep(0.6)
        assert server.metric("taskflow_queue_items", "slow") == 0     # both withdrawn before a batch took them
        assert server.metric("taskflow_requests_total", "slow") >= 2
    finally:
        assert server.stop() == 0


def test_the_api_key_is_required_where_set(tiny_models, tmp_path):
    config = {"tasks": {"sentiment_analysis": {"task_path": str(tiny_models["sentiment_analysis"])}}}
    server = Served(tmp_path, config, api_key=KEY)
    try:
        assert server.post("/v1/sentiment_analysis", {"inputs": ["好"]}).status_code == 401
        assert server.post("/v1/sentiment_analysis", {"inputs": ["好"]},
                           headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert server.post("/v1/sentiment_analysis", {"inputs": ["好"]},
                           headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert server.session.get(server.url + "/metrics", timeout=10).status_code == 401
        assert server.session.get(server.url + "/health", timeout=10).status_code == 200   # probes need no key
        assert Client(server.url, "sentiment_analysis", api_key=KEY)(["好"])[0]["label"]
    finally:
        assert server.stop() == 0


def test_sigterm_answers_what_is_in_flight_and_exits_0(tiny_models, tmp_path):
    config = {"tasks": {"sentiment_analysis": {"task_path": str(tiny_models["sentiment_analysis"]),
                                               "max_wait_ms": 800, "max_batch_items": 1000}}}
    server = Served(tmp_path, config)
    answers = []
    thread = threading.Thread(target=lambda: answers.append(server.post("/v1/sentiment_analysis",
                                                                        {"inputs": ["好吃", "难吃"]})))
    thread.start()
    time.sleep(0.3)          # the request waits in the queue for others to join it
    status = server.stop(signal.SIGTERM)
    thread.join()
    assert status == 0
    assert answers[0].status_code == 200 and len(answers[0].json()["results"]) == 2


def test_a_model_that_fails_to_load_ends_the_server_with_its_error(tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tasks": {"sentiment_analysis": {"task_path": str(tmp_path / "missing")}}}))
    run = subprocess.run([sys.executable, "-m", "taskflow.cli", "serve", "--config", str(config),
                          "--port", str(_free_port())], capture_output=True, text=True, timeout=240)
    assert run.returncode == 1, run.stderr
    assert "taskflow: error: ModelNotFoundError" in run.stderr and "Traceback" not in run.stderr
    unknown = subprocess.run([sys.executable, "-m", "taskflow.cli", "serve", "sentiment_analysys"],
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "sentiment_analysis" in unknown.stderr


def test_the_input_routes_answer_a_failing_handler_with_a_json_500_and_keep_the_guard():
    """InputRoutes (what `taskflow serve` runs) answers the input routes itself: an exception there
    is a JSON 500 without a traceback, the API key holds on them, and other routes reach FastAPI."""
    import asyncio

    import httpx

    from taskflow.serve_config import ServeConfig, route_config
    from taskflow.server import InputRoutes, http_app

    async def answer(route, request, items, parameters, on_error):
        raise RuntimeError("a bug in the backend")

    async def describe():
        return []

    async def not_ready():
        return None

    config = ServeConfig({"sentiment_analysis": route_config("sentiment_analysis", {})}, api_key="k")
    app = InputRoutes(http_app(config, answer, describe, not_ready))

    async def calls():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            keyed = {"authorization": "Bearer k"}
            failed = await client.post("/v1/sentiment_analysis", json={"inputs": ["好"]}, headers=keyed)
            paddlenlp = await client.post("/taskflow/sentiment_analysis", json={"data": {"text": "好"}}, headers=keyed)
            unkeyed = await client.post("/v1/sentiment_analysis", json={"inputs": ["好"]})
            unknown = await client.post("/v1/sentiment", json={"inputs": ["好"]}, headers=keyed)
            health = await client.get("/health")
            return failed, paddlenlp, unkeyed, unknown, health

    failed, paddlenlp, unkeyed, unknown, health = asyncio.run(calls())
    for response in (failed, paddlenlp):
        assert response.status_code == 500 and response.json()["error"]["type"] == "InternalError"
        assert "Traceback" not in response.text and "a bug" not in response.text
    assert unkeyed.status_code == 401
    assert unknown.status_code == 404 and "did you mean 'sentiment_analysis'" in unknown.json()["error"]["message"]
    assert health.status_code == 200
