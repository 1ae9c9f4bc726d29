"""The command line, called in-process through taskflow.cli.main."""

import json
import os
import sys

import pytest

from taskflow.cli import main


def _lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _api(package, items, task="sentiment_analysis", **options):
    """What the Python API gives for the same items and options, as JSON reads it back: what the
    command line must print."""
    from taskflow import Taskflow

    return json.loads(json.dumps(Taskflow(task, task_path=package, **options)(items), ensure_ascii=False))


def _assert_same(got, expected, where="result"):
    """JSON values equal, numbers within 1e-6: the same texts batched with others (a stream's chunks,
    one call) move a score by ~1e-7."""
    if isinstance(expected, float):
        assert isinstance(got, (int, float)) and abs(got - expected) <= 1e-6, f"{where}: {got!r} != {expected!r}"
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), f"{where}: {got!r} != {expected!r}"
        for key in expected:
            _assert_same(got[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{where}: {len(got)} != {len(expected)} items"
        for k, (g, e) in enumerate(zip(got, expected)):
            _assert_same(g, e, f"{where}[{k}]")
    else:
        assert got == expected, f"{where}: {got!r} != {expected!r}"


def _numbered(rows, first=1):
    """``rows`` without their ``line`` field, once it is checked to count from ``first``."""
    assert [r["line"] for r in rows] == list(range(first, first + len(rows)))
    return [{k: v for k, v in r.items() if k != "line"} for r in rows]


def test_texts_on_the_command_line(tiny_sentiment, capsys):
    assert main(["sentiment_analysis", "很好", "很差", "--task-path", str(tiny_sentiment)]) == 0
    _assert_same(_lines(capsys.readouterr().out), _api(tiny_sentiment, ["很好", "很差"]))


def test_txt_file_to_jsonl_keeps_order_and_writes_atomically(tiny_sentiment, tmp_path, capsys):
    texts = [f"第{i}条评论，很好" if i % 2 else f"第{i}条评论，太差" for i in range(2500)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    assert main(["senta", "--input", str(source), "--output", str(target), "--task-path", str(tiny_sentiment), "--quiet"]) == 0
    rows = _lines(target.read_text(encoding="utf-8"))
    _assert_same(_numbered(rows), _api(tiny_sentiment, texts))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.jsonl"], "temporary file left behind"


def test_csv_column_and_missing_column(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_text('id,review\n1,"很好, 真的"\n2,太差\n', encoding="utf-8")
    assert main(["sentiment_analysis", "--input", str(source), "--field", "review", "--task-path", str(tiny_sentiment)]) == 0
    rows = _lines(capsys.readouterr().out)
    assert [r.pop("id") for r in rows] == ["1", "2"]              # the record's other columns, kept
    _assert_same(_numbered(rows, first=2), _api(tiny_sentiment, ["很好, 真的", "太差"]))     # line 1: the header
    assert main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment)]) == 2
    out, err = capsys.readouterr()
    # One line: the file, the column missing, those it has, and the flag that picks one.
    assert out == "" and err.startswith(f"taskflow: error: {source}: no column 'text'") and err.count("\n") == 1
    assert "['id', 'review']" in err and "--field" in err
    # --field where there are no columns is refused, never ignored: a .txt file, or texts on the line.
    text = tmp_path / "in.txt"
    text.write_text("很好\n", encoding="utf-8")
    for argv in (["--input", str(text), "--field", "review"], ["--input", str(text), "--output", str(tmp_path / "o.jsonl"),
                                                               "--field", "review"], ["很好", "--field", "review"]):
        with pytest.raises(SystemExit) as info:
            main(["sentiment_analysis", *argv, "--task-path", str(tiny_sentiment)])
        assert info.value.code == 2 and "--field" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_bad_jsonl_line_is_reported_with_its_line_number(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text('{"text": "很好"}\n{"text": \n', encoding="utf-8")
    assert main(["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"taskflow: error: {source}:2: not valid JSON") and err.count("\n") == 1
    _assert_same(_numbered(_lines(out)), _api(tiny_sentiment, ["很好"]))      # the good line before it was answered


def test_bad_item_in_a_file_names_its_line(tiny_sentiment, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("很好\n\n很差\n", encoding="utf-8")
    target = tmp_path / "out.jsonl"
    assert main(["sentiment_analysis", "--input", str(source), "--output", str(target), "--task-path", str(tiny_sentiment)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taskflow: error: {source}:2: empty line") and err.count("\n") == 1
    assert "--on-error skip" in err                      # the way past it
    assert not target.exists(), "a failed job must not leave a partial output"


def test_list(capsys):
    from taskflow.registry import task_names

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "sentiment_analysis (aliases: sentiment, senta)" in out
    # Every registered task, each once, and under sentiment its models and modes.
    listed = [line.split(" (")[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert listed == sorted(task_names())
    senta = out.split("sentiment_analysis (")[1].split("\ntext_classification")[0]
    assert "    char_cnn [default]" in senta and "    mode accurate -> encoder_ensemble" in senta


def test_pack_writes_the_endpoint_layout(tiny_sentiment, tmp_path, capsys):
    assert main(["pack", str(tiny_sentiment), str(tmp_path / "served")]) == 0
    version_dir = tmp_path / "served" / "sentiment_analysis" / "tiny"
    (version,) = list(version_dir.iterdir())
    assert version.name == json.loads((tiny_sentiment / "manifest.json").read_text(encoding="utf-8"))["version"]
    assert sorted(p.name for p in version.iterdir()) == ["manifest.json", "vocab.txt", "weights.npz"]
    assert all((version / name).read_bytes() == (tiny_sentiment / name).read_bytes()
               for name in ("manifest.json", "vocab.txt", "weights.npz"))
    # Paths that cannot be a package or its destination are named, and nothing is written.
    package = tmp_path / "pkg"
    import shutil

    shutil.copytree(tiny_sentiment, package)
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    for argv, words in (([package, package], "is inside the package"), ([package, package / "sub"], "is inside the package"),
                        ([tmp_path / "a_file", tmp_path / "o"], "is not a folder"),
                        ([package, tmp_path / "a_file"], "is a file: name a folder")):
        assert main(["pack", *map(str, argv)]) == 2
        assert words in capsys.readouterr().err
    assert sorted(p.name for p in package.iterdir()) == ["manifest.json", "vocab.txt", "weights.npz"]


def test_version_output_dash_and_a_closed_pipe(tiny_sentiment, tmp_path, capsys, monkeypatch):
    from taskflow import __version__

    assert main(["--version"]) == 0 and capsys.readouterr().out == f"taskflow {__version__}\n"
    monkeypatch.chdir(tmp_path)
    assert main(["sentiment_analysis", "很好", "--output", "-", "--task-path", str(tiny_sentiment)]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "很好" and not (tmp_path / "-").exists()   # - is stdout
    import subprocess

    for command in ("list", "--help"):     # a pipe whose reader is gone: no traceback, exit 141
        code = f"import sys; from taskflow.cli import main; sys.exit(main([{command!r}]))"
        run = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -c \"{code}\" | true"],
                             capture_output=True, text=True)
        assert run.returncode == 141 and "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr


def test_unknown_task_exits_2_with_a_suggestion(capsys):
    assert main(["sentimnt_analysis", "好"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("taskflow: error: unknown task 'sentimnt_analysis'. Did you mean 'sentiment_analysis'?")
    assert "Available tasks: knowledge_mining, lexical_analysis, ner," in err and err.count("\n") == 1


def test_texts_and_input_are_exclusive(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["sentiment_analysis"])          # no texts, and pytest's stdin is no pipe to read
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("taskflow: error: give either texts or --input FILE")
    assert "`cat texts.txt | taskflow sentiment_analysis`" in err and err.count("\n") == 1
    path = tmp_path / "in.txt"
    path.write_text("好\n", encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["sentiment_analysis", "这家酒店很干净", "--input", str(path)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "either texts or --input" in err and err.count("\n") == 1


def test_download_puts_a_bundled_package_and_its_export_in_the_cache(tmp_path, monkeypatch, capsys):
    """`taskflow download` on a connected machine, copy $PPNLP_HOME over: the cache alone is enough."""
    from taskflow import Taskflow, packages

    assert main(["download", "sentiment_analysis", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    version = Taskflow("sentiment_analysis").task.manifest.version     # the bundled package's
    cached = tmp_path / "taskflow" / "sentiment_analysis" / "char_cnn" / version
    assert f"{cached} (bundled)" in out and "static graph:" in out
    assert (cached / ".verified").is_file() and list(cached.glob("static/*-*/inference.*"))
    empty = tmp_path / "no_bundle"
    empty.mkdir()
    # The package and those it requires (the fast mode's router and posts network), all downloaded.
    downloaded = sorted((tmp_path / "taskflow" / "sentiment_analysis").glob("*/*/manifest.json"))
    assert {path.parent.parent.name for path in downloaded} == {"char_cnn", "char_cnn_posts", "genre_router"}
    for manifest in downloaded:
        (empty / "sentiment_analysis" / manifest.parent.parent.name).mkdir(parents=True)
        (empty / "sentiment_analysis" / manifest.parent.parent.name / "manifest.json").write_bytes(manifest.read_bytes())
    texts = ["这家酒店很干净，服务也好", "等了一个小时还没上菜", "今天天气真好，出去玩了一天"]   # reviews and a post
    bundled = Taskflow("sentiment_analysis", offline=True)(texts)
    monkeypatch.setattr(packages, "_bundled_root", lambda: empty)   # only the manifests ship: files from the cache
    flow = Taskflow("sentiment_analysis", home=tmp_path, offline=True)
    assert flow.model.source == "cache" and flow(texts) == bundled


def test_every_task_option_is_a_flag(tiny_models, capsys):
    """Flags come from the tasks' own options: each reaches the task, typed."""
    senta = ["--task-path", str(tiny_models["sentiment_analysis"])]
    assert main(["sentiment_analysis", "很好", "--return-all-scores", *senta]) == 0
    (result,) = _api(tiny_models["sentiment_analysis"], ["很好"], return_all_scores=True)
    assert json.loads(capsys.readouterr().out) == result and set(result["scores"]) == {"negative", "positive"}
    pairs = ["--task-path", str(tiny_models["text_similarity"])]
    for threshold, label in (("0", 1), ("1", 0)):      # each end: one label whatever the package's own threshold
        assert main(["text_similarity", "怎么修改微信密码", "微信密码怎么改", "--threshold", threshold, *pairs]) == 0
        (result,) = _api(tiny_models["text_similarity"], [("怎么修改微信密码", "微信密码怎么改")], "text_similarity",
                         threshold=float(threshold))
        assert json.loads(capsys.readouterr().out) == result and result["label"] == label
    lexical = ["--task-path", str(tiny_models["ner"])]
    assert main(["ner", "我在北京大学", "--entity-labels", "ORG,LOC", "--user-dict", "-", *lexical]) == 2
    assert "user_dict" in capsys.readouterr().err            # a missing file is one clear line
    assert main(["ner", "春天我在北京大学", "--entity-labels", "SEASON", "--entity-only", *lexical,
                 "--user-dict-format", "lac"]) == 2                # SEASON is no tag without a user dictionary
    assert "SEASON" in capsys.readouterr().err
    qa = ["--task-path", str(tiny_models["reading_comprehension"])]
    assert main(["reading_comprehension", "杭州市是浙江省的省会", "省会是哪里", "--top-k", "2", *qa]) == 0
    (answers,) = _api(tiny_models["reading_comprehension"], [("杭州市是浙江省的省会", "省会是哪里")], "reading_comprehension",
                      top_k=2)
    assert json.loads(capsys.readouterr().out) == answers and len(answers) == 2
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--threshold", "0.5", *senta])   # not a sentiment option
    assert "unknown option --threshold (see" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sentiment_analysis", "很好", "--retrun-all-scores", "还行吧", *senta])   # a misspelt flag: the nearest one
    assert "error: unknown option --retrun-all-scores (did you mean --return-all-scores?) (see" in capsys.readouterr().err


def test_a_value_option_before_the_task_name_keeps_the_tasks_flags(tiny_models, tmp_path, capsys):
    """`taskflow --mode fast ner --user-dict d.txt ...`: "fast" is --mode's value, not the task."""
    words = tmp_path / "dict.txt"
    words.write_text("北京大学\n", encoding="utf-8")
    lexical = str(tiny_models["ner"])
    for argv in (["--mode", "fast", "--task-path", lexical, "ner"], [f"--task-path={lexical}", "--mode", "fast", "ner"],
                 ["--quiet", "--task-pa", lexical, "ner"]):   # --task-pa: argparse's prefix of --task-path
        assert main([*argv, "--user-dict", str(words), "我在北京大学"]) == 0, capsys.readouterr().err
        assert "北京大学" in [word for word, _ in json.loads(capsys.readouterr().out)["words"]]


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
    assert [r.pop("input_label") for r in rows] == ["1", "0"]         # the file's own label, kept apart from ours
    _assert_same(_numbered(rows, first=2), _api(tiny_models["text_similarity"], [("怎么修改微信密码", "微信密码怎么改"),
                                                                             ("明天天气", "信用卡")], "text_similarity"))


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
    _assert_same([json.loads(run.stdout)], _api(package, ["这家店很好"]))
    if verbose:
        assert run.stderr.strip(), "Paddle's own lines are shown"
    else:
        assert run.stderr == "", run.stderr


def test_download_of_a_package_with_no_network_caches_its_files_and_no_export(tmp_path, monkeypatch, capsys):
    """word_segmentation mode="fast" is jieba over a dictionary: nothing to export; offline it runs
    from the cache alone."""
    from taskflow import Taskflow, packages

    assert main(["download", "word_segmentation", "--mode", "fast", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "word_segmentation/jieba" in out and "static graph:" not in out
    cached = next((tmp_path / "taskflow" / "word_segmentation" / "jieba").iterdir())
    empty = tmp_path / "no_bundle"
    (empty / "word_segmentation" / "jieba").mkdir(parents=True)
    (empty / "word_segmentation" / "jieba" / "manifest.json").write_bytes((cached / "manifest.json").read_bytes())
    monkeypatch.setattr(packages, "_bundled_root", lambda: empty)
    flow = Taskflow("word_segmentation", mode="fast", home=tmp_path, offline=True)
    assert flow.model.source == "cache" and flow("李明在华为工作") == ["李明", "在", "华为", "工作"]


def test_download_of_a_task_without_a_bundled_model_says_how_to_train_one(capsys):
    assert main(["download", "text_classification"]) == 2
    err = capsys.readouterr().err
    assert "has no bundled model" in err and "taskflow train text_classification --train" in err


# ------------------------------------------------------------------ what a new user meets

def _flag_help(help_text: str) -> dict[str, str]:
    """``{flag: its help on one line}`` from ``--help`` output (argparse wraps it, and puts a long flag's
    help on the lines below)."""
    flags: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            flags[current] = " ".join(line.split()[1:])
        elif current and line.startswith("    "):
            flags[current] += " " + line.strip()
        else:
            current = None
    return flags


def _stdin(monkeypatch, text: str):
    """Standard input as a pipe holding ``text`` (in-process: a stream with no descriptor)."""
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(text.encode("utf-8")))))


def test_train_help_is_usage_on_stdout_and_exit_0(capsys):
    for flag in ("--help", "-h"):
        assert main(["train", flag]) == 0
        out, err = capsys.readouterr()
        assert out.startswith("usage: taskflow train TASK") and "text_classification" in out and err == ""
    with pytest.raises(SystemExit) as info:
        main(["train", "sentiment_analysis", "--help"])
    assert info.value.code == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: taskflow train sentiment_analysis") and err == ""
    assert main(["train"]) == 2                          # nothing asked: the usage, as an error
    assert capsys.readouterr().err.startswith("usage: taskflow train TASK")


def test_a_pipe_with_no_texts_is_read_a_text_a_line(tiny_models, monkeypatch, capsys):
    _stdin(monkeypatch, "很好\n很差\n")
    assert main(["senta", "--task-path", str(tiny_models["sentiment_analysis"])]) == 0
    rows = _lines(capsys.readouterr().out)
    _assert_same(_numbered(rows), _api(tiny_models["sentiment_analysis"], ["很好", "很差"]))
    _stdin(monkeypatch, "怎么修改微信密码\t微信密码怎么改\n明天\t后天")     # a pair task: a tab between the two
    assert main(["text_similarity", "--task-path", str(tiny_models["text_similarity"])]) == 0
    _assert_same(_numbered(_lines(capsys.readouterr().out)), _api(
        tiny_models["text_similarity"], [("怎么修改微信密码", "微信密码怎么改"), ("明天", "后天")], "text_similarity"))


def test_input_dash_reads_stdin_to_stdout_or_to_output(tiny_sentiment, tmp_path, monkeypatch, capsys):
    expected = _api(tiny_sentiment, ["很好", "很差"])
    _stdin(monkeypatch, "很好\n很差\n")
    assert main(["senta", "--input", "-", "--task-path", str(tiny_sentiment)]) == 0
    _assert_same(_numbered(_lines(capsys.readouterr().out)), expected)
    _stdin(monkeypatch, "很好\n很差\n")
    target = tmp_path / "out.jsonl"
    assert main(["senta", "--input", "-", "--output", str(target), "--task-path", str(tiny_sentiment)]) == 0
    _assert_same(_numbered(_lines(target.read_text(encoding="utf-8"))), expected)
    assert capsys.readouterr().out == "" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
    _stdin(monkeypatch, "很好\n\n很差\n")             # a bad line stops it, and no half file is left
    assert main(["senta", "--input", "-", "--output", str(target), "--task-path", str(tiny_sentiment)]) == 2
    assert "<stdin>:2: empty line" in capsys.readouterr().err
    assert [r["text"] for r in _lines(target.read_text(encoding="utf-8"))] == ["很好", "很差"]   # the old one stays
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
    with pytest.raises(SystemExit):                     # a checkpointed job needs a file it can read again
        main(["senta", "--input", "-", "--output", str(target), "--resume", "--task-path", str(tiny_sentiment)])
    assert "--resume needs --input FILE" in capsys.readouterr().err


def test_a_terminal_is_not_read_as_input(tiny_sentiment, monkeypatch, capsys):
    class Terminal:
        def readable(self):
            return True

        def isatty(self):
            return True

        def read(self, *args):
            raise AssertionError("a terminal must not be read")

        readline = read

    monkeypatch.setattr(sys, "stdin", Terminal())
    with pytest.raises(SystemExit):
        main(["senta", "--task-path", str(tiny_sentiment)])
    assert "give either texts or --input FILE (or pipe texts in" in capsys.readouterr().err


@pytest.mark.slow
def test_piped_lines_are_answered_as_they_come(tiny_sentiment, tmp_path):
    """`producer | taskflow senta`: each line's result comes out before the next line is written."""
    import subprocess

    env = {**os.environ, "PPNLP_HOME": str(tmp_path / "home")}
    with subprocess.Popen([sys.executable, "-m", "taskflow.cli", "senta", "--task-path", str(tiny_sentiment)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          encoding="utf-8", env=env) as run:
        for number, text in enumerate(("很好", "很差", "一般"), 1):
            run.stdin.write(text + "\n")
            run.stdin.flush()
            line = run.stdout.readline()
            assert line, run.stderr.read()
            # each line answered as it comes: this would block forever if lines were batched
            _assert_same(_numbered([json.loads(line)], number), _api(tiny_sentiment, [text]))
        run.stdin.close()
        assert run.wait(timeout=60) == 0 and run.stdout.read() == "" and run.stderr.read() == ""


def test_short_model_names_on_the_command_line(capsys):
    """ner lists lexical_analysis/bigru_crf: --model bigru_crf names it (here through `download`, which
    resolves the model as a run does and puts it into the test's cache)."""
    assert main(["download", "ner", "--model", "bigru_crf"]) == 0
    assert "lexical_analysis/bigru_crf" in capsys.readouterr().out
    assert main(["ner", "李明", "--model", "nope"]) == 2
    assert "available: lexical_analysis/bigru_crf, knowledge_mining/termtree" in capsys.readouterr().err
    assert main(["sentiment_analysis", "很好", "--model", "/any/dir/evil"]) == 2
    assert "is a path" in capsys.readouterr().err


def test_an_option_of_the_accurate_mode_says_so(tiny_models, tmp_path, capsys):
    tree = tmp_path / "tree.tsv"
    tree.write_text("", encoding="utf-8")
    assert main(["ner", "李明在北京", "--term-tree", str(tree), "--task-path", str(tiny_models["ner"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("taskflow: error: term_tree is an option of ner's mode 'accurate'") and "--mode accurate" in err
    with pytest.raises(SystemExit):
        main(["ner", "--help"])
    flags = _flag_help(capsys.readouterr().out)
    assert flags["--term-tree"].endswith("[--mode accurate only]") and "only" not in flags["--user-dict"]


def test_training_is_quiet_without_verbose(tmp_path):
    """`taskflow train` as quiet as inference: no "No ccache found" UserWarning from Paddle's import."""
    import subprocess

    rows = "".join(f"{'好棒赞美香'[i % 5] * 2}{'的了'[i % 2]},5\n" if i % 2 else f"{'差烂坏慢贵'[i % 5] * 2}的,1\n"
                   for i in range(40))
    (tmp_path / "train.csv").write_text("text,label\n" + rows, encoding="utf-8")
    command = [sys.executable, "-m", "taskflow.cli", "train", "text_classification", "--train",
               str(tmp_path / "train.csv"), "--out", str(tmp_path / "model"), "--epochs", "1", "--embed-dim", "8",
               "--bigram-buckets", "64", "--ngram-dim", "4", "--conv-channels", "8", "--max-kernel", "2", "--quiet"]
    env = {k: v for k, v in os.environ.items() if k != "TASKFLOW_VERBOSE"}
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "ccache" not in run.stderr and "Warning" not in run.stderr, run.stderr
    assert (tmp_path / "model" / "manifest.json").is_file()


def test_an_empty_input_says_0_records(tiny_sentiment, tmp_path, capsys, monkeypatch):
    senta = ["--task-path", str(tiny_sentiment)]
    empty, header = tmp_path / "empty.txt", tmp_path / "header.csv"
    empty.write_text("", encoding="utf-8")
    header.write_text("id,text\n", encoding="utf-8")
    assert main(["senta", "--input", str(empty), *senta]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err == f"taskflow: 0 records in {empty}\n"
    target = tmp_path / "out.jsonl"
    assert main(["senta", "--input", str(header), "--output", str(target), "--quiet", *senta]) == 0
    assert capsys.readouterr().err == f"taskflow: 0 records in {header}; wrote an empty {target}\n"
    assert target.read_text(encoding="utf-8") == ""
    _stdin(monkeypatch, "")
    assert main(["senta", *senta]) == 0
    assert capsys.readouterr().err == "taskflow: 0 records in <stdin>\n"


def test_help_texts_say_what_each_flag_takes(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")       # fewer wrapped words
    with pytest.raises(SystemExit):
        main(["ner", "--help"])
    flags = _flag_help(capsys.readouterr().out)
    assert "one entry a line" in flags["--user-dict"] and "see " not in flags["--user-dict"]
    assert all(choice in flags["--user-dict-format"] for choice in ("auto", "lac", "jieba"))
    assert "gpu:N" in flags["--device"] and "per forward pass" in flags["--batch-size"]
    with pytest.raises(SystemExit):
        main(["reading_comprehension", "--help"])
    flags = _flag_help(capsys.readouterr().out)
    assert "no answer" in flags["--handle-impossible-answer"] and "docstring" not in flags["--handle-impossible-answer"]
    bare = [flag for flag, text in flags.items()
            if not text.split()[1 if text.split() and (text.split()[0].isupper() or text[0] == "{") else 0:]]
    assert bare == [], f"flags without help: {bare}"


def test_argparse_errors_are_one_taskflow_error_line(capsys):
    """Like every other error (README: one `taskflow: error:` line), not argparse's `prog: error:`."""
    errors = {}
    for argv in (["sentiment_analysis", "很好", "--batch-size", "many"], ["list", "--nope"], ["pack", "only_one"],
                 ["train", "text_classification", "--train", "x.csv"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        errors[argv[0]] = capsys.readouterr().err
    for err in errors.values():
        assert err.startswith("taskflow: error: ") and err.count("\n") == 1, err
    assert "(see `taskflow sentiment_analysis --help`)" in errors["sentiment_analysis"]
    assert "(see `taskflow train text_classification --help`)" in errors["train"]


def test_a_narrow_window_scales_its_stride(tiny_models, capsys):
    qa = ["--task-path", str(tiny_models["reading_comprehension"])]
    assert main(["reading_comprehension", "杭州市是浙江省的省会", "省会是哪里", "--max-seq-len", "8", *qa]) == 0
    (narrow,) = _api(tiny_models["reading_comprehension"], [("杭州市是浙江省的省会", "省会是哪里")], "reading_comprehension",
                     max_seq_len=8)
    assert json.loads(capsys.readouterr().out) == narrow and narrow["answer"]
    assert main(["reading_comprehension", "杭州市是浙江省的省会", "省会是哪里", "--max-seq-len", "8",
                 "--doc-stride", "8", *qa]) == 2
    err = capsys.readouterr().err      # what is wrong, in the flags' own names, and both ways out
    assert err.startswith("taskflow: error: doc_stride (8) must be smaller than max_seq_len (8)")
    assert err.count("\n") == 1
    assert "lower doc_stride (--doc-stride) or raise max_seq_len (--max-seq-len)" in err
    from taskflow import Taskflow

    default = Taskflow("reading_comprehension", task_path=tiny_models["reading_comprehension"]).task
    narrow = Taskflow("reading_comprehension", task_path=tiny_models["reading_comprehension"], max_seq_len=8).task
    assert default.doc_stride == default.manifest.get("doc_stride", 128)     # the model's own windows: unchanged
    assert 0 <= narrow.doc_stride < 8 and narrow.doc_stride == default.doc_stride * 8 // default.max_seq_len


def test_streaming_to_stdout_writes_every_result_before_a_bad_line(tiny_sentiment, tmp_path, capsys):
    """2,000 good lines, a blank one, 5 more: 1,024 results came out and 976 were lost."""
    texts = [f"第{i}条，{'很好' if i % 2 else '太差'}" for i in range(2000)]
    source = tmp_path / "bad.txt"
    source.write_text("\n".join(texts + [""] + texts[:5]) + "\n", encoding="utf-8")
    assert main(["senta", "--input", str(source), "--task-path", str(tiny_sentiment)]) == 2
    captured = capsys.readouterr()
    _assert_same(_numbered(_lines(captured.out)), _api(tiny_sentiment, texts))
    assert captured.err.startswith(f"taskflow: error: {source}:2001: empty line") and captured.err.count("\n") == 1


@pytest.mark.slow
def test_a_pipe_gets_every_result_before_a_bad_line(tiny_sentiment, tmp_path):
    """Through a pipe, 1,000 good lines then a bad one printed nothing."""
    import subprocess

    texts = [f"第{i}条，{'很好' if i % 2 else '太差'}" for i in range(1000)]
    env = {**os.environ, "PPNLP_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "taskflow.cli", "senta", "--task-path", str(tiny_sentiment)],
                         input="\n".join(texts) + "\n\n很好\n", capture_output=True, text=True, encoding="utf-8",
                         env=env, timeout=120)
    assert run.returncode == 2
    _assert_same(_numbered([json.loads(line) for line in run.stdout.splitlines()]), _api(tiny_sentiment, texts))
    assert run.stderr.startswith("taskflow: error: <stdin>:1001: empty line") and run.stderr.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("name, output", [("SIGTERM", False), ("SIGHUP", False), ("SIGTERM", True)],
                         ids=["SIGTERM-stdout", "SIGHUP-stdout", "SIGTERM-output"])
def test_a_stop_signal_ends_a_streaming_run_with_one_error_line(tiny_sentiment, tmp_path, name, output):
    """A pipe left open, a signal once its first line is done: stdout holds whole results only (no Paddle
    dump), stderr one `taskflow: error:` line, and --output's temporary file is gone."""
    import signal
    import subprocess
    import time

    work = tmp_path / "work"
    work.mkdir()
    extra = ["--output", str(work / "out.jsonl")] if output else []
    with subprocess.Popen([sys.executable, "-m", "taskflow.cli", "senta", "--task-path", str(tiny_sentiment), *extra],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          encoding="utf-8", start_new_session=True) as run:
        run.stdin.write("很好\n")
        run.stdin.flush()
        if output:   # its result is in the hidden temporary file the output is made from
            deadline = time.monotonic() + 60
            while not any(p.stat().st_size for p in work.iterdir()) and time.monotonic() < deadline:
                time.sleep(0.05)
        else:
            assert json.loads(run.stdout.readline())["text"] == "很好"
        run.send_signal(getattr(signal, name))
        out, err = run.communicate(timeout=60)
    assert run.returncode == 2, err
    assert all(json.loads(line) for line in out.splitlines()) and "FatalError" not in out + err
    left = "out.jsonl was not written" if output else "the results before it were written to standard output"
    assert err.startswith(f"taskflow: error: stopped by {name}; ") and left in err and err.count("\n") == 1, err
    assert list(work.iterdir()) == []


def test_the_top_level_help_is_plain_text(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    assert "taskflow serve" in shown and "``" not in shown and ":class:" not in shown
