"""Outputs and inputs that are not regular files: devices, FIFOs, descriptors and symbolic links.

A character device or a FIFO named as ``--output`` (or reached through a link) is written
directly, as results come, and is never replaced by a regular file, nor gets side files
beside it; a link to a regular file writes that file and stays a link.  A FIFO or a process
substitution as ``--input`` is read as a stream.  The devices are reached through links made
in the test's folder, so no test ever writes at /dev's own names (a regression would replace a
link, not the machine's /dev/null).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InvalidInputError

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/null and /dev/full")]

TEXTS = [f"第{i}条：{'服务很好' if i % 2 else '太差了'}" for i in range(300)]


def _lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _device(tmp_path, name="null"):
    """A link in the test's folder to /dev/<name>."""
    link = tmp_path / name
    link.symlink_to(f"/dev/{name}")
    return link


def _untouched(link, device):
    """The link is still a link to the device, the device still a character device."""
    assert link.is_symlink() and os.readlink(link) == device, f"{link} was replaced"
    assert stat.S_ISCHR(os.stat(device).st_mode)


def _input(tmp_path, texts=TEXTS):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return source


def _stdin(monkeypatch, text):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))


@pytest.mark.parametrize("way", ["texts", "stdin", "job"])
def test_a_device_as_output_is_written_directly_and_never_replaced(tiny_sentiment, tmp_path, monkeypatch, capsys, way):
    link = _device(tmp_path)
    args = {"texts": ["很好", "很差"], "stdin": ["--input", "-"], "job": ["--input", str(tmp_path / "in.txt")]}[way]
    if way == "job":
        _input(tmp_path)
    if way == "stdin":
        _stdin(monkeypatch, "很好\n很差\n")
    assert main(["senta", *args, "--output", str(link), "--task-path", str(tiny_sentiment), "--quiet"]) == 0
    _untouched(link, "/dev/null")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["null"] + (["in.txt"] if way == "job" else [])), \
        "side files or a temporary file were left beside the device"
    captured = capsys.readouterr()
    assert captured.out == ""
    if way == "job":   # a job could otherwise be resumed: it says it cannot
        assert "is a character device: results are written into it directly" in captured.err
        assert "cannot be resumed" in captured.err


def test_a_full_device_is_one_clear_error_and_stays_a_device(tiny_sentiment, tmp_path, capsys):
    link = _device(tmp_path, "full")
    for args in (["很好"], ["--input", str(_input(tmp_path))]):
        assert main(["senta", *args, "--output", str(link), "--task-path", str(tiny_sentiment), "--quiet"]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("taskflow: error:")]
        assert len(errors) == 1 and "No space left on device" in errors[0], errors
        _untouched(link, "/dev/full")
    assert "--resume" not in errors[0] and "no checkpoint to resume from" in errors[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "in.txt"]


def _read_fifo(path, into: list):
    def read():
        with open(path, "rb") as handle:
            into.append(handle.read())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_fifo_as_output_gets_every_line_and_stays_a_fifo(tiny_sentiment, tmp_path, capsys):
    source = _input(tmp_path)
    reference = tmp_path / "reference.jsonl"
    args = ["senta", "--input", str(source), "--task-path", str(tiny_sentiment), "--quiet", "--batch-size", "8"]
    assert main([*args, "--output", str(reference)]) == 0
    fifo = tmp_path / "results"
    os.mkfifo(fifo)
    for run in (args, ["senta", "很好", "--task-path", str(tiny_sentiment)]):
        got = []
        reader = _read_fifo(fifo, got)
        assert main([*run, "--output", str(fifo)]) == 0
        reader.join(30)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
        if run is args:
            assert got == [reference.read_bytes()]
        else:
            assert [r["text"] for r in _lines(got[0].decode("utf-8"))] == ["很好"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "reference.jsonl", "results"]
    capsys.readouterr()


@pytest.mark.parametrize("way", ["texts", "job"])
def test_a_link_to_a_file_writes_that_file_and_stays_a_link(tiny_sentiment, tmp_path, capsys, way):
    (tmp_path / "data").mkdir()
    real = tmp_path / "data" / "out.jsonl"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "out.jsonl"
    link.symlink_to(real)
    args = ["很好", "很差"] if way == "texts" else ["--input", str(_input(tmp_path, ["很好", "很差"]))]
    assert main(["senta", *args, "--output", str(link), "--task-path", str(tiny_sentiment), "--quiet"]) == 0
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert [r["text"] for r in _lines(real.read_text(encoding="utf-8"))] == ["很好", "很差"]
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["out.jsonl"]


def test_a_job_into_a_device_cannot_resume_and_names_its_errors_file(tiny_sentiment, tmp_path, capsys):
    link = _device(tmp_path)
    source = _input(tmp_path, ["很好", "", "很差"])
    args = ["senta", "--input", str(source), "--output", str(link), "--task-path", str(tiny_sentiment), "--quiet"]
    assert main([*args, "--resume"]) == 2
    assert "cannot be resumed; run without --resume" in capsys.readouterr().err
    assert main([*args, "--on-error", "skip"]) == 2     # the default errors file would sit beside the device
    assert "needs --errors FILE" in capsys.readouterr().err
    errors = tmp_path / "errors.jsonl"
    assert main([*args, "--on-error", "skip", "--errors", str(errors)]) == 0
    assert [r["line"] for r in _lines(errors.read_text(encoding="utf-8"))] == [2]
    assert main([*args]) == 2                           # a bad record stops it: run again, no --resume
    err = capsys.readouterr().err
    assert "in.txt:2: empty line" in err and "Fix the line and run the job again" in err and "--resume" not in err
    _untouched(link, "/dev/null")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["errors.jsonl", "in.txt", "null"]


