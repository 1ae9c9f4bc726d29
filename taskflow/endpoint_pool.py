"""A batch job's chunks answered by a ``taskflow serve`` server (:class:`EndpointPool`,
``taskflow TASK --endpoint URL``), as a local pool answers them.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from .errors import JobError, ServerError
from .readers import Record

__all__ = ["EndpointPool"]


class EndpointPool:
    """The chunks of a job run against a server (:func:`taskflow.jobs.run_file` with a
    :class:`taskflow.Client` as its task): each chunk's readable records go to the server in requests
    of at most ``max_inputs`` items (and about 4 MiB of JSON), with the job's call-time ``parameters``
    and ``on_error="skip"``, so a record the server refuses gets its error in its place, named by
    file and line as a local job names it, and the others their results.

    One request at a time, in input order: the server batches and replicates its model, and a
    request that holds one call's items runs as a local job's chunk does.  The client retries a full
    queue (429), a loading or stopping server (503) and a connection that fails; a request still
    unanswered after that (the server gone, a 5xx) stops the job with one
    :class:`~taskflow.errors.JobError`, the records before it saved for ``--resume``.
    """

    MAX_REQUEST_BYTES = 4 << 20      # half the server's default body limit (max_body_bytes, 8 MiB)

    def __init__(self, client, parameters: dict, *, source: str, max_inputs: int):
        self.client, self.parameters, self.source = client, dict(parameters), source
        self.max_inputs = max(1, max_inputs)

    def map(self, chunks: Iterable[list[Record]]) -> Iterator[list]:
        """Outcomes of each chunk, in order (as :func:`taskflow.workers.process_chunk` gives them)."""
        for chunk in chunks:
            yield self._run(chunk)

    def _run(self, records: Sequence[Record]) -> list[tuple[Record, Any, str | None]]:
        readable = [record for record in records if record.error is None]
        answers: list[Any] = []
        for part in self._requests(readable):
            where = f"the records at lines {part[0].line}-{part[-1].line} of {self.source}"
            try:
                results = self.client([record.item for record in part], on_error="skip", **self.parameters)
            except ServerError as exc:
                raise JobError(f"the server did not answer {where} ({exc}); the records before them are saved: "
                               "rerun with --resume (resume=True) once it answers again") from None
            if not isinstance(results, list) or len(results) != len(part):
                raise JobError(f"{self.client.url} answered {len(results) if isinstance(results, list) else 'no'} "
                               f"result(s) for the {len(part)} of {where}; the records before them are saved")
            answers += results
        answered = iter(answers)
        return [(record, None, record.error) if record.error is not None else self._outcome(record, next(answered))
                for record in records]

    def _requests(self, records: list[Record]) -> Iterator[list[Record]]:
        import json

        part: list[Record] = []
        size = 0
        for record in records:
            # As the client sends it (ASCII escapes): what the server's body limit counts.
            length = len(json.dumps(record.item, default=str)) + 2
            if part and (len(part) == self.max_inputs or size + length > self.MAX_REQUEST_BYTES):
                yield part
                part, size = [], 0
            part.append(record)
            size += length
        if part:
            yield part

    def _outcome(self, record: Record, result: Any) -> tuple[Record, Any, str | None]:
        if isinstance(result, dict) and set(result) == {"error", "error_type", "index"}:
            # The server numbers a bad item by its place in the request ("text #3 ..."); a job names
            # its file and line instead, as a local job does.
            message, index = str(result["error"]), result["index"]
            if isinstance(index, int):
                message = message.replace(f" #{index}", "", 1)
            return record, None, f"{self.source}:{record.line}: {message}"
        return record, result, None

    def close(self) -> list[str]:
        self.abort()
        return []

    def abort(self) -> None:
        pass    # nothing runs here between requests; the client is the caller's
