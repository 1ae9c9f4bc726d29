"""``taskflow serve --backend ray``: each route a Ray Serve deployment, behind the same HTTP API.

Each route of the serve config is a deployment of ``replicas`` replicas.  A replica builds one copy
of the route's model and warms it before it takes requests; the requests that reach it are checked
there (a bad option or shape is its 422, as in the local backend), gathered by ``@serve.batch``
(at most ``max_batch_items`` requests, waiting at most ``max_wait_ms`` after the first), and run
through the task's :class:`~taskflow.runner.Runner` as one call per option set, each request
answered with its own results.  One more deployment, ``http``, is :func:`taskflow.server.http_app`
(the routes, body shapes, JSON errors, API key and body limit of the local backend) behind Serve's
HTTP proxy on ``--host`` / ``--port``; it passes each request to its route's deployment.

Without ``--address`` a Ray starts on this machine, listening on 127.0.0.1 only and reaped with
the server (:func:`taskflow.ray_connect.init_local_ray`); ``--address`` joins a cluster, and an
address where nothing answers fails at once.  SIGTERM deletes the application (its replicas
answer what they hold), stops the local Ray and exits 0; Ctrl-C the same, exit 130.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import logging
import os
import re
import signal
import sys
import time
from typing import Any

from fastapi import Request as HTTPRequest
from fastapi.responses import JSONResponse, Response

from .batching import describe_route, options_key, warm_up_item
from .errors import JobError
from .ray_connect import LOOPBACK, connect, import_ray, reap, starts_local
from .runner import Request, Runner
from .serve_config import ServeConfig, TaskConfig
from .server import REFUSED, _error, _typed, answered, check_request, http_app

__all__ = ["serve_on_ray", "application", "TaskReplica"]

APP = "taskflow"          # the Serve application's name
INGRESS = "http"          # its HTTP deployment; a route's deployment is "task-<route>"
log = logging.getLogger("taskflow.server")


def _deployment(route: str) -> str:
    return f"task-{route}"


class _Call:
    """One request in a replica, from its arrival to its batch's end."""

    __slots__ = ("items", "on_error", "options", "queued_at", "started_at", "finished_at", "outcome")

    def __init__(self, items: list, on_error: str, options: dict):
        self.items, self.on_error, self.options = items, on_error, options
        self.queued_at = time.perf_counter()
        self.started_at = self.finished_at = 0.0
        self.outcome: Any = None


class TaskReplica:
    """A route's model in one Ray Serve replica: requests checked, gathered by ``@serve.batch``,
    then one :meth:`Runner.run_requests` call per option set among them."""

    def __init__(self, route: str, config: TaskConfig, threads: int, cwd: str, settings: dict[str, str]):
        from ray import serve

        from .pipeline import Taskflow
        from .signals import without_paddle_signal_handlers

        _replica_on_loopback()
        # The config's relative paths (task_path...) and the PPNLP_* settings are read as the server's
        # process reads them, also on a cluster started elsewhere.
        if os.path.isdir(cwd):
            os.chdir(cwd)
        os.environ.update(settings)
        options = dict(config.options)
        if options.get("num_threads") is None:
            options["num_threads"] = threads
        self.route, self.config = route, config
        self.flow = Taskflow(config.task, **options)
        self.flow(warm_up_item(self.flow.task))
        # Ray may end a replica's process with SIGTERM, which Paddle's handler (set as the model loads
        # and first runs) would answer with a FatalError dump, or a hang, instead of the process ending.
        without_paddle_signal_handlers()
        self.runner = Runner(self.flow.task)
        # One batcher per replica, with its route's limits (a decorator on the class would give every
        # route the same ones).
        self.batched = serve.batch(max_batch_size=config.max_batch_items,
                                   batch_wait_timeout_s=config.max_wait_ms / 1000.0)(self._batch)

    def describe(self) -> dict:
        return describe_route(self.route, self.config, self.flow, self.config.replicas)

    async def __call__(self, items: Any, parameters: Any, on_error: str) -> tuple[int, bytes, dict]:
        """``(status, body, headers)`` of the answer to one request."""
        try:
            items = check_request(self.flow.task, items, parameters, on_error, self.config.max_inputs)
        except REFUSED as exc:
            return _sent(_typed(exc))
        if not items:
            return _sent(JSONResponse({"results": []}))
        call = _Call(items, on_error, dict(parameters))
        await self.batched(call)
        headers = {"x-queue-time": f"{(call.started_at - call.queued_at) * 1000:.2f}",
                   "x-inference-time": f"{(call.finished_at - call.started_at) * 1000:.2f}"}
        return _sent(answered(call.outcome, headers))

    async def _batch(self, calls: list[_Call]) -> list[None]:
        # In a thread: the replica's event loop goes on taking (and checking) requests meanwhile.
        await asyncio.to_thread(self._run, calls)
        return [None] * len(calls)

    def _run(self, calls: list[_Call]) -> None:
        groups: dict[str, list[_Call]] = {}
        for call in calls:               # only requests of one option set share a call
            groups.setdefault(options_key(call.options), []).append(call)
        for group in groups.values():
            started = time.perf_counter()
            requests = [Request(call.items, on_error=call.on_error) for call in group]
            try:
                self.runner.run_requests(requests, group[0].options)
                outcomes: list[Any] = requests
            except Exception as exc:     # these requests get a 500; the replica serves the next batch
                log.exception("taskflow serve: a batch of %s failed", self.route)
                outcomes = [exc] * len(group)
            finished = time.perf_counter()
            for call, outcome in zip(group, outcomes):
                call.outcome, call.started_at, call.finished_at = outcome, started, finished


