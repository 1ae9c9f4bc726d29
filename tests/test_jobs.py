"""Batch jobs over files (taskflow.jobs), Taskflow.stream and the CLI flags that drive them.

Input faults over the four formats are in test_job_inputs.py; process faults
(killed and hung workers, signals, full disk) in test_job_faults.py.
"""

import itertools
import json

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InvalidInputError, JobError
from taskflow.jobs import run_file

pytestmark = pytest.mark.timeout(120)

TEXTS = [f"第{i}条：{'服务很好，干净' if i % 3 else '等了很久，太差了'}" for i in range(700)]


@pytest.fixture(scope="module")
def flow(tiny_sentiment):
    return Taskflow("sentiment_analysis", task_path=tiny_sentiment, batch_size=16)


@pytest.fixture(scope="module")
def expected(flow):
    return flow(TEXTS)


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _results(path, lines=None):
    """The task results of an output file, after checking each record's input line."""
    rows = _read_jsonl(path)
    got = [row.pop("line") for row in rows]
    assert got == (lines if lines is not None else list(range(1, len(rows) + 1)))
    return rows


def _job(flow, source, target, **options):
    """Taskflow.predict_file with run_file's reading options (encoding, id_fields...), as the CLI runs it."""
    return run_file(flow.task, source, target, worker_spec=flow.spec, progress=False, **options)


def _txt(path, texts):
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def test_txt_to_jsonl_in_order(flow, expected, tmp_path):
    source = _txt(tmp_path / "in.txt", TEXTS)
    summary = flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=50, progress=False)
    assert _results(tmp_path / "out.jsonl") == expected
    assert summary.read == summary.processed == len(TEXTS) and summary.skipped == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]


