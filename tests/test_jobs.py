"""Batch jobs over files (taskflow.jobs), Taskflow.stream and the CLI flags that drive them.

Input faults over the four formats are in test_job_inputs.py; process faults
(killed and hung workers, signals, full disk) in test_job_faults.py.
"""

import itertools
import json
import os
import re
import shutil

import pytest

from taskflow import Taskflow
from taskflow.cli import main
from taskflow.checkpoint import JobFiles
from taskflow.errors import InvalidInputError, JobError, OptionError, OutputWriteError, ResumeMismatchError

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
    return flow.predict_file(source, target, progress=False, **options)


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


def test_interrupted_job_resumes_without_loss_or_duplicates(flow, expected, tmp_path, interrupt_on_call):
    source, target = _txt(tmp_path / "in.txt", TEXTS), tmp_path / "out.jsonl"
    with interrupt_on_call(flow.task, 4):
        flow.predict_file(source, target, chunk_size=100, progress=False)
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


def test_a_resume_of_a_finished_job_says_so_and_refuses_an_input_that_grew(flow, tmp_path, caplog):
    source, target = _txt(tmp_path / "in.txt", TEXTS[:40] + [""] + TEXTS[40:80]), tmp_path / "out.jsonl"
    flow.predict_file(source, target, on_error="skip", progress=False)    # 80 results, 1 bad line
    finished = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with caplog.at_level("WARNING", logger="taskflow"):
        again = flow.predict_file(source, target, on_error="skip", resume=True, progress=False)
    assert again.processed == 0 and again.messages == [f"{target} is complete (81 record(s) of {source}); nothing to resume"]
    assert again.messages[0] in caplog.text     # said, not only returned
    # Lines appended after the job finished: it kept no checkpoint, so it cannot tell where to go on.
    with open(source, "a", encoding="utf-8") as handle:
        handle.write("新加的一条，很好\n")
    with pytest.raises(JobError, match=r"a job finished it with 81 record\(s\) \(with .*errors.jsonl\), but .*in.txt now holds 82"):
        flow.predict_file(source, target, on_error="skip", resume=True, progress=False)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "in.txt"} == \
        {name: data for name, data in finished.items() if name != "in.txt"}


def test_resume_is_byte_exact_and_checks_its_settings(flow, tmp_path, interrupt_on_call):
    source = tmp_path / "in.csv"
    source.write_text("id,text\n" + "".join(f"{i},{t}\n" for i, t in enumerate(TEXTS[:300])), encoding="utf-8")
    flow.predict_file(source, tmp_path / "clean.jsonl", chunk_size=64, progress=False)
    with interrupt_on_call(flow.task, 3):
        flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=64, progress=False)
    with pytest.raises(ResumeMismatchError, match=r"made by another job \(id_fields: None then, \[.id.\] now\)"):
        _job(flow, source, tmp_path / "out.jsonl", chunk_size=64, resume=True, id_fields=["id"])
    flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=64, resume=True, progress=False)
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