def _sent(response: Response) -> tuple[int, bytes, dict]:
    return response.status_code, bytes(response.body), dict(response.headers)


class _Routes:
    """The HTTP deployment's side of the routes: each route's deployment handle, looked up by name
    in the replica when first needed (the FastAPI app is built, and pickled, before there is one)."""

    def __init__(self, config: ServeConfig):
        self.config = config
        self.handles: dict[str, Any] = {}
        self.described: list[dict] | None = None
        self.asking: asyncio.Future | None = None

    def handle(self, route: str):
        if route not in self.handles:
            from ray import serve

            self.handles[route] = serve.get_deployment_handle(_deployment(route), app_name=APP)
        return self.handles[route]

    async def answer(self, route: str, request: HTTPRequest, items: Any, parameters: Any, on_error: str):
        arrived = time.perf_counter()
        limits = self.config.routes[route]
        call = self.handle(route).remote(items, parameters, on_error)
        waiting = asyncio.ensure_future(_awaited(call))
        try:
            # asyncio.wait, not wait_for: a timeout answers at once, without waiting for Ray to cancel.
            await asyncio.wait({waiting}, timeout=limits.timeout_s)
        except asyncio.CancelledError:   # the client left: its request leaves the replica's queue
            call.cancel()
            waiting.cancel()
            raise
        if not waiting.done():
            call.cancel()
            waiting.cancel()
            return _error(504, "Timeout", f"not answered within {limits.timeout_s:g} s")
        try:
            status, body, headers = waiting.result()
        except Exception as exc:
            if type(exc).__name__ == "BackPressureError":     # past max_queued_requests (ray.serve.exceptions)
                return _error(429, "QueueFull", f"the queue of {route!r} is full ({limits.max_queue_items:,} "
                                                "requests wait at most); retry after a moment", {"Retry-After": "1"})
            log.error("taskflow serve: %s: %s: %s", route, type(exc).__name__, exc)
            return answered(exc, {})     # a replica that died, or a batch that failed
        if "x-queue-time" in headers:
            headers["x-total-time"] = f"{(time.perf_counter() - arrived) * 1000:.2f}"
        return Response(body, status_code=status, headers=headers)

    async def describe(self):
        """Each route's description, asked of its deployment once; a 503 until every one answers
        (a probe is answered at once: the question goes on in the background)."""
        if self.described is None:
            asking = self.asking
            if asking is None or (asking.done() and asking.exception() is not None):
                asking = self.asking = asyncio.ensure_future(asyncio.gather(
                    *(_awaited(self.handle(route).describe.remote()) for route in self.config.routes)))
            await asyncio.wait({asking}, timeout=0.5)
            if not asking.done() or asking.exception() is not None:
                return _error(503, "ServiceUnavailable", "the models are still loading", {"Retry-After": "1"})
            self.described = list(asking.result())
        return self.described

    async def not_ready(self):
        if isinstance(await self.describe(), Response):
            return _error(503, "ServiceUnavailable", "loading", {"Retry-After": "1"})
        return None


async def _awaited(response):
    return await response


class _HTTP:
    """The HTTP deployment.  The routes' deployments are bound to it so that they belong to its
    application; its routes reach them by name (see :class:`_Routes`)."""

    def __init__(self, *deployments):
        _replica_on_loopback()


def _replica_on_loopback() -> None:
    """On a Ray that listens on 127.0.0.1 only, this replica's server for calls from other
    deployments does too.  Ray Serve binds that server to every interface (``[::]:0``), where anyone
    who reaches the machine could call the replica, just after the replica's constructor (the
    caller of this) has run.  Other deployments call it at the node's address, 127.0.0.1 here, so
    they still reach it.  On a cluster's nodes (another address) it is left as Serve makes it."""
    import ray

    module = sys.modules.get("ray.serve._private.replica")
    bind = getattr(module, "add_port_to_grpc_server", None)
    if bind is None or getattr(bind, "on_loopback", False) or ray.util.get_node_ip_address() != LOOPBACK:
        return

    def on_loopback(server, address: str):
        host, _, port = address.rpartition(":")
        return bind(server, f"{LOOPBACK}:{port}" if host in ("[::]", "0.0.0.0", "") else address)

    on_loopback.on_loopback = True
    module.add_port_to_grpc_server = on_loopback


