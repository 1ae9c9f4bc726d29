"""The command line, called in-process through taskflow.cli.main."""

import json
import os
import sys

import pytest

from taskflow.cli import main


def _lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_texts_on_the_command_line(tiny_sentiment, capsys):
    assert main(["sentiment_analysis", "很好", "很差", "--task-path", str(tiny_sentiment)]) == 0
    out = _lines(capsys.readouterr().out)
    assert [r["text"] for r in out] == ["很好", "很差"]
    assert all(r["label"] in ("negative", "positive") for r in out)


def test_txt_file_to_jsonl_keeps_order_and_writes_atomically(tiny_sentiment, tmp_path, capsys):
    texts = [f"第{i}条评论，很好" if i % 2 else f"第{i}条评论，太差" for i in range(2500)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    assert main(["senta", "--input", str(source), "--output", str(target), "--task-path", str(tiny_sentiment), "--quiet"]) == 0
    rows = _lines(target.read_text(encoding="utf-8"))
    assert [r["text"] for r in rows] == texts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"], "temporary file left behind"


def test_csv_column_and_missing_column(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_text('id,review\n1,"很好, 真的"\n2,太差\n', encoding="utf-8")
    assert main(["sentiment_analysis", "--input", str(source), "--field", "review", "--task-path", str(tiny_sentiment)]) == 0
    assert [r["text"] for r in _lines(capsys.readouterr().out)] == ["很好, 真的", "太差"]
    assert main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment)]) == 2
    assert "no column 'text'" in capsys.readouterr().err


def test_bad_jsonl_line_is_reported_with_its_line_number(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "很好"}\n{"text": \n', encoding="utf-8")
    assert main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment)]) == 2
    assert "in.jsonl:2" in capsys.readouterr().err