@pytest.mark.parametrize("name", ["out.jsonl.partial", "out.jsonl.partial.ckpt", "out.jsonl.lock"])
def test_an_output_named_as_another_jobs_working_file_is_refused(flow, tmp_path, name):
    source = _txt(tmp_path / "in.txt", TEXTS[:5])
    with pytest.raises(InvalidInputError, match=rf"--output .*{name} ends in \.[a-z.]+, the name of a job's working "
                                                 r"file \(a job on out\.jsonl writes it\)"):
        flow.predict_file(source, tmp_path / name, progress=False)
    with pytest.raises(InvalidInputError, match="--errors .* the name of a job's working file"):
        flow.predict_file(source, tmp_path / "x.jsonl", errors_path=tmp_path / name, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_starting_a_stopped_job_again_without_resume_says_what_it_drops(flow, tmp_path, caplog, interrupt_on_call):
    source, target = _txt(tmp_path / "in.txt", TEXTS[:300]), tmp_path / "out.jsonl"
    _interrupt(flow, interrupt_on_call, source, target)
    flow.predict_file(source, target, chunk_size=64, progress=False)
    assert "an earlier run of this job stopped after 128 record(s); starting over" in caplog.text
    assert _results(target) == flow(TEXTS[:300])


def test_a_job_stopped_while_moving_its_files_is_finished_by_resume(flow, tmp_path, monkeypatch):
    source, target = _txt(tmp_path / "in.txt", TEXTS[:20]), tmp_path / "out.jsonl"

    def stop(path):
        raise KeyboardInterrupt

    # The state a job leaves when it stops between renaming its output and removing its checkpoint:
    monkeypatch.setattr(JobFiles, "_drop_checkpoint", staticmethod(stop))
    with pytest.raises(KeyboardInterrupt):
        flow.predict_file(source, target, progress=False)
    monkeypatch.undo()
    assert target.exists() and (tmp_path / "out.jsonl.partial.ckpt").exists()
    before = _snapshot(tmp_path, source)
    with pytest.raises(ResumeMismatchError, match="encoding: 'utf-8' then, 'gbk' now"):
        _job(flow, source, target, resume=True, encoding="gbk")
    assert _snapshot(tmp_path, source) == before
    summary = flow.predict_file(source, target, resume=True, progress=False)
    assert "complete" in summary.messages[0] and not (tmp_path / "out.jsonl.partial.ckpt").exists()
    assert _results(target) == flow(TEXTS[:20])


def _snapshot(directory, *leave_out):
    """Every file under ``directory`` but ``leave_out``, by name, with its bytes (links as links)."""
    return {p.name: ("->", str(p.readlink())) if p.is_symlink() else p.read_bytes()
            for p in sorted(directory.iterdir()) if p not in leave_out}


def _interrupt(flow, interrupt_on_call, source, target, *, chunk_size=64, at_chunk=3, **options):
    """Run a job that is interrupted (Ctrl-C) while it runs its ``at_chunk``-th chunk."""
    with interrupt_on_call(flow.task, at_chunk):
        _job(flow, source, target, chunk_size=chunk_size, **options)


def test_the_issue_a_resume_by_another_task_and_model_is_refused_and_changes_nothing(
        tiny_sentiment, tiny_models, tmp_path, capsys):
    """A sentiment_analysis job stopped at a bad JSON line; the line was fixed and the job
    resumed as text_classification with another package, which wrote y/z labels after positive/negative."""
    rows = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in enumerate(TEXTS[:300])]
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join(rows[:150] + ['{"id": 150, "text": "坏了'] + rows[151:]) + "\n", encoding="utf-8")
    job = ["--input", str(source), "--field", "text", "--output", str(target), "--quiet"]
    sentiment = ["sentiment_analysis", "--task-path", str(tiny_sentiment), "--batch-size", "16"]
    assert main([*sentiment, *job]) == 2
    assert "in.jsonl:151: not valid JSON" in capsys.readouterr().err
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")  # the user fixes line 151
    before = _snapshot(tmp_path, source)
    assert sorted(before) == ["out.jsonl.errors.jsonl.partial", "out.jsonl.partial", "out.jsonl.partial.ckpt"]
    assert len(before["out.jsonl.partial"].splitlines()) == 150

    classify = ["text_classification", "--task-path", str(tiny_models["text_classification"])]
    assert main([*classify, *job, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "task: 'sentiment_analysis' then, 'text_classification' now" in err
    assert "model: sentiment_analysis/tiny 0.0.0 (fingerprint " in err and " then, text_classification/tiny 0.0.0" in err
    assert "nothing was changed" in err and "without --resume to start over" in err
    assert _snapshot(tmp_path, source) == before, "a refused resume changes no file"

    other = Taskflow("text_classification", task_path=tiny_models["text_classification"])
    with pytest.raises(ResumeMismatchError) as info:
        other.predict_file(source, target, resume=True, progress=False)
    # sentiment_analysis has the option neutral (False then), text_classification does not.
    assert set(info.value.changes) == {"task", "model", "option neutral"}
    assert info.value.changes["task"] == ("sentiment_analysis", "text_classification")
    assert _snapshot(tmp_path, source) == before

    assert main([*sentiment, *job, "--resume"]) == 0  # what made it finishes it
    assert main([*sentiment, *job[:4], "--output", str(tmp_path / "clean.jsonl"), "--quiet"]) == 0
    assert target.read_bytes() == (tmp_path / "clean.jsonl").read_bytes()


def test_a_resume_with_other_weights_or_options_is_refused_and_a_copy_of_the_package_is_not(
        flow, tiny_sentiment, tmp_path, interrupt_on_call):
    from make_tiny_models import make_tiny_sentiment

    source, target = _txt(tmp_path / "in.txt", TEXTS[:300]), tmp_path / "out" / "out.jsonl"
    _interrupt(flow, interrupt_on_call, source, target)
    before = _snapshot(target.parent)
    # Same task, name and version; other weights (another seed): the fingerprint tells them apart.
    package = make_tiny_sentiment(tmp_path / "seed1", seed=1)
    manifest = json.loads((package / "manifest.json").read_text(encoding="utf-8"))
    (package / "manifest.json").write_text(json.dumps({**manifest, "version": "0.0.0"}), encoding="utf-8")
    retrained = Taskflow("sentiment_analysis", task_path=package)
    with pytest.raises(ResumeMismatchError) as info:
        retrained.predict_file(source, target, chunk_size=64, resume=True, progress=False)
    assert set(info.value.changes) == {"model"}
    then, now = info.value.changes["model"]
    assert then["package"] == now["package"] == "sentiment_analysis/tiny 0.0.0" and then["fingerprint"] != now["fingerprint"]
    scores = Taskflow("sentiment_analysis", task_path=tiny_sentiment, return_all_scores=True)
    with pytest.raises(ResumeMismatchError, match=r"\(option return_all_scores: False then, True now\)"):
        scores.predict_file(source, target, chunk_size=64, resume=True, progress=False)
    # The dynamic graph computes the same network in another order of operations: not mixed in either.
    dynamic = Taskflow("sentiment_analysis", task_path=tiny_sentiment, static=False)
    with pytest.raises(ResumeMismatchError) as info:
        dynamic.predict_file(source, target, chunk_size=64, resume=True, progress=False)
    assert set(info.value.changes) == {"compute"} and info.value.changes["compute"][1]["static"] is False
    assert _snapshot(target.parent) == before
    # Where the package lies is not what it is: a copy resumes, as do another batch size and chunk size.
    shutil.copytree(tiny_sentiment, tmp_path / "copy")
    copy = Taskflow("sentiment_analysis", task_path=tmp_path / "copy", batch_size=4, return_all_scores=False)
    summary = copy.predict_file(source, target, chunk_size=50, resume=True, progress=False)
    assert summary.resumed_from == 128
    assert _results(target) == flow(TEXTS[:300])


def test_a_file_an_option_names_is_pinned_by_its_content(tiny_models, tmp_path, interrupt_on_call):
    words, package = tmp_path / "words.txt", tiny_models["word_segmentation"]
    words.write_text("北京大学\n", encoding="utf-8")
    seg = Taskflow("word_segmentation", task_path=package, user_dict=words)
    source, target = _txt(tmp_path / "in.txt", ["李明在北京大学读书"] * 100), tmp_path / "out.jsonl"
    _interrupt(seg, interrupt_on_call, source, target, chunk_size=16)
    words.write_text("北京\n大学\n", encoding="utf-8")  # edited in place: same path, other words
    edited = Taskflow("word_segmentation", task_path=package, user_dict=str(words))
    with pytest.raises(ResumeMismatchError, match=rf"\(option user_dict: {re.escape(str(words))} \(sha256 \w{{12}}\) then, "
                                                  rf"{re.escape(str(words))} \(sha256 \w{{12}}\) now\)"):
        edited.predict_file(source, target, chunk_size=16, resume=True, progress=False)
    words.write_text("北京大学\n", encoding="utf-8")  # put back: the pipeline that read it finishes the job
    assert seg.predict_file(source, target, chunk_size=16, resume=True, progress=False).resumed_from == 32


def test_a_resume_with_another_encoding_is_refused(flow, tmp_path, interrupt_on_call):
    source, target = tmp_path / "in.txt", tmp_path / "out.jsonl"
    source.write_bytes(("\n".join(TEXTS[:300]) + "\n").encode("gbk"))
    _interrupt(flow, interrupt_on_call, source, target, encoding="gbk")
    before = _snapshot(tmp_path, source)
    # latin-1 reads any bytes: without the check, the rest of the output would be mojibake, silently.
    with pytest.raises(ResumeMismatchError) as info:
        _job(flow, source, target, chunk_size=64, resume=True, encoding="latin-1")
    assert info.value.changes == {"encoding": ("gbk", "iso8859-1")}
    assert _snapshot(tmp_path, source) == before
    summary = _job(flow, source, target, chunk_size=64, resume=True, encoding="gbk")
    assert summary.resumed_from == 128 and _results(target) == flow(TEXTS[:300])


def test_resume_cuts_off_what_a_stopped_chunk_half_wrote(flow, tmp_path, interrupt_on_call):
    lines = list(TEXTS[:300])
    lines[10] = lines[200] = ""
    source, target = _txt(tmp_path / "in.txt", lines), tmp_path / "out.jsonl"
    _job(flow, source, tmp_path / "clean.jsonl", chunk_size=64, on_error="skip")
    _interrupt(flow, interrupt_on_call, source, target, at_chunk=5, on_error="skip")  # both bad lines are done
    # A crash in the middle of writing a chunk leaves more bytes than the rest of the job writes.
    with open(tmp_path / "out.jsonl.partial", "ab") as handle:
        handle.write(b'{"line": 999, "text": "written before the crash"}\n' * 400 + b'{"line": 1000, "te')
    with open(tmp_path / "out.jsonl.errors.jsonl.partial", "ab") as handle:
        handle.write(b'{"line": 260, "error": "half a li')
    summary = _job(flow, source, target, chunk_size=64, on_error="skip", resume=True)
    assert summary.resumed_from == 256 and summary.skipped == 0
    assert target.read_bytes() == (tmp_path / "clean.jsonl").read_bytes()
    assert (tmp_path / "out.jsonl.errors.jsonl").read_bytes() == (tmp_path / "clean.jsonl.errors.jsonl").read_bytes()


def _damage_checkpoint(edit):
    def damage(tmp_path, source):
        path = tmp_path / "out.jsonl.partial.ckpt"
        state = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(edit(state) if callable(edit) else edit, encoding="utf-8")
    return damage


def _cut(name, keep):
    def damage(tmp_path, source):
        path = source if name == "input" else tmp_path / name
        path.write_bytes(path.read_bytes()[:keep])
    return damage


def _edit_done_line(tmp_path, source):
    text = source.read_text(encoding="utf-8").replace(TEXTS[5], TEXTS[5].replace("第5条", "第五条"), 1)
    source.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("damage, error, message", [
    (_damage_checkpoint('{"format": 3, "done": 12'), JobError,
     r"checkpoint .*out\.jsonl\.partial\.ckpt is damaged \(not JSON"),
    (_damage_checkpoint("[1, 2]"), JobError, r"is damaged \(a JSON list, not an object\)"),
    (_damage_checkpoint(lambda s: json.dumps({**s, "done": "128"})), JobError, r"is damaged \(it needs format, done"),
    (_damage_checkpoint(lambda s: json.dumps({k: v for k, v in s.items() if k != "in_sha256"})), JobError, "is damaged"),
    (_damage_checkpoint(lambda s: json.dumps({**s, "format": 2})), ResumeMismatchError,
     r"written by another version of taskflow \(format 2; this one reads 3\)"),
    (_cut("out.jsonl.partial", 100), JobError,
     r"out\.jsonl\.partial is shorter than its checkpoint says \([\d,]+ bytes; it has 100\)"),
    (_cut("input", 1000), ResumeMismatchError,
     r"in\.txt is now shorter than the part already done; is it the same file\? "
     r"\(input: '128 record\(s\) done in its first [\d,]+ bytes' then, '1,000 bytes in all' now\)"),
    (_edit_done_line, ResumeMismatchError, r"the 128 record\(s\) already done are not what .*in\.txt now holds"),
], ids=["truncated-json", "not-an-object", "bad-count", "missing-field", "old-format", "short-partial", "short-input",
        "done-line-edited"])
def test_a_resume_that_cannot_continue_says_why_and_changes_nothing(flow, tmp_path, damage, error, message, interrupt_on_call):
    source, target = _txt(tmp_path / "in.txt", TEXTS[:300]), tmp_path / "out.jsonl"
    _interrupt(flow, interrupt_on_call, source, target)
    damage(tmp_path, source)
    before = _snapshot(tmp_path)
    with pytest.raises(error, match=message) as info:
        _job(flow, source, target, chunk_size=64, resume=True)
    assert "without --resume to start over" in str(info.value)
    assert _snapshot(tmp_path) == before, "a refused resume changes no file, the input included"


def test_job_files_do_not_follow_planted_links(flow, tmp_path, interrupt_on_call):
    """A results file overwrote precious.txt through a link planted at a job file's
    predictable name.  A new job replaces such links; a resume refuses to write through them.
    At the output's own name, a link is followed only when it is the user's (or root's): one
    planted by someone else is replaced too (planted here as another user, where the test may)."""
    lines = list(TEXTS[:100])
    lines[3] = ""
    source, out = _txt(tmp_path / "in.txt", lines), tmp_path / "out"
    out.mkdir()
    names = ["out.jsonl.partial", "out.jsonl.errors.jsonl.partial", "out.jsonl.partial.ckpt",
             f"out.jsonl.partial.ckpt.{os.getpid()}.tmp", "out.jsonl.errors.jsonl"]
    if os.geteuid() == 0:
        names.append("out.jsonl")
    victims = []
    for i, name in enumerate(names):
        victims.append(tmp_path / f"precious{i}.txt")
        victims[-1].write_text("precious\n")
        (out / name).symlink_to(victims[-1])
        if name == "out.jsonl":
            os.lchown(out / name, 65534, 65534)   # nobody's link: not followed
    summary = _job(flow, source, out / "out.jsonl", on_error="skip")
    assert [v.read_text() for v in victims] == ["precious\n"] * len(victims), "a link was followed"
    assert summary.skipped == 1 and len(_read_jsonl(out / "out.jsonl")) == 99
    assert not (out / "out.jsonl").is_symlink() and not (out / "out.jsonl.errors.jsonl").is_symlink()

    for name in ["out.jsonl.partial", "out.jsonl.errors.jsonl.partial", "out.jsonl.partial.ckpt"]:
        target = tmp_path / name.replace(".", "_") / "out.jsonl"
        target.parent.mkdir()
        _interrupt(flow, interrupt_on_call, source, target, chunk_size=16, on_error="skip")
        planted = target.parent / name
        victims[0].write_bytes(planted.read_bytes())  # the victim even looks like the file it replaces
        planted.unlink()
        planted.symlink_to(victims[0])
        kept = victims[0].read_bytes()
        with pytest.raises(OutputWriteError, match=rf"{re.escape(str(planted))} is a symbolic link; .*remove it"):
            _job(flow, source, target, chunk_size=16, on_error="skip", resume=True)
        assert victims[0].read_bytes() == kept and planted.is_symlink()


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
    # A wrong option is an OptionError, as in a call; none touches a file.
    for options, name in (({"on_error": "ignore"}, "on_error"), ({"workers": 0}, "workers"),
                          ({"chunk_size": -1}, "chunk_size"), ({"chunk_size": True}, "chunk_size"),
                          ({"fields": "text"}, "fields"), ({"fields": ["review"]}, "fields")):   # a .txt has no columns
        with pytest.raises(OptionError, match=name) as info:
            flow.predict_file(source, tmp_path / "o.jsonl", **options)
        assert info.value.option == name
    with pytest.raises(OptionError, match=r"fields=\['review'\]"):
        flow.predict_file(source, tmp_path / "o.jsonl", fields="review")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
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
    assert f"{flags[0]} needs --input FILE and --output FILE" in capsys.readouterr().err
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


# ------------------------------------------------------------------ the job's own files

@pytest.mark.parametrize("name", ["in.txt", "out.jsonl", "out.jsonl.partial", "out.jsonl.partial.ckpt"])
def test_the_errors_file_may_not_name_any_of_the_jobs_own_files(flow, tmp_path, capsys, tiny_sentiment, name):
    """--errors naming the input deleted it; naming the output lost every result."""
    lines = list(TEXTS[:50])
    lines[7] = ""
    source, target = _txt(tmp_path / "in.txt", lines), tmp_path / "out.jsonl"
    target.write_text("an earlier output\n", encoding="utf-8")
    before = _snapshot(tmp_path)
    with pytest.raises(InvalidInputError, match=rf"--errors {re.escape(str(tmp_path / name))} is the job's own "):
        _job(flow, source, target, on_error="skip", errors_path=tmp_path / name)
    assert _snapshot(tmp_path) == before, "a refused job touches no file"
    code = main(["sentiment_analysis", "--input", str(source), "--output", str(target), "--on-error", "skip",
                 "--errors", str(tmp_path / name), "--task-path", str(tiny_sentiment), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("taskflow: error: --errors ") and err.count("\n") == 1
    assert _snapshot(tmp_path) == before


def test_a_job_renames_only_the_partial_file_it_wrote(flow, tmp_path, monkeypatch):
    """A .partial replaced while the job ran (by a writer that ignores the job's lock) is not moved into place."""
    source, target = _txt(tmp_path / "in.txt", TEXTS[:300]), tmp_path / "out.jsonl"
    partial = tmp_path / "out.jsonl.partial"
    real, calls = flow.task.run_items, []

    def replace_the_partial_on_the_third_chunk(items):
        calls.append(1)
        if len(calls) == 3:
            partial.unlink()
            partial.write_text('{"line": 1, "text": "another job"}\n', encoding="utf-8")
        return real(items)

    monkeypatch.setattr(flow.task, "run_items", replace_the_partial_on_the_third_chunk)
    with pytest.raises(JobError, match=rf"{re.escape(str(partial))} is not the file this job wrote"):
        _job(flow, source, target, chunk_size=64)
    assert not target.exists(), "another writer's file was moved into place"
    assert partial.read_text(encoding="utf-8") == '{"line": 1, "text": "another job"}\n'


@pytest.mark.parametrize("change", ["truncated", "replaced", "removed-errors"])
def test_a_resume_calls_a_job_complete_only_when_its_output_matches_the_checkpoint(flow, tmp_path, monkeypatch, change):
    """A checkpoint left beside an output that is not the one it describes: the resume says so and changes nothing."""
    lines = list(TEXTS[:200])
    lines[5] = ""
    source, target = _txt(tmp_path / "in.txt", lines), tmp_path / "out.jsonl"

    def stop(path):
        raise KeyboardInterrupt

    monkeypatch.setattr(JobFiles, "_drop_checkpoint", staticmethod(stop))
    with pytest.raises(KeyboardInterrupt):
        _job(flow, source, target, chunk_size=64, on_error="skip")
    monkeypatch.undo()
    good = target.read_bytes()
    if change == "truncated":
        target.write_bytes(good[:good.index(b"\n", len(good) // 3) + 1])
    elif change == "replaced":
        target.write_bytes(good.replace(b'"line": 1,', b'"line": 1, "x": 1,', 1))
    else:
        (tmp_path / "out.jsonl.errors.jsonl").unlink()
    before = _snapshot(tmp_path)
    with pytest.raises(JobError, match=r"cannot resume .*out\.jsonl: its checkpoint says the finished job wrote "
                                       r".*run without --resume to start over"):
        _job(flow, source, target, chunk_size=64, on_error="skip", resume=True)
    assert _snapshot(tmp_path) == before


def test_a_job_that_fails_on_its_first_record_leaves_no_file_behind(tiny_models, tmp_path):
    flow = Taskflow("sentiment_analysis", task_path=tiny_models["sentiment_analysis"])
    source = tmp_path / "in.txt"
    source.write_text("\n好吃\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="in.txt:1: .*Fix the line and run the job again"):
        flow.predict_file(source, tmp_path / "out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
    # After a good first record the checkpoint is kept, and says how to go on.
    source.write_text("好吃\n\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="in.txt:2: .*--resume"):
        flow.predict_file(source, tmp_path / "out.jsonl", chunk_size=1)
    assert (tmp_path / "out.jsonl.partial.ckpt").exists()
