"""``taskflow serve``: tasks over HTTP, the items of concurrent requests batched together.

Each served task has a bounded queue of pending requests and, per copy of its model
(``replicas``), a thread that takes what is queued, up to ``max_batch_items`` items and
``max_batch_chars`` chars of one call-time option set, waiting at most ``max_wait_ms`` after the
first for more, and runs them through the task's :class:`~taskflow.runner.Runner` as one call:
one pass of batches over every caller's items, each caller answered with its own results.  No
lock spans requests, so copies run side by side.

The HTTP layer is FastAPI on uvicorn (the ``[serve]`` extra), Prometheus metrics through
prometheus-client.  Routes:

* ``POST /v1/{task}``: ``{"inputs": [...], "parameters": {...}, "on_error": "raise"|"skip"}`` ->
  ``{"results": [...]}``, one per input in order;
* ``POST /taskflow/{task}``: PaddleNLP's ``{"data": {"text": ...}, "parameters": {...}}`` ->
  ``{"result": [...]}``, so PaddleNLP clients work unchanged;
* ``GET /v1/tasks``, ``GET /health`` (the process is up), ``GET /ready`` (every model loaded and
  warmed), ``GET /metrics``, and the OpenAPI documents at ``/docs`` and ``/openapi.json``.

Errors are JSON, ``{"error": {"type", "message", "index"?, "option"?}}``: 404 unknown task (with
the near miss), 413 body too large, 422 a bad item, option or request shape, 429 queue full (with
``Retry-After``), 401 without the API key, 503 while loading or stopping, 504 past the request
timeout, 500 a batch that failed (the server keeps serving).  A client that disconnects takes its
pending items out of the queue.  SIGTERM stops accepting, answers what is in flight, exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
from contextlib import asynccontextmanager
import difflib
import hmac
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, Field

from .errors import InputTypeError, InvalidInputError, OptionError, TaskflowError
from .runner import Request, Runner, check_on_error

__all__ = ["ServeConfig", "TaskConfig", "TaskServer", "create_app", "http_app", "parse_command", "serve_local",
           "DEFAULT_PORT"]

DEFAULT_PORT = 8189          # PaddleNLP's `paddlenlp server` examples use it too
API_KEY_VARIABLE = "TASKFLOW_API_KEY"
log = logging.getLogger("taskflow.server")


@dataclass
class TaskConfig:
    """How one route serves a task.  ``options`` are the Taskflow's own (mode, model, task_path,
    neutral, batch_size...); the rest are the route's batching and limits."""

    task: str
    options: dict = field(default_factory=dict)
    replicas: int = 1               # copies of the model, each with its own inference loop
    max_batch_items: int = 256      # items of several requests run as one call, at most
    max_batch_chars: int = 65536    # and their chars, at most (a long text counts whole)
    max_wait_ms: float = 2.0        # how long a first request waits for others to join it
    max_queue_items: int = 4096     # items waiting, past which a request is answered 429
    max_inputs: int = 1024          # inputs in one request, past which it is a 422
    timeout_s: float = 60.0         # a request not answered by then is a 504

    _LIMITS = ("replicas", "max_batch_items", "max_batch_chars", "max_queue_items", "max_inputs")

    def __post_init__(self):
        for name in self._LIMITS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptionError(f"{self.task}: {name} must be an int >= 1, got {value!r}", name)
        for name in ("max_wait_ms", "timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                    name == "timeout_s" and value == 0):
                raise OptionError(f"{self.task}: {name} must be a number >= 0 (timeout_s > 0), got {value!r}", name)


@dataclass
class ServeConfig:
    routes: dict[str, TaskConfig]
    api_key: str | None = None
    max_body_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_file(cls, path: str | os.PathLike, tasks: Sequence[str] = (), **defaults) -> "ServeConfig":
        """Routes from a JSON file ``{"tasks": {route: {"task": ..., <Taskflow options>, <limits>}}}``
        (``task`` defaults to the route's name), plus ``tasks`` named on the command line."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise OptionError(f"--config {path}: cannot be read as JSON ({exc})", "config") from None
        if not isinstance(data, Mapping) or not isinstance(data.get("tasks", {}), Mapping):
            raise OptionError(f"--config {path}: expected {{\"tasks\": {{route: {{options}}}}}}", "config")
        unknown = sorted(set(data) - {"tasks", "api_key", "max_body_bytes"})
        if unknown:
            raise OptionError(f"--config {path}: unknown key(s) {', '.join(map(repr, unknown))}; keys: tasks, "
                              "api_key, max_body_bytes", unknown[0])
        routes = {name: route_config(name, settings, defaults) for name, settings in data.get("tasks", {}).items()}
        for name in tasks:
            routes.setdefault(name, route_config(name, {}, defaults))
        return cls(routes, api_key=data.get("api_key"), max_body_bytes=data.get("max_body_bytes", 8 * 1024 * 1024))


def route_config(route: str, settings: Any, defaults: Mapping[str, Any] | None = None) -> TaskConfig:
    """A route's :class:`TaskConfig` from its settings: the limits by name, the rest Taskflow's."""
    if not isinstance(settings, Mapping):
        raise OptionError(f"route {route!r}: its settings must be an object, got {type(settings).__name__}", route)
    settings = {**(defaults or {}), **settings}
    limits = {f.name for f in fields(TaskConfig)} - {"task", "options"}
    options = {k: v for k, v in settings.items() if k not in limits and k != "task"}
    return TaskConfig(task=settings.get("task", route), options=options,
                      **{k: v for k, v in settings.items() if k in limits})


class QueueFull(Exception):
    pass


class Stopping(Exception):
    pass


class _Pending:
    """One request waiting for its results; completed from an inference thread."""

    __slots__ = ("items", "on_error", "options", "key", "count", "chars", "future", "loop", "queued_at",
                 "started_at", "finished_at")

    def __init__(self, items: list, on_error: str, options: dict, loop: asyncio.AbstractEventLoop):
        self.items, self.on_error, self.options = items, on_error, options
        self.key = options_key(options)
        self.count = len(items)
        self.chars = sum(_chars(item) for item in items)
        self.loop, self.future = loop, loop.create_future()
        self.queued_at = time.perf_counter()
        self.started_at = self.finished_at = 0.0

    def complete(self, outcome: Any) -> None:
        self.finished_at = time.perf_counter()
        self.loop.call_soon_threadsafe(_settle, self.future, outcome)


def options_key(options: Mapping[str, Any]) -> str:
    """Requests whose call-time options have one key share a call."""
    return json.dumps(options, sort_keys=True, default=repr)


def _settle(future: asyncio.Future, outcome: Any) -> None:
    if not future.done():     # a request that timed out or whose client left has stopped waiting
        future.set_result(outcome)


def _chars(item: Any) -> int:
    if isinstance(item, str):
        return len(item)
    if isinstance(item, Mapping):
        return sum(len(v) for v in item.values() if isinstance(v, str))
    if isinstance(item, (list, tuple)):
        return sum(len(v) for v in item if isinstance(v, str))
    return 0


class TaskServer:
    """One route's queue and the inference threads of its model copies."""

    def __init__(self, route: str, config: TaskConfig, metrics: "Metrics"):
        self.route, self.config, self.metrics = route, config, metrics
        self.flows: list = []
        self.cond = threading.Condition()
        self.pending: deque[_Pending] = deque()
        self.queued_items = 0
        self.stopping = False
        self.threads: list[threading.Thread] = []
        self.described: dict | None = None

    # -------------------------------------------------------------- loading
    def load(self, build) -> None:
        """Build the model copies (``build(task, **options)``: a Taskflow), warm each with one call
        so its predictors exist before the first request, and start their threads."""
        for _ in range(self.config.replicas):
            flow = build(self.config.task, **self.config.options)
            flow(warm_up_item(flow.task))
            self.flows.append(flow)
        for k, flow in enumerate(self.flows):
            thread = threading.Thread(target=self._loop, args=(flow,), name=f"taskflow-{self.route}-{k}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def describe(self) -> dict:
        if self.described is None:      # once: the fingerprint and the sha256 of an option's file are read here
            self.described = describe_route(self.route, self.config, self.flows[0], len(self.flows))
        return self.described

    # -------------------------------------------------------------- queue
    def submit(self, pending: _Pending) -> None:
        with self.cond:
            if self.stopping:
                raise Stopping()
            if self.queued_items and self.queued_items + pending.count > self.config.max_queue_items:
                raise QueueFull()
            self.pending.append(pending)
            self.queued_items += pending.count
            self.metrics.queue_items.labels(self.route).set(self.queued_items)
            self.cond.notify()

    def withdraw(self, pending: _Pending) -> bool:
        """Take a request out of the queue if no thread has taken it yet."""
        with self.cond:
            try:
                self.pending.remove(pending)
            except ValueError:
                return False
            self.queued_items -= pending.count
            self.metrics.queue_items.labels(self.route).set(self.queued_items)
            return True

    def stop(self) -> None:
        """Let the threads finish what is queued, then end."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        for thread in self.threads:
            thread.join(timeout=self.config.timeout_s)

    def _take(self) -> list[_Pending] | None:
        """The next batch: the oldest request and the queued ones of its option set that fit,
        after waiting up to max_wait_ms from its arrival for more to come."""
        wait = self.config.max_wait_ms / 1000.0
        with self.cond:
            while True:
                while not self.pending:
                    if self.stopping:
                        return None
                    self.cond.wait()
                first = self.pending[0]
                while not self.stopping:
                    items, chars = self._fits(first.key)
                    remaining = first.queued_at + wait - time.perf_counter()
                    if items >= self.config.max_batch_items or chars >= self.config.max_batch_chars or remaining <= 0:
                        break
                    self.cond.wait(remaining)
                    if not self.pending or self.pending[0] is not first:
                        break
                if not self.pending or self.pending[0] is not first:
                    continue       # it was withdrawn meanwhile: start again from the new oldest
                batch, items, chars = [], 0, 0
                for pending in list(self.pending):
                    if pending.key != first.key:
                        continue
                    if batch and (items + pending.count > self.config.max_batch_items
                                  or chars + pending.chars > self.config.max_batch_chars):
                        break
                    batch.append(pending)
                    items, chars = items + pending.count, chars + pending.chars
                for pending in batch:
                    self.pending.remove(pending)
                self.queued_items -= items
                self.metrics.queue_items.labels(self.route).set(self.queued_items)
                return batch

    def _fits(self, key: str) -> tuple[int, int]:
        items = chars = 0
        for pending in self.pending:
            if pending.key == key:
                items, chars = items + pending.count, chars + pending.chars
        return items, chars

    def _loop(self, flow) -> None:
        runner = Runner(flow.task)
        while True:
            batch = self._take()
            if batch is None:
                return
            started = time.perf_counter()
            requests = [Request(p.items, on_error=p.on_error) for p in batch]
            try:
                runner.run_requests(requests, batch[0].options)
            except Exception as exc:     # the batch's requests get a 500; the loop serves the next
                log.exception("taskflow serve: a batch of %s failed", self.route)
                outcomes = [exc] * len(batch)
            else:
                outcomes = requests
            done = time.perf_counter()
            self.metrics.inference.labels(self.route).observe(done - started)
            self.metrics.batch_items.labels(self.route).observe(sum(p.count for p in batch))
            self.metrics.batch_requests.labels(self.route).observe(len(batch))
            for pending, outcome in zip(batch, outcomes):
                pending.started_at = started
                self.metrics.queue_time.labels(self.route).observe(started - pending.queued_at)
                pending.complete(outcome)


def describe_route(route: str, config: TaskConfig, flow, replicas: int) -> dict:
    """What ``GET /v1/tasks`` says of a route served by ``flow`` (one of its copies)."""
    from .jobs import served_model

    task_class, model = type(flow.task), flow.model
    # The package, fingerprint, compute and options (served_model) are what a job run against this
    # route pins, to refuse a resume against another model (taskflow.jobs.endpoint_identity).
    return {"task": flow.task.name, "route": route, "model": model.name, "version": model.version,
            **served_model(flow.task, flow.spec), "taskflow": _version(), "replicas": replicas,
            "input_fields": list(task_class.input_fields),
            "parameters": {name: {"default": o.default, "help": o.help, "kind": o.kind}
                           for name, o in task_class.declared_options().items() if o.per_call},
            "limits": {"max_inputs": config.max_inputs, "max_batch_items": config.max_batch_items,
                       "max_wait_ms": config.max_wait_ms, "timeout_s": config.timeout_s}}


def warm_up_item(task) -> Any:
    """One small item of the task's input shape, to make its predictors before the first request."""
    fields_ = task.input_fields
    if len(fields_) == 1:
        return ["你好，这是一个测试。"]
    return [{name: "北京是中国的首都。" if name == "context" else "中国的首都是哪里？" for name in fields_}]


class Metrics:
    """The server's Prometheus metrics, in a registry of its own (two servers in a process apart)."""

    def __init__(self):
        self.registry = CollectorRegistry()
        seconds = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
        sizes = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
        self.requests = Counter("taskflow_requests", "Requests answered, by route and HTTP status",
                                ["route", "status"], registry=self.registry)
        self.items = Counter("taskflow_items", "Inputs answered, by route", ["route"], registry=self.registry)
        self.queue_items = Gauge("taskflow_queue_items", "Items waiting in a route's queue", ["route"],
                                 registry=self.registry)
        self.queue_time = Histogram("taskflow_queue_seconds", "Time a request waited before its batch ran",
                                    ["route"], buckets=seconds, registry=self.registry)
        self.inference = Histogram("taskflow_inference_seconds", "Time one batch took through the model",
                                   ["route"], buckets=seconds, registry=self.registry)
        self.request_time = Histogram("taskflow_request_seconds", "Time from arrival to answer",
                                      ["route"], buckets=seconds, registry=self.registry)
        self.batch_items = Histogram("taskflow_batch_items", "Items in one batch (of one or more requests)",
                                     ["route"], buckets=sizes, registry=self.registry)
        self.batch_requests = Histogram("taskflow_batch_requests", "Requests whose items ran in one batch",
                                        ["route"], buckets=sizes, registry=self.registry)


class Inputs(BaseModel):
    inputs: list[Any] = Field(..., description="the items: texts, or pairs / dicts for multi-text tasks")
    parameters: dict[str, Any] = Field(default_factory=dict, description="call-time options for this request")
    on_error: str = Field("raise", description="'raise': a bad item is a 422; 'skip': its error in its place")


class PaddleNLPInputs(BaseModel):
    data: dict[str, Any] = Field(..., description="{'text': a text or a list of items}")
    parameters: dict[str, Any] = Field(default_factory=dict)


class _Guard:
    """The API key and the body-size limit, before any route runs.  A plain ASGI middleware (not
    Starlette's BaseHTTPMiddleware, whose wrapped channel hides a client's disconnect)."""

    OPEN = ("/health", "/ready")      # probes of a load balancer or an orchestrator carry no key

    def __init__(self, app, api_key: str | None, max_body_bytes: int):
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = None
        if self.api_key is not None and scope.get("path") not in self.OPEN:
            given = headers.get("x-api-key", "")
            auth = headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = auth[7:]
            if not hmac.compare_digest(given.encode("utf-8", "replace"), self.api_key.encode("utf-8")):
                refused = _error(401, "Unauthorized", "a valid API key is needed: send 'Authorization: Bearer KEY' "
                                                      "or 'X-API-Key: KEY'")
        length = headers.get("content-length", "")
        if refused is None and length.isdigit() and int(length) > self.max_body_bytes:
            refused = _error(413, "PayloadTooLarge", f"the body has {int(length):,} bytes; at most "
                                                     f"{self.max_body_bytes:,} are taken: send fewer inputs a request")
        if refused is not None:
            return await refused(scope, receive, send)
        return await self.app(scope, receive, send)


def _error(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None, **extra):
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status,
                        headers=dict(headers or {}))


def _typed(exc: BaseException, status: int = 422):
    extra = {}
    if getattr(exc, "index", None) is not None:
        extra["index"] = exc.index
    if getattr(exc, "option", None) is not None:
        extra["option"] = exc.option
    return _error(status, type(exc).__name__, str(exc), **extra)


class TooManyInputs(ValueError):
    pass


# What makes a request a 422 before it is queued.
REFUSED = (OptionError, InputTypeError, InvalidInputError, TooManyInputs)


def check_request(task, items: Any, parameters: Any, on_error: str, max_inputs: int) -> list:
    """The request's items as ``task`` takes them, once its ``on_error``, its call-time options and
    its number of inputs are checked; else one of :data:`REFUSED`, its 422."""
    check_on_error(on_error)
    if not isinstance(parameters, Mapping):
        raise OptionError(f"parameters must be an object of call-time options, got "
                          f"{type(parameters).__name__}", "parameters")
    task.for_call(dict(parameters))          # a wrong option is this request's 422, before it queues
    items = task.as_items(items)
    if len(items) > max_inputs:
        raise TooManyInputs(f"{len(items):,} inputs in one request; at most {max_inputs:,} are taken: "
                            "split the request")
    return items


def answered(outcome: Any, headers: Mapping[str, str]) -> JSONResponse:
    """The answer to a request once its batch has run: its ``Request`` (its results, or the 422 of
    its bad item), or the exception of a batch that failed (a 500)."""
    if isinstance(outcome, Exception):
        return _error(500, "InternalError", f"the batch holding this request failed ({type(outcome).__name__}); "
                                            "the server keeps serving, retry", headers)
    if outcome.error is not None:
        return _typed(outcome.error)
    return JSONResponse({"results": outcome.results}, headers=headers)


async def body_too_large(request: HTTPRequest, max_body_bytes: int) -> JSONResponse | None:
    """The 413 of a body past the limit that gave no Content-Length (the guard refuses those that do)."""
    body = await request.body()
    if len(body) > max_body_bytes:
        return _error(413, "PayloadTooLarge", f"the body has {len(body):,} bytes; at most "
                                              f"{max_body_bytes:,} are taken")
    return None


def create_app(config: ServeConfig, build=None):
    """The FastAPI application serving ``config``'s routes; models load in the background when it
    starts (``/ready`` says when they are), with ``build`` (default :class:`Taskflow`)."""
    from .pipeline import Taskflow

    build = build or Taskflow
    metrics = Metrics()
    servers = {route: TaskServer(route, task_config, metrics) for route, task_config in config.routes.items()}
    state = {"ready": False, "failed": None}

    def load_all():
        try:
            for server in servers.values():
                server.load(build)
            state["ready"] = True
            print("taskflow serve: ready: " + ", ".join(f"{route} ({server.flows[0].model.name} "
                                                        f"{server.flows[0].model.version})"
                                                        for route, server in servers.items()), file=sys.stderr)
        except BaseException as exc:     # reported by /ready, and the server stops (exit status 1)
            state["failed"] = exc
            log.error("taskflow serve: loading failed: %s: %s", type(exc).__name__, exc)
            stop = getattr(app.state, "stop", None)
            if stop is not None:
                stop()

    @asynccontextmanager
    async def lifespan(app):
        loader = threading.Thread(target=load_all, name="taskflow-load", daemon=True)
        loader.start()
        app.state.loader = loader
        yield
        for server in servers.values():
            server.stop()

    async def answer(route: str, request: HTTPRequest, items: Any, parameters: Any, on_error: str):
        arrived = time.perf_counter()
        server = servers[route]
        if state["failed"] is not None or not state["ready"]:
            metrics.requests.labels(route, "503").inc()
            return _error(503, "ServiceUnavailable", "the models are still loading; GET /ready says when they are",
                          {"Retry-After": "1"})
        too_large = await body_too_large(request, config.max_body_bytes)
        if too_large is not None:
            return too_large
        try:
            items = check_request(server.flows[0].task, items, parameters, on_error, server.config.max_inputs)
        except REFUSED as exc:
            metrics.requests.labels(route, "422").inc()
            return _typed(exc)
        if not items:
            return JSONResponse({"results": []})
        pending = _Pending(items, on_error, dict(parameters), asyncio.get_running_loop())
        try:
            server.submit(pending)
        except QueueFull:
            metrics.requests.labels(route, "429").inc()
            return _error(429, "QueueFull", f"the queue of {route!r} is full ({server.config.max_queue_items:,} "
                                            "items); retry after a moment", {"Retry-After": "1"})
        except Stopping:
            return _error(503, "ServiceUnavailable", "the server is stopping", {"Retry-After": "1"})
        deadline = arrived + server.config.timeout_s
        while True:
            try:
                outcome = await asyncio.wait_for(asyncio.shield(pending.future),
                                                 max(0.0, min(0.2, deadline - time.perf_counter())))
                break
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    server.withdraw(pending)        # its items leave the queue; a running batch is not stopped
                    metrics.requests.labels(route, "499").inc()
                    return Response(status_code=499)
                if time.perf_counter() >= deadline:
                    server.withdraw(pending)
                    metrics.requests.labels(route, "504").inc()
                    return _error(504, "Timeout", f"not answered within {server.config.timeout_s:g} s")
        headers = {"x-queue-time": f"{(pending.started_at - pending.queued_at) * 1000:.2f}",
                   "x-inference-time": f"{(pending.finished_at - pending.started_at) * 1000:.2f}",
                   "x-total-time": f"{(time.perf_counter() - arrived) * 1000:.2f}"}
        metrics.request_time.labels(route).observe(time.perf_counter() - arrived)
        response = answered(outcome, headers)
        metrics.requests.labels(route, str(response.status_code)).inc()
        if response.status_code == 200:
            metrics.items.labels(route).inc(len(items))
        return response

    async def described():
        if not state["ready"]:
            return _error(503, "ServiceUnavailable", "the models are still loading", {"Retry-After": "1"})
        return [server.describe() for server in servers.values()]

    async def not_ready():
        if state["failed"] is not None:
            exc = state["failed"]
            return _error(503, type(exc).__name__, f"loading failed: {exc}")
        if not state["ready"]:
            return _error(503, "ServiceUnavailable", "loading", {"Retry-After": "1"})
        return None

    app = http_app(config, answer, described, not_ready, lifespan=lifespan,
                   metrics=lambda: Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST))
    app.state.servers, app.state.metrics, app.state.status = servers, metrics, state
    return app


