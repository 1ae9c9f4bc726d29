"""`taskflow cache list` and `taskflow cache prune`, on real packages in a temporary cache: a tiny
sentiment package shipped (as if bundled) at version 1.0 and then 2.0, each put in the cache by
`taskflow download`, a task_path package's export, and jieba's bundled package."""

import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from make_tiny_models import make_tiny_sentiment

from taskflow import Taskflow, packages
from taskflow.cli import main

TASK, MODEL = "sentiment_analysis", "tiny_copy"


def _export_formats() -> tuple[str, str]:
    """This Paddle's static-export format, then the other Paddle's."""
    import paddle

    return ("json", "pdmodel") if int(paddle.__version__.split(".")[0]) >= 3 else ("pdmodel", "json")


FORMAT, OTHER_FORMAT = _export_formats()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_sentiment(tmp_path_factory.mktemp("tiny") / "package")


def _ship(resources: Path, tiny: Path, version: str) -> Path:
    """``tiny`` as the bundled package ``tiny_copy`` at ``version``: what an install of that version pins."""
    target = resources / TASK / MODEL
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(tiny, target)
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(name=MODEL, version=version)
    (target / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    return target


@pytest.fixture
def cache(tmp_path, monkeypatch, tiny, capsys) -> Path:
    """A cache home holding tiny_copy 1.0 (old) and 2.0 (pinned), with their static exports."""
    resources = tmp_path / "resources"
    shutil.copytree(packages._bundled_root() / "word_segmentation", resources / "word_segmentation")
    monkeypatch.setattr(packages, "_bundled_root", lambda: resources)
    home = tmp_path / "home"
    for version in ("1.0", "2.0"):       # an install of 1.0, then an upgrade to 2.0
        _ship(resources, tiny, version)
        assert main(["download", TASK, "--model", MODEL, "--home", str(home)]) == 0
    gc.collect()                         # the downloads' own models let go of their packages
    capsys.readouterr()
    return home


def _files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def _listed(home: Path, capsys) -> dict:
    assert main(["cache", "list", "--home", str(home), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _version(listed: dict, version: str) -> dict:
    return next(v for v in listed["versions"] if (v["model"], v["version"]) == (MODEL, version))


def _prune(home: Path, capsys, *flags: str) -> str:
    assert main(["cache", "prune", "--home", str(home), *flags]) == 0
    return capsys.readouterr().out


def test_a_missing_or_empty_cache_says_so(tmp_path, capsys):
    assert main(["cache", "list", "--home", str(tmp_path / "none")]) == 0
    assert "no cache at" in capsys.readouterr().out
    (tmp_path / "none" / "taskflow").mkdir(parents=True)
    assert main(["cache", "list", "--home", str(tmp_path / "none")]) == 0
    assert "is empty" in capsys.readouterr().out
    assert _listed(tmp_path / "none", capsys)["versions"] == []
    assert "nothing to prune" in _prune(tmp_path / "none", capsys, "--yes")


def test_list_shows_each_version_its_state_its_exports_and_task_path_exports(cache, tiny, capsys):
    assert main(["download", "word_segmentation", "--mode", "fast", "--home", str(cache)]) == 0   # bundled jieba
    Taskflow(TASK, task_path=tiny, home=cache)(["很好"])          # a task_path package exports into .exports
    capsys.readouterr()
    listed = _listed(cache, capsys)
    old, pinned = _version(listed, "1.0"), _version(listed, "2.0")
    assert (old["state"], pinned["state"]) == ("old", "pinned")
    assert old["verified"] == pinned["verified"] == "yes"
    assert [e["format"] for e in pinned["exports"]] == [FORMAT] and pinned["exports"][0]["size"] > 0
    assert pinned["size"] > pinned["exports"][0]["size"]
    jieba = next(v for v in listed["versions"] if v["model"] == "jieba")
    assert (jieba["state"], jieba["verified"], jieba["exports"]) == ("pinned", "yes", [])
    assert len(listed["task_path_exports"]) == 1 and listed["task_path_exports"][0]["format"] == FORMAT
    assert listed["total"] >= sum(v["size"] for v in listed["versions"])

    assert main(["cache", "list", "--home", str(cache)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["TASK", "MODEL", "VERSION", "SIZE", "STATE", "VERIFIED", "IN", "USE", "EXPORTS"]
    row = next(line for line in table if " 1.0 " in line).split()
    assert row[:3] == [TASK, MODEL, "1.0"] and row[4:6] == ["old", "yes"] and row[3][-1] in "KM"
    assert table[1].index(" 1.0 ") == table[2].index(" 2.0 ")     # aligned columns
    assert "(task_path export)" in "\n".join(table) and table[-1].startswith("3 versions (2 pinned by this install)")


def _copy_export(source: Path, name: str, **stamp) -> Path:
    """The export in ``source`` copied as ``name`` (``<format>-<key>``), its stamp saying so, with ``stamp``'s
    fields changed: a valid export but for what they change."""
    dest = source.with_name(name)
    shutil.copytree(source, dest)
    fmt, _, key = name.partition("-")
    program = f"inference.{source.name.partition('-')[0]}"      # the program file is named by its format
    (dest / program).rename(dest / f"inference.{fmt}")
    recorded = json.loads((dest / "export.json").read_text(encoding="utf-8"))
    recorded["key"] = key + recorded["key"][16:]
    recorded["files"] = {f"inference.{fmt}" if file == program else file: sha
                         for file, sha in recorded["files"].items()}
    (dest / "export.json").write_text(json.dumps({**recorded, **stamp}), encoding="utf-8")
    return dest


def test_prune_removes_the_old_version_stale_exports_and_leftover_temporaries(cache, capsys):
    pinned = cache / "taskflow" / TASK / MODEL / "2.0"
    (export,) = (pinned / "static").glob(f"{FORMAT}-*")
    paddle2 = _copy_export(export, export.name.replace(FORMAT, OTHER_FORMAT))      # the other Paddle's: valid
    stale = _copy_export(export, f"{FORMAT}-" + "0" * 16, built_from={"weights.npz": "0" * 64})   # other weights
    edited = _copy_export(export, f"{FORMAT}-" + "1" * 16)
    (edited / "inference.pdiparams").write_bytes(b"edited")                        # bytes its stamp does not record
    unknown = cache / "taskflow" / TASK / "no_such_model" / "1.0"                 # a model this install does not know
    unknown.mkdir(parents=True)
    (unknown / "weights.npz").write_bytes(b"w")
    left = pinned / f".weights.npz.{2 ** 22 + 7}.0123abcd.tmp"     # by a process that is gone, long ago
    left.write_bytes(b"x" * 1000)
    os.utime(left, (time.time() - 3600,) * 2)
    live = pinned / f".weights.npz.{os.getpid()}.0123abcd.tmp"     # this process is alive: kept
    live.write_bytes(b"x")
    before = _files(cache)

    out = _prune(cache, capsys, "--dry-run")
    assert _files(cache) == before                                  # a dry run removes nothing
    for path in (pinned.with_name("1.0"), stale, edited, left, unknown):
        assert f"would remove {path} (" in out
    assert str(live) not in out and str(paddle2) not in out and f"{export} " not in out and "would free" in out

    out = _prune(cache, capsys, "--yes")
    for path in (pinned.with_name("1.0"), stale, edited, left, unknown.parent):
        assert not path.exists(), path
    assert live.exists() and export.is_dir() and paddle2.is_dir()
    assert "removed 5, freed " in out
    assert Taskflow(TASK, model=MODEL, home=cache, offline=True).model.source == "cache"   # what this install runs
    assert "nothing to prune" in _prune(cache, capsys, "--yes")


def test_a_link_is_removed_as_a_link_and_its_target_is_left(cache, tmp_path, capsys):
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "keep.bin").write_bytes(b"mine")
    planted = cache / "taskflow" / TASK / MODEL / "0.1"
    planted.symlink_to(outside, target_is_directory=True)
    inner = cache / "taskflow" / TASK / MODEL / "1.0" / "elsewhere"
    inner.symlink_to(outside / "deep", target_is_directory=True)
    assert _version(_listed(cache, capsys), "0.1")["link"] == str(outside)

    out = _prune(cache, capsys, "--yes")
    assert "a link (to" in out and not os.path.lexists(planted) and not inner.parent.exists()
    assert (outside / "deep" / "keep.bin").read_bytes() == b"mine"


def test_prune_asks_on_a_terminal_and_refuses_without_one(cache, capsys, monkeypatch):
    old = cache / "taskflow" / TASK / MODEL / "1.0"
    assert main(["cache", "prune", "--home", str(cache)]) == 2      # no terminal to ask on, no --yes
    assert "pass --yes" in capsys.readouterr().err and old.is_dir()
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    answers = iter(["n", "y"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    assert main(["cache", "prune", "--home", str(cache)]) == 1 and old.is_dir()
    assert main(["cache", "prune", "--home", str(cache)]) == 0 and not old.exists()


_HOLD = """
import sys
from pathlib import Path
from taskflow import Taskflow, packages
packages._bundled_root = lambda: Path(sys.argv[1])
flow = Taskflow("sentiment_analysis", model="tiny_copy", home=sys.argv[2], offline=True)
print(flow.model.source, flow.model.version, flow.model.package.directory, flush=True)
sys.stdin.read()
"""


def test_a_package_loaded_by_a_live_process_is_kept(cache, tiny, tmp_path, capsys):
    """Two installs share a cache: one that pins 1.0 runs while the one that pins 2.0 prunes."""
    old_install = tmp_path / "old_install"
    _ship(old_install, tiny, "1.0")
    old = cache / "taskflow" / TASK / MODEL / "1.0"
    process = subprocess.Popen([sys.executable, "-c", _HOLD, str(old_install), str(cache)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        assert process.stdout.readline().split() == ["cache", "1.0", str(old)]
        assert _version(_listed(cache, capsys), "1.0")["in_use"] is True
        out = _prune(cache, capsys, "--yes")
        assert f"keep {old}: in use by a running process" in out and "nothing to prune" in out
        assert {"manifest.json", "vocab.txt", "weights.npz"} <= {path.name for path in old.iterdir()}
    finally:
        process.communicate("", timeout=60)
    assert process.returncode == 0
    assert _version(_listed(cache, capsys), "1.0")["in_use"] is False
    assert "removed 1, freed " in _prune(cache, capsys, "--yes") and not old.exists()
