"""Input faults over the four formats: every record ends in the output or in the errors
file with its line number, or the job stops at it with a clear error; never a silent drop.

Each case writes a small file in .txt, .jsonl, .csv and .tsv with one fault, runs the
job with ``on_error="skip"`` and checks the accounting line by line, then with
``on_error="raise"`` and checks that it stops at the first bad line, resumably.
"""

import json
import re

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import InputChangedError, InvalidInputError, JobError
from taskflow.jobs import run_file

pytestmark = pytest.mark.timeout(120)

FORMATS = ["txt", "jsonl", "csv", "tsv"]
TEXTS = [f"第{i}条：{'服务很好' if i % 2 else '太差了'}" for i in range(40)]
HUGE = "长" * (1 << 20)  # 3 MiB of UTF-8: over the 1 MiB default limit


@pytest.fixture(scope="module")
def flow(tiny_sentiment):
    return Taskflow("sentiment_analysis", task_path=tiny_sentiment, batch_size=8)


def _line(fmt, i, text):
    """Record ``i`` of a file in ``fmt``: its text, and an id to join on where the format has fields."""
    return {
        "txt": text,
        "jsonl": json.dumps({"id": i, "text": text}, ensure_ascii=False),
        "csv": f'{i},"{text}"',
        "tsv": f"{i}\t{text}",
    }[fmt]


def _write(path, fmt, lines, *, encoding="utf-8", bom=False, end="\n"):
    header = {"csv": "id,text", "tsv": "id\ttext"}.get(fmt)
    body = "\n".join(([header] if header else []) + lines) + end
    data = body.encode(encoding) if isinstance(body, str) else body
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)
    return 1 if header else 0  # line numbers of records start after the header


def _job(flow, source, target, **options):
    return run_file(flow.task, source, target, chunk_size=16, progress=False, **options)


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _check_accounting(flow, source, fmt, offset, bad_records, *, texts=TEXTS, **options):
    """Run with skip: output + errors hold every record's line exactly once; then with raise."""
    target = source.with_name(source.name + ".out.jsonl")
    summary = _job(flow, source, target, on_error="skip", **options)
    out, errors = _read_jsonl(target), _read_jsonl(target.with_name(target.name + ".errors.jsonl"))
    lines = [offset + i + 1 for i in range(len(texts))]
    assert sorted([r["line"] for r in out] + [e["line"] for e in errors]) == lines, "a record was lost or doubled"
    assert [e["line"] for e in errors] == [offset + i + 1 for i in bad_records]
    assert all(f"{source.name}:{e['line']}:" in e["error"] for e in errors), "each error names file and line"
    assert summary.read == len(texts) and summary.skipped == len(bad_records)
    for row in out:  # each result joins back to its input record
        i = row["line"] - offset - 1
        assert row["text"] == texts[i].strip("\ufeff")
        if fmt != "txt":
            assert str(row["id"]) == str(i)
    if bad_records:
        first = offset + bad_records[0] + 1
        with pytest.raises(InvalidInputError, match=rf"{source.name}:{first}:"):
            _job(flow, source, source.with_name("raise.jsonl"), **options)
        if bad_records[0] == 0:      # nothing done: nothing to resume, and no file is left behind
            assert not list(source.parent.glob("raise.jsonl*"))
        else:
            assert len(_read_jsonl(source.with_name("raise.jsonl.partial"))) == bad_records[0], "the good ones are kept"
            assert source.with_name("raise.jsonl.partial.ckpt").exists(), "a stopped job is resumable"
    return out, errors


