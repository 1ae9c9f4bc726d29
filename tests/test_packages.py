"""taskflow.packages: manifests, the cache, resolution, downloads and archives.

Downloads go to a real HTTP server on 127.0.0.1 started by the ``server``
fixture; nothing about HTTP is mocked.  The server is scripted per test
(error statuses, dropped connections, slow answers, no Range support) and
records every request it sees, so a test can say exactly what went over the wire.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import socket
import subprocess
import sys
import tarfile
import textwrap
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from taskflow import packages
from taskflow.errors import (
    ChecksumError,
    DownloadError,
    ManifestError,
    ModelNotFoundError,
    OfflineModeError,
    UnsafeArchiveError,
)
from taskflow.packages import Manifest, download_file, extract_archive, pack, resolve, write_package


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def files_under(directory: Path) -> list[str]:
    """Every file below ``directory`` (relative, sorted); [] when it does not exist."""
    if not directory.exists():
        return []
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if not p.is_dir())


# ----------------------------------------------------------------- the server

class FileServer:
    """What the test controls and observes; the handler below reads it."""

    def __init__(self, root: Path, url: str):
        self.root, self.url = root, url
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.status: dict[str, int] = {}  # path -> error status to answer
        self.drop: dict[str, tuple[int, int]] = {}  # path -> (bytes to send, on the first K requests)
        self.gate = threading.Event()  # a body is sent once this is set (tests hold a download open)
        self.gate.set()
        self.ignore_range = False
        self.lock = threading.Lock()

    def put(self, path: str, data: bytes) -> str:
        """Serve ``data`` at ``/path`` and return its URL."""
        file = self.root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        return f"{self.url}/{path}"

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == "/" + path)

    def ranges(self, path: str) -> list[str | None]:
        return [r for p, r in self.requests if p == "/" + path]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so a dropped connection is a real truncation

    def do_GET(self):
        script: FileServer = self.server.script
        path = unquote(urlsplit(self.path).path)
        asked = self.headers.get("Range")
        with script.lock:
            script.requests.append((path, asked))
            nth = sum(1 for p, _ in script.requests if p == path)
        if path in script.status:
            self.send_error(script.status[path])
            return
        file = script.root / path.lstrip("/")
        if not file.is_file():
            self.send_error(404)
            return
        body = file.read_bytes()
        start = 0
        if asked and not script.ignore_range:
            start = int(re.fullmatch(r"bytes=(\d+)-", asked).group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        body = body[start:]
        if path in script.drop and nth <= script.drop[path][1]:
            body = body[: script.drop[path][0]]
            self.close_connection = True  # the client sees EOF before Content-Length
        script.gate.wait(timeout=60)
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    root = tmp_path / "served"
    root.mkdir()
    httpd.script = FileServer(root, f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.script
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own (the session one is shared with other tests)."""
    path = tmp_path / "home"
    monkeypatch.setenv("PPNLP_HOME", str(path))
    return path


# ------------------------------------------------------------ download_file

@pytest.mark.network
def test_download_file_writes_verified_bytes_and_shows_progress(server, tmp_path, capfd, monkeypatch):
    data = payload(10_000)
    url = server.put("pkg/weights.bin", data)
    dest = tmp_path / "dl" / "weights.bin"
    # Every update redraws (no 0.1 s refresh interval to outlast), so the bar is drawn at 100%: no timing.
    import taskflow.display
    from tqdm import tqdm

    monkeypatch.setattr(taskflow.display, "progress_bar", lambda **options: tqdm(mininterval=0, **options))

    assert download_file(url, dest, sha256=sha256(data), size=len(data), progress=True, backoff=0) == dest

    assert dest.read_bytes() == data
    assert os.listdir(dest.parent) == ["weights.bin"]  # no temporary file left beside it
    err = capfd.readouterr().err
    assert "weights.bin" in err and "100%" in err