def test_a_device_as_errors_file_of_a_checkpointed_job_is_refused(tiny_sentiment, tmp_path, capsys):
    link = _device(tmp_path)
    target = tmp_path / "out.jsonl"
    assert main(["senta", "--input", str(_input(tmp_path)), "--output", str(target), "--errors", str(link),
                 "--task-path", str(tiny_sentiment), "--quiet"]) == 2
    assert "is a character device: a job's errors file is checkpointed" in capsys.readouterr().err
    _untouched(link, "/dev/null")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "null"]


@pytest.mark.slow
def test_dev_stdout_as_output_writes_into_standard_output(tiny_sentiment, tmp_path):
    """`taskflow ... --output /dev/stdout > file`: the results land in that file, which stays the one the shell
    opened (not replaced behind it), after what was written there before."""
    source = _input(tmp_path, ["很好", "很差"])
    stdout = tmp_path / "stdout.txt"
    stdout.write_text("before\n", encoding="utf-8")
    inode = os.stat(stdout).st_ino
    env = {**os.environ, "PPNLP_HOME": os.environ["PPNLP_HOME"]}
    for args in (["--input", str(source)], ["很好", "很差"]):
        with open(stdout, "ab") as handle:
            run = subprocess.run([sys.executable, "-m", "taskflow.cli", "senta", *args, "--output", "/dev/stdout",
                                  "--task-path", str(tiny_sentiment), "--quiet"], stdout=handle, stderr=subprocess.PIPE,
                                 text=True, env=env, timeout=120)
        assert run.returncode == 0, run.stderr
    assert os.stat(stdout).st_ino == inode
    lines = stdout.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "before" and [json.loads(line)["text"] for line in lines[1:]] == ["很好", "很差"] * 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "stdout.txt"]


# ---------------------------------------------------------------- a FIFO as input

def _write_fifo(path, text):
    def write():
        with open(path, "wb") as handle:
            handle.write(text.encode("utf-8"))
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_a_fifo_as_input_is_read_as_a_stream(tiny_sentiment, tmp_path, capsys):
    fifo = tmp_path / "texts"
    os.mkfifo(fifo)
    args = ["senta", "--input", str(fifo), "--task-path", str(tiny_sentiment)]
    writer = _write_fifo(fifo, "很好\n很差\n")
    assert main(args) == 0
    writer.join(30)
    assert [(r["line"], r["text"]) for r in _lines(capsys.readouterr().out)] == [(1, "很好"), (2, "很差")]
    target = tmp_path / "out.jsonl"
    writer = _write_fifo(fifo, "很好\n")
    assert main([*args, "--output", str(target)]) == 0
    writer.join(30)
    assert [r["text"] for r in _lines(target.read_text(encoding="utf-8"))] == ["很好"]
    assert "is a FIFO" in capsys.readouterr().err   # said: read once, no checkpoint, no resume
    with pytest.raises(SystemExit):
        main([*args, "--output", str(target), "--resume"])
    assert "read once as a stream, with no checkpoint" in capsys.readouterr().err
    fifo_jsonl = tmp_path / "records.jsonl"         # its extension names its format, as a file's does
    os.mkfifo(fifo_jsonl)
    writer = _write_fifo(fifo_jsonl, '{"id": 7, "review": "很好"}\n')
    assert main(["senta", "--input", str(fifo_jsonl), "--field", "review", "--task-path", str(tiny_sentiment)]) == 0
    writer.join(30)
    assert [(r["id"], r["text"]) for r in _lines(capsys.readouterr().out)] == [(7, "很好")]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.slow
def test_a_process_substitution_as_input_is_read(tiny_sentiment, tmp_path):
    """`taskflow senta --input <(zcat texts.gz)`: the shell passes /dev/fd/N, a pipe."""
    import gzip
    import shlex

    packed = tmp_path / "texts.txt.gz"
    packed.write_bytes(gzip.compress("很好\n很差\n".encode("utf-8")))
    command = (f"{shlex.quote(sys.executable)} -m taskflow.cli senta --task-path {shlex.quote(str(tiny_sentiment))} "
               f"--input <(gzip -dc {shlex.quote(str(packed))})")
    run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert [r["text"] for r in _lines(run.stdout)] == ["很好", "很差"]


def test_a_job_on_a_fifo_says_it_needs_a_regular_file(tiny_sentiment, tmp_path):
    fifo = tmp_path / "texts.txt"
    os.mkfifo(fifo)
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment)
    with pytest.raises(InvalidInputError, match="is a FIFO .* can be read only once; a job reads its input file again"):
        flow.predict_file(fifo, tmp_path / "out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["texts.txt"]
