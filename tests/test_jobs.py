"""Batch jobs over files (taskflow.jobs), Taskflow.stream and the CLI flags that drive them."""

import itertools
import json

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InvalidInputError

TEXTS = [f"第{i}条：{'服务很好，干净' if i % 3 else '等了很久，太差了'}" for i in range(700)]


@pytest.fixture(scope="module")
def flow(tiny_sentiment):
    return Taskflow("sentiment_analysis", task_path=tiny_sentiment, batch_size=16)


@pytest.fixture(scope="module")
def expected(flow):
    return flow(TEXTS)


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _txt(path, texts):
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def test_txt_to_jsonl_in_order(flow, expected, tmp_path):
    source = _txt(tmp_path / "in.txt", TEXTS)
    summary = flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=50, progress=False)
    assert _read_jsonl(tmp_path / "out.jsonl") == expected
    assert summary.processed == len(TEXTS) and summary.skipped == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]


def test_jsonl_csv_tsv_inputs(flow, expected, tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"id": i, "review": t}, ensure_ascii=False) + "\n"
                                               for i, t in enumerate(TEXTS[:30])), encoding="utf-8")
    flow.predict_file(tmp_path / "in.jsonl", tmp_path / "a.jsonl", fields=["review"], progress=False)
    assert _read_jsonl(tmp_path / "a.jsonl") == expected[:30]
    (tmp_path / "in.csv").write_text("id,text\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(TEXTS[:30])), encoding="utf-8")
    flow.predict_file(tmp_path / "in.csv", tmp_path / "b.jsonl", progress=False)
    assert _read_jsonl(tmp_path / "b.jsonl") == expected[:30]
    (tmp_path / "in.tsv").write_text("text\tid\n" + "".join(f"{t}\t{i}\n" for i, t in enumerate(TEXTS[:30])), encoding="utf-8")
    flow.predict_file(tmp_path / "in.tsv", tmp_path / "c.jsonl", progress=False)
    assert _read_jsonl(tmp_path / "c.jsonl") == expected[:30]


def test_bad_line_stops_the_job_and_resume_continues_after_the_fix(flow, expected, tmp_path):
    texts = list(TEXTS)
    texts[400] = "   "
    source, target = _txt(tmp_path / "in.txt", texts), tmp_path / "out.jsonl"
    with pytest.raises(InvalidInputError, match=r"in\.txt:401: .*empty.*--resume"):
        flow.predict_file(source, target, chunk_size=64, progress=False)
    assert not target.exists(), "a stopped job must not look finished"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")  # the user fixes line 401
    summary = flow.predict_file(source, target, chunk_size=64, resume=True, progress=False)
    assert summary.resumed_from == 400
    assert _read_jsonl(target) == expected


def test_skip_records_bad_lines_and_keeps_the_rest(flow, expected, tmp_path, caplog):
    lines = list(TEXTS[:100])
    lines[10], lines[55] = "", "\t "
    source = _txt(tmp_path / "in.txt", lines)
    (tmp_path / "in.jsonl").write_text('{"text": "很好"}\n{"text": \n[1, 2]\n{"title": "x"}\n', encoding="utf-8")
    summary = flow.predict_file(source, tmp_path / "out.jsonl", on_error="skip", progress=False)
    assert summary.skipped == 2 and summary.processed == 98
    assert "2 bad record(s) skipped" in caplog.text, "skipping is never silent"
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [11, 56]
    assert all("empty" in e["error"] for e in errors)
    kept = [r for i, r in enumerate(expected[:100]) if i not in (10, 55)]
    assert _read_jsonl(tmp_path / "out.jsonl") == kept

    summary = flow.predict_file(tmp_path / "in.jsonl", tmp_path / "j.jsonl", on_error="skip", progress=False)
    errors = _read_jsonl(tmp_path / "j.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [2, 3, 4]
    assert "not valid JSON" in errors[0]["error"] and "must be a str" in errors[1]["error"]
    assert "no key 'text'" in errors[2]["error"]
    assert [r["text"] for r in _read_jsonl(tmp_path / "j.jsonl")] == ["很好"]


def test_interrupted_job_resumes_without_loss_or_duplicates(flow, expected, tmp_path, monkeypatch):
    source, target = _txt(tmp_path / "in.txt", TEXTS), tmp_path / "out.jsonl"
    real, calls = flow.task.run_items, []

    def crash_on_fourth_chunk(items):
        calls.append(len(items))
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(items)

    monkeypatch.setattr(flow.task, "run_items", crash_on_fourth_chunk)
    with pytest.raises(KeyboardInterrupt):
        flow.predict_file(source, target, chunk_size=100, progress=False)
    monkeypatch.setattr(flow.task, "run_items", real)
    partial = tmp_path / "out.jsonl.partial"
    assert len(_read_jsonl(partial)) == 300
    with open(partial, "a", encoding="utf-8") as handle:
        handle.write('{"text": "half a li')  # a crash in the middle of a write
    summary = flow.predict_file(source, target, chunk_size=100, resume=True, progress=False)
    assert summary.resumed_from == 300 and summary.processed == 400
    assert _read_jsonl(target) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]
    again = flow.predict_file(source, target, resume=True, progress=False)
    assert again.processed == 0 and "complete" in again.messages[0]


@pytest.mark.slow
def test_two_worker_processes_keep_order(flow, expected, tmp_path):
    source = _txt(tmp_path / "in.txt", TEXTS)
    flow.predict_file(source, tmp_path / "out.jsonl", workers=2, chunk_size=64, progress=False)
    assert _read_jsonl(tmp_path / "out.jsonl") == expected


def test_stream_is_lazy_and_ordered(flow, expected):
    endless = (TEXTS[i % len(TEXTS)] for i in itertools.count())
    first = list(itertools.islice(flow.stream(endless, chunk_size=32), 100))
    assert first == expected[:100]


def test_stream_error_index_counts_from_the_start(flow):
    items = TEXTS[:70] + [None]
    with pytest.raises(TypeError) as info:
        list(flow.stream(items, chunk_size=32))
    assert info.value.index == 70 and "text #70" in str(info.value)


def test_bad_job_options(flow, tmp_path):
    source = _txt(tmp_path / "in.txt", TEXTS[:3])
    with pytest.raises(InvalidInputError, match="on_error"):
        flow.predict_file(source, tmp_path / "o.jsonl", on_error="ignore")
    with pytest.raises(InvalidInputError, match="workers"):
        flow.predict_file(source, tmp_path / "o.jsonl", workers=0)
    with pytest.raises(InvalidInputError, match="does not exist"):
        flow.predict_file(tmp_path / "missing.txt", tmp_path / "o.jsonl")


def test_cli_flags(tiny_sentiment, expected, tmp_path, capsys):
    lines = list(TEXTS[:50])
    lines[5] = ""
    source = _txt(tmp_path / "in.txt", lines)
    args = ["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "out.jsonl"),
            "--task-path", str(tiny_sentiment), "--batch-size", "16", "--quiet"]
    assert main(args) == 2
    assert "in.txt:6" in capsys.readouterr().err
    assert main(args + ["--on-error", "skip", "--errors", str(tmp_path / "bad.jsonl")]) == 0
    assert [e["line"] for e in _read_jsonl(tmp_path / "bad.jsonl")] == [6]
    assert len(_read_jsonl(tmp_path / "out.jsonl")) == 49
    err = capsys.readouterr().err
    assert "1 bad record(s) skipped; see" in err and "bad.jsonl" in err
    assert "it/s" not in err and "items/s" not in err, "--quiet: no progress bar"