# (fault, {format: the faulty record's line, or None where the format has no such fault}, is it a bad record?)
LINE_FAULTS = [
    ("unclosed_quote", {"csv": '9999,"未闭合的引号', "jsonl": '{"id": 9999, "text": "未闭合的引号}'}, True),
    # In .txt and .tsv a quote is a character like any other: the record is fine.
    ("quote_is_text", {"txt": '"未闭合的引号', "tsv": '9999\t"未闭合的引号'}, False),
    ("quote_inside_field", {"csv": '9999,"引号"后面还有字'}, True),
    ("ragged_row", {"csv": "9999,多,一列", "tsv": "9999\t多\t一列", "jsonl": '{"id": 9999}'}, True),
    ("short_row", {"csv": "9999", "tsv": "9999"}, True),
    ("huge_field", {f: _line(f, 9999, HUGE) for f in FORMATS}, True),
    ("blank", {f: "" for f in FORMATS}, True),
    ("whitespace", {f: " \t " for f in FORMATS}, True),
    # Raw NUL bytes (json.dumps would escape one as \u0000, which is a deliberate character).
    ("nul_byte", {"txt": "坏\x00字节", "jsonl": '{"id": 9999, "text": "坏\x00字节"}', "csv": '9999,"坏\x00字节"',
                  "tsv": "9999\t坏\x00字节"}, True),
    ("bad_utf8", {f: _line(f, 9999, "坏字节").replace("坏", "\udcff") for f in FORMATS}, True),
    # Valid JSON that Python will not hold (ValueError: over 4,300 digits), or that names no character.
    ("huge_number", {"jsonl": '{"id": 9999, "text": "数字", "n": ' + "9" * 5000 + "}"}, True),
    ("lone_surrogate", {"jsonl": '{"id": 9999, "text": "坏\\udc80字"}'}, True),
    ("lone_surrogate_in_a_key", {"jsonl": '{"id": 9999, "text": "好", "\\uD800": 1}'}, True),
]


CASES = [(fault, fmt, line, bad) for fault, variants, bad in LINE_FAULTS for fmt, line in variants.items()]