@pytest.mark.network
def test_download_file_is_quiet_without_progress_and_skips_a_good_file(server, tmp_path, capfd):
    data = payload(3000)
    url = server.put("a.bin", data)
    dest = tmp_path / "dl" / "a.bin"

    download_file(url, dest, sha256=sha256(data), size=len(data), progress=False)
    download_file(url, dest, sha256=sha256(data), size=len(data), progress=False)

    assert dest.read_bytes() == data
    assert server.count("a.bin") == 1  # the second call found the file already verified
    assert "a.bin" not in capfd.readouterr().err


@pytest.mark.network
def test_download_404_names_the_url_and_is_not_retried(server, tmp_path):
    url = f"{server.url}/missing/file.bin"
    with pytest.raises(DownloadError) as info:
        download_file(url, tmp_path / "dl" / "file.bin", sha256="0" * 64, backoff=0)
    assert info.value.status == 404
    assert info.value.url == url and url in str(info.value)
    assert server.count("missing/file.bin") == 1
    assert files_under(tmp_path / "dl") == []


@pytest.mark.network
def test_download_500_is_retried_with_backoff_then_fails(server, tmp_path):
    url = server.put("flaky.bin", b"x")
    server.status["/flaky.bin"] = 500
    sleeps: list[float] = []

    with pytest.raises(DownloadError) as info:
        download_file(url, tmp_path / "dl" / "flaky.bin", sha256=sha256(b"x"), retries=2, backoff=0.01,
                      sleep=sleeps.append)

    assert info.value.status == 500
    assert info.value.url == url and url in str(info.value)
    assert server.count("flaky.bin") == 3
    assert sleeps == [0.01, 0.02]
    assert files_under(tmp_path / "dl") == []


@pytest.mark.network
def test_download_checksum_mismatch_leaves_nothing(server, tmp_path):
    data = payload(5000)
    url = server.put("w.bin", data)
    dest_dir = tmp_path / "cache"
    dest_dir.mkdir()
    (dest_dir / "keep.txt").write_text("unrelated")

    with pytest.raises(ChecksumError) as info:
        download_file(url, dest_dir / "w.bin", sha256=sha256(b"other"), size=len(data), backoff=0)

    assert info.value.url == url
    assert os.listdir(dest_dir) == ["keep.txt"]  # no w.bin, no temporary file
    with pytest.raises(ChecksumError):
        download_file(url, tmp_path / "new" / "w.bin", sha256=sha256(b"other"), backoff=0)
    assert files_under(tmp_path / "new") == []


@pytest.mark.network
def test_dropped_connection_is_resumed_with_a_range_request(server, tmp_path):
    data = payload(300_000)
    url = server.put("big.bin", data)
    server.drop["/big.bin"] = (100_000, 1)
    dest = tmp_path / "dl" / "big.bin"

    download_file(url, dest, sha256=sha256(data), size=len(data), backoff=0)

    assert dest.read_bytes() == data
    first, second = server.ranges("big.bin")
    assert first is None
    assert re.fullmatch(r"bytes=[1-9]\d*-", second), second
    assert os.listdir(dest.parent) == ["big.bin"]


@pytest.mark.network
def test_dropped_connection_restarts_when_the_server_ignores_range(server, tmp_path):
    data = payload(300_000, seed=1)
    url = server.put("big.bin", data)
    server.drop["/big.bin"] = (100_000, 1)
    server.ignore_range = True
    dest = tmp_path / "dl" / "big.bin"

    download_file(url, dest, sha256=sha256(data), size=len(data), backoff=0)

    assert dest.read_bytes() == data  # a 200 answer to a Range request is taken as the whole file
    assert server.count("big.bin") == 2
    assert os.listdir(dest.parent) == ["big.bin"]


@pytest.mark.network
def test_dropped_connection_without_known_size_is_still_resumed(server, tmp_path):
    data = payload(200_000, seed=2)
    url = server.put("big.bin", data)
    server.drop["/big.bin"] = (50_000, 2)
    dest = tmp_path / "dl" / "big.bin"

    download_file(url, dest, sha256=sha256(data), backoff=0)

    assert dest.read_bytes() == data
    assert server.count("big.bin") == 3


# --------------------------------------------------------------- resolution