def test_jsonl_csv_tsv_inputs_carry_their_other_fields(flow, expected, tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"id": i, "review": t}, ensure_ascii=False) + "\n"
                                               for i, t in enumerate(TEXTS[:30])), encoding="utf-8")
    flow.predict_file(tmp_path / "in.jsonl", tmp_path / "a.jsonl", fields=["review"], progress=False)
    assert _read_jsonl(tmp_path / "a.jsonl") == [{"line": i + 1, "id": i, **r} for i, r in enumerate(expected[:30])]
    (tmp_path / "in.csv").write_text("id,text\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(TEXTS[:30])), encoding="utf-8")
    flow.predict_file(tmp_path / "in.csv", tmp_path / "b.jsonl", progress=False)
    # A CSV's line 1 is its header; values stay strings, as in the file.
    assert _read_jsonl(tmp_path / "b.jsonl") == [{"line": i + 2, "id": str(i), **r} for i, r in enumerate(expected[:30])]
    (tmp_path / "in.tsv").write_text("text\tid\n" + "".join(f"{t}\t{i}\n" for i, t in enumerate(TEXTS[:30])), encoding="utf-8")
    flow.predict_file(tmp_path / "in.tsv", tmp_path / "c.jsonl", progress=False)
    assert _read_jsonl(tmp_path / "c.jsonl") == _read_jsonl(tmp_path / "b.jsonl")


def test_id_fields_choose_what_is_carried_and_collisions_are_renamed(flow, tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("id,text,label,note\na1,很好,1,x\na2,太差,0,y\n", encoding="utf-8")
    flow.predict_file(source, tmp_path / "all.jsonl", progress=False)
    first = _read_jsonl(tmp_path / "all.jsonl")[0]
    # The gold label does not overwrite the predicted one: it comes as input_label.
    assert list(first) == ["line", "id", "input_label", "note", "text", "label", "score"]
    assert first["input_label"] == "1" and first["label"] in ("positive", "negative")
    _job(flow, source, tmp_path / "ids.jsonl", id_fields=["id"])
    assert [list(r) for r in _read_jsonl(tmp_path / "ids.jsonl")] == [["line", "id", "text", "label", "score"]] * 2
    _job(flow, source, tmp_path / "none.jsonl", id_fields=[])
    assert list(_read_jsonl(tmp_path / "none.jsonl")[0]) == ["line", "text", "label", "score"]
    with pytest.raises(InvalidInputError, match="no column 'key' for --id-field"):
        _job(flow, source, tmp_path / "x.jsonl", id_fields=["key"])
    with pytest.raises(InvalidInputError, match="a .txt file has no named fields"):
        _job(flow, _txt(tmp_path / "in.txt", ["很好"]), tmp_path / "x.jsonl", id_fields=["id"])


def test_results_that_are_not_dicts_are_wrapped(tiny_models, tmp_path):
    seg = Taskflow("word_segmentation", task_path=tiny_models["word_segmentation"])
    source = _txt(tmp_path / "in.txt", ["李明在北京", "今天很好"])
    seg.predict_file(source, tmp_path / "out.jsonl", progress=False)
    rows = _read_jsonl(tmp_path / "out.jsonl")
    assert [list(r) for r in rows] == [["line", "result"]] * 2
    assert [r["result"] for r in rows] == seg(["李明在北京", "今天很好"])


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
    assert _results(target) == expected


def test_skip_records_bad_lines_with_their_line_numbers(flow, expected, tmp_path, caplog):
    lines = list(TEXTS[:100])
    lines[10], lines[55] = "", "\t "
    source = _txt(tmp_path / "in.txt", lines)
    summary = flow.predict_file(source, tmp_path / "out.jsonl", on_error="skip", progress=False)
    assert summary.skipped == 2 and summary.processed == 98 and summary.read == 100
    assert "2 bad record(s) skipped" in caplog.text, "skipping is never silent"
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [11, 56]
    assert all("empty" in e["error"] for e in errors)
    kept = [i for i in range(100) if i not in (10, 55)]
    # Each output record names its input line: skipping does not shift rows.
    assert _results(tmp_path / "out.jsonl", [i + 1 for i in kept]) == [expected[i] for i in kept]

    (tmp_path / "in.jsonl").write_text('{"text": "很好"}\n{"text": \n[1, 2]\n{"title": "x", "id": 7}\n', encoding="utf-8")
    flow.predict_file(tmp_path / "in.jsonl", tmp_path / "j.jsonl", on_error="skip", progress=False)
    errors = _read_jsonl(tmp_path / "j.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [2, 3, 4]
    assert "not valid JSON" in errors[0]["error"] and errors[0]["input"] == '{"text": '
    assert "must be a str" in errors[1]["error"] and errors[1]["input"] == [1, 2]
    assert "no key 'text'" in errors[2]["error"] and errors[2]["id"] == 7, "an error record carries the input's fields too"
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
    assert _results(target) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"]
    again = flow.predict_file(source, target, resume=True, progress=False)
    assert again.processed == 0 and "complete" in again.messages[0]


def test_resume_is_byte_exact_and_checks_its_settings(flow, tmp_path, monkeypatch):
    source = tmp_path / "in.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in enumerate(TEXTS[:300])), encoding="utf-8")
    flow.predict_file(source, tmp_path / "clean.jsonl", chunk_size=64, progress=False)
    real, calls = flow.task.run_items, []

    def crash_on_third_chunk(items):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(items)

    monkeypatch.setattr(flow.task, "run_items", crash_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=64, progress=False)
    monkeypatch.setattr(flow.task, "run_items", real)
    with pytest.raises(JobError, match="other settings.*id_fields"):
        _job(flow, source, tmp_path / "out.jsonl", chunk_size=64, resume=True, id_fields=["id"])
    flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=64, resume=True, progress=False)
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


def test_a_job_stopped_while_moving_its_files_is_finished_by_resume(flow, tmp_path):
    source = _txt(tmp_path / "in.txt", TEXTS[:20])
    flow.predict_file(source, tmp_path / "out.jsonl", progress=False)
    # The state a job leaves when it stops between renaming its output and removing its checkpoint:
    (tmp_path / "out.jsonl.partial.ckpt").write_text("{}")
    summary = flow.predict_file(source, tmp_path / "out.jsonl", resume=True, progress=False)
    assert "complete" in summary.messages[0] and not (tmp_path / "out.jsonl.partial.ckpt").exists()


@pytest.mark.slow
def test_two_worker_processes_keep_order(flow, expected, tmp_path):
    source = _txt(tmp_path / "in.txt", TEXTS)
    summary = flow.predict_file(source, tmp_path / "out.jsonl", workers=2, chunk_size=64, progress=False)
    assert _results(tmp_path / "out.jsonl") == expected
    assert summary.worker_faults == []


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
    with pytest.raises(InvalidInputError, match="is the input file"):
        flow.predict_file(source, source)
    with pytest.raises(InvalidInputError, match="is a directory"):
        flow.predict_file(source, tmp_path)


def test_cli_flags(tiny_sentiment, tmp_path, capsys):
    lines = list(TEXTS[:50])
    lines[5] = ""
    source = _txt(tmp_path / "in.txt", lines)
    args = ["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "out.jsonl"),
            "--task-path", str(tiny_sentiment), "--batch-size", "16", "--quiet"]
    assert main(args) == 2
    assert "in.txt:6" in capsys.readouterr().err
    assert main(args + ["--on-error", "skip", "--errors", str(tmp_path / "bad.jsonl")]) == 0
    assert [e["line"] for e in _read_jsonl(tmp_path / "bad.jsonl")] == [6]
    assert [r["line"] for r in _read_jsonl(tmp_path / "out.jsonl")] == [i for i in range(1, 51) if i != 6]
    err = capsys.readouterr().err
    assert err.count("bad record(s) skipped") == 1, f"said once, not by the log and the CLI both:\n{err}"
    assert "1 bad record(s) skipped, all because: empty line" in err and "bad.jsonl" in err
    assert "it/s" not in err and "items/s" not in err, "--quiet: no progress bar"


def test_cli_says_once_when_every_record_fails_the_same_way(tiny_sentiment, tmp_path, capsys):
    """A wrong --field fails every line: one line says why, not one per record, and the exit status says so."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"review": t}, ensure_ascii=False) + "\n" for t in TEXTS[:40]),
                      encoding="utf-8")
    args = ["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "out.jsonl"),
            "--task-path", str(tiny_sentiment), "--quiet", "--on-error", "skip"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("taskflow: warning: every record (40) failed the same way: no key 'text' (has 'review')")
    assert len(_read_jsonl(tmp_path / "out.jsonl.errors.jsonl")) == 40, "the records are kept"
    # Two causes: both counted, the commoner named.
    lines = [{"text": t} for t in TEXTS[:10]] + [{"review": "x"}] * 3 + [{"text": ""}]
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "4 bad record(s) skipped (3 because: no key 'text' (has 'review')" in err


@pytest.mark.parametrize("flags", [["--workers", "2"], ["--resume"], ["--on-error", "skip"], ["--errors", "e.jsonl"]])
def test_cli_refuses_job_options_without_output(tiny_sentiment, tmp_path, capsys, flags):
    source = _txt(tmp_path / "in.txt", TEXTS[:3])
    with pytest.raises(SystemExit) as info:
        main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment), *flags])
    assert info.value.code == 2
    assert f"{flags[0]} need --input FILE and --output FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--task-path", str(tiny_sentiment), *flags])


def test_cli_stdout_records_carry_line_and_fields(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a", "text": "很好"}\n{"id": "b", "text": "太差"}\n', encoding="utf-8")
    assert main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["line"], r["id"], r["text"]) for r in rows] == [(1, "a", "很好"), (2, "b", "太差")]
    assert main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment), "--id-field", "id"]) == 0
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--task-path", str(tiny_sentiment), "--encoding", "gbk"])
    assert "--encoding apply to --input FILE" in capsys.readouterr().err


@pytest.mark.parametrize("name, content, message", [
    ("missing.txt", None, "input file '{path}' does not exist"),
    ("sheet.xlsx", b"PK\x03\x04", "unknown input format '.xlsx'; taskflow reads .txt, .jsonl, .ndjson, .csv, .tsv "
                                  "(save the sheet as CSV"),
    ("data.json", b"[]", "a .json file holds one document"),
])
def test_cli_unreadable_input_is_one_clear_error(tiny_sentiment, tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    code = main(["sentiment_analysis", "--input", str(path), "--output", str(tmp_path / "o.jsonl"),
                 "--task-path", str(tiny_sentiment)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert message.format(path=path) in err
    assert not (tmp_path / "o.jsonl.partial").exists()