def http_app(config: ServeConfig, answer, describe, not_ready, *, lifespan=None, metrics=None) -> FastAPI:
    """The HTTP API of ``taskflow serve``, whichever backend runs the models: its routes, body
    shapes, JSON errors, API key and body limit.  The backend gives four callables:
    ``answer(route, request, items, parameters, on_error)`` (async: the response to a request of a
    served route), ``describe()`` (async: each route's description, or a response while there is
    none), ``not_ready()`` (async: None once every model is ready, else the 503 of ``/ready``) and
    ``metrics()`` (the ``/metrics`` response; without it there is no such route)."""
    routes = list(config.routes)
    app = FastAPI(title="taskflow", version=_version(), lifespan=lifespan,
                  description="Chinese NLP tasks over HTTP: one result per input, in order.")

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request, exc):
        problems = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in exc.errors())
        return _error(422, "RequestValidationError", f"the request body is not of the documented shape: {problems}")

    app.add_middleware(_Guard, api_key=config.api_key, max_body_bytes=config.max_body_bytes)

    async def routed(route: str, request: HTTPRequest, items: Any, parameters: Any, on_error: str):
        if route not in config.routes:
            close = difflib.get_close_matches(route, routes, n=1, cutoff=0.5)
            return _error(404, "UnknownTaskError", f"no task {route!r} is served here"
                          + (f"; did you mean {close[0]!r}?" if close else "")
                          + f" Served: {', '.join(routes)} (GET /v1/tasks)")
        return await answer(route, request, items, parameters, on_error)

    @app.post("/v1/{task}", summary="Results for the inputs, one per input in order")
    async def run_task(task: str, body: Inputs, request: HTTPRequest):
        return await routed(task, request, body.inputs, body.parameters, body.on_error)

    @app.post("/taskflow/{task}", summary="PaddleNLP's route and shapes: {'data': {'text': ...}} -> {'result': ...}")
    async def run_paddlenlp(task: str, body: PaddleNLPInputs, request: HTTPRequest):
        if "text" not in body.data:
            return _error(422, "RequestValidationError", "data must hold 'text': a text or a list of items")
        response = await routed(task, request, body.data["text"], body.parameters, "raise")
        if response.status_code != 200:
            return response
        results = json.loads(response.body)["results"]
        return JSONResponse({"result": results}, headers={k: v for k, v in response.headers.items()
                                                          if k.startswith("x-")})

    @app.get("/v1/tasks", summary="The served tasks, their models, call-time parameters and limits")
    async def served():
        described = await describe()
        return described if isinstance(described, Response) else {"tasks": described}

    @app.get("/health", summary="200 while the process serves")
    async def health():
        return {"status": "ok"}

    @app.get("/ready", summary="200 once every model is loaded and warmed; 503 before")
    async def ready():
        return await not_ready() or {"status": "ready", "tasks": routes}

    if metrics is not None:
        @app.get("/metrics", summary="Prometheus metrics")
        async def prometheus():
            return metrics()

    return app


def _version() -> str:
    from . import __version__

    return __version__


def parse_command(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, ServeConfig] | int:
    """The arguments of ``taskflow serve TASK [TASK ...] [--config FILE] [--host H] [--port P] ...``
    and the routes they name, for either backend (:func:`serve_local`, or
    :func:`taskflow.serve_ray.serve_on_ray` for ``--backend ray``); the exit status of a refusal."""
    from .errors import CommandParser

    parser = CommandParser(prog="taskflow serve", description="Serve tasks over HTTP (POST /v1/TASK).")
    parser.add_argument("tasks", nargs="*", metavar="TASK", help="tasks to serve, each with its default model")
    parser.add_argument("--config", help="JSON file: {\"tasks\": {route: {\"task\": ..., Taskflow options, limits}}}")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    parser.add_argument("--api-key", help=f"require this key (default: ${API_KEY_VARIABLE}, if set)")
    parser.add_argument("--replicas", type=int, help="copies of each model (default 1)")
    parser.add_argument("--max-wait-ms", type=float, help="how long a request waits for others to batch with (2)")
    parser.add_argument("--max-batch-items", type=int, help="items of several requests run together, at most (256)")
    parser.add_argument("--max-queue-items", type=int, help="items waiting per task before 429 (4096)")
    parser.add_argument("--max-inputs", type=int, help="inputs one request may hold (1024)")
    parser.add_argument("--timeout", type=float, dest="timeout_s", help="seconds before a request is a 504 (60)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="local: threads of this process (default); ray: each route a Ray Serve deployment")
    parser.add_argument("--address", help="--backend ray: the Ray cluster to join (host:port of its head, or auto); "
                                          "default: a Ray on this machine, on 127.0.0.1 only")
    args = parser.parse_args(argv)
    if args.address is not None and args.backend != "ray":
        parser.error("--address names a Ray cluster: give --backend ray")
    defaults = {name: getattr(args, name) for name in ("replicas", "max_wait_ms", "max_batch_items",
                                                       "max_queue_items", "max_inputs", "timeout_s")
                if getattr(args, name) is not None}
    try:
        if args.config:
            config = ServeConfig.from_file(args.config, args.tasks, **defaults)
        else:
            if not args.tasks:
                parser.error("name a task to serve (taskflow serve sentiment_analysis) or pass --config FILE")
            config = ServeConfig({name: route_config(name, {}, defaults) for name in args.tasks})
        config.api_key = args.api_key or config.api_key or os.environ.get(API_KEY_VARIABLE) or None
        from .registry import get_task_class

        for route in config.routes.values():
            get_task_class(route.task)           # an unknown task fails now, with the near miss
    except TaskflowError as exc:
        print(f"taskflow: error: {exc}", file=sys.stderr)
        return 2
    return args, config


def serve_local(args: argparse.Namespace, config: ServeConfig) -> int:
    """Serve ``config``'s routes from this process until SIGTERM (0) or Ctrl-C (130); 1 if a model
    fails to load."""
    import uvicorn

    logging.basicConfig(level=args.log_level.upper(), format="%(message)s")
    from .signals import without_paddle_signal_handlers

    # Paddle's own SIGTERM handler (installed when it is imported, as the models load) would print
    # a FatalError dump and kill the process instead of uvicorn's graceful stop.
    without_paddle_signal_handlers()
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                                           timeout_graceful_shutdown=max(r.timeout_s for r in config.routes.values())))
    app.state.stop = lambda: setattr(server, "should_exit", True)
    # uvicorn stops gracefully on SIGTERM / SIGINT, then raises the signal again with the handlers
    # it found in place: these note it, so that a stop that answered everything in flight exits 0.
    received: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, frame: received.append(number))
    server.run()
    failed = app.state.status["failed"]
    if failed is not None:
        print(f"taskflow: error: {type(failed).__name__}: {failed}", file=sys.stderr)
        return 1
    return 130 if signal.SIGINT in received else 0