TASK, MODEL, VERSION = "toy_task", "toy", "1.2"
FILES = {"weights.bin": payload(150_000, seed=3), "vocab.txt": "的\n一\n是\n".encode()}


def make_package(directory: Path, files: dict[str, bytes] = FILES) -> Manifest:
    sources = directory.parent / f"{directory.name}-sources"
    sources.mkdir(parents=True)
    for name, data in files.items():
        (sources / name).write_bytes(data)
    return write_package(
        directory,
        {"task": TASK, "name": MODEL, "version": VERSION, "labels": ["a", "b"]},
        {name: sources / name for name in files},
    )


@pytest.fixture
def pinned(tmp_path, monkeypatch, server, home):
    """A model taskflow pins (manifest only, no bundled weights) that ``server`` hosts."""
    manifest = make_package(tmp_path / "package")
    pack(tmp_path / "package", server.root)
    bundled = tmp_path / "bundled"
    (bundled / TASK / MODEL).mkdir(parents=True)
    (bundled / TASK / MODEL / "manifest.json").write_bytes((tmp_path / "package" / "manifest.json").read_bytes())
    monkeypatch.setattr(packages, "_bundled_root", lambda: bundled)
    return manifest


def served(name: str) -> str:
    return f"{TASK}/{MODEL}/{VERSION}/{name}"


