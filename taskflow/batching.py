"""How ``taskflow serve`` batches a route's requests: its bounded queue (:class:`TaskServer`), and
per copy of its model (``replicas``) a thread that takes what is queued, up to ``max_batch_items``
items and ``max_batch_chars`` chars of one call-time option set, waiting at most ``max_wait_ms``
after the first for more, and runs them through the task's :class:`~taskflow.runner.Runner` as one
call; each request is then completed with its own outcome.  Also what a route says of itself
(:func:`describe_route`), the item that warms a model copy, and the server's Prometheus
:class:`Metrics`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from typing import Any, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .predictor import SMALL_BATCH
from .runner import Request, Runner
from .serve_config import TaskConfig

__all__ = ["TaskServer", "Pending", "Metrics", "QueueFull", "Stopping", "describe_route", "options_key", "warm_up_item"]

log = logging.getLogger("taskflow.server")


class QueueFull(Exception):
    pass


class Stopping(Exception):
    pass


class Pending:
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
        self.pending: deque[Pending] = deque()
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
            # One item, then a batch: a predictor serves small batches and another the rest
            # (taskflow.predictor), and the first request of each size should not pay for its making.
            flow(warm_up_item(flow.task))
            flow(warm_up_item(flow.task) * (SMALL_BATCH + 1))
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
    def submit(self, pending: Pending) -> None:
        with self.cond:
            if self.stopping:
                raise Stopping()
            if self.queued_items and self.queued_items + pending.count > self.config.max_queue_items:
                raise QueueFull()
            self.pending.append(pending)
            self.queued_items += pending.count
            self.metrics.queue_items.labels(self.route).set(self.queued_items)
            self.cond.notify()

    def withdraw(self, pending: Pending) -> bool:
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

    def _take(self) -> list[Pending] | None:
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
    from . import __version__
    from .job_identity import served_model

    task_class, model = type(flow.task), flow.model
    # The package, fingerprint, compute and options (served_model) are what a job run against this
    # route pins, to refuse a resume against another model (taskflow.job_identity.endpoint_identity).
    return {"task": flow.task.name, "route": route, "model": model.name, "version": model.version,
            **served_model(flow.task, flow.spec), "taskflow": __version__, "replicas": replicas,
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