def _limits(serve, ongoing: int, queued: int | None) -> dict:
    """A deployment's request limits under this Ray's names for them (``max_concurrent_queries``
    before Ray 2.10; ``max_queued_requests`` where it exists)."""
    names = inspect.signature(serve.deployment).parameters
    limits = {"max_ongoing_requests" if "max_ongoing_requests" in names else "max_concurrent_queries": ongoing}
    if queued is not None and "max_queued_requests" in names:
        limits["max_queued_requests"] = queued
    return limits


def application(config: ServeConfig, *, cpus: float = 1, threads: int = 1):
    """The Serve application of ``config``'s routes, for ``serve.run``: each route a deployment of
    its ``replicas`` (each reserving ``cpus`` CPUs, its model on ``threads`` Paddle threads), behind
    the HTTP deployment."""
    from ray import serve

    routes = _Routes(config)
    app = http_app(config, routes.answer, routes.describe, routes.not_ready)
    settings = {name: value for name, value in os.environ.items() if name.startswith("PPNLP_")}
    deployments = []
    for route, task in config.routes.items():
        # A replica holds a whole batch at once; past that, up to max_queue_items requests wait, then 429.
        deployment = serve.deployment(TaskReplica, name=_deployment(route), num_replicas=task.replicas,
                                      ray_actor_options={"num_cpus": cpus},
                                      **_limits(serve, task.max_batch_items, task.max_queue_items))
        deployments.append(deployment.bind(route, task, threads, os.getcwd(), settings))
    in_flight = sum(t.replicas * t.max_batch_items + t.max_queue_items for t in config.routes.values())
    ingress = serve.deployment(serve.ingress(app)(_HTTP), name=INGRESS, ray_actor_options={"num_cpus": 0},
                               **_limits(serve, in_flight, None))
    return ingress.bind(*deployments)


class _Stopped(BaseException):
    pass


def serve_on_ray(args: argparse.Namespace, config: ServeConfig) -> int:
    """Serve ``config``'s routes on Ray Serve until SIGTERM (0) or Ctrl-C (130); 1 if the
    application does not start, 2 if Ray Serve is missing or Ray cannot be reached."""
    try:
        ray = import_ray()
        from ray import serve
    except ImportError as exc:
        print(f"taskflow: error: taskflow serve --backend ray needs Ray Serve ({exc}): "
              "pip install 'taskflow-nlp[ray]'", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(message)s")
    logging.getLogger("ray.serve").setLevel(max(logging.WARNING, logging.getLogger().level))
    local = starts_local(args.address)
    try:
        session_dir = connect(ray, args.address)
    except JobError as exc:
        print(f"taskflow: error: {exc}", file=sys.stderr)
        return 2
    received: list[int] = []

    def stop(number, frame):
        received.append(number)
        if len(received) == 1:           # once: what follows stops the application, and must finish
            raise _Stopped()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    status = 0
    try:
        serve.start(http_options={"host": args.host, "port": args.port},
                    logging_config={"log_level": args.log_level.upper()})
        # serve.run returns once every replica has built and warmed its model.
        serve.run(application(config, **_share(ray, config)), name=APP, route_prefix="/")
        described = [serve.get_deployment_handle(_deployment(route), app_name=APP).describe.remote().result()
                     for route in config.routes]
        print(f"taskflow serve: ready (Ray Serve, http://{args.host}:{args.port}): "
              + ", ".join(f"{d['route']} ({d['model']} {d['version']}, replicas: {d['replicas']})" for d in described),
              file=sys.stderr)
        while True:
            time.sleep(3600)
    except _Stopped:
        pass
    except Exception as exc:
        print(f"taskflow: error: {_failure(serve, exc)}", file=sys.stderr)
        status = 1
    finally:
        with contextlib.suppress(Exception):
            if local:
                serve.shutdown()
            else:
                serve.delete(APP)          # the cluster's Serve goes on for its other applications
        ray.shutdown()
        if session_dir:
            reap(session_dir)
    if status:
        return status
    return 130 if received and received[0] == signal.SIGINT else 0


def _share(ray, config: ServeConfig) -> dict:
    """Each replica's share of the cluster's CPUs (no more than a node has; replicas beyond the
    CPUs share them rather than wait for CPUs that never come free), and as many Paddle threads."""
    largest = max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=1)
    share = ray.cluster_resources().get("CPU", 1) / sum(route.replicas for route in config.routes.values())
    cpus = min(int(largest), int(share)) if share >= 1 else share
    return {"cpus": cpus, "threads": max(1, int(cpus))}


def _failure(serve, exc: Exception) -> str:
    """Why the application did not start: the error a route's replicas ended with (the last line of
    the traceback Serve keeps for a deployment that failed), else ``exc``'s first line."""
    with contextlib.suppress(Exception):
        for name, deployment in serve.status().applications[APP].deployments.items():
            lines = [line for line in str(deployment.message).splitlines() if line.strip()]
            if name.startswith("task-") and str(deployment.status).endswith("DEPLOY_FAILED") and lines:
                error = re.sub(r"^(?:\w+\.)+(?=\w+: )", "", lines[-1].strip())   # taskflow.errors.X: -> X:
                return f"{error} (route {name[len('task-'):]!r})"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
