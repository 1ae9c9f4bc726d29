"""Batch jobs over files: streaming, order, resume, error records, worker processes.

The CLI's ``taskflow TASK --input ... --output ...`` and
``Taskflow.predict_file`` both run :func:`run_file`.  Memory stays flat in
the file's size: records are read, processed and written a chunk at a time,
with at most two chunks per worker in flight.

Output is written to ``<output>.partial`` and renamed into place when the
job ends; after every chunk a small checkpoint (``<output>.partial.ckpt``)
records how many input records are done and how many bytes of the output and
error files are valid, so ``resume=True`` continues an interrupted job exactly
where it stopped.
"""

from __future__ import annotations

import collections
import csv
import json
import logging
import multiprocessing
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from .errors import InputTypeError, InvalidInputError
from .packages import atomic_write_text

__all__ = ["Record", "read_records", "run_file", "JobSummary", "process_chunk", "iter_chunks"]

ON_ERROR = ("raise", "skip")
logger = logging.getLogger("taskflow")


@dataclass
class Record:
    """One input record: where it came from, and the item or why it could not be read."""

    line: int
    item: Any = None
    error: str | None = None


def _pick(row: dict, fields: Sequence[str], where: str) -> Any:
    missing = [f for f in fields if f not in row]
    if missing:
        raise InvalidInputError(f"{where}: no {'key' if len(missing) == 1 else 'keys'} {', '.join(map(repr, missing))} "
                                f"(has {', '.join(map(repr, row))}); choose with --field")
    return row[fields[0]] if len(fields) == 1 else {f: row[f] for f in fields}