@pytest.fixture
def connects(monkeypatch) -> list:
    """Every socket connection attempted during the test."""
    calls = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        calls.append(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        calls.append(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return calls


@pytest.mark.network
def test_resolve_downloads_verifies_then_uses_the_cache(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url + "/")

    package = resolve(TASK, MODEL, progress=False)

    assert package.source == "download"
    assert package.directory == home / "taskflow" / TASK / MODEL / VERSION
    for name, data in FILES.items():
        assert package.path(name).read_bytes() == data
        assert server.count(served(name)) == 1
    assert (package.directory / ".verified").read_text().strip() == pinned.fingerprint()
    assert files_under(package.directory) == sorted([".verified", *FILES])

    again = resolve(TASK, MODEL, progress=False)

    assert again.source == "cache" and again.directory == package.directory
    assert len(server.requests) == len(FILES)


@pytest.mark.network
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_offline_mode_never_opens_a_socket_and_says_how_to_get_the_files(pinned, server, home, monkeypatch, connects, how):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    if how == "environment":
        monkeypatch.setenv("PPNLP_OFFLINE", "1")

    with pytest.raises(OfflineModeError) as info:
        resolve(TASK, MODEL, offline=True if how == "argument" else None)

    message = str(info.value)
    for name in FILES:
        assert name in message
    assert "taskflow download" in message
    assert server.requests == []
    assert connects == []
    assert files_under(home / "taskflow" / TASK) == []


def test_no_endpoint_is_a_model_not_found_error_naming_the_variable(pinned, home):
    with pytest.raises(ModelNotFoundError) as info:
        resolve(TASK, MODEL)
    assert not isinstance(info.value, OfflineModeError)
    assert "PPNLP_ENDPOINT" in str(info.value)


@pytest.mark.network
def test_corrupted_cached_file_is_detected_and_downloaded_again(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    package = resolve(TASK, MODEL, progress=False)
    weights = package.path("weights.bin")
    corrupted = bytes(b ^ 0xFF for b in weights.read_bytes()[:16]) + weights.read_bytes()[16:]
    weights.write_bytes(corrupted)  # same size, different bytes
    (package.directory / ".verified").unlink()

    again = resolve(TASK, MODEL, progress=False)

    assert again.source == "download"
    assert weights.read_bytes() == FILES["weights.bin"]
    assert server.count(served("weights.bin")) == 2
    assert server.count(served("vocab.txt")) == 1  # the intact file is kept
    assert (again.directory / ".verified").is_file()


@pytest.mark.network
def test_tampered_file_on_the_server_is_refused(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    # weights.bin is the first file of the manifest, so nothing has been downloaded before it.
    tampered = server.root / served("weights.bin")
    tampered.write_bytes(payload(len(FILES["weights.bin"]), seed=99))

    with pytest.raises(ChecksumError):
        resolve(TASK, MODEL, progress=False)

    assert files_under(home / "taskflow" / TASK) == []


@pytest.mark.network
def test_http_error_during_resolve_names_the_url(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    (server.root / served("vocab.txt")).unlink()

    with pytest.raises(DownloadError) as info:
        resolve(TASK, MODEL, progress=False)

    assert info.value.status == 404
    assert info.value.url == f"{server.url}/{served('vocab.txt')}"


_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import taskflow.packages as packages

    packages._bundled_root = lambda: Path(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    real_lock = packages._file_lock

    class Traced:   # says when this process, having found the cache empty, asks for the lock
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            print("locking", flush=True)
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    packages._file_lock = lambda home, key: Traced(real_lock(home, key))
    package = packages.resolve(sys.argv[2], sys.argv[3], progress=False)
    print(json.dumps({"source": package.source, "dir": str(package.directory)}), flush=True)
""")


@pytest.mark.slow
@pytest.mark.network
def test_two_processes_download_a_file_once(pinned, server, home, monkeypatch, tmp_path):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    server.gate.clear()  # the first download stays open until both processes have asked for the lock
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(packages._bundled_root()), TASK, MODEL],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:   # both found the cache empty and asked for the lock (one holds it)
            assert child.stdout.readline().strip() == "locking", child.stderr.read()
        server.gate.set()
        results = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()

    for child, (out, err) in zip(children, results):
        assert child.returncode == 0, err
        answer = json.loads(out.strip().splitlines()[-1])
        # Both found the cache empty, so they really overlapped; the lock made one wait.
        assert answer["source"] == "download"
        assert answer["dir"] == str(home / "taskflow" / TASK / MODEL / VERSION)
    for name, data in FILES.items():
        assert server.count(served(name)) == 1
        assert (home / "taskflow" / TASK / MODEL / VERSION / name).read_bytes() == data


# ------------------------------------------------------------------ archives

def make_tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tf.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


def make_zip(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path


def link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda tmp: ("../evil.txt", b"evil"), id="parent"),
        pytest.param(lambda tmp: ("sub/../../evil.txt", b"evil"), id="parent-inside"),
        pytest.param(lambda tmp: (str(tmp / "evil.txt"), b"evil"), id="absolute"),
        pytest.param(lambda tmp: link("evil.txt", "/etc/passwd"), id="symlink"),
        pytest.param(lambda tmp: link("evil.txt", "../outside.txt"), id="relative-symlink"),
        pytest.param(lambda tmp: link("evil.txt", "good.txt", tarfile.LNKTYPE), id="hardlink"),
    ],
)
def test_unsafe_tar_member_is_refused_and_nothing_is_written(tmp_path, bad):
    archive = make_tar(tmp_path / "a.tar.gz", [("good.txt", b"fine"), bad(tmp_path)])
    target = tmp_path / "out" / "target"
    target.mkdir(parents=True)

    with pytest.raises(UnsafeArchiveError):
        extract_archive(archive, target)

    assert files_under(tmp_path / "out") == []
    assert sorted(os.listdir(tmp_path)) == ["a.tar.gz", "out"]


@pytest.mark.parametrize("name", ["../evil.txt", "sub/../../evil.txt", "/tmp/taskflow-test-evil.txt"])
def test_unsafe_zip_member_is_refused_and_nothing_is_written(tmp_path, name):
    archive = make_zip(tmp_path / "a.zip", [("good.txt", b"fine"), (name, b"evil")])
    target = tmp_path / "out" / "target"
    target.mkdir(parents=True)

    with pytest.raises(UnsafeArchiveError):
        extract_archive(archive, target)

    assert files_under(tmp_path / "out") == []
    assert sorted(os.listdir(tmp_path)) == ["a.zip", "out"]
    assert not Path("/tmp/taskflow-test-evil.txt").exists()


@pytest.mark.parametrize("maker, suffix", [(make_tar, "tar.gz"), (make_zip, "zip")])
def test_safe_archive_is_extracted(tmp_path, maker, suffix):
    members = [("a.txt", b"alpha"), ("sub/b.bin", payload(2000)), ("sub/deeper/c.txt", "中文".encode())]
    archive = maker(tmp_path / f"model.{suffix}", members)

    written = extract_archive(archive, tmp_path / "out")

    assert sorted(written) == sorted(tmp_path / "out" / name for name, _ in members)
    for name, data in members:
        assert (tmp_path / "out" / name).read_bytes() == data
    assert files_under(tmp_path / "out") == sorted(name for name, _ in members)


def test_not_an_archive_is_refused(tmp_path):
    (tmp_path / "plain.bin").write_bytes(b"not an archive at all" * 100)
    with pytest.raises(UnsafeArchiveError):
        extract_archive(tmp_path / "plain.bin", tmp_path / "out")


# ----------------------------------------------------------------- manifests

GOOD_ENTRY = {"sha256": sha256(b"w"), "size": 1}


def manifest_dict(**changes):
    data = {"task": TASK, "name": MODEL, "version": VERSION, "files": {"w.bin": dict(GOOD_ENTRY)}}
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def test_manifest_from_dict_reads_fields():
    manifest = Manifest.from_dict(manifest_dict(version=3, labels=["neg", "pos"]))
    assert (manifest.task, manifest.name, manifest.version) == (TASK, MODEL, "3")
    assert manifest["labels"] == ["neg", "pos"]
    assert manifest.get("missing", 7) == 7
    with pytest.raises(ManifestError, match="no field 'missing'"):
        manifest["missing"]


@pytest.mark.parametrize("field", ["task", "name", "version", "files"])
def test_manifest_missing_field(field):
    data = manifest_dict()
    del data[field]
    with pytest.raises(ManifestError, match=field):
        Manifest.from_dict(data)


@pytest.mark.parametrize(
    "files",
    [
        pytest.param([], id="files-not-object"),
        pytest.param({}, id="no-files"),
        pytest.param({"w.bin": "abc"}, id="entry-not-object"),
        pytest.param({"w.bin": {"size": 1}}, id="no-sha256"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"]}}, id="no-size"),
        pytest.param({"w.bin": {"sha256": "abc", "size": 1}}, id="short-sha256"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"].upper(), "size": 1}}, id="uppercase-sha256"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"], "size": "1"}}, id="size-str"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"], "size": -1}}, id="size-negative"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"], "size": True}}, id="size-bool"),
    ],
)
def test_manifest_bad_file_entries(files):
    with pytest.raises(ManifestError):
        Manifest.from_dict(manifest_dict(files=files))


@pytest.mark.parametrize("name", ["sub/w.bin", "../w.bin", "/etc/passwd", "sub\\w.bin", "..", ".", "", "manifest.json"])
def test_manifest_file_names_must_be_plain(name):
    with pytest.raises(ManifestError):
        Manifest.from_dict(manifest_dict(files={name: dict(GOOD_ENTRY)}))


def test_manifest_from_dict_rejects_non_object():
    with pytest.raises(ManifestError, match="JSON object"):
        Manifest.from_dict(["task"])


def test_manifest_load(tmp_path):
    path = tmp_path / "manifest.json"
    with pytest.raises(ModelNotFoundError, match="manifest.json"):
        Manifest.load(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ManifestError, match="not valid JSON"):
        Manifest.load(path)
    path.write_text(json.dumps(manifest_dict(files={"a/b": dict(GOOD_ENTRY)})), encoding="utf-8")
    with pytest.raises(ManifestError, match=re.escape(str(path))):
        Manifest.load(path)
    path.write_text(json.dumps(manifest_dict()), encoding="utf-8")
    assert Manifest.load(path).files == {"w.bin": GOOD_ENTRY}


def test_task_path_is_verified(tmp_path):
    make_package(tmp_path / "mine")

    package = resolve(TASK, None, task_path=tmp_path / "mine")
    assert package.source == "task_path" and package.directory == tmp_path / "mine"
    assert package.path("vocab.txt").read_bytes() == FILES["vocab.txt"]

    (tmp_path / "mine" / "weights.bin").write_bytes(payload(len(FILES["weights.bin"]), seed=42))
    with pytest.raises(ChecksumError, match="weights.bin"):
        resolve(TASK, None, task_path=tmp_path / "mine")


def test_task_path_for_another_task_or_missing_file(tmp_path):
    make_package(tmp_path / "mine")
    with pytest.raises(ManifestError, match=TASK):
        resolve("other_task", None, task_path=tmp_path / "mine")
    (tmp_path / "mine" / "vocab.txt").unlink()
    with pytest.raises(ModelNotFoundError, match="vocab.txt"):
        resolve(TASK, None, task_path=tmp_path / "mine")
    with pytest.raises(ModelNotFoundError):
        resolve(TASK, None, task_path=tmp_path / "nowhere")


# ------------------------------------------------------- writing packages

def test_write_package_pins_every_file(tmp_path):
    manifest = make_package(tmp_path / "pkg")

    on_disk = json.loads((tmp_path / "pkg" / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk == dict(manifest.data)
    assert on_disk["labels"] == ["a", "b"]
    assert on_disk["files"] == {name: {"sha256": sha256(data), "size": len(data)} for name, data in FILES.items()}
    assert files_under(tmp_path / "pkg") == sorted(["manifest.json", *FILES])


def test_write_package_writes_the_manifest_last_and_atomically(tmp_path, monkeypatch):
    """A reader must never see a manifest before its files, nor a half-written one."""
    sources = tmp_path / "src"
    sources.mkdir()
    for name, data in FILES.items():
        (sources / name).write_bytes(data)
    out = tmp_path / "pkg"
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        dst = Path(dst)
        seen.append((dst.name, (out / "manifest.json").exists(), files_under(out)))
        if dst.name == "manifest.json":
            json.loads(Path(src).read_text(encoding="utf-8"))  # complete before it appears
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    write_package(out, {"task": TASK, "name": MODEL, "version": VERSION}, {n: sources / n for n in FILES})

    assert [name for name, _, _ in seen][-1] == "manifest.json"
    assert not any(had_manifest for _, had_manifest, _ in seen)
    assert all(name in seen[-1][2] for name in FILES)


def test_write_package_with_a_missing_source_leaves_no_manifest(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"w")
    with pytest.raises(FileNotFoundError):
        write_package(tmp_path / "pkg", {"task": TASK, "name": MODEL, "version": VERSION},
                      {"w.bin": tmp_path / "w.bin", "gone.bin": tmp_path / "gone.bin"})
    assert not (tmp_path / "pkg" / "manifest.json").exists()
    assert all(not name.endswith(".tmp") for name in files_under(tmp_path / "pkg"))


def test_write_package_in_place(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"weights")
    manifest = write_package(tmp_path, {"task": TASK, "name": MODEL, "version": VERSION}, {"w.bin": tmp_path / "w.bin"})
    assert manifest.files == {"w.bin": {"sha256": sha256(b"weights"), "size": 7}}
    assert (tmp_path / "w.bin").read_bytes() == b"weights"


def test_pack_lays_out_a_servable_tree(tmp_path):
    manifest = make_package(tmp_path / "pkg")

    out = pack(tmp_path / "pkg", tmp_path / "www")

    assert out == tmp_path / "www" / TASK / MODEL / VERSION
    assert files_under(tmp_path / "www") == sorted(f"{TASK}/{MODEL}/{VERSION}/{n}" for n in ["manifest.json", *FILES])
    for name, data in FILES.items():
        assert (out / name).read_bytes() == data
    assert Manifest.load(out / "manifest.json") == manifest


def test_pack_refuses_a_package_whose_files_were_edited(tmp_path):
    make_package(tmp_path / "pkg")
    (tmp_path / "pkg" / "vocab.txt").write_bytes(b"edited")
    with pytest.raises(ChecksumError, match="vocab.txt"):
        pack(tmp_path / "pkg", tmp_path / "www")
    assert files_under(tmp_path / "www") == []