def test_bad_item_in_a_file_names_its_line(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("很好\n\n很差\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    assert main(["sentiment_analysis", "--input", str(source), "--output", str(target), "--task-path", str(tiny_sentiment)]) == 2
    err = capsys.readouterr().err
    assert "in.txt:2" in err and "empty" in err
    assert not target.exists(), "a failed job must not leave a partial output"


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "sentiment_analysis (aliases: sentiment, senta)" in out


def test_pack_writes_the_endpoint_layout(tiny_sentiment, tmp_path, capsys):
    assert main(["pack", str(tiny_sentiment), str(tmp_path / "served")]) == 0
    version_dir = tmp_path / "served" / "sentiment_analysis" / "tiny"
    (version,) = list(version_dir.iterdir())
    assert sorted(p.name for p in version.iterdir()) == ["manifest.json", "vocab.txt", "weights.npz"]


def test_unknown_task_exits_2_with_a_suggestion(capsys):
    assert main(["sentimnt_analysis", "好"]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_texts_and_input_are_exclusive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["sentiment_analysis"])
    path = tmp_path / "in.txt"
    path.write_text("好\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "这家酒店很干净", "--input", str(path)])
    assert "either texts or --input" in capsys.readouterr().err


def test_download_puts_a_bundled_package_and_its_export_in_the_cache(tmp_path, monkeypatch, capsys):
    """`taskflow download` on a connected machine, copy $PPNLP_HOME over: the cache alone is enough."""
    from taskflow import Taskflow, packages

    assert main(["download", "sentiment_analysis", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    cached = tmp_path / "taskflow" / "sentiment_analysis" / "char_cnn" / "1.0.0"
    assert f"{cached} (bundled)" in out and "static graph:" in out
    assert (cached / ".verified").is_file() and list(cached.glob("static/*-*/inference.*"))
    empty = tmp_path / "no_bundle"
    empty.mkdir()
    (empty / "sentiment_analysis" / "char_cnn").mkdir(parents=True)
    (empty / "sentiment_analysis" / "char_cnn" / "manifest.json").write_bytes((cached / "manifest.json").read_bytes())
    monkeypatch.setattr(packages, "_bundled_root", lambda: empty)   # only the manifest ships: files from the cache
    flow = Taskflow("sentiment_analysis", home=tmp_path, offline=True)
    assert flow.model.source == "cache" and flow(["很好"])[0]["label"] in ("positive", "negative")


def test_every_task_option_is_a_flag(tiny_models, capsys):
    """Flags come from the tasks' own options: each reaches the task, typed."""
    senta = ["--task-path", str(tiny_models["sentiment_analysis"])]
    assert main(["sentiment_analysis", "很好", "--return-all-scores", *senta]) == 0
    assert set(json.loads(capsys.readouterr().out)["scores"]) == {"negative", "positive"}
    pairs = ["--task-path", str(tiny_models["text_similarity"])]
    assert main(["text_similarity", "怎么修改微信密码", "微信密码怎么改", "--threshold", "0", *pairs]) == 0
    assert json.loads(capsys.readouterr().out)["label"] == 1
    lexical = ["--task-path", str(tiny_models["ner"])]
    assert main(["ner", "我在北京大学", "--entity-labels", "ORG,LOC", "--user-dict", "-", *lexical]) == 2
    assert "user_dict" in capsys.readouterr().err            # a missing file is one clear line
    assert main(["ner", "春天我在北京大学", "--entity-labels", "SEASON", "--entity-only", *lexical,
                 "--user-dict-format", "lac"]) == 2                # SEASON is no tag without a user dictionary
    assert "SEASON" in capsys.readouterr().err
    qa = ["--task-path", str(tiny_models["reading_comprehension"])]
    assert main(["reading_comprehension", "杭州市是浙江省的省会", "省会是哪里", "--top-k", "2", *qa]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--threshold", "0.5", *senta])   # not a sentiment option
    assert "unrecognized arguments: --threshold" in capsys.readouterr().err


def test_task_options_are_listed_in_help(capsys):
    with pytest.raises(SystemExit):
        main(["ner", "--help"])
    out = capsys.readouterr().out
    assert "--entity-labels" in out and "--entity-only, --no-entity-only" in out and "--term-tree" in out


def test_pair_fields_fill_the_pairs_slots_in_order(tiny_models, tmp_path, capsys):
    # LCQMC's own layout: text_a, text_b, label.
    path = tmp_path / "lcqmc.tsv"
    path.write_text("text_a\ttext_b\tlabel\n怎么修改微信密码\t微信密码怎么改\t1\n明天天气\t信用卡\t0\n", encoding="utf-8")
    pairs = ["--task-path", str(tiny_models["text_similarity"])]
    assert main(["text_similarity", "--input", str(path), "--field", "text_a,text_b", *pairs]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["line"], r["text1"], r["text2"]) for r in rows] == [(2, "怎么修改微信密码", "微信密码怎么改"), (3, "明天天气", "信用卡")]
    assert [r["input_label"] for r in rows] == ["1", "0"]         # the file's own label, kept apart from ours


@pytest.mark.slow
@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_a_first_run_prints_its_results_and_nothing_else(tiny_sentiment, tmp_path, verbose):
    """The first run exports the static program (where Paddle's C++ side logs) and imports Paddle (which
    warns about ccache): by default stderr stays empty; --verbose lets Paddle speak."""
    import shutil
    import subprocess

    package = shutil.copytree(tiny_sentiment, tmp_path / "model")    # a fresh copy: nothing exported yet
    env = {**os.environ, "PPNLP_HOME": str(tmp_path / "home")}
    env.pop("TASKFLOW_VERBOSE", None)
    run = subprocess.run([sys.executable, "-m", "taskflow.cli", "sentiment_analysis", "这家店很好",
                          "--task-path", str(package), *(["--verbose"] if verbose else [])],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["text"] == "这家店很好"
    if verbose:
        assert run.stderr.strip(), "Paddle's own lines are shown"
    else:
        assert run.stderr == "", run.stderr


def test_download_of_a_task_without_a_bundled_model_says_how_to_train_one(capsys):
    assert main(["download", "text_classification"]) == 2
    err = capsys.readouterr().err
    assert "has no bundled model" in err and "taskflow train text_classification --train" in err