def read_records(path: str | os.PathLike, fields: Sequence[str] = ("text",)) -> Iterator[Record]:
    """Records of a .txt, .jsonl, .csv or .tsv file, lazily.

    * ``.txt``: a record a line (tab-separated parts when the task takes several fields);
    * ``.jsonl``: an object a line, its ``fields`` picked (or a bare value);
    * ``.csv`` / ``.tsv``: a header row, then a record a row.

    A record that cannot be read carries ``error`` instead of ``item``; the
    caller decides whether that stops the job.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    with open(path, encoding="utf-8", newline="") as handle:
        if suffix in (".csv", ".tsv"):
            reader = csv.DictReader(handle, delimiter="\t" if suffix == ".tsv" else ",")
            header = reader.fieldnames or []
            missing = [f for f in fields if f not in header]
            if missing:
                raise InvalidInputError(
                    f"{path}: no column {', '.join(map(repr, missing))}; columns are {header}; choose with --field"
                )
            for row in reader:
                yield Record(reader.line_num, _pick(row, fields, f"{path}:{reader.line_num}"))
        elif suffix in (".jsonl", ".ndjson"):
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                    item = _pick(value, fields, f"{path}:{number}") if isinstance(value, dict) else value
                except json.JSONDecodeError as exc:
                    yield Record(number, error=f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})")
                    continue
                except InvalidInputError as exc:
                    yield Record(number, error=str(exc))
                    continue
                yield Record(number, item)
        else:
            for number, line in enumerate(handle, 1):
                text = line.rstrip("\r\n")
                yield Record(number, text if len(fields) == 1 else text.split("\t"))


def count_records(path: str | os.PathLike) -> int | None:
    """How many records a file holds (for the progress bar's ETA); cheap: one pass over bytes."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return None  # quoted fields may span lines; no cheap exact count
    with open(path, "rb") as handle:
        if suffix in (".jsonl", ".ndjson"):
            return sum(1 for line in handle if line.strip())
        return sum(1 for _ in handle)


# ------------------------------------------------------------------ processing

def process_chunk(task, records: Sequence[Record], source: str) -> list[tuple[Record, Any, str | None]]:
    """``(record, result, error)`` for each record, in order; bad items get an error, not an exception."""
    outcomes: list[tuple[Record, Any, str | None]] = []
    good: list[tuple[int, Any]] = []
    for position, record in enumerate(records):
        if record.error is not None:
            outcomes.append((record, None, record.error))
            continue
        try:
            checked = task.check_item(record.item, None)
        except (InvalidInputError, InputTypeError) as exc:
            outcomes.append((record, None, f"{source}:{record.line}: {exc}"))
            continue
        outcomes.append((record, None, None))
        good.append((position, checked))
    if good:
        results = task.run_items([item for _, item in good])
        for (position, _), result in zip(good, results):
            outcomes[position] = (outcomes[position][0], result, None)
    return outcomes


# Worker processes (spawned, so each has its own Paddle runtime and predictor).
_worker_task = None


def _init_worker(config: dict) -> None:
    global _worker_task
    from .pipeline import Taskflow

    _worker_task = Taskflow(**config).task


def _work(records: list[Record], source: str):
    return process_chunk(_worker_task, records, source)


class _Workers:
    """Ordered map over chunks with N processes and bounded prefetch."""

    def __init__(self, config: dict, workers: int):
        config = dict(config)
        if config.get("num_threads") is None:
            # N processes x threads each <= cores: oversubscribing 2 cores only adds switching.
            config["num_threads"] = max(1, (os.cpu_count() or 1) // workers)
        self.pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_init_worker, initargs=(config,))
        self.depth = 2 * workers

    def map(self, chunks: Iterable[list[Record]], source: str) -> Iterator[list]:
        pending: collections.deque = collections.deque()
        for chunk in chunks:
            pending.append(self.pool.apply_async(_work, (chunk, source)))
            if len(pending) >= self.depth:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


# ------------------------------------------------------------------ the job

@dataclass
class JobSummary:
    input: str
    output: str
    processed: int = 0      # results written by this run
    skipped: int = 0        # records written to the errors file by this run
    resumed_from: int = 0   # records already done by an earlier run
    errors_file: str | None = None
    messages: list[str] = field(default_factory=list)


class _Checkpointed:
    """The output and error files of a job, with their checkpoint."""

    def __init__(self, output: Path, errors: Path, input_path: Path, resume: bool):
        self.output, self.errors = output, errors
        self.out_tmp = output.with_name(output.name + ".partial")
        self.err_tmp = errors.with_name(errors.name + ".partial")
        self.ckpt = output.with_name(output.name + ".partial.ckpt")
        # The input's path, not its bytes: fixing a bad line in place and resuming is the expected repair.
        self.identity = {"input": str(input_path.resolve())}
        self.done, out_bytes, err_bytes = 0, 0, 0
        if resume and self.ckpt.exists():
            state = json.loads(self.ckpt.read_text())
            if {k: state.get(k) for k in self.identity} != self.identity:
                raise InvalidInputError(
                    f"cannot resume {output}: its checkpoint belongs to {state.get('input')}, "
                    "not this input; run without --resume to start over"
                )
            self.done, out_bytes, err_bytes = state["done"], state["out_bytes"], state["err_bytes"]
        output.parent.mkdir(parents=True, exist_ok=True)
        self.out = self._open(self.out_tmp, out_bytes)
        self.err = self._open(self.err_tmp, err_bytes)

    @staticmethod
    def _open(path: Path, valid_bytes: int):
        # Bytes past the checkpoint belong to a chunk that was not finished: drop them.
        handle = open(path, "r+b" if valid_bytes and path.exists() else "w+b")
        handle.truncate(valid_bytes)
        handle.seek(valid_bytes)
        return handle

    def write(self, results: list[Any], errors: list[dict], done: int) -> None:
        for result in results:
            self.out.write((json.dumps(result, ensure_ascii=False) + "\n").encode("utf-8"))
        for error in errors:
            self.err.write((json.dumps(error, ensure_ascii=False) + "\n").encode("utf-8"))
        for handle in (self.out, self.err):
            handle.flush()
            os.fsync(handle.fileno())
        self.done = done
        atomic_write_text(self.ckpt, json.dumps({
            **self.identity, "done": done, "out_bytes": self.out.tell(), "err_bytes": self.err.tell(),
        }))

    def finish(self) -> bool:
        """Move the files into place; True when an errors file was written."""
        has_errors = self.err.tell() > 0
        self.out.close()
        self.err.close()
        os.replace(self.out_tmp, self.output)
        if has_errors:
            os.replace(self.err_tmp, self.errors)
        else:
            self.err_tmp.unlink(missing_ok=True)
            self.errors.unlink(missing_ok=True)
        self.ckpt.unlink(missing_ok=True)
        return has_errors

    def close(self) -> None:
        self.out.close()
        self.err.close()


def run_file(
    task,
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    *,
    fields: Sequence[str] | None = None,
    chunk_size: int | None = None,
    workers: int = 1,
    worker_config: dict | None = None,
    resume: bool = False,
    on_error: str = "raise",
    errors_path: str | os.PathLike | None = None,
    progress: bool | None = None,
) -> JobSummary:
    """Run ``task`` over a file into JSON lines, in input order.

    ``on_error="raise"`` stops at the first bad record (naming file and line;
    what was done so far is kept for ``resume=True``); ``"skip"`` writes each
    bad record to ``errors_path`` (default ``<output>.errors.jsonl``) and goes on.
    """
    from tqdm.auto import tqdm

    if on_error not in ON_ERROR:
        raise InvalidInputError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    if not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"workers must be a positive int, got {workers!r}")
    input_path, output_path = Path(input_path), Path(output_path)
    if not input_path.is_file():
        raise InvalidInputError(f"input file {str(input_path)!r} does not exist")
    errors_path = Path(errors_path) if errors_path else output_path.with_name(output_path.name + ".errors.jsonl")
    fields = tuple(fields or task.input_fields)
    chunk_size = chunk_size or max(64, task.batch_size * 8)
    summary = JobSummary(str(input_path), str(output_path))

    if resume and output_path.exists() and not output_path.with_name(output_path.name + ".partial.ckpt").exists():
        summary.messages.append(f"{output_path} is complete; nothing to resume")
        return summary
    files = _Checkpointed(output_path, errors_path, input_path, resume)
    summary.resumed_from = files.done
    records = read_records(input_path, fields)
    for _ in range(files.done):
        next(records, None)

    pool = _Workers(worker_config, workers) if workers > 1 else None
    chunks = iter_chunks(records, chunk_size)
    outcomes = pool.map(chunks, str(input_path)) if pool else (process_chunk(task, c, str(input_path)) for c in chunks)
    total = count_records(input_path)
    try:
        with tqdm(total=total, initial=files.done, unit="items", dynamic_ncols=True,
                  disable=None if progress is None else not progress) as bar:
            done = files.done
            for chunk in outcomes:
                results, errors = [], []
                for record, result, error in chunk:
                    if error is None:
                        results.append(result)
                        continue
                    if on_error == "raise":
                        files.write(results, [], done + len(results))  # all before it were good
                        raise InvalidInputError(
                            f"{error}. Fix the line and rerun with --resume (resume=True) to continue, "
                            "or use --on-error skip"
                        )
                    errors.append({"line": record.line, "error": error, "input": record.item})
                done += len(chunk)
                files.write(results, errors, done)
                summary.processed += len(results)
                summary.skipped += len(errors)
                bar.update(len(chunk))
        if files.finish():
            summary.errors_file = str(errors_path)
            summary.messages.append(f"{summary.skipped} bad record(s) skipped; see {errors_path}")
    finally:
        files.close()
        if pool:
            pool.close()
    for message in summary.messages:
        logger.warning(message)
    return summary


def iter_chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of up to ``size`` items from any iterable, lazily."""
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk

