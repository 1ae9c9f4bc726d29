"""Shared by the benchmark scripts: data reading, tables, and writing a
script's own section of benchmarks/RESULTS.md."""

from __future__ import annotations

import csv
import datetime
import os
import platform
import re
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


# The vector extensions that decide which kernels oneDNN (and LAC's, jieba's numpy's) can run.
VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8")


def cpu() -> str:
    """The CPU model and its vector extensions, from /proc/cpuinfo (``platform.processor()`` says
    only "x86_64" on Linux, and the same script runs 2x apart on two models)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("", "x86_64", platform.machine()):
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    found = [flag for flag in VECTOR_FLAGS if flag in flags]
    return f"{model} ({' '.join(found) or 'no AVX2'})"


def machine() -> str:
    import importlib.metadata as md

    paddle = md.version("paddlepaddle") if _has("paddlepaddle") else "none"
    return (
        f"{cpu()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"paddlepaddle {paddle}, {datetime.date.today().isoformat()}"
    )


def timed(run, texts: list[str], seconds: float, chunk: int = 256) -> tuple[float, list]:
    """chars/s of ``run(list_of_texts) -> results`` over ``texts`` (whole passes, at least one and at
    least ``seconds``), calling ``run`` on ``chunk`` texts at a time, after one warm-up call (kernels,
    oneDNN primitive caches, a dictionary's first load).  Also the first pass's results."""
    run(texts[:256])
    outputs, chars, start = None, 0, time.perf_counter()
    while outputs is None or time.perf_counter() - start < seconds:
        current = []
        for i in range(0, len(texts), chunk):
            current += run(texts[i:i + chunk])
        outputs = outputs or current
        chars += sum(map(len, texts))
    return chars / (time.perf_counter() - start), outputs


def quiet_load(limit: float = 0.5, wait: float = 120.0) -> float:
    """The 1-minute load average once it falls below ``limit`` (waiting at most ``wait`` s).

    The average decays over about a minute, so right after another command it still shows that
    command; waiting tells a busy machine from a machine that just was."""
    deadline = time.time() + wait
    while os.getloadavg()[0] > limit and time.time() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def load_note(load: float, limit: float = 0.5) -> str:
    """How RESULTS.md states the load at the start of a run (see :func:`quiet_load`)."""
    note = f"1-minute load average at start {load:.1f}"
    if load > limit:
        note += " (**other work was using the cores: absolute figures are low, ratios within the run hold**)"
    return note


def _has(dist: str) -> bool:
    import importlib.metadata as md

    try:
        md.version(dist)
        return True
    except md.PackageNotFoundError:
        return False


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def update_section(name: str, body: str, path: Path = RESULTS) -> None:
    """Replace (or append) the section delimited by BEGIN/END markers for ``name``."""
    from taskflow.files import atomic_write_text

    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\nEach section is written by the script it names; do not edit by hand.\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    atomic_write_text(path, text)


def read_labelled_tsv(path) -> tuple[list[str], list[int]]:
    """``label<TAB>text`` files with a header row, as in ../shared/data/sentiment."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]
