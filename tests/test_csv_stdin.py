"""CSV records whose quoted fields hold line breaks (RFC 4180), in files, jobs and their resume; and
standard input read in every format (``--format``) with ``--field`` and ``--on-error skip``."""

import io
import json
import os
import subprocess
import sys

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InvalidInputError
from taskflow.jobs import run_file
from taskflow.readers import InputFile, count_records

pytestmark = pytest.mark.timeout(180)

# Exported reviews: some hold line breaks inside their quoted text (a line break in a cell).
REVIEWS = [f"第{i}条：{'很好' if i % 2 else '太差了'}" + ("\n下次还来" if i % 3 == 0 else "")
           for i in range(60)]


@pytest.fixture(scope="module")
def flow(tiny_sentiment):
    return Taskflow("sentiment_analysis", task_path=tiny_sentiment, batch_size=8)


def _csv(texts, *, end="\n"):
    """An id,text,stars file of ``texts``, and the line each record starts on (the header is line 1)."""
    rows, starts, line = ["id,text,stars"], [], 2
    for i, text in enumerate(texts):
        rows.append(f'{i},"{text}",{i % 5}')
        starts.append(line)
        line += text.count("\n") + 1
    return end.join(rows) + end, starts


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _stdin(monkeypatch, text: str):
    """Standard input as a pipe holding ``text`` (in-process: a stream with no descriptor)."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(text.encode("utf-8")))))


# ------------------------------------------------------------------ the reader

@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_a_quoted_line_break_is_inside_one_record_numbered_by_its_first_line(tmp_path, end):
    source = tmp_path / "reviews.csv"
    source.write_bytes('id,text,stars{0}1,"很好{0}下次还来",5{0}2,一般,3{0}'.format(end).encode("utf-8"))
    with InputFile(source, ["text"]) as reader:
        records = list(reader)
    assert [(r.line, r.item, r.carried, r.error) for r in records] == [
        (2, f"很好{end}下次还来", {"id": "1", "stars": "5"}, None),   # the line break as the file writes it
        (4, "一般", {"id": "2", "stars": "3"}, None)]
    assert records[0].end == len(f'id,text,stars{end}1,"很好{end}下次还来",5{end}'.encode("utf-8"))
    assert reader.lines == 4 and count_records(source) == 2


def test_a_stray_quote_is_one_bad_line_and_the_lines_after_it_are_records(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text('id,text\n1,"a\nb"\n2,"未闭合\n3,"好"\n4,"还行\n', encoding="utf-8")
    with InputFile(source, ["text"]) as reader:
        records = [(r.line, r.item, r.error) for r in reader]
    assert [line for line, *_ in records] == [2, 4, 5, 6]
    assert records[0][1] == "a\nb" and records[2][1] == "好"
    # Line 4's quote would close on line 5 into no valid record; line 6's is open at the end of the file.
    assert "in.csv:4: a quoted field is not closed on its line; where line 5 closes it" in records[1][2]
    assert "in.csv:6: a quoted field is not closed on its line, nor by the end of the input" in records[3][2]
    assert 'write a quote inside a field as ""' in records[3][2]
    assert count_records(source) == 4


def test_max_record_bytes_bounds_a_quoted_field_over_lines(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text('id,text\n1,"a\nbb\nccc\ndddd"\n2,x\n', encoding="utf-8")
    with InputFile(source, ["text"], max_record_bytes=8) as reader:
        records = list(reader)
    assert records[0].line == 2 and "nor within max_record_bytes (8 bytes" in records[0].error
    assert (records[-1].line, records[-1].item) == (6, "x")
    with InputFile(source, ["text"], max_record_bytes=100) as reader:
        assert [(r.line, r.item) for r in reader] == [(2, "a\nbb\nccc\ndddd"), (6, "x")]


def test_a_bad_line_inside_a_quoted_field_is_the_records_error(tmp_path):
    source = tmp_path / "in.csv"
    source.write_bytes('id,text\n1,"好\n'.encode() + b"\xff\xfe" + '"\n2,好\n'.encode())
    with InputFile(source, ["text"]) as reader:
        records = list(reader)
    assert [r.line for r in records] == [2, 4]
    assert f"{source}:2: line 3, inside a quoted field: not valid utf-8" in records[0].error
    assert records[1].item == "好"


# ------------------------------------------------------------------ jobs

def test_a_job_writes_one_result_per_record_with_the_line_it_starts_on(flow, tmp_path):
    text, starts = _csv(REVIEWS)
    source, target = tmp_path / "reviews.csv", tmp_path / "out.jsonl"
    source.write_text(text, encoding="utf-8")
    summary = run_file(flow.task, source, target, chunk_size=8, progress=False)
    rows = _read_jsonl(target)
    assert summary.read == summary.processed == len(REVIEWS)
    assert [r["line"] for r in rows] == starts
    assert [r["text"] for r in rows] == REVIEWS
    assert [r["label"] for r in rows] == [r["label"] for r in flow(REVIEWS)]
    # A finished job's records are counted as it read them: --resume says it is complete.
    again = run_file(flow.task, source, target, chunk_size=8, progress=False, resume=True)
    assert again.read == 0 and "is complete (60 record(s)" in again.messages[0]


def test_skip_names_a_bad_record_by_its_first_line_and_keeps_the_others(flow, tmp_path):
    texts = list(REVIEWS[:12])
    text, starts = _csv(texts)
    text = text.replace('5,"第5条：很好",0', '5,"第5条：很好"多余,0')   # text after the closing quote
    source, target = tmp_path / "in.csv", tmp_path / "out.jsonl"
    source.write_text(text, encoding="utf-8")
    summary = run_file(flow.task, source, target, chunk_size=4, progress=False, on_error="skip")
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [starts[5]] and f"in.csv:{starts[5]}:" in errors[0]["error"]
    assert [r["line"] for r in _read_jsonl(target)] == starts[:5] + starts[6:]
    assert summary.skipped == 1 and summary.processed == 11
    with pytest.raises(InvalidInputError, match=rf"in\.csv:{starts[5]}: "):
        run_file(flow.task, source, tmp_path / "raise.jsonl", chunk_size=4, progress=False)


def test_a_resumed_job_neither_mixes_nor_repeats_records_over_lines(flow, tmp_path, interrupt_on_call):
    text, starts = _csv(REVIEWS)
    source, target = tmp_path / "reviews.csv", tmp_path / "out.jsonl"
    source.write_text(text, encoding="utf-8")
    run_file(flow.task, source, tmp_path / "clean.jsonl", chunk_size=7, progress=False)
    with interrupt_on_call(flow.task, 4):
        run_file(flow.task, source, target, chunk_size=7, progress=False)
    checkpoint = json.loads((tmp_path / "out.jsonl.partial.ckpt").read_text(encoding="utf-8"))
    done = checkpoint["done"]
    assert 0 < done < len(REVIEWS)
    # The position is the end of the last record done, past its every line.
    assert checkpoint["in_bytes"] == len(text[:text.index(f'\n{done},"')].encode("utf-8")) + 1
    summary = run_file(flow.task, source, target, chunk_size=7, progress=False, resume=True)
    assert summary.resumed_from == done and summary.read == len(REVIEWS) - done
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


def test_a_job_stopped_at_a_stray_quote_resumes_once_it_is_fixed(flow, tmp_path):
    text, starts = _csv(REVIEWS[:20])
    source, target = tmp_path / "in.csv", tmp_path / "out.jsonl"
    source.write_text(text.replace('10,"第10条：太差了",0', '10,"第10条：太差了,0'), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=rf"in\.csv:{starts[10]}: a quoted field is not closed on its line"):
        run_file(flow.task, source, target, chunk_size=4, progress=False)
    assert len(_read_jsonl(tmp_path / "out.jsonl.partial")) == 10
    source.write_text(text, encoding="utf-8")
    summary = run_file(flow.task, source, target, chunk_size=4, progress=False, resume=True)
    assert summary.resumed_from == 10 and [r["line"] for r in _read_jsonl(target)] == starts


# ------------------------------------------------------------------ standard input

def test_stdin_reads_csv_with_its_field_as_a_file_is_read(tiny_sentiment, monkeypatch, capsys):
    text, starts = _csv(REVIEWS[:7])
    _stdin(monkeypatch, text.replace(",text,", ",review,"))
    assert main(["senta", "--input", "-", "--format", "csv", "--field", "review", "--task-path",
                 str(tiny_sentiment)]) == 0
    rows = _lines(capsys.readouterr().out)
    assert [(r["line"], r["id"], r["text"]) for r in rows] == [(s, str(i), t) for i, (s, t) in
                                                               enumerate(zip(starts, REVIEWS[:7]))]
    _stdin(monkeypatch, "".join(json.dumps({"id": i, "review": t}, ensure_ascii=False) + "\n"
                                for i, t in enumerate(REVIEWS[:3])))
    assert main(["senta", "--format", "jsonl", "--field", "review", "--id-field", "id", "--task-path",
                 str(tiny_sentiment)]) == 0      # a pipe with no texts is standard input too
    assert [(r["id"], r["text"]) for r in _lines(capsys.readouterr().out)] == list(enumerate(REVIEWS[:3]))
    _stdin(monkeypatch, "review\tid\n很好\t7\n")
    assert main(["senta", "--input", "-", "--format", "tsv", "--field", "review", "--task-path",
                 str(tiny_sentiment)]) == 0
    assert [(r["line"], r["id"], r["text"]) for r in _lines(capsys.readouterr().out)] == [(2, "7", "很好")]


def test_stdin_skips_bad_records_to_stderr_or_to_the_errors_file(tiny_sentiment, tmp_path, monkeypatch, capsys):
    stdin = '{"text": "很好"}\n{"text": "坏了\n\n{"text": "很差"}\n'
    args = ["senta", "--input", "-", "--format", "jsonl", "--on-error", "skip", "--task-path", str(tiny_sentiment)]
    _stdin(monkeypatch, stdin)
    assert main(args) == 0
    captured = capsys.readouterr()
    assert [(r["line"], r["text"]) for r in _lines(captured.out)] == [(1, "很好"), (4, "很差")]
    said = captured.err.splitlines()
    assert said[0].startswith("taskflow: skipped <stdin>:2: not valid JSON")
    assert said[1].startswith("taskflow: skipped <stdin>:3: empty line")
    assert "2 bad record(s) skipped" in said[2] and len(said) == 3
    # With --output FILE, the bad records go where a job writes them: beside it, as JSON lines.
    target = tmp_path / "out.jsonl"
    _stdin(monkeypatch, stdin)
    assert main([*args, "--output", str(target)]) == 0
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [(e["line"], e["input"]) for e in errors] == [(2, '{"text": "坏了'), (3, "")]
    assert [r["line"] for r in _read_jsonl(target)] == [1, 4]
    assert "see " + str(tmp_path / "out.jsonl.errors.jsonl") in capsys.readouterr().err
    _stdin(monkeypatch, '{"text": "很好"}\n')          # no bad record: an older run's errors file goes
    assert main([*args, "--output", str(target)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
    named = tmp_path / "bad.jsonl"
    _stdin(monkeypatch, stdin)
    assert main([*args, "--errors", str(named)]) == 0
    assert [e["line"] for e in _read_jsonl(named)] == [2, 3]
    assert "taskflow: skipped" not in capsys.readouterr().err
    _stdin(monkeypatch, "\n\n")                          # every record bad: nothing done, as a job says
    assert main(args) == 2
    assert "every record (2) failed the same way: empty line" in capsys.readouterr().err


def test_stdin_refuses_what_it_cannot_do_with_the_fix(tiny_sentiment, tmp_path, monkeypatch, capsys):
    base = ["senta", "--task-path", str(tiny_sentiment)]
    refusals = [
        (["--input", "-", "--field", "review"], "unless --format names jsonl, csv or tsv"),
        (["--input", "-", "--format", "csv", "--errors", str(tmp_path / "e.jsonl")], "add --on-error skip"),
        (["--input", "-", "--format", "csv", "--resume", "--output", str(tmp_path / "o.jsonl")],
         "--resume needs --input FILE"),
        (["--input", "-", "--on-error", "skip", "--workers", "2"], "--workers needs --input FILE"),
        (["很好", "--format", "csv"], "--format apply to --input FILE"),
    ]
    source = tmp_path / "in.txt"
    source.write_text("很好\n", encoding="utf-8")
    refusals.append((["--input", str(source), "--format", "csv"], "rename it to .csv, or pipe it in"))
    for flags, message in refusals:
        _stdin(monkeypatch, "id,review\n1,很好\n")
        with pytest.raises(SystemExit) as info:
            main([*base, *flags])
        assert info.value.code == 2 and message in capsys.readouterr().err, flags
    with pytest.raises(SystemExit):
        main(["senta", "--help"])
    assert "--format {txt,jsonl,csv,tsv}" in capsys.readouterr().out


@pytest.mark.slow
def test_csv_piped_into_the_command_line(tiny_sentiment, tmp_path):
    """`taskflow sentiment_analysis --input - --field text --format csv` over a real pipe, a review with a
    line break in it and a stray quote among them."""
    text, starts = _csv(REVIEWS[:9])
    text = text.replace('4,"第4条：太差了",4', '4,"第4条：太差了,4')
    env = {**os.environ, "PPNLP_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "taskflow.cli", "sentiment_analysis", "--input", "-", "--field",
                          "text", "--format", "csv", "--on-error", "skip", "--task-path", str(tiny_sentiment)],
                         input=text, capture_output=True, text=True, encoding="utf-8", env=env, timeout=150)
    assert run.returncode == 0, run.stderr
    rows = _lines(run.stdout)
    assert [r["line"] for r in rows] == starts[:4] + starts[5:]
    assert [r["text"] for r in rows] == REVIEWS[:4] + REVIEWS[5:9]
    assert run.stderr.startswith(f"taskflow: skipped <stdin>:{starts[4]}: a quoted field is not closed on its line")
