"""``taskflow serve``'s HTTP side: the app, its routes, body shapes and JSON errors, and serving it
from this process; the items of concurrent requests are batched together (:mod:`taskflow.batching`).

Each served task (a route of :class:`~taskflow.serve_config.ServeConfig`) has a bounded queue of
pending requests and, per copy of its model (``replicas``), a thread that takes what is queued, up
to ``max_batch_items`` items and ``max_batch_chars`` chars of one call-time option set, waiting at
most ``max_wait_ms`` after the first for more, and runs them through the task's
:class:`~taskflow.runner.Runner` as one call (:mod:`taskflow.batching`): one pass of batches over
every caller's items, each caller answered with its own results.  No lock spans requests, so
copies run side by side.

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
import re
import signal
import sys
import threading
import time
from typing import Any, Mapping, Sequence

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field, ValidationError

from .batching import Metrics, Pending, QueueFull, Stopping, TaskServer
from .errors import InputTypeError, InvalidInputError, OptionError, TaskflowError
from .runner import check_on_error
from .serve_config import ServeConfig, route_config

__all__ = ["create_app", "http_app", "InputRoutes", "parse_command", "serve_local", "DEFAULT_PORT"]

DEFAULT_PORT = 8189          # PaddleNLP's `paddlenlp server` examples use it too
API_KEY_VARIABLE = "TASKFLOW_API_KEY"
log = logging.getLogger("taskflow.server")


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
        refused = self.refusal(scope)
        if refused is not None:
            return await refused(scope, receive, send)
        return await self.app(scope, receive, send)

    def refusal(self, scope):
        """The 401 or 413 of an HTTP request, or None."""
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
        return refused


class InputRoutes:
    """The ASGI application ``taskflow serve`` runs locally: the two routes that carry inputs
    (``POST /v1/{task}``, ``POST /taskflow/{task}``) answered directly, behind the same API-key and
    body checks, and everything else (and their OpenAPI documents) by the FastAPI app.  The
    FastAPI route for these runs the same handlers; skipping its dozen middleware and dependency
    layers took about half of the event loop's time per request, time that the two cores a server
    shares with its models give back to inference."""

    PATH = re.compile(r"/(v1|taskflow)/([^/]+)")

    def __init__(self, app: FastAPI):
        self.app, self.handlers = app, app.state.input_handlers
        self.guard = _Guard(None, app.state.api_key, app.state.max_body_bytes)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            match = self.PATH.fullmatch(scope["path"])
            if match:
                response = self.guard.refusal(scope)
                if response is None:
                    try:
                        response = await self.handlers[match[1]](match[2], HTTPRequest(scope, receive))
                    except Exception:     # as FastAPI's own error middleware would: a 500, no traceback out
                        log.exception("taskflow serve: %s failed", scope["path"])
                        response = _error(500, "InternalError", "the server failed on this request; it keeps serving")
                return await response(scope, receive, send)
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


async def _parsed(request: HTTPRequest, shape: type[BaseModel], max_body_bytes: int):
    """The request's body as ``shape``, or its error response: the 413 of a body past the limit
    that gave no Content-Length (the guard refuses those that do), the 422 of one not of the shape."""
    body = await request.body()
    if len(body) > max_body_bytes:
        return _error(413, "PayloadTooLarge", f"the body has {len(body):,} bytes; at most "
                                              f"{max_body_bytes:,} are taken")
    try:
        return shape.model_validate_json(body)
    except ValidationError as exc:
        return _invalid_body(exc.errors(include_url=False))


def _invalid_body(errors) -> JSONResponse:
    problems = "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'body'}: {e.get('msg')}" for e in errors)
    return _error(422, "RequestValidationError", f"the request body is not of the documented shape: {problems}")


def _body_schema(shape: type[BaseModel]) -> dict:
    """The OpenAPI request body of a route that parses its own (``_parsed``)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": shape.model_json_schema()}}}}


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
        try:
            items = check_request(server.flows[0].task, items, parameters, on_error, server.config.max_inputs)
        except REFUSED as exc:
            metrics.requests.labels(route, "422").inc()
            return _typed(exc)
        if not items:
            return JSONResponse({"results": []})
        pending = Pending(items, on_error, dict(parameters), asyncio.get_running_loop())
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
        return _invalid_body(exc.errors())

    app.add_middleware(_Guard, api_key=config.api_key, max_body_bytes=config.max_body_bytes)

    async def routed(route: str, request: HTTPRequest, items: Any, parameters: Any, on_error: str):
        if route not in config.routes:
            close = difflib.get_close_matches(route, routes, n=1, cutoff=0.5)
            return _error(404, "UnknownTaskError", f"no task {route!r} is served here"
                          + (f"; did you mean {close[0]!r}?" if close else "")
                          + f" Served: {', '.join(routes)} (GET /v1/tasks)")
        return await answer(route, request, items, parameters, on_error)

    # The two routes that carry inputs read their own body (one pydantic-core pass over the bytes,
    # after the size limit) instead of FastAPI's body dependency: on the two cores a server
    # shares with its models, each request's Python is time the predictors do not get.  Their
    # OpenAPI body is still the model's schema.
    async def run_task(task: str, request: HTTPRequest):
        body = await _parsed(request, Inputs, config.max_body_bytes)
        if isinstance(body, Response):
            return body
        return await routed(task, request, body.inputs, body.parameters, body.on_error)

    async def run_paddlenlp(task: str, request: HTTPRequest):
        body = await _parsed(request, PaddleNLPInputs, config.max_body_bytes)
        if isinstance(body, Response):
            return body
        if "text" not in body.data:
            return _error(422, "RequestValidationError", "data must hold 'text': a text or a list of items")
        response = await routed(task, request, body.data["text"], body.parameters, "raise")
        if response.status_code != 200:
            return response
        results = json.loads(response.body)["results"]
        return JSONResponse({"result": results}, headers={k: v for k, v in response.headers.items()
                                                          if k.startswith("x-")})

    app.post("/v1/{task}", summary="Results for the inputs, one per input in order",
             openapi_extra=_body_schema(Inputs))(run_task)
    app.post("/taskflow/{task}", summary="PaddleNLP's route and shapes: {'data': {'text': ...}} -> {'result': ...}",
             openapi_extra=_body_schema(PaddleNLPInputs))(run_paddlenlp)
    # What InputRoutes answers without going through FastAPI's layers.
    app.state.input_handlers = {"v1": run_task, "taskflow": run_paddlenlp}
    app.state.api_key, app.state.max_body_bytes = config.api_key, config.max_body_bytes

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
    parser.add_argument("--max-wait-ms", type=float, help="how long a request waits for others to batch with (0: a free copy runs what is queued)")
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
    server = uvicorn.Server(uvicorn.Config(InputRoutes(app), host=args.host, port=args.port, log_level=args.log_level,
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