@pytest.mark.parametrize("fault, fmt, faulty, bad", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_faulty_line_is_accounted_for(flow, tmp_path, fault, fmt, faulty, bad):
    position = 17
    lines = [_line(fmt, i, t) for i, t in enumerate(TEXTS)]
    lines[position] = faulty
    texts = list(TEXTS)
    if not bad:
        texts[position] = '"未闭合的引号'
        lines[position] = lines[position].replace("9999", str(position))
    source = tmp_path / f"in.{fmt}"
    path_bytes = ("\n".join(([{"csv": "id,text", "tsv": "id\ttext"}[fmt]] if fmt in ("csv", "tsv") else []) + lines)
                  + "\n").encode("utf-8", "surrogateescape")
    source.write_bytes(path_bytes)
    offset = 1 if fmt in ("csv", "tsv") else 0
    _, errors = _check_accounting(flow, source, fmt, offset, [position] if bad else [], texts=texts)
    if fault == "bad_utf8":
        assert "--encoding" in errors[0]["error"] and "\ufffd" in errors[0]["input"]
    if fault == "huge_field":
        assert "longer than max_record_bytes" in errors[0]["error"] and len(errors[0]["input"]) < 1000
    if fault == "huge_number":
        assert "a JSON value that cannot be read (Exceeds the limit (4300 digits)" in errors[0]["error"]
    if fault.startswith("lone_surrogate"):
        assert "is half of a UTF-16 surrogate pair" in errors[0]["error"] and errors[0]["input"] == faulty


def test_the_issue_csv_with_an_unclosed_quote_at_line_501(flow, tmp_path):
    rows = [f'{i},"评论{i}，还不错",{i % 5}' for i in range(2000)]
    rows[499] = '9999,"未闭合的引号,5'  # line 501 (the header is line 1)
    source = tmp_path / "reviews.csv"
    source.write_text("id,text,stars\n" + "\n".join(rows) + "\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    with pytest.raises(InvalidInputError, match=r"reviews\.csv:501: a quoted field is not closed on its line"):
        _job(flow, source, target)
    summary = _job(flow, source, target, on_error="skip")
    out = _read_jsonl(target)
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert len(out) == 1999 and [e["line"] for e in errors] == [501] and summary.skipped == 1
    assert max(len(r["text"]) for r in out) < 20, "no record swallowed the ones after it"
    assert [r["id"] for r in out][498:501] == ["498", "500", "501"]


def test_a_line_no_job_could_get_past_is_a_bad_record_and_resume_gets_past_it(tiny_sentiment, tmp_path, capsys):
    """A 5,000-digit number, or a lone surrogate escape, crashed the job with a traceback even
    under --on-error skip, and --resume crashed again on the same line."""
    rows = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in enumerate(TEXTS)]
    rows[7] = '{"id": 7, "text": "好", "n": ' + "9" * 5000 + "}"
    rows[20] = '{"id": 20, "text": "坏\\udc80字"}'
    rows[30] = '{"id": 30, "text": "\\ud83d\\ude00 一对是一个字"}'  # a surrogate pair is a character: fine
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["sentiment_analysis", "--input", str(source), "--output", str(target), "--task-path", str(tiny_sentiment),
            "--quiet"]
    for resume in ([], ["--resume"]):  # a stop, not a crash, and a resume stops at the same line again
        assert main(args + resume) == 2
        err = capsys.readouterr().err
        assert err.startswith("taskflow: error: ") and err.count("\n") == 1, err
        assert "in.jsonl:8: a JSON value that cannot be read" in err
    assert main(args + ["--resume", "--on-error", "skip"]) == 0
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [8, 21]
    assert "in.jsonl:21: the JSON escape \\udc80 is half of a UTF-16 surrogate pair" in errors[1]["error"]
    assert errors[1]["input"] == rows[20], "the line as it is in the file"
    out = _read_jsonl(target)
    assert [r["line"] for r in out] == [i for i in range(1, len(TEXTS) + 1) if i not in (8, 21)]
    assert out[28]["line"] == 31 and out[28]["text"] == "\U0001f600 一对是一个字"


def test_a_result_that_cannot_be_written_is_a_bad_record(flow, tmp_path, monkeypatch):
    """Were a lone surrogate to get past the reader, writing its result fails: that is a bad record too,
    and the errors file stays valid UTF-8 JSON (what cannot be encoded is written as an escape)."""
    from taskflow import readers

    monkeypatch.setattr(readers, "_lone_surrogate", lambda value: None)
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write(source, "jsonl", [_line("jsonl", i, t) for i, t in enumerate(TEXTS[:5])] + ['{"id": 5, "text": "坏\\udc80字"}'])
    with pytest.raises(InvalidInputError, match=r"in\.jsonl:6: the result cannot be written as UTF-8 \(surrogates not allowed"):
        _job(flow, source, target)
    assert len(_read_jsonl(tmp_path / "out.jsonl.partial")) == 5
    summary = _job(flow, source, target, on_error="skip", resume=True)
    assert summary.skipped == 1 and len(_read_jsonl(target)) == 5
    raw = (tmp_path / "out.jsonl.errors.jsonl").read_bytes()
    raw.decode("utf-8")
    error, = [json.loads(line) for line in raw.splitlines()]
    assert error["line"] == 6 and error["id"] == 5 and error["input"] == "坏\udc80字"


@pytest.mark.parametrize("fmt", FORMATS)
def test_bom_is_dropped(flow, tmp_path, fmt):
    source = tmp_path / f"in.{fmt}"
    offset = _write(source, fmt, [_line(fmt, i, t) for i, t in enumerate(TEXTS)], bom=True)
    out, _ = _check_accounting(flow, source, fmt, offset, [])
    assert "\ufeff" not in json.dumps(out[0], ensure_ascii=False)


@pytest.mark.parametrize("fmt", FORMATS)
def test_gbk_file_needs_its_encoding_named(flow, tiny_sentiment, tmp_path, fmt):
    source = tmp_path / f"in.{fmt}"
    offset = _write(source, fmt, [_line(fmt, i, t) for i, t in enumerate(TEXTS)], encoding="gbk")
    with pytest.raises(InvalidInputError, match=rf"in\.{fmt}:{offset + 1}: not valid utf-8 .*--encoding gbk"):
        _job(flow, source, tmp_path / "out.jsonl")
    _check_accounting(flow, source, fmt, offset, [], encoding="gbk")
    # Under --on-error skip, every line is in the errors file, and the summary says so.
    _, errors = _check_accounting(flow, source, fmt, offset, list(range(len(TEXTS))))
    assert len(errors) == len(TEXTS)
    code = main(["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "cli.jsonl"),
                 "--task-path", str(tiny_sentiment), "--encoding", "gbk", "--quiet"])
    assert code == 0 and len(_read_jsonl(tmp_path / "cli.jsonl")) == len(TEXTS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_blank_lines_are_one_rule_and_a_trailing_newline_is_not_a_record(flow, tmp_path, fmt):
    source = tmp_path / f"in.{fmt}"
    lines = [_line(fmt, i, t) for i, t in enumerate(TEXTS)]
    lines[5:5] = [""]  # the records after it move down one line
    texts = TEXTS[:5] + [""] + TEXTS[5:]
    offset = _write(source, fmt, lines)
    # lines[6:] hold ids one less than their position; compare texts only
    target = tmp_path / "out.jsonl"
    summary = _job(flow, source, target, on_error="skip")
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [e["line"] for e in errors] == [offset + 6] and "empty line" in errors[0]["error"]
    assert summary.read == len(texts) and summary.processed == len(TEXTS), "the final newline is not a record"
    assert [r["text"] for r in _read_jsonl(target)] == TEXTS


@pytest.mark.parametrize("fmt", FORMATS)
def test_last_line_without_newline(flow, tmp_path, fmt):
    source = tmp_path / f"in.{fmt}"
    offset = _write(source, fmt, [_line(fmt, i, t) for i, t in enumerate(TEXTS)], end="")
    _check_accounting(flow, source, fmt, offset, [])


@pytest.mark.parametrize("cut", ["characters", "bytes"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_last_line(flow, tmp_path, fmt, cut):
    """A file cut in the middle of its last record (a crashed writer): an error where the
    format can tell (JSON, an open CSV quote, half a UTF-8 character), otherwise the text as it is."""
    source = tmp_path / f"in.{fmt}"
    offset = _write(source, fmt, [_line(fmt, i, t) for i, t in enumerate(TEXTS)])
    texts = list(TEXTS)
    if cut == "characters":  # the newline and two characters
        source.write_text(source.read_text(encoding="utf-8")[:-3], encoding="utf-8")
        bad = fmt in ("jsonl", "csv")
        texts[-1] = TEXTS[-1] if bad else TEXTS[-1][:-2]
    else:  # the newline and one byte: half of "好", or the closing brace or quote
        source.write_bytes(source.read_bytes()[:-2])
        bad = True
    _check_accounting(flow, source, fmt, offset, [len(TEXTS) - 1] if bad else [], texts=texts)


def test_crlf_line_ends(flow, tmp_path):
    source = tmp_path / "in.csv"
    source.write_bytes(("id,text\r\n" + "".join(f'{i},"{t}"\r\n' for i, t in enumerate(TEXTS))).encode("utf-8"))
    _check_accounting(flow, source, "csv", 1, [])


def test_huge_line_limit_is_configurable(flow, tmp_path):
    source = tmp_path / "in.txt"
    _write(source, "txt", ["短", "长" * 2000, "短"])
    _check_accounting(flow, source, "txt", 0, [1], texts=["短", "长" * 2000, "短"], max_record_bytes=1000)
    _check_accounting(flow, source, "txt", 0, [], texts=["短", "长" * 2000, "短"], max_record_bytes=10_000)


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfet\x00e\x00", "is UTF-16 (little-endian) text"),
    ("id\ttext\n".encode(), "no column 'text'; columns are ['id\\ttext']"),
    (b"\n1,2\n", "the header row is blank"),
    (b"id,id,text\n", "names column(s) 'id' twice"),
    (b'id,"text\n', "header row: a quoted field is not closed"),
])
def test_unreadable_csv_is_one_clear_error(flow, tmp_path, content, message):
    source = tmp_path / "in.csv"
    source.write_bytes(content)
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        _job(flow, source, tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl.partial").exists()


def test_unusable_encodings_are_refused(flow, tmp_path):
    source = tmp_path / "in.txt"
    _write(source, "txt", TEXTS)
    with pytest.raises(InvalidInputError, match="unknown encoding 'klingon'"):
        _job(flow, source, tmp_path / "out.jsonl", encoding="klingon")
    with pytest.raises(InvalidInputError, match="not ASCII-compatible"):
        _job(flow, source, tmp_path / "out.jsonl", encoding="utf-16")


def test_utf8_sig_is_utf8_with_its_bom_dropped(flow, tmp_path):
    source = tmp_path / "in.csv"
    _write(source, "csv", [_line("csv", i, t) for i, t in enumerate(TEXTS[:3])], bom=True)
    _job(flow, source, tmp_path / "out.jsonl", encoding="utf-8-sig")
    assert [(r["id"], r["text"]) for r in _read_jsonl(tmp_path / "out.jsonl")] == [(str(i), t) for i, t in
                                                                                  enumerate(TEXTS[:3])]


def test_a_line_a_codec_refuses_is_a_bad_record_naming_its_line(flow, tiny_sentiment, tmp_path, capsys):
    """idna reads ASCII only, and cannot even replace what it refuses: each such line is one bad record."""
    source = tmp_path / "in.txt"
    source.write_text("hello\nnǐ hǎo\nxn--abc\nworld\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    summary = _job(flow, source, target, encoding="idna", on_error="skip")
    assert [r["line"] for r in _read_jsonl(target)] == [1, 4]
    errors = _read_jsonl(tmp_path / "out.jsonl.errors.jsonl")
    assert [r["line"] for r in errors] == [2, 3] and summary.skipped == 2
    assert all(f"in.txt:{r['line']}: not valid idna (" in r["error"] and "--encoding" in r["error"] for r in errors)
    assert errors[0]["input"] == "nǐ hǎo"     # shown as UTF-8, where the codec itself cannot replace
    assert main(["senta", "--input", str(source), "--encoding", "idna", "--task-path", str(tiny_sentiment)]) == 2
    assert capsys.readouterr().err.startswith(f"taskflow: error: {source}:2: not valid idna (")


# ---------------------------------------------------------------- a file that grows while it is read

def _grow_during_last_chunk(flow, monkeypatch, source, extra: bytes):
    """Append ``extra`` to the input while the job runs its last chunk, after the reader saw the end."""
    real = flow.task.run_items

    def run_items(items):
        if len(items) < 16:  # the last, short chunk
            with open(source, "ab") as handle:
                handle.write(extra)
        return real(items)

    monkeypatch.setattr(flow.task, "run_items", run_items)
    return real


def test_lines_appended_after_the_end_was_read_stop_the_job_resumably(flow, tmp_path, monkeypatch):
    source, target = tmp_path / "in.txt", tmp_path / "out.jsonl"
    _write(source, "txt", TEXTS)
    real = _grow_during_last_chunk(flow, monkeypatch, source, "新来的一行\n又一行\n".encode())
    with pytest.raises(JobError, match=r"in\.txt changed while the job read it.*--resume"):
        _job(flow, source, target)
    assert not target.exists()
    monkeypatch.setattr(flow.task, "run_items", real)
    summary = _job(flow, source, target, resume=True)
    assert summary.resumed_from == len(TEXTS) and summary.processed == 2
    assert [r["text"] for r in _read_jsonl(target)] == TEXTS + ["新来的一行", "又一行"]


def test_a_last_line_completed_after_it_was_read_is_read_again(flow, tmp_path, monkeypatch):
    source, target = tmp_path / "in.txt", tmp_path / "out.jsonl"
    source.write_text("\n".join(TEXTS) + "\n半句", encoding="utf-8")  # the writer is mid-line
    real = _grow_during_last_chunk(flow, monkeypatch, source, "话说完了\n下一行\n".encode())
    with pytest.raises(JobError, match="changed while the job read it"):
        _job(flow, source, target)
    monkeypatch.setattr(flow.task, "run_items", real)
    _job(flow, source, target, resume=True)
    rows = _read_jsonl(target)
    assert [r["text"] for r in rows] == TEXTS + ["半句话说完了", "下一行"], "the half line is not kept"
    assert [r["line"] for r in rows] == list(range(1, len(TEXTS) + 3))


def test_lines_appended_before_the_end_are_read(flow, tmp_path, monkeypatch):
    source, target = tmp_path / "in.txt", tmp_path / "out.jsonl"
    _write(source, "txt", TEXTS)
    real, appended = flow.task.run_items, []

    def run_items(items):
        if not appended:  # the first chunk: the reader is far from the end
            appended.append(True)
            with open(source, "ab") as handle:
                handle.write("新来的一行\n".encode())
        return real(items)

    monkeypatch.setattr(flow.task, "run_items", run_items)
    summary = _job(flow, source, target)
    assert summary.read == len(TEXTS) + 1
    assert [r["text"] for r in _read_jsonl(target)] == TEXTS + ["新来的一行"]


def test_an_input_rewritten_in_place_to_the_same_size_stops_the_job(flow, tmp_path, monkeypatch):
    """Lines already done rewritten in place (same size, so nothing looks appended or cut): the job
    does not finish an output read from two files; it says the input changed, naming it."""
    source, target = tmp_path / "in.txt", tmp_path / "out.jsonl"
    _write(source, "txt", TEXTS)
    real, calls = flow.task.run_items, []

    def run_items(items):
        calls.append(len(items))
        if len(calls) == 2:   # the first chunk is written and checkpointed
            data = source.read_bytes()
            with open(source, "r+b") as handle:
                handle.write(data.replace("太差了".encode(), "很不错".encode()))
        return real(items)

    monkeypatch.setattr(flow.task, "run_items", run_items)
    with pytest.raises(InputChangedError, match=rf"^{re.escape(str(source))} changed while the job ran") as info:
        _job(flow, source, target, on_error="skip")
    assert info.value.path == str(source) and not target.exists()


def _strict(text):
    """JSON lines parsed as a strict parser would: NaN and Infinity are not JSON."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_number_json_cannot_hold_is_a_bad_record_and_the_output_is_strict_json(flow, tmp_path, value):
    """NaN, Infinity and 1e400 were read and written back as NaN / Infinity, which no strict parser reads."""
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [_line("jsonl", i, text) for i, text in enumerate(TEXTS[:10])]
    lines[3] = f'{{"id": {value}, "text": "很好"}}'
    lines[6] = f'{{"id": 6, "text": "很好", "score": [1, {value}]}}'
    _write(source, "jsonl", lines)
    summary = _job(flow, source, target, on_error="skip")
    assert summary.processed == 8 and summary.skipped == 2
    assert [row["line"] for row in _strict(target.read_text(encoding="utf-8"))] == [1, 2, 3, 5, 6, 8, 9, 10]
    errors = _strict((tmp_path / "out.jsonl.errors.jsonl").read_text(encoding="utf-8"))
    assert [row["line"] for row in errors] == [4, 7]
    assert all(f"in.jsonl:{row['line']}: a number JSON cannot hold ({value}" in row["error"] for row in errors)
    with pytest.raises(InvalidInputError, match=r"in\.jsonl:4: a number JSON cannot hold"):
        _job(flow, source, tmp_path / "raise.jsonl")


def test_a_result_json_cannot_hold_is_a_bad_record(flow, tmp_path, monkeypatch):
    """Whatever a task returns, what is written is strict JSON."""
    source, target = tmp_path / "in.txt", tmp_path / "out.jsonl"
    _write(source, "txt", TEXTS[:5])
    real = flow.task.run_items

    def nan_for_the_third(items):
        return [dict(r, score=float("nan")) if r["text"] == TEXTS[2] else r for r in real(items)]

    monkeypatch.setattr(flow.task, "run_items", nan_for_the_third)
    summary = _job(flow, source, target, on_error="skip")
    assert summary.skipped == 1 and [row["line"] for row in _strict(target.read_text(encoding="utf-8"))] == [1, 2, 4, 5]
    error, = _strict((tmp_path / "out.jsonl.errors.jsonl").read_text(encoding="utf-8"))
    assert error["line"] == 3 and "in.txt:3: the result holds a number JSON cannot hold" in error["error"]
