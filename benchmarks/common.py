"""Shared by the benchmark scripts: data reading, tables, and writing a
script's own section of benchmarks/RESULTS.md, with its figures as JSON in benchmarks/figures/
(what benchmarks/documents.py copies into the README and the task documents)."""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform
import re
import time
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
FIGURES = "figures"  # the folder beside RESULTS.md that holds one <section>.json per section


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


def cpu_kind(text: str | None = None) -> tuple[str, str]:
    """A short key and a label for the kind of CPU :func:`cpu` describes (``text``: its output),
    by vendor and the widest vector unit oneDNN and MKL pick kernels for: ``("intel_amx", "Intel,
    AVX-512 and AMX")``, ``("amd_avx512", "AMD, AVX-512")``, ``("amd_avx2", "AMD, AVX2")``.  A
    benchmark whose figures depend on those kernels keeps one section per kind."""
    text = cpu() if text is None else text
    model, _, flags = text.rpartition(" (")
    flags = set(flags.rstrip(")").split())
    vendor = ("intel", "Intel") if "intel" in model.lower() else ("amd", "AMD") if "amd" in model.lower() \
        else ("cpu", "other CPU")
    unit = (("amx", "AVX-512 and AMX") if "amx_bf16" in flags else ("avx512", "AVX-512") if "avx512f" in flags
            else ("avx2", "AVX2") if "avx2" in flags else ("novec", "no AVX2"))
    return f"{vendor[0]}_{unit[0]}", f"{vendor[1]}, {unit[1]}"


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
    """Replace (or append) the section delimited by BEGIN/END markers for ``name``, and write its
    figures to ``figures/<name>.json`` beside ``path`` (:func:`section_figures`)."""
    from taskflow.files import atomic_write_text

    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\nEach section is written by the script it names; do not edit by hand.\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    atomic_write_text(path, text)
    write_figures(section_figures(name, body), path.parent / FIGURES)


_SECTION = re.compile(r"^<!-- BEGIN (\S+) -->\n(.*?)\n<!-- END \1 -->$", re.S | re.M)
_TABLE_RULE = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+\s*$")
_HEADING = re.compile(r"^(#{2,3})\s+(.*?)\s*$")


def sections(text: str) -> dict[str, str]:
    """Every section of a RESULTS.md text, name -> body (between its BEGIN and END lines)."""
    return {m.group(1): m.group(2) for m in _SECTION.finditer(text)}


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table line as written (``\\|`` is a pipe inside a cell)."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def section_figures(name: str, body: str) -> dict:
    """A section's figures as data: its name, its text before the first table (the paragraph that
    says machine, date and command), and every Markdown table with the nearest ``##``/``###``
    heading above it (or None), its columns and its rows, each cell as written."""
    lines = body.strip().splitlines()
    tables, heading, first_table, i = [], None, None, 0
    while i < len(lines):
        match = _HEADING.match(lines[i])
        if match:
            heading = match.group(2)
        if lines[i].startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            first_table = i if first_table is None else first_table
            columns, rows, i = _cells(lines[i]), [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            tables.append({"heading": heading, "columns": columns, "rows": rows})
            continue
        i += 1
    preamble = "\n".join(lines[:first_table] if first_table is not None else lines).strip()
    return {"section": name, "preamble": preamble, "tables": tables}


def figures_json(figures: dict) -> str:
    """:func:`section_figures`' dict as the text of its JSON file: keys in a fixed order, non-ASCII
    as it is, one table row a line (so a new run's diff shows the rows that changed)."""
    def dump(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    tables = []
    for table in figures["tables"]:
        rows = ",\n".join(f"        {dump(row)}" for row in table["rows"])
        tables.append(
            "    {\n"
            f'      "heading": {dump(table["heading"])},\n'
            f'      "columns": {dump(table["columns"])},\n'
            + (f'      "rows": [\n{rows}\n      ]\n' if table["rows"] else '      "rows": []\n')
            + "    }")
    body = ",\n".join(tables)
    return (
        "{\n"
        f'  "section": {dump(figures["section"])},\n'
        f'  "preamble": {dump(figures["preamble"])},\n'
        + (f'  "tables": [\n{body}\n  ]\n' if tables else '  "tables": []\n')
        + "}\n")


def write_figures(figures: dict, folder: Path) -> Path:
    """Write ``figures`` to ``folder/<section>.json`` (into place: readers see the old file or the new)."""
    from taskflow.files import atomic_write_text

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{figures['section']}.json"
    atomic_write_text(path, figures_json(figures))
    return path


def read_labelled_tsv(path) -> tuple[list[str], list[int]]:
    """``label<TAB>text`` files with a header row, as in ../shared/data/sentiment."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r["text"] for r in rows], [int(r["label"]) for r in rows]
