"""The one runner behind every way of calling a task.

``flow(items)``, ``flow.stream(items)``, a batch job's chunk (a worker process or a Ray actor) and
a server's batch of many callers' items all go through :class:`Runner`: each item is checked
(``Task.check_item``), a bad one becomes an error record in its place or raises, and the good ones
run together through ``Task.run_items`` (split -> order -> batch -> preprocess -> forward ->
postprocess -> join), their results scattered back to their places.  Call-time options
(``flow(texts, top_k=3)``) are applied to a copy of the task for that call only
(``Task.for_call``), so they never change what another caller gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from .errors import InputTypeError, InvalidInputError, OptionError

__all__ = ["Runner", "Request", "chunks", "error_record", "check_on_error"]

# The errors an item itself causes: they are the item's, never the call's.
ITEM_ERRORS = (InvalidInputError, InputTypeError)


def check_on_error(on_error: Any) -> str:
    if on_error not in ("raise", "skip"):
        raise OptionError(f"on_error must be 'raise' or 'skip', got {on_error!r}", "on_error")
    return on_error


def error_record(exc: BaseException, index: int | None) -> dict:
    """What a skipped item gets in its place: ``{"error", "error_type", "index"}``."""
    return {"error": str(exc), "error_type": type(exc).__name__, "index": index}


def chunks(items: Iterable[Any], size: int, first: int | None = None) -> Iterator[list[Any]]:
    """Lists of up to ``size`` items from any iterable, lazily; the first of up to ``first``."""
    chunk: list[Any] = []
    limit = first or size
    for item in items:
        chunk.append(item)
        if len(chunk) == limit:
            yield chunk
            chunk, limit = [], size
    if chunk:
        yield chunk


@dataclass
class Request:
    """One caller's items in a run of several callers (:meth:`Runner.run_requests`): its checked
    items go through the model with the other callers', and its ``results`` come back in its own
    order, an error record (``on_error="skip"``) or the item's exception (``"raise"``) in each bad
    item's place.  ``offset`` is where the items start in the caller's numbering (a stream's)."""

    items: Sequence[Any]
    on_error: str = "raise"
    offset: int = 0
    results: list[Any] = field(default_factory=list)
    error: BaseException | None = None    # with on_error="raise": the first bad item's error


class Runner:
    """Checks items, runs the good ones through a task, and puts each result in its item's place.

    One runner serves any number of callers: its state is the task, which it only reads, so
    threads may share one (each call's options live in a copy of the task made for that call).
    """

    def __init__(self, task):
        self.task = task

    def check(self, items: Sequence[Any], *, offset: int | None = 0, on_error: str = "raise",
              where: Callable[[int, BaseException], Any] | None = None) -> tuple[list[tuple[int, Any]], list[Any]]:
        """``([(position, checked item)], results)``: ``results`` holds an error record at each bad
        item's position (``on_error="skip"``) and ``None`` elsewhere, to be filled in.  Messages
        number the items from ``offset`` (``None``: unnumbered, where ``where`` says which it is: a
        job names the file and line); ``where`` makes a bad item's entry from its position and error."""
        check_on_error(on_error)
        good: list[tuple[int, Any]] = []
        results: list[Any] = [None] * len(items)
        for position, item in enumerate(items):
            index = None if offset is None else offset + position
            try:
                good.append((position, self.task.check_item(item, index)))
            except ITEM_ERRORS as exc:
                if on_error == "raise":
                    raise
                results[position] = where(position, exc) if where else error_record(exc, index)
        return good, results

    def run(self, items: Sequence[Any], *, offset: int = 0, on_error: str = "raise",
            options: Mapping[str, Any] | None = None) -> list[Any]:
        """One result per item, in order (an error record in a bad item's place with ``"skip"``)."""
        task = self.task.for_call(options or {})
        good, results = Runner(task).check(items, offset=offset, on_error=on_error)
        return _scatter(task, good, results)

    def run_checked(self, good: list[tuple[int, Any]], results: list[Any],
                    options: Mapping[str, Any] | None = None) -> list[Any]:
        """``results`` with the results of the already-checked ``good`` items put in their places."""
        return _scatter(self.task.for_call(options or {}), good, results)

    def run_requests(self, requests: Sequence[Request], options: Mapping[str, Any] | None = None) -> None:
        """Run several callers' items through the model together (one pass of batches over all of
        them, so a server fills a batch from many requests), each request's ``results`` in its own
        order.  A request with a bad item and ``on_error="raise"`` gets that error in ``error`` and
        no results; the others are answered all the same."""
        task = self.task.for_call(options or {})
        checker = Runner(task)
        runs: list[tuple[Request, list[tuple[int, Any]]]] = []
        for request in requests:
            try:
                good, request.results = checker.check(request.items, offset=request.offset,
                                                      on_error=request.on_error)
            except ITEM_ERRORS as exc:
                request.error, request.results = exc, []
                continue
            runs.append((request, good))
        done = task.run_items([item for _, good in runs for _, item in good]) if runs else []
        start = 0
        for request, good in runs:
            for (position, _), result in zip(good, done[start:start + len(good)]):
                request.results[position] = result
            start += len(good)

    def stream(self, items: Iterable[Any], chunk_size: int, *, on_error: str = "raise",
               options: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Results for any iterable of items, lazily and in order, ``chunk_size`` items at a time;
        a bad item's index counts from the start of the stream."""
        task = self.task.for_call(options or {})     # checked before the first item is read
        runner, offset = Runner(task), 0
        for chunk in chunks(items, chunk_size):
            yield from runner.run(chunk, offset=offset, on_error=on_error)
            offset += len(chunk)


def _scatter(task, good: list[tuple[int, Any]], results: list[Any]) -> list[Any]:
    if good:
        done = task.run_items([item for _, item in good])
        if len(done) != len(good):
            raise RuntimeError(f"{type(task).__name__}.run_items returned {len(done)} results for {len(good)} items")
        for (position, _), result in zip(good, done):
            results[position] = result
    return results
