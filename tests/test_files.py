"""taskflow.files: files written into place, and the strict JSON line."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from taskflow import files
from taskflow.files import (
    atomic_write_bytes,
    copy_into_place,
    json_line,
    json_text_line,
    remove_stale_temps,
    written_into_place,
)


def _temps(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def test_atomic_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "new" / "w.bin"   # folders on the way are made
    atomic_write_bytes(path, b"old")
    atomic_write_bytes(path, b"new")
    assert path.read_bytes() == b"new"
    assert _temps(path.parent) == []


def test_atomic_write_without_parents_refuses_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write_bytes(tmp_path / "gone" / "w.ckpt", b"{}", parents=False)
    assert not (tmp_path / "gone").exists()


def test_atomic_write_gives_the_permissions_asked_for(tmp_path):
    atomic_write_bytes(tmp_path / "private", b"x", permissions=0o600)
    assert stat.S_IMODE(os.stat(tmp_path / "private").st_mode) == 0o600


def test_a_failed_block_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with written_into_place(path, "w", encoding="utf-8") as out:
            out.write("half")
            raise RuntimeError("stopped")
    assert path.read_text(encoding="utf-8") == "old\n"
    assert _temps(tmp_path) == []


def test_a_link_planted_at_the_temporary_name_is_not_followed(tmp_path, monkeypatch):
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    planted = tmp_path / ".w.bin.planted.tmp"
    planted.symlink_to(victim)
    monkeypatch.setattr(files, "temp_name", lambda dest: planted)
    source = tmp_path / "source.bin"
    source.write_bytes(b"weights")
    for write in (lambda: atomic_write_bytes(tmp_path / "w.bin", b"weights"),
                  lambda: copy_into_place(source, tmp_path / "w.bin")):
        with pytest.raises(OSError):
            write()
        assert victim.read_text() == "precious\n" and planted.is_symlink()
    assert not (tmp_path / "w.bin").exists()


def test_copy_into_place_copies_the_bytes(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 5000)
    (tmp_path / "out").mkdir()
    copy_into_place(source, tmp_path / "out" / "w.bin")
    assert (tmp_path / "out" / "w.bin").read_bytes() == source.read_bytes()
    assert _temps(tmp_path / "out") == []


def test_a_failure_to_finish_the_file_is_raised_as_asked(tmp_path, monkeypatch):
    def full_disk(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(LookupError, match="No space left"):
        with written_into_place(tmp_path / "out.txt", "w", encoding="utf-8",
                                on_failure=lambda exc: LookupError(exc.strerror)) as out:
            out.write("done\n")
    assert os.listdir(tmp_path) == []


def test_stale_temporaries_of_gone_processes_are_removed_and_others_kept(tmp_path):
    dest = tmp_path / "w.bin"
    gone, mine, young = (tmp_path / f".w.bin.{pid}.0123abcd.tmp" for pid in (2 ** 22 + 1, os.getpid(), 2 ** 22 + 2))
    other = tmp_path / ".x.bin.99999999.0123abcd.tmp"
    for path in (gone, mine, young, other):
        path.write_bytes(b"part")
    old = time.time() - 3600
    for path in (gone, mine, other):
        os.utime(path, (old, old))
    remove_stale_temps(dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, young, other))


def test_json_line_is_strict_json_in_utf8():
    assert json_line({"text": "好", "score": 0.5}) == '{"text": "好", "score": 0.5}\n'.encode("utf-8")
    assert json_text_line(["好"]) == '["好"]\n'
    for value in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            json_line({"score": value})
        with pytest.raises(ValueError):
            json_text_line({"score": value})


def test_json_line_refuses_a_lone_surrogate_unless_ascii():
    with pytest.raises(UnicodeEncodeError):
        json_line({"text": "a\udc80"})
    line = json_line({"text": "好\udc80"}, ascii=True)
    assert line == b'{"text": "\\u597d\\udc80"}\n'
    assert json.loads(line) == {"text": "好\udc80"}
